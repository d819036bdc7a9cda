#include "imagepack/permutation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace imagepack {
namespace {

TEST(KeyedPermutation, IsABijectionWithItsInverseForEverySize) {
  for (uint64_t n = 0; n < 300; ++n)
    for (uint64_t key : {0ull, 1ull, 0xDEADBEEFull}) {
      const KeyedPermutation p(n, key);
      std::vector<char> seen(n, 0);
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t v = p(i);
        ASSERT_LT(v, n) << "n " << n;
        ASSERT_FALSE(seen[v]) << "n " << n << " value " << v << " twice";
        seen[v] = 1;
        ASSERT_EQ(p.Inverse(v), i);
      }
    }
  for (uint64_t n : {65535ull, 65536ull, 65537ull, 1000003ull}) {
    const KeyedPermutation p(n, 42);
    std::vector<char> seen(n, 0);
    for (uint64_t i = 0; i < n; ++i) seen[p(i)] = 1;
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), int64_t(n)) << "n " << n;
  }
}

// The same (n, key) gives the same entries on every platform and build:
// these are pinned.
TEST(KeyedPermutation, EntriesArePinned) {
  const KeyedPermutation p(1000, 7);
  std::vector<uint64_t> first;
  for (uint64_t i = 0; i < 8; ++i) first.push_back(p(i));
  EXPECT_EQ(first, (std::vector<uint64_t>{921, 64, 204, 163, 975, 978, 450, 635}));
  EXPECT_EQ(KeyedPermutation(uint64_t(1) << 40, 9)(123456789), 1039018745918ull);
}

// Over many keys every value lands at a given position about equally often,
// and neighbouring positions are not correlated.
TEST(KeyedPermutation, KeysGiveUniformlySpreadPermutations) {
  const uint64_t n = 10, keys = 20000;
  std::vector<int> at0(n, 0), pairs(n * n, 0);
  for (uint64_t key = 0; key < keys; ++key) {
    const KeyedPermutation p(n, key);
    ++at0[p(0)];
    ++pairs[p(3) * n + p(4)];
  }
  for (uint64_t v = 0; v < n; ++v) {
    EXPECT_GT(at0[v], 1700) << "value " << v;
    EXPECT_LT(at0[v], 2300) << "value " << v;
  }
  // 90 ordered pairs of distinct values, ~222 each.
  for (uint64_t a = 0; a < n; ++a)
    for (uint64_t b = 0; b < n; ++b) {
      if (a == b) {
        EXPECT_EQ(pairs[a * n + b], 0);
        continue;
      }
      EXPECT_GT(pairs[a * n + b], 140) << a << "," << b;
      EXPECT_LT(pairs[a * n + b], 310) << a << "," << b;
    }
}

}  // namespace
}  // namespace imagepack
