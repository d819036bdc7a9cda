#include "imagepack/mix.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "imagepack/image.h"
#include "imagepack/loader.h"
#include "imagepack/record.h"
#include "imagepack/shard.h"
#include "fixtures.h"
#include "testutil.h"

namespace imagepack {
namespace {

using testing::TempDir;
using testing::Weighted;

TEST(MixCounts, LargestRemainderIsExactAndTiesGoToTheEarlierSource) {
  // 70/30 of 1,000: exactly 700 and 300.
  auto c = MixCounts({Weighted("a", 0.7), Weighted("b", 0.3)}, {900, 100});
  ASSERT_OK(c);
  EXPECT_EQ(c.value(), (std::vector<int64_t>{700, 300}));
  // Thirds of 100: 33.33 each, the one left to the first.
  c = MixCounts({Weighted("a", 1), Weighted("b", 1), Weighted("c", 1)}, {10, 50, 40});
  ASSERT_OK(c);
  EXPECT_EQ(c.value(), (std::vector<int64_t>{34, 33, 33}));
  // Largest fraction first: 10 * (0.15, 0.26, 0.59) = 1.5, 2.6, 5.9 -> 1, 3, 6.
  c = MixCounts({Weighted("a", 0.15), Weighted("b", 0.26), Weighted("c", 0.59)}, {5, 3, 2});
  ASSERT_OK(c);
  EXPECT_EQ(c.value(), (std::vector<int64_t>{1, 3, 6}));
  // An epoch size of its own; a source far smaller than its share.
  c = MixCounts({Weighted("a", 0.5), Weighted("b", 0.5)}, {1000, 7}, 100);
  ASSERT_OK(c);
  EXPECT_EQ(c.value(), (std::vector<int64_t>{50, 50}));
  for (int64_t total : {1, 2, 3, 97, 1000, 12345}) {
    c = MixCounts({Weighted("a", 0.1), Weighted("b", 0.2), Weighted("c", 0.3000001), Weighted("d", 0.4)}, {1, 1, 1, 1},
                  total);
    ASSERT_OK(c);
    int64_t sum = 0;
    for (int64_t x : c.value()) sum += x;
    EXPECT_EQ(sum, total);
  }
}

TEST(MixCounts, RepeatAndChooseAreAbsoluteAndMistakesAreNamed) {
  MixSource a, b, c;
  a.paths = {"a.lmdb"};
  a.repeat = 3;
  b.paths = {"b.lmdb"};
  b.choose = 10;
  c.paths = {"c.lmdb"};  // neither: once
  auto n = MixCounts({a, b, c}, {7, 100, 20});
  ASSERT_OK(n);
  EXPECT_EQ(n.value(), (std::vector<int64_t>{21, 10, 20}));
  a.repeat = 0.5;
  n = MixCounts({a}, {7});
  ASSERT_OK(n);
  EXPECT_EQ(n.value(), (std::vector<int64_t>{4}));  // llround(3.5)
  auto err = [](Result<std::vector<int64_t>> r) { return r.ok() ? std::string("ok") : r.status().message(); };
  MixSource w = Weighted("w.lmdb", 1);
  EXPECT_NE(err(MixCounts({w, b}, {5, 5})).find("source 2 (b.lmdb) has no weight while others have"),
            std::string::npos);
  w.repeat = 2;
  EXPECT_NE(err(MixCounts({w}, {5})).find("source 1 (w.lmdb) has a weight and a repeat or choose"), std::string::npos);
  EXPECT_NE(err(MixCounts({Weighted("x", -1)}, {5})).find("source 1 (x)"), std::string::npos);
  EXPECT_NE(err(MixCounts({Weighted("x", 1), Weighted("e.lmdb", 1)}, {5, 0})).find("source 2 (e.lmdb) holds no records"),
            std::string::npos);
  EXPECT_NE(err(MixCounts({b}, {5}, 100)).find("epoch size"), std::string::npos);
}

// Every prefix within one sample of the ratio, for 2 to 7 sources of any
// counts: |taken_i(p) - p c_i / T| < 1, checked exactly in integers.
TEST(Interleaver, EveryPrefixIsWithinOneSampleOfTheRatio) {
  SplitMix64 rng(42);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = 2 + trial % 6;
    std::vector<int64_t> counts(n);
    for (auto& c : counts) c = 1 + int64_t(rng.Below(trial % 3 == 0 ? 2000 : 60));
    if (trial % 5 == 0) counts[1] = 0;  // a source with nothing this epoch
    Interleaver mix(counts);
    const int64_t total = mix.total();
    std::vector<int64_t> taken(n, 0);
    for (int64_t p = 1; p <= total; ++p) {
      const int s = mix.Next();
      ASSERT_GE(s, 0);
      ++taken[size_t(s)];
      for (size_t i = 0; i < n; ++i) {
        const __int128 lag = __int128(taken[i]) * total - __int128(p) * counts[i];
        ASSERT_LT(lag < 0 ? -lag : lag, __int128(total)) << "trial " << trial << " source " << i << " prefix " << p;
      }
    }
    EXPECT_EQ(mix.Next(), -1);
    EXPECT_EQ(taken, counts);
  }
}

int64_t SourceOf(int64_t index, const std::vector<int64_t>& sizes) {
  int64_t at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (index < at + sizes[i]) return int64_t(i);
    at += sizes[i];
  }
  return -1;
}

