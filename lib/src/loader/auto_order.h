// The loader's Order::kAuto decision (docs/LOADER.md "Order"). Internal.
#pragma once

#include "imagepack/order.h"
#include "imagepack/store.h"

namespace imagepack::internal {

// Random where reads are cheap (in RAM, a dataset under 256 MB that the
// first epoch brings into the page cache, files at least half cached) or
// where blocks would mix poorly (records not stored shuffled: blocks of a
// pack in class order hold one class each); blocks otherwise, and always
// for a shuffled dataset in object storage (every read is a request).
// Asks the source for its stored and cached bytes.
Order AutoOrder(bool in_ram, const RecordSource& src);

}  // namespace imagepack::internal
