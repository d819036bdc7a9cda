// Sharding: how N machines (or N ranks) split one job with no overlap.
#pragma once

#include <cstdint>
#include <string>

#include "imagepack/status.h"

namespace imagepack {

// Shard `index` of `count` (0 <= index < count).
struct Shard {
  int index = 0;
  int count = 1;
  std::string ToString() const { return std::to_string(index) + "/" + std::to_string(count); }
};

// Parses "I/N". Errors name the offending text.
Result<Shard> ParseShard(const std::string& text);

// The shard a file belongs to: a function of its relative path alone
// (XXH3-64 of the path, modulo count), so machines that list the tree in a
// different order, or see a few extra files, still agree on every file.
int ShardOfPath(const std::string& relative_path, int count);

// Contiguous range [begin, end) of `total` items owned by shard `index` of
// `count`: sizes differ by at most one, the union is [0, total).
struct ShardRange {
  int64_t begin = 0;
  int64_t end = 0;
};
ShardRange RangeOf(int64_t total, int index, int count);

}  // namespace imagepack
