// AddChannelSums (its AVX2 kernels where the CPU has them) against a plain
// per-byte loop.
#include "pixel_stats.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace imagepack::internal {
namespace {

void Reference(const uint8_t* p, size_t bytes, int c, uint64_t s[3], uint64_t q[3]) {
  for (size_t i = 0; i < bytes; ++i) {
    s[i % c] += p[i];
    q[i % c] += uint64_t(p[i]) * p[i];
  }
}

void ExpectSame(const std::vector<uint8_t>& buf, size_t offset, size_t bytes, int c) {
  uint64_t s[3] = {1, 2, 3}, q[3] = {4, 5, 6};  // adds to what is there
  uint64_t rs[3] = {1, 2, 3}, rq[3] = {4, 5, 6};
  AddChannelSums(buf.data() + offset, bytes, c, s, q);
  Reference(buf.data() + offset, bytes, c, rs, rq);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(s[k], rs[k]) << "sum, channel " << k << " of " << c << ", " << bytes << " bytes at +" << offset;
    EXPECT_EQ(q[k], rq[k]) << "squares, channel " << k << " of " << c << ", " << bytes << " bytes at +" << offset;
  }
}

// Sizes around the kernels' block sizes (48, 96 bytes), unaligned starts,
// and runs longer than one and two batches of uint32 lanes (4096 blocks of
// 96 bytes).
TEST(PixelStats, SameSumsAsAPlainLoop) {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(96 * 8192 * 2 + 1000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (int c : {1, 2, 3})
    for (size_t bytes : {0, 1, 2, 3, 47, 48, 95, 96, 97, 191, 192, 1000, 96 * 8192 + 5, 96 * 8192 * 2 + 99})
      for (size_t offset : {0, 1, 13}) ExpectSame(buf, offset, std::min(bytes, buf.size() - offset), c);
}

// The largest values over more than two batches: a uint32 lane that were
// emptied too late would wrap around.
TEST(PixelStats, AllWhiteDoesNotOverflow) {
  std::vector<uint8_t> white(96 * 4096 * 3 + 48, 255);
  for (int c : {1, 3}) {
    uint64_t s[3] = {0, 0, 0}, q[3] = {0, 0, 0};
    AddChannelSums(white.data(), white.size(), c, s, q);
    const uint64_t per_channel = white.size() / c;
    for (int k = 0; k < c; ++k) {
      EXPECT_EQ(s[k], per_channel * 255) << c;
      EXPECT_EQ(q[k], per_channel * 255 * 255) << c;
    }
    for (int k = c; k < 3; ++k) EXPECT_EQ(s[k] + q[k], 0u) << "channel " << k << " of " << c << " was touched";
  }
}

// Channels stay apart: a pattern whose channels differ gives each its own
// sums (a kernel mixing neighbouring bytes would blur them).
TEST(PixelStats, ChannelsStayApart) {
  std::vector<uint8_t> rgb(3 * 10000);
  for (size_t i = 0; i < rgb.size(); i += 3) {
    rgb[i] = 10;
    rgb[i + 1] = 200;
    rgb[i + 2] = static_cast<uint8_t>(i / 3 % 2 ? 0 : 100);
  }
  uint64_t s[3] = {0, 0, 0}, q[3] = {0, 0, 0};
  AddChannelSums(rgb.data(), rgb.size(), 3, s, q);
  EXPECT_EQ(s[0], 10u * 10000);
  EXPECT_EQ(s[1], 200u * 10000);
  EXPECT_EQ(s[2], 100u * 5000);
  EXPECT_EQ(q[0], 100u * 10000);
  EXPECT_EQ(q[1], 40000u * 10000);
  EXPECT_EQ(q[2], 10000u * 5000);
}

}  // namespace
}  // namespace imagepack::internal
