#include "imagepack/permutation.h"

#include "imagepack/shard.h"

namespace imagepack {

KeyedPermutation::KeyedPermutation(uint64_t n, uint64_t key) : n_(n) {
  // The smallest power of two >= n, at least 4 (two bits, one a side).
  const int bits = n <= 4 ? 2 : 64 - __builtin_clzll(n - 1);
  const int left_bits = bits / 2;
  right_bits_ = bits - left_bits;
  left_mask_ = (uint64_t{1} << left_bits) - 1;
  right_mask_ = (uint64_t{1} << right_bits_) - 1;
  // Round keys from the key and the domain, so that two sizes under one
  // key are unrelated permutations.
  SplitMix64 rng(key ^ (n * 0xD1B54A32D192ED03ull));
  for (uint64_t& k : keys_) k = rng.Next();
}

}  // namespace imagepack
