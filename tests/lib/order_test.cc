#include "imagepack/order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "imagepack/shard.h"
#include "testutil.h"

namespace imagepack {
namespace {

OrderSpec Blocks(int64_t block, int64_t window, int world, uint64_t seed = 7) {
  OrderSpec s;
  s.kind = Order::kBlocks;
  s.seed = seed;
  s.block_records = block;
  s.window_blocks = window;
  s.world = world;
  return s;
}

bool IsPermutation(std::vector<int64_t> v, int64_t n) {
  std::sort(v.begin(), v.end());
  for (int64_t i = 0; i < n; ++i)
    if (v[size_t(i)] != i) return false;
  return int64_t(v.size()) == n;
}

TEST(Order, BlockOrderIsAPermutationForEveryShape) {
  for (int64_t n : {1, 7, 100, 1001})
    for (int64_t block : {1, 4, 64, 5000})
      for (int64_t window : {1, 3})
        for (int world : {1, 2, 3, 8}) {
          SCOPED_TRACE("n " + std::to_string(n) + " block " + std::to_string(block) + " window " +
                       std::to_string(window) + " world " + std::to_string(world));
          EXPECT_TRUE(IsPermutation(EpochOrder(n, Blocks(block, window, world), 0), n));
        }
}

// Each rank reads whole blocks of its own: its records fall in at most
// (its share / block) + 2 blocks, and every window of its stream in at most
// window_blocks + 1 (a run's ends cut a block).
TEST(Order, EachRankReadsItsOwnBlocksAWindowAtATime) {
  const int64_t n = 10000, block = 50, window = 4;
  for (int world : {1, 2, 3}) {
    const auto order = EpochOrder(n, Blocks(block, window, world), 3);
    std::set<int64_t> owner_blocks;
    for (int r = 0; r < world; ++r) {
      const auto mine = DealPositions(order, r, world, false);
      std::set<int64_t> blocks;
      for (int64_t i : mine) blocks.insert(i / block);
      EXPECT_LE(int64_t(blocks.size()), int64_t(mine.size()) / block + 2) << "rank " << r;
      const OrderSpec spec = Blocks(block, window, world);
      int64_t windows = 0;
      for (size_t w0 = 0, wi = 0; w0 < mine.size(); w0 += size_t(WindowRecords(spec, int64_t(wi))), ++wi) {
        const size_t size = size_t(WindowRecords(spec, int64_t(wi)));
        std::set<int64_t> in_window;
        for (size_t k = w0; k < std::min(mine.size(), w0 + size); ++k) in_window.insert(mine[k] / block);
        EXPECT_LE(int64_t(in_window.size()), int64_t(size) / block + 1) << "rank " << r << " window at " << w0;
        ++windows;
      }
      EXPECT_GT(windows, 3);
      // Shuffled inside: not the blocks' own order.
      EXPECT_FALSE(std::is_sorted(mine.begin(), mine.begin() + block * window));
      for (int64_t b : blocks) owner_blocks.insert(b);
    }
    EXPECT_EQ(int64_t(owner_blocks.size()), n / block);
  }
}

TEST(Order, AFunctionOfSeedEpochAndWorldAlone) {
  const auto a = EpochOrder(500, Blocks(10, 2, 2), 1);
  EXPECT_EQ(a, EpochOrder(500, Blocks(10, 2, 2), 1));
  EXPECT_NE(a, EpochOrder(500, Blocks(10, 2, 2), 2));
  EXPECT_NE(a, EpochOrder(500, Blocks(10, 2, 2, /*seed=*/8), 1));
  EXPECT_NE(a, EpochOrder(500, Blocks(10, 2, 3), 1));
  // Random and sequential are unchanged by the block settings.
  OrderSpec r;
  r.kind = Order::kRandom;
  r.seed = 7;
  OrderSpec r_blocks = Blocks(10, 2, 3, 7);
  r_blocks.kind = Order::kRandom;
  EXPECT_EQ(EpochOrder(500, r, 1), EpochOrder(500, r_blocks, 1));
  EXPECT_TRUE(IsPermutation(EpochOrder(500, r, 1), 500));
  EXPECT_NE(EpochOrder(500, r, 1), EpochOrder(500, r, 2));
  r.kind = Order::kSequential;
  std::vector<int64_t> seq(500);
  std::iota(seq.begin(), seq.end(), 0);
  EXPECT_EQ(EpochOrder(500, r, 1), seq);
}

// Resuming at a position the ranks reached together continues each rank's
// own stream; on another world size the rest is still covered once.
TEST(Order, ResumeContinuesAndAnotherWorldCoversTheRestOnce) {
  const int64_t n = 1003;
  const int world = 3;
  const auto order = EpochOrder(n, Blocks(16, 2, world), 0);
  for (int r = 0; r < world; ++r) {
    const auto all = DealPositions(order, r, world, true);
    const auto rest = DealPositions(order, r, world, true, 30 * world);
    ASSERT_GE(all.size(), rest.size() + 30);
    EXPECT_TRUE(std::equal(rest.begin(), rest.end(), all.begin() + 30)) << "rank " << r;
  }
  const int64_t start = 40 * world;
  std::vector<int64_t> seen(order.begin(), order.begin() + start);
  for (int r = 0; r < 2; ++r) {
    const auto mine = DealPositions(order, r, 2, false, start);
    seen.insert(seen.end(), mine.begin(), mine.end());
  }
  EXPECT_TRUE(IsPermutation(seen, n));
}

// The first windows ramp up (1, 2, 4, ... blocks) so an epoch starts after
// one block's read; then every window holds window_blocks blocks.
TEST(Order, WindowsRampUpFromOneBlock) {
  const OrderSpec s = Blocks(10, 16, 1);
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < 7; ++i) sizes.push_back(WindowRecords(s, i));
  EXPECT_EQ(sizes, (std::vector<int64_t>{10, 20, 40, 80, 160, 160, 160}));
  EXPECT_EQ(WindowRecords(s, 1000), 160);
  // The first 10 entries of the order are block-mates: one block, shuffled.
  const auto order = EpochOrder(1000, s, 0);
  std::set<int64_t> first;
  for (int k = 0; k < 10; ++k) first.insert(order[size_t(k)] / 10);
  EXPECT_EQ(first.size(), 1u);
  EXPECT_FALSE(std::is_sorted(order.begin(), order.begin() + 10));
}

// The order is computed position by position: any entry of an epoch of
// any size is at hand at once, and the vector form and each rank's share
// are exactly those entries.
TEST(Order, PositionsAreComputedNotStored) {
  for (Order kind : {Order::kRandom, Order::kBlocks, Order::kSequential})
    for (int64_t n : {1, 2, 5, 97, 1000, 4099})
      for (int world : {1, 3, 8}) {
        OrderSpec s = Blocks(7, 3, world);
        s.kind = kind;
        const auto all = EpochOrder(n, s, 5);
        ASSERT_TRUE(IsPermutation(all, n));
        const EpochPermutation order(n, s, 5);
        ASSERT_EQ(order.size(), n);
        for (int64_t p = 0; p < n; ++p) ASSERT_EQ(order[p], all[size_t(p)]);
        for (bool even : {false, true})
          for (int64_t start : {int64_t(0), n / 3, n}) {
            for (int r = 0; r < world; ++r) {
              const auto dealt = DealPositions(all, r, world, even, start);
              const RankOrder mine(order, r, world, even, start);
              ASSERT_EQ(mine.size(), int64_t(dealt.size())) << "n " << n << " world " << world << " start " << start;
              for (int64_t k = 0; k < mine.size(); ++k) ASSERT_EQ(mine[k], dealt[size_t(k)]);
            }
          }
      }
  // 10^12 records: a position in the middle of the epoch costs what the
  // first does; the entries are distinct and inside the dataset.
  const int64_t huge = 1000000000000;
  for (Order kind : {Order::kRandom, Order::kBlocks}) {
    OrderSpec s = Blocks(40000, 16, 8);
    s.kind = kind;
    const EpochPermutation order(huge, s, 3);
    std::set<int64_t> seen;
    for (int64_t p = huge / 2; p < huge / 2 + 1000; ++p) {
      const int64_t at = order[p];
      ASSERT_GE(at, 0);
      ASSERT_LT(at, huge);
      seen.insert(at);
    }
    EXPECT_EQ(seen.size(), 1000u);
    EXPECT_GE(order[huge - 1], 0);
  }
}

TEST(Order, BlockRecordsFollowTheMeanRecordAndTheValueSize) {
  EXPECT_EQ(BlockRecords(1000, 1000 * 100000, 4 << 20, 1), 41);  // 100 KB records, 4 MB blocks
  EXPECT_EQ(BlockRecords(1000, 1000 * 100000, 4 << 20, 8), 40);  // whole LMDB values of 8
  EXPECT_EQ(BlockRecords(1000, 1000 * 100000, 1000, 8), 8);      // at least one value
  EXPECT_EQ(BlockRecords(0, 0, 4 << 20, 1), 4 << 20);
}

TEST(Order, ParseAndName) {
  for (Order o : {Order::kSequential, Order::kRandom, Order::kBlocks, Order::kAuto})
    EXPECT_EQ(ParseOrder(OrderName(o)).value(), o);
  EXPECT_NE(ParseOrder("shuffled").status().message().find("unknown order 'shuffled'"), std::string::npos);
}

// The reference is exact: for labels {0,0,1,1,2,2} and batches of 2, a
// full permutation gives 1 + P(two different) = 1 + 4/5 distinct labels.
TEST(Shuffle, ReferenceIsTheFullPermutationsExpectation) {
  const std::vector<int64_t> labels = {0, 0, 1, 1, 2, 2};
  const auto q = MeasureShuffle(labels, {0, 1, 2, 3, 4, 5}, 2);
  EXPECT_NEAR(q.classes_per_batch_ref, 1.8, 1e-12);
  EXPECT_NEAR(q.same_label_pairs_ref, 3 * (1.0 / 9), 1e-12);
  EXPECT_EQ(q.batches, 3);
  EXPECT_DOUBLE_EQ(q.classes_per_batch, 1.0);  // sorted: each batch one class
  EXPECT_DOUBLE_EQ(q.same_label_pairs, 3.0 / 5);
  // Averaged over every permutation of 6, a batch's distinct count is the reference.
  std::vector<int64_t> p = {0, 1, 2, 3, 4, 5};
  double sum = 0;
  int count = 0;
  do {
    sum += MeasureShuffle(labels, p, 2).classes_per_batch;
    ++count;
  } while (std::next_permutation(p.begin(), p.end()));
  EXPECT_NEAR(sum / count, 1.8, 1e-12);
}

// The standard error of a full permutation's distinct labels is exact:
// over every permutation of 8 records in classes of 3, 2, 2 and 1, the
// variance of the first batch's distinct count is the one stated; the
// score of a permutation lies above 1 as often as chance puts it there.
TEST(Shuffle, StandardErrorIsTheFullPermutationsSpread) {
  const std::vector<int64_t> labels = {0, 0, 0, 1, 1, 2, 2, 3};
  std::vector<int64_t> p = {0, 1, 2, 3, 4, 5, 6, 7};
  double sum = 0, squares = 0;
  int count = 0, above = 0;
  const auto first = MeasureShuffle(labels, p, 3);
  do {
    const auto q = MeasureShuffle(labels, std::vector<int64_t>(p.begin(), p.begin() + 3), 3);
    sum += q.classes_per_batch;
    squares += q.classes_per_batch * q.classes_per_batch;
    above += q.score() > 1;
    ++count;
  } while (std::next_permutation(p.begin(), p.end()));
  const double mean = sum / count, var = squares / count - mean * mean;
  EXPECT_NEAR(mean, first.classes_per_batch_ref, 1e-9);
  // Two batches of 3 in `first`: the standard error of their mean.
  EXPECT_EQ(first.batches, 2);
  EXPECT_NEAR(first.classes_per_batch_se, std::sqrt(var / 2), 1e-9);
  EXPECT_NEAR(first.score_se(), std::sqrt(var / 2) / mean, 1e-9);
  EXPECT_GT(above, 0);  // so a score above 1 is no fault of the measure
}

// A pack sorted by class: read in order it scores near 1/batch of a full
// shuffle; a full permutation scores 1; blocks over a shuffled pack score
// like a full permutation, over a sorted pack in between.
TEST(Shuffle, ScoresSeparateSortedBlocksAndFullOrders) {
  const int64_t n = 20000, classes = 100;
  std::vector<int64_t> sorted(n), shuffled(n);
  for (int64_t i = 0; i < n; ++i) sorted[size_t(i)] = i * classes / n;
  const auto perm = Permutation(n, 3);
  for (int64_t i = 0; i < n; ++i) shuffled[size_t(i)] = sorted[size_t(perm[size_t(i)])];
  OrderSpec seq;
  seq.kind = Order::kSequential;
  OrderSpec full;
  full.kind = Order::kRandom;
  const auto in_order = MeasureShuffle(sorted, EpochOrder(n, seq, 0), 128);
  const auto random = MeasureShuffle(sorted, EpochOrder(n, full, 0), 128);
  const auto blocks_sorted = MeasureShuffle(sorted, EpochOrder(n, Blocks(40, 16, 1), 0), 128);
  const auto blocks_shuffled = MeasureShuffle(shuffled, EpochOrder(n, Blocks(40, 16, 1), 0), 128);
  EXPECT_LT(in_order.score(), 0.03);
  EXPECT_NEAR(random.score(), 1.0, 0.02);
  EXPECT_NEAR(blocks_shuffled.score(), 1.0, 0.02);
  EXPECT_GT(blocks_sorted.score(), 0.1);
  EXPECT_LT(blocks_sorted.score(), 0.5);
  EXPECT_NEAR(random.same_label_pairs, random.same_label_pairs_ref, 0.005);
  EXPECT_GT(in_order.same_label_pairs, 0.99);
}

}  // namespace
}  // namespace imagepack
