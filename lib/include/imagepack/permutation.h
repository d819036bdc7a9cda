// A keyed bijection of [0, n): entry i of a pseudo-random permutation
// computed on demand, in O(1) time and memory, and its inverse. The
// epoch's order (order.h) and pack's shuffle are made of these instead of
// shuffled arrays, so neither grows with the number of records.
#pragma once

#include <cstdint>

namespace imagepack {

// A Feistel network over the smallest power of two >= n (at least 4), the
// halves alternately xored with a keyed mix of the other half (eight
// half-rounds, four keys each side), then cycle walking: a value outside
// [0, n) is encrypted again until it falls inside, which keeps it a
// bijection of [0, n). The domain is below 2n, so a position takes fewer
// than two evaluations on average. The same (n, key) gives the same
// permutation on every platform and build.
class KeyedPermutation {
 public:
  KeyedPermutation() : KeyedPermutation(0, 0) {}
  KeyedPermutation(uint64_t n, uint64_t key);

  uint64_t size() const { return n_; }
  // The entry at position i. REQUIRES: i < size().
  uint64_t operator()(uint64_t i) const {
    if (n_ <= 1) return i;
    uint64_t x = Encrypt(i);
    while (x >= n_) x = Encrypt(x);
    return x;
  }
  // The position of value v: Inverse((*this)(i)) == i. REQUIRES: v < size().
  uint64_t Inverse(uint64_t v) const {
    if (n_ <= 1) return v;
    uint64_t x = Decrypt(v);
    while (x >= n_) x = Decrypt(x);
    return x;
  }

 private:
  static constexpr int kHalfRounds = 8;
  static uint64_t Mix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  uint64_t Encrypt(uint64_t x) const {
    uint64_t left = x >> right_bits_, right = x & right_mask_;
    for (int r = 0; r < kHalfRounds; r += 2) {
      left ^= Mix(right ^ keys_[r]) & left_mask_;
      right ^= Mix(left ^ keys_[r + 1]) & right_mask_;
    }
    return (left << right_bits_) | right;
  }
  uint64_t Decrypt(uint64_t x) const {
    uint64_t left = x >> right_bits_, right = x & right_mask_;
    for (int r = kHalfRounds - 2; r >= 0; r -= 2) {
      right ^= Mix(left ^ keys_[r + 1]) & right_mask_;
      left ^= Mix(right ^ keys_[r]) & left_mask_;
    }
    return (left << right_bits_) | right;
  }

  uint64_t n_;
  int right_bits_ = 1;
  uint64_t left_mask_ = 1, right_mask_ = 1;
  uint64_t keys_[kHalfRounds] = {};
};

}  // namespace imagepack
