#include "imagepack/order.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "imagepack/permutation.h"
#include "imagepack/shard.h"

namespace imagepack {

const char* OrderName(Order o) {
  switch (o) {
    case Order::kSequential: return "sequential";
    case Order::kRandom: return "random";
    case Order::kBlocks: return "blocks";
    case Order::kAuto: return "auto";
  }
  return "?";
}

Result<Order> ParseOrder(const std::string& name) {
  for (Order o : {Order::kSequential, Order::kRandom, Order::kBlocks, Order::kAuto})
    if (name == OrderName(o)) return o;
  return Status::InvalidArgument("unknown order '" + name + "' (expected random, blocks, sequential or auto)");
}

namespace {

// Seeds of the independent draws of one epoch (SplitMix64 mixes them).
uint64_t Mix(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  SplitMix64 m(seed ^ 0x6A09E667F3BCC909ull);
  uint64_t x = m.Next() ^ a;
  x = SplitMix64(x).Next() ^ b;
  x = SplitMix64(x).Next() ^ c;
  return SplitMix64(x).Next();
}

// kBlocks: which window of a run holds entry k of the run, and where it
// begins: the first windows ramp up (1, 2, 4, ... blocks) until one would
// hold window_blocks blocks; from there on every window does.
struct Window {
  int64_t index = 0, begin = 0;
};
Window WindowOf(const OrderSpec& s, int64_t k) {
  const int64_t B = std::max<int64_t>(1, s.block_records);
  const int64_t full = std::max<int64_t>(1, s.window_blocks);
  int ramp = 0;  // windows smaller than a full one: 2^ramp >= full
  while (ramp < 62 && (int64_t(1) << ramp) < full) ++ramp;
  const int64_t ramp_records = B * ((int64_t(1) << ramp) - 1);
  if (k < ramp_records) {
    int i = 0;
    while (B * ((int64_t(2) << i) - 1) <= k) ++i;
    return {i, B * ((int64_t(1) << i) - 1)};
  }
  const int64_t steps = (k - ramp_records) / (B * full);
  return {ramp + steps, ramp_records + steps * B * full};
}

}  // namespace

EpochPermutation::EpochPermutation(int64_t n, const OrderSpec& spec, int64_t epoch)
    : n_(std::max<int64_t>(0, n)), spec_(spec), epoch_(epoch) {
  spec_.block_records = std::max<int64_t>(1, spec_.block_records);
  spec_.window_blocks = std::max<int64_t>(1, spec_.window_blocks);
  spec_.world = std::max(1, spec_.world);
  if (spec_.kind == Order::kRandom) {
    perm_ = KeyedPermutation(static_cast<uint64_t>(n_), Mix(spec_.seed, 0, static_cast<uint64_t>(epoch)));
  } else if (spec_.kind == Order::kBlocks) {
    blocks_ = (n_ + spec_.block_records - 1) / spec_.block_records;
    perm_ = KeyedPermutation(static_cast<uint64_t>(blocks_), Mix(spec_.seed, 1, static_cast<uint64_t>(epoch)));
    if (blocks_ > 0) short_at_ = static_cast<int64_t>(perm_.Inverse(static_cast<uint64_t>(blocks_ - 1)));
  }
}

EpochPermutation EpochPermutation::FromList(std::vector<int64_t> order) {
  EpochPermutation p;
  p.n_ = static_cast<int64_t>(order.size());
  p.list_ = std::make_shared<const std::vector<int64_t>>(std::move(order));
  return p;
}

int64_t EpochPermutation::operator[](int64_t position) const {
  if (list_) return (*list_)[static_cast<size_t>(position)];
  switch (spec_.kind) {
    case Order::kRandom: return RandomAt(position);
    case Order::kBlocks: return BlocksAt(position);
    case Order::kSequential:
    case Order::kAuto: break;
  }
  return position;
}

int64_t EpochPermutation::RandomAt(int64_t position) const {
  return static_cast<int64_t>(perm_(static_cast<uint64_t>(position)));
}

int64_t EpochPermutation::BlocksAt(int64_t position) const {
  const int64_t B = spec_.block_records, world = spec_.world;
  // Entry k of run r; the run's place in the block sequence.
  const int64_t k = position / world, r = position % world;
  const int64_t base = n_ / world, extra = n_ % world;
  const int64_t run_begin = r * base + std::min(r, extra), run_len = base + (r < extra ? 1 : 0);
  // The window of the run that holds k, shuffled by its own bijection.
  const Window w = WindowOf(spec_, k);
  const int64_t window_len = std::min(WindowRecords(spec_, w.index), run_len - w.begin);
  const uint64_t window_key =
      Mix(spec_.seed, 2 + static_cast<uint64_t>(epoch_), static_cast<uint64_t>(r), static_cast<uint64_t>(w.index));
  const int64_t s = run_begin + w.begin +
                    static_cast<int64_t>(KeyedPermutation(static_cast<uint64_t>(window_len), window_key)(
                        static_cast<uint64_t>(k - w.begin)));
  // Entry s of the blocks laid end to end in permuted order: every block
  // holds B records but the dataset's last, which lies at slot short_at_.
  const int64_t short_len = n_ - (blocks_ - 1) * B;
  int64_t slot, offset;
  if (s < short_at_ * B) {
    slot = s / B, offset = s % B;
  } else if (s < short_at_ * B + short_len) {
    slot = short_at_, offset = s - short_at_ * B;
  } else {
    const int64_t u = s - short_at_ * B - short_len;
    slot = short_at_ + 1 + u / B, offset = u % B;
  }
  return static_cast<int64_t>(perm_(static_cast<uint64_t>(slot))) * B + offset;
}

std::vector<int64_t> EpochOrder(int64_t n, const OrderSpec& spec, int64_t epoch) {
  const EpochPermutation order(n, spec, epoch);
  std::vector<int64_t> out(static_cast<size_t>(order.size()));
  for (int64_t i = 0; i < order.size(); ++i) out[static_cast<size_t>(i)] = order[i];
  return out;
}

int64_t WindowRecords(const OrderSpec& spec, int64_t i) {
  const int64_t full = std::max<int64_t>(1, spec.window_blocks);
  const int64_t blocks = i >= 62 ? full : std::min<int64_t>(full, int64_t(1) << i);
  return std::max<int64_t>(1, spec.block_records) * blocks;
}

std::vector<int64_t> DealPositions(const std::vector<int64_t>& order, int rank, int world, bool even_partition,
                                   int64_t start) {
  const int64_t n = static_cast<int64_t>(order.size());
  start = std::clamp<int64_t>(start, 0, n);
  const int64_t rest = n - start;
  const int64_t total = even_partition && rest > 0 ? (rest + world - 1) / world * world : rest;
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(total / std::max(1, world) + 1));
  for (int64_t j = rank; j < total; j += world) mine.push_back(j < rest ? order[start + j] : order[(j - rest) % n]);
  return mine;
}