// A 70/30 mix: exact counts, every 1,000 consecutive positions within 3
// points of 70/30 (after the window shuffle), each source's records in
// rounds (the small one repeated, never dropped), a new order each epoch.
TEST(MixOrder, SeventyThirtyHoldsTheRatioInEveryThousand) {
  MixSpec spec;
  spec.sizes = {9000, 1300};
  spec.counts = MixCounts({Weighted("a", 0.7), Weighted("b", 0.3)}, spec.sizes, 20000).value();
  ASSERT_EQ(spec.counts, (std::vector<int64_t>{14000, 6000}));
  spec.seed = 3;
  for (int64_t epoch : {0, 1}) {
    const auto order = MixOrder(spec, epoch);
    ASSERT_EQ(order.size(), 20000u);
    std::vector<int64_t> per_source(2, 0);
    std::map<int64_t, int> seen;
    for (int64_t i : order) {
      ++per_source[size_t(SourceOf(i, spec.sizes))];
      ++seen[i];
    }
    EXPECT_EQ(per_source, spec.counts);
    // Source a: 14,000 of 9,000 records: each once or twice (a second
    // round's 5,000); source b: 6,000 of 1,300: 4 or 5 times.
    for (const auto& [i, c] : seen) {
      if (i < 9000) EXPECT_TRUE(c == 1 || c == 2) << i;
      else EXPECT_TRUE(c == 4 || c == 5) << i;
    }
    EXPECT_EQ(seen.size(), 10300u);
    int64_t a = 0, worst = 0;
    for (size_t p = 0; p < order.size(); ++p) {
      a += SourceOf(order[p], spec.sizes) == 0;
      if (p >= 1000) a -= SourceOf(order[p - 1000], spec.sizes) == 0;
      if (p >= 999) worst = std::max<int64_t>(worst, std::abs(a - 700));
    }
    EXPECT_LE(worst, 30) << "every 1,000 consecutive samples within 3 points of 70/30";
  }
  EXPECT_NE(MixOrder(spec, 0), MixOrder(spec, 1));
  EXPECT_EQ(MixOrder(spec, 1), MixOrder(spec, 1));
  spec.kind = Order::kSequential;
  const auto seq = MixOrder(spec, 0);
  std::vector<int64_t> a_part;
  for (int64_t i : seq)
    if (i < 9000) a_part.push_back(i);
  for (size_t k = 0; k < a_part.size(); ++k) ASSERT_EQ(a_part[k], int64_t(k % 9000));
}

TEST(MixOrder, RepeatThreeShowsEachRecordExactlyThreeTimes) {
  MixSource small, big;
  small.paths = {"small"};
  small.repeat = 3;
  big.paths = {"big"};
  MixSpec spec;
  spec.sizes = {37, 500};
  spec.counts = MixCounts({small, big}, spec.sizes).value();
  ASSERT_EQ(spec.counts, (std::vector<int64_t>{111, 500}));
  for (int64_t epoch : {0, 1, 2}) {
    std::map<int64_t, int> seen;
    for (int64_t i : MixOrder(spec, epoch)) ++seen[i];
    for (int64_t i = 0; i < 537; ++i) EXPECT_EQ(seen[i], i < 37 ? 3 : 1) << "record " << i << " epoch " << epoch;
  }
}

// The global order is a function of (seed, epoch): dealt to 1, 2 or 4
// ranks (batch 8, 4, 2: global batch 8), each global batch holds the same
// samples in the same positions.
TEST(MixOrder, TheGlobalOrderDoesNotDependOnTheWorldSize) {
  MixSpec spec;
  spec.sizes = {300, 120};
  spec.counts = {301, 129};
  spec.seed = 9;
  const auto order = MixOrder(spec, 4);
  for (int world : {1, 2, 4}) {
    std::vector<int64_t> global(order.size());
    for (int r = 0; r < world; ++r) {
      const auto mine = DealPositions(order, r, world, /*even=*/false);
      for (size_t k = 0; k < mine.size(); ++k) global[k * size_t(world) + size_t(r)] = mine[k];
    }
    EXPECT_EQ(global, order) << "world " << world;
  }
}

// n records of 16x12 raw pixels labelled i % classes.size().
std::string MakeDb(const TempDir& d, const std::string& name, int n, const std::vector<std::string>& classes,
                   int channels = 3) {
  auto w = CreateWriter(ContainerFormat::kLmdb, d / name);
  EXPECT_TRUE(w.ok());
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> px(size_t(16 * 12 * channels), uint8_t(i));
    RecordFields f{Encoding::kRaw, channels, i % int(classes.size()), 12, 16};
    EXPECT_OK(w.value()->Add(EncodeRecord(f, "img" + std::to_string(i), px.data(), px.size())));
  }
  DatasetMeta m;
  m.count = n;
  m.classes = classes;
  m.encoding = Encoding::kRaw;
  m.channels = channels;
  m.label_counts.assign(classes.size(), 0);
  for (int i = 0; i < n; ++i) ++m.label_counts[size_t(i) % classes.size()];
  m.mean.assign(size_t(channels), 0.25);
  m.std.assign(size_t(channels), 0.1);
  m.stats_images = n;
  EXPECT_OK(w.value()->Finish(m));
  return d / name;
}

