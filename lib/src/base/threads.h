// How many worker threads a job runs with. Internal.
#pragma once

#include <thread>

namespace imagepack::internal {

// `requested` threads, or every core for 0 (or less): the rule of every
// `threads` option in the library.
inline int ResolveThreads(int requested) {
  if (requested > 0) return requested;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return cores > 0 ? cores : 1;
}

}  // namespace imagepack::internal
