// Shared test fixtures that need more of the library than testutil.h (which
// every test includes) pulls in.
#pragma once

#include <string>

#include "imagepack/mix.h"

namespace imagepack::testing {

// A mix source: one pack (or shard pattern) and its weight.
inline MixSource Weighted(const std::string& path, double weight) {
  MixSource s;
  s.paths = {path};
  s.weight = weight;
  return s;
}

}  // namespace imagepack::testing
