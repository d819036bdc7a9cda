#include "imagepack/order.h"

#include <algorithm>
#include <map>

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

std::vector<int64_t> BlockOrder(int64_t n, const OrderSpec& s, int64_t epoch) {
  const int64_t B = std::max<int64_t>(1, s.block_records);
  const int64_t world = std::max(1, s.world);
  const int64_t blocks = (n + B - 1) / B;
  const std::vector<int64_t> perm = Permutation(blocks, Mix(s.seed, 1, static_cast<uint64_t>(epoch)));
  std::vector<int64_t> seq;
  seq.reserve(static_cast<size_t>(n));
  for (int64_t b : perm)
    for (int64_t i = b * B; i < std::min(n, (b + 1) * B); ++i) seq.push_back(i);
  std::vector<int64_t> order(static_cast<size_t>(n));
  int64_t lo = 0;
  for (int64_t r = 0; r < world; ++r) {
    const int64_t len = n / world + (r < n % world ? 1 : 0);
    for (int64_t w0 = 0, wi = 0; w0 < len; w0 += WindowRecords(s, wi), ++wi) {
      const int64_t wl = std::min(WindowRecords(s, wi), len - w0);
      const std::vector<int64_t> p =
          Permutation(wl, Mix(s.seed, 2 + static_cast<uint64_t>(epoch), static_cast<uint64_t>(r),
                              static_cast<uint64_t>(wi)));
      for (int64_t k = 0; k < wl; ++k) order[static_cast<size_t>((w0 + k) * world + r)] = seq[lo + w0 + p[k]];
    }
    lo += len;
  }
  return order;
}

}  // namespace

std::vector<int64_t> EpochOrder(int64_t n, const OrderSpec& spec, int64_t epoch) {
  switch (spec.kind) {
    case Order::kRandom:
      return Permutation(n, spec.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) + 1);
    case Order::kBlocks: return BlockOrder(n, spec, epoch);
    case Order::kSequential:
    case Order::kAuto: break;
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  return order;
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

int64_t BlockRecords(int64_t count, int64_t bytes, int64_t block_bytes, int records_per_value) {
  const int64_t per = std::max(1, records_per_value);
  const double mean = count > 0 ? std::max(1.0, double(bytes) / double(count)) : 1.0;
  int64_t r = static_cast<int64_t>(double(block_bytes) / mean);
  r = std::max<int64_t>(per, r / per * per);
  return r;
}

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
  if (q.batches > 0) q.classes_per_batch = distinct / double(q.batches);
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
