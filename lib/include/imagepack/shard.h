// Sharding: how N machines (or N ranks) split one job with no overlap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// A permutation of [0, n) that depends only on (n, seed): Fisher-Yates
// driven by SplitMix64, so it is the same on every platform and library
// version (std::shuffle's is not).
std::vector<int64_t> Permutation(int64_t n, uint64_t seed);

// SplitMix64: a small, fast, well-mixed generator with a fully specified
// sequence. Used wherever results must be reproducible.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound), bound > 0, without modulo bias.
  uint64_t Below(uint64_t bound);
  // Uniform in [0, 1).
  double Uniform() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  uint64_t state_;
};

}  // namespace imagepack
