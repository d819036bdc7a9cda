#include "loader/auto_order.h"

namespace imagepack::internal {

Order AutoOrder(bool in_ram, const RecordSource& src) {
  if (in_ram || !StoredShuffled(src.meta())) return Order::kRandom;
  if (src.remote()) return Order::kBlocks;
  const int64_t stored = src.stored_bytes();
  if (stored < (int64_t(256) << 20)) return Order::kRandom;
  return src.cached_bytes() * 2 >= stored ? Order::kRandom : Order::kBlocks;
}

}  // namespace imagepack::internal