TEST(OpenMix, ClassesMustAgreeOrBeGivenAndMismatchesAreNamed) {
  TempDir d;
  const std::string a = MakeDb(d, "a.lmdb", 10, {"cat", "dog"});
  const std::string b = MakeDb(d, "b.lmdb", 6, {"dog", "cat"});
  const std::string c = MakeDb(d, "c.lmdb", 4, {"cat", "owl"});
  auto same = OpenMix({Weighted(a, 2), Weighted(a, 1)}, 0, {}, "", 0, {});
  ASSERT_OK(same);
  EXPECT_EQ(same->meta.count, 20);
  EXPECT_EQ(same->counts, (std::vector<int64_t>{13, 7}));  // 13.33, 6.67
  EXPECT_EQ(same->starts, (std::vector<int64_t>{0, 10, 20}));
  EXPECT_EQ(same->records->Describe().substr(0, 12), "2 datasets: ");
  auto differ = OpenMix({Weighted(a, 1), Weighted(b, 1)}, 0, {}, "", 0, {});
  ASSERT_FALSE(differ.ok());
  EXPECT_NE(differ.status().message().find("a.lmdb (2 classes) and " + b + " (2) have different class lists (label 0 is "
                                           "'cat' in one and 'dog' in the other)"),
            std::string::npos)
      << differ.status().ToString();
  // The mapping given: each source's labels by name.
  auto mapped = OpenMix({Weighted(a, 1), Weighted(b, 1)}, 0, {"cat", "dog", "owl"}, "classes.txt", 0, {});
  ASSERT_OK(mapped);
  EXPECT_EQ(mapped->meta.classes, (std::vector<std::string>{"cat", "dog", "owl"}));
  EXPECT_EQ(mapped->class_maps[1].Map(0), 1);  // b's 'dog'
  EXPECT_EQ(mapped->class_maps[1].Map(1), 0);
  EXPECT_EQ(mapped->meta.label_counts, (std::vector<int64_t>{8, 8, 0}));
  auto missing = OpenMix({Weighted(a, 1), Weighted(c, 1)}, 0, {"cat", "dog"}, "classes.txt", 0, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'owl'"), std::string::npos) << missing.status().ToString();
  EXPECT_NE(missing.status().message().find("c.lmdb"), std::string::npos) << missing.status().ToString();
  const std::string gray = MakeDb(d, "gray.lmdb", 4, {"cat", "dog"}, 1);
  auto channels = OpenMix({Weighted(a, 1), Weighted(gray, 1)}, 0, {}, "", 0, {});
  ASSERT_FALSE(channels.ok());
  EXPECT_NE(channels.status().message().find("differ in channels"), std::string::npos);
  EXPECT_OK(OpenMix({Weighted(a, 1), Weighted(gray, 1)}, 0, {}, "", 3, {}));
}

TEST(OpenMix, TheDescriptionNamesSourcesAndSharesAndComparesByName) {
  TempDir d;
  const std::string a = MakeDb(d, "a.lmdb", 10, {"x"});
  const std::string b = MakeDb(d, "b.lmdb", 5, {"x"});
  const std::string other = MakeDb(d, "other.lmdb", 5, {"x", "y"});
  auto mix = [&](std::vector<MixSource> s) { return OpenMix(s, 0, {"x", "y"}, "", 0, {}).value().description; };
  const std::string base = mix({Weighted(a, 0.7), Weighted(b, 0.3)});
  EXPECT_OK(CompareMixes(base, mix({Weighted(a, 0.7), Weighted(b, 0.3)})));
  EXPECT_OK(CompareMixes("", ""));
  auto why = [](const Status& s) { return s.ok() ? std::string("ok") : s.message(); };
  EXPECT_EQ(why(CompareMixes(base, mix({Weighted(a, 0.7), Weighted(b, 0.5)}))),
            "source 2 (" + b + "): weight 0.3 in the state, weight 0.5 now");
  EXPECT_NE(why(CompareMixes(base, mix({Weighted(a, 0.7), Weighted(other, 0.3)}))).find(
                "source 2 (" + other + ") is not the dataset the state was saved with (" + b + ", 5 records"),
            std::string::npos);
  EXPECT_NE(why(CompareMixes(base, mix({Weighted(a, 1)}))).find("a mix of 2 (" + a + ", " + b + ")"),
            std::string::npos);
  EXPECT_NE(why(CompareMixes(base, "")).find("this loader reads one dataset"), std::string::npos);
  MixSource once, twice;
  once.paths = {a};
  twice.paths = {b};
  twice.repeat = 2;
  EXPECT_EQ(why(CompareMixes(base, mix({once, twice}))), "source 1 (" + a + "): weight 0.7 in the state, repeat 1.0 now");
}

}  // namespace
}  // namespace imagepack