RankOrder::RankOrder(EpochPermutation order, int rank, int world, bool even_partition, int64_t start)
    : order_(std::move(order)), rank_(rank), world_(std::max(1, world)) {
  const int64_t n = order_.size();
  start_ = std::clamp<int64_t>(start, 0, n);
  rest_ = n - start_;
  const int64_t total = even_partition && rest_ > 0 ? (rest_ + world_ - 1) / world_ * world_ : rest_;
  size_ = total > rank_ ? (total - rank_ + world_ - 1) / world_ : 0;
}

int64_t RankOrder::Position(int64_t k) const {
  const int64_t j = rank_ + k * world_;
  return j < rest_ ? start_ + j : (j - rest_) % order_.size();
}

int64_t BlockRecords(int64_t count, int64_t bytes, int64_t block_bytes, int records_per_value) {
  const int64_t per = std::max(1, records_per_value);
  const double mean = count > 0 ? std::max(1.0, double(bytes) / double(count)) : 1.0;
  int64_t r = static_cast<int64_t>(double(block_bytes) / mean);
  r = std::max<int64_t>(per, r / per * per);
  return r;
}

namespace {

// log P(a batch of b drawn from n without replacement misses m given
// records) = log (C(n - m, b) / C(n, b)); -inf when it cannot.
double LogMiss(double n, double m, double b) {
  if (n - m < b) return -INFINITY;
  return std::lgamma(n - m + 1) - std::lgamma(n - m - b + 1) - std::lgamma(n + 1) + std::lgamma(n - b + 1);
}

// The variance of the distinct labels in a batch of b records drawn from
// the n of a full permutation: the labels' presences are indicators, so
// Var = sum over pairs of classes (c, d) of P(both absent) - P(c absent)
// P(d absent) (c = d included). Classes of equal size are taken together:
// as many terms as distinct sizes squared.
double DistinctVariance(const std::map<int64_t, int64_t>& counts, double n, int64_t batch) {
  std::map<int64_t, double> sizes;  // class size -> how many classes have it
  for (const auto& [label, c] : counts) sizes[c] += 1;
  const double b = double(batch);
  double var = 0;
  for (const auto& [c, kc] : sizes)
    for (const auto& [d, kd] : sizes) {
      const double miss_c = std::exp(LogMiss(n, double(c), b)), miss_d = std::exp(LogMiss(n, double(d), b));
      const double pairs = c == d ? kc * (kc - 1) : kc * kd;  // ordered pairs of different classes
      var += pairs * (std::exp(LogMiss(n, double(c + d), b)) - miss_c * miss_d);
      if (c == d) var += kc * (miss_c - miss_c * miss_c);  // each class with itself
    }
  return std::max(0.0, var);
}

}  // namespace

