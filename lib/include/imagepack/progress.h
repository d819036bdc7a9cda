// Progress counters. The library updates them; tools read them from another
// thread to draw a progress line. The library never prints.
#pragma once

#include <atomic>
#include <cstdint>

namespace imagepack {

struct Progress {
  std::atomic<int64_t> total{0};    // items this run will look at
  std::atomic<int64_t> done{0};     // items finished (written, skipped or failed)
  std::atomic<int64_t> failed{0};
  std::atomic<int64_t> bytes_in{0};
  std::atomic<int64_t> bytes_out{0};
};

// Set from a signal handler (lock-free atomic); long loops poll it and stop
// cleanly, leaving previous state or a complete result.
using CancelFlag = std::atomic<bool>;

}  // namespace imagepack
