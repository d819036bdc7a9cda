// The order in which an epoch visits a dataset's records, how it is dealt
// to ranks, and how well it is shuffled. Pure functions: no I/O.
// docs/LOADER.md, "Order".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "imagepack/permutation.h"
#include "imagepack/status.h"

namespace imagepack {

enum class Order {
  kSequential,  // 0, 1, 2, ... every epoch
  kRandom,      // a full permutation per epoch
  kBlocks,      // blocks of consecutive records in random order, shuffled within windows
  kAuto,        // loader only: random where the data is in RAM or the page cache, else blocks
};
const char* OrderName(Order o);
// "sequential", "random", "blocks", "auto".
Result<Order> ParseOrder(const std::string& name);

// Everything an epoch's order depends on besides the epoch itself.
struct OrderSpec {
  Order kind = Order::kRandom;  // not kAuto
  uint64_t seed = 0;
  // kBlocks: records per block, blocks per shuffling window, and the ranks
  // the order is made for (each rank reads its own run of blocks).
  int64_t block_records = 1;
  int64_t window_blocks = 1;
  int world = 1;
};

// The epoch's order: a permutation of 0 .. n-1 that is a function of
// (spec, epoch) alone, computed position by position (keyed bijections:
// a Feistel network with cycle walking), so it takes O(1) memory whatever
// n is and any position is reached in O(1). kRandom: one such bijection of
// the records. kBlocks: the blocks [k*B, (k+1)*B) are permuted (a
// bijection of the blocks) and laid end to end; that sequence is cut into
// `world` runs of consecutive entries (run r holds n/world entries, one
// more for r < n % world); each run is shuffled within consecutive windows
// (WindowRecords: 1, 2, 4, ... blocks, then window_blocks blocks each; a
// bijection per window); position k * world + r of the order is entry k of
// run r. So rank r of `world`, dealt positions r, r + world, ...
// (DealPositions), reads whole blocks of its own, a window at a time.
// Copyable and cheap; thread-safe (const).
class EpochPermutation {
 public:
  EpochPermutation() = default;
  EpochPermutation(int64_t n, const OrderSpec& spec, int64_t epoch);
  // An order given as a list (a mix's, MixOrder): held, shared by copies.
  static EpochPermutation FromList(std::vector<int64_t> order);
  int64_t size() const { return n_; }
  // The record at `position`. REQUIRES: 0 <= position < size().
  int64_t operator[](int64_t position) const;

 private:
  int64_t RandomAt(int64_t position) const;
  int64_t BlocksAt(int64_t position) const;

  int64_t n_ = 0;
  OrderSpec spec_;
  int64_t epoch_ = 0;
  KeyedPermutation perm_;  // kRandom: of the records; kBlocks: of the blocks
  int64_t blocks_ = 0;     // kBlocks: ceil(n / B)
  int64_t short_at_ = 0;   // kBlocks: the slot of the block sequence that holds the last (short) block
  std::shared_ptr<const std::vector<int64_t>> list_;  // FromList: the order itself
};

// The same order as a vector (tools and tests; the loader evaluates
// positions as it needs them).
std::vector<int64_t> EpochOrder(int64_t n, const OrderSpec& spec, int64_t epoch);

// kBlocks: the entries of window `i` of a rank's run: B * min(window_blocks,
// 2^i). The first windows ramp up so that an epoch's first batch waits for
// one block's read, not a whole window's.
int64_t WindowRecords(const OrderSpec& spec, int64_t i);

// The entries of `order` rank `rank` of `world` takes from position `start`
// on: start + r, start + r + world, ... With even_partition every rank gets
// ceil((n - start) / world), the shortfall made up by repeating positions
// 0, 1, ... of the order (DistributedSampler's rule when start is 0).
std::vector<int64_t> DealPositions(const std::vector<int64_t>& order, int rank, int world, bool even_partition,
                                   int64_t start = 0);

// DealPositions' rule as a function: entry k of rank `rank`'s share of
// `order` from position `start` on, computed when asked (O(1) memory, O(1)
// to reach any entry, so resuming in the middle of an epoch costs nothing).
class RankOrder {
 public:
  RankOrder() = default;
  RankOrder(EpochPermutation order, int rank, int world, bool even_partition, int64_t start = 0);
  // This rank's entries: ceil((n - start) / world) with even_partition.
  int64_t size() const { return size_; }
  // The position in the epoch's order that entry k takes: start + rank +
  // k * world, or for the padding past the end, a position from 0 on.
  int64_t Position(int64_t k) const;
  // The record of entry k. REQUIRES: 0 <= k < size().
  int64_t operator[](int64_t k) const { return order_[Position(k)]; }
  const EpochPermutation& order() const { return order_; }

 private:
  EpochPermutation order_;
  int rank_ = 0, world_ = 1;
  int64_t start_ = 0, rest_ = 0, size_ = 0;
};

// Records per block for blocks of about `block_bytes`, from the dataset's
// mean record size (`bytes` over `count`: the loader gives the files'
// size), a multiple of `records_per_value` (LMDB values are
// read whole), at least 1.
int64_t BlockRecords(int64_t count, int64_t bytes, int64_t block_bytes, int records_per_value);

// How well an order mixes labels, against what a full permutation of the
// same labels gives (computed exactly, not sampled). A value near the
// reference means batches look like those of a full shuffle.
struct ShuffleQuality {
  int64_t batches = 0;
  double classes_per_batch = 0;      // mean distinct labels in a batch
  double classes_per_batch_ref = 0;  // expected for a full permutation
  double same_label_pairs = 0;       // fraction of consecutive samples with equal labels
  double same_label_pairs_ref = 0;   // sum over classes of p_c^2 (a full permutation's)
  // Given the next epoch's order: of the pairs of records that share a
  // batch, the fraction that share one again in the next epoch; a full
  // permutation's is (batch - 1) / (n - 1). Blocks keep neighbours in one
  // window every epoch, so they meet more often: this is the price of a
  // window, whatever the labels. -1: not measured.
  double repeat_pairs = -1;
  double repeat_pairs_ref = -1;
  // How far a full permutation's classes_per_batch lies from its
  // expectation by chance over this many batches (1 standard error: the
  // exact standard deviation of one batch's distinct labels over the square
  // root of the batches; the batches of one epoch vary a little less).
  double classes_per_batch_se = 0;
  // classes_per_batch / classes_per_batch_ref: 1 for a full shuffle, about
  // 1 / (distinct per batch) for a pack sorted by class read in order.
  // Not bounded by 1: the numerator is the mean of one epoch's batches, the
  // denominator an exact expectation, so a full permutation itself scores 1
  // only on average (1 +- classes_per_batch_se / classes_per_batch_ref), and
  // an order that spreads labels more evenly than chance (classes dealt in
  // turn) scores above 1.
  double score() const { return classes_per_batch_ref > 0 ? classes_per_batch / classes_per_batch_ref : 0; }
  double score_se() const { return classes_per_batch_ref > 0 ? classes_per_batch_se / classes_per_batch_ref : 0; }
};
// `labels[i]`: record i's label; `order`: the indices one rank reads, in
// order; batches of `batch` consecutive entries (a final short one left
// out). Labels below 0 count as one more class.
// `next`: the same rank's order in the next epoch, for repeat_pairs
// (empty: not measured).
ShuffleQuality MeasureShuffle(const std::vector<int64_t>& labels, const std::vector<int64_t>& order, int batch,
                              const std::vector<int64_t>& next = {});

}  // namespace imagepack
