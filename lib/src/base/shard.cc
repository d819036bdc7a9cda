#include "imagepack/shard.h"

#include <xxhash.h>

#include <cstdlib>

namespace imagepack {

Result<Shard> ParseShard(const std::string& text) {
  auto slash = text.find('/');
  auto bad = [&] {
    return Status::InvalidArgument("bad shard '" + text + "': expected I/N with 0 <= I < N");
  };
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size()) return bad();
  char* end = nullptr;
  long i = std::strtol(text.c_str(), &end, 10);
  if (end != text.c_str() + slash) return bad();
  long n = std::strtol(text.c_str() + slash + 1, &end, 10);
  if (*end != '\0' || n < 1 || n > 1000000 || i < 0 || i >= n) return bad();
  return Shard{static_cast<int>(i), static_cast<int>(n)};
}

int ShardOfPath(const std::string& relative_path, int count) {
  if (count <= 1) return 0;
  return static_cast<int>(XXH3_64bits(relative_path.data(), relative_path.size()) %
                          static_cast<uint64_t>(count));
}

ShardRange RangeOf(int64_t total, int index, int count) {
  const int64_t base = total / count, extra = total % count;
  ShardRange r;
  r.begin = index * base + (index < extra ? index : extra);
  r.end = r.begin + base + (index < extra ? 1 : 0);
  return r;
}

uint64_t SplitMix64::Below(uint64_t bound) {
  const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % bound);
  uint64_t r;
  do r = Next(); while (r >= limit);
  return r % bound;
}

std::vector<int64_t> Permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  SplitMix64 rng(seed);
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[rng.Below(static_cast<uint64_t>(i) + 1)]);
  return p;
}

}  // namespace imagepack