ShuffleQuality MeasureShuffle(const std::vector<int64_t>& labels, const std::vector<int64_t>& order, int batch,
                              const std::vector<int64_t>& next) {
  ShuffleQuality q;
  std::map<int64_t, int64_t> counts;
  for (int64_t l : labels) ++counts[std::max<int64_t>(l, -1)];
  const double n = static_cast<double>(labels.size());
  if (labels.empty() || batch < 1) return q;
  const int64_t b = std::min<int64_t>(batch, static_cast<int64_t>(labels.size()));
  // E[distinct] = sum over classes of P(class present) = 1 - prod (n-c-i)/(n-i).
  for (const auto& [label, c] : counts) {
    double absent = 1;
    for (int64_t i = 0; i < b && absent > 0; ++i) absent *= std::max(0.0, (n - double(c) - double(i)) / (n - double(i)));
    q.classes_per_batch_ref += 1 - absent;
    q.same_label_pairs_ref += (double(c) / n) * (double(c) / n);
  }
  auto label_of = [&](int64_t i) { return std::max<int64_t>(labels[static_cast<size_t>(i)], -1); };
  double distinct = 0;
  for (size_t at = 0; at + size_t(batch) <= order.size(); at += size_t(batch)) {
    std::vector<int64_t> in(order.begin() + static_cast<std::ptrdiff_t>(at),
                            order.begin() + static_cast<std::ptrdiff_t>(at + size_t(batch)));
    for (auto& x : in) x = label_of(x);
    std::sort(in.begin(), in.end());
    distinct += double(std::unique(in.begin(), in.end()) - in.begin());
    ++q.batches;
  }
  if (q.batches > 0) {
    q.classes_per_batch = distinct / double(q.batches);
    q.classes_per_batch_se = std::sqrt(DistinctVariance(counts, n, b) / double(q.batches));
  }
  int64_t same = 0;
  for (size_t i = 1; i < order.size(); ++i) same += label_of(order[i]) == label_of(order[i - 1]);
  if (order.size() > 1) q.same_label_pairs = double(same) / double(order.size() - 1);
  if (!next.empty() && q.batches > 0) {
    // Batch of each record in the next epoch (-1: not read there).
    std::vector<int64_t> next_batch(labels.size(), -1);
    for (size_t k = 0; k < next.size(); ++k) next_batch[static_cast<size_t>(next[k])] = int64_t(k) / batch;
    double met = 0, again = 0;
    for (size_t at = 0; at + size_t(batch) <= order.size(); at += size_t(batch)) {
      std::map<int64_t, int64_t> groups;
      for (size_t k = at; k < at + size_t(batch); ++k) ++groups[next_batch[static_cast<size_t>(order[k])]];
      for (const auto& [nb, c] : groups)
        if (nb >= 0) again += double(c) * double(c - 1) / 2;
      met += double(batch) * double(batch - 1) / 2;
    }
    q.repeat_pairs = again / met;
    q.repeat_pairs_ref = n > 1 ? double(batch - 1) / (n - 1) : 0;
  }
  return q;
}

}  // namespace imagepack
