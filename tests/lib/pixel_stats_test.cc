// AddChannelSums (its AVX2 kernels where the CPU has them) against a plain
// per-byte loop; PixelMoments' mean/std against the textbook formula.
#include "fields/pixel_stats.h"

#include <gtest/gtest.h>

#include <cmath>
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

// Mean and population std per channel, in [0, 1], of all pixels of `images`
// (interleaved, `c` channels), computed directly in doubles.
void TextbookMeanStd(const std::vector<std::vector<uint8_t>>& images, int c, std::vector<double>* mean,
                     std::vector<double>* std) {
  mean->assign(c, 0.0);
  std->assign(c, 0.0);
  double n = 0;
  for (const auto& img : images)
    for (size_t i = 0; i < img.size(); ++i) (*mean)[i % c] += img[i] / 255.0;
  for (const auto& img : images) n += double(img.size() / c);
  for (int k = 0; k < c; ++k) (*mean)[k] /= n;
  for (const auto& img : images)
    for (size_t i = 0; i < img.size(); ++i) {
      const double d = img[i] / 255.0 - (*mean)[i % c];
      (*std)[i % c] += d * d;
    }
  for (int k = 0; k < c; ++k) (*std)[k] = std::sqrt((*std)[k] / n);
}

// Images of different sizes added to two PixelMoments, merged: the mean and
// std of every pixel together, whatever the split.
TEST(PixelMoments, MergedMomentsGiveTheMeanAndStdOfAllPixels) {
  std::mt19937 rng(11);
  for (int c : {1, 3}) {
    std::vector<std::vector<uint8_t>> images;
    PixelMoments a, b;
    for (int i = 0; i < 7; ++i) {
      const size_t px = 100 + 37 * i;
      std::vector<uint8_t> img(px * c);
      const int base = 20 * i;  // differing means, so the split matters
      for (auto& v : img) v = static_cast<uint8_t>(base + rng() % 60);
      (i % 2 ? a : b).Add(img.data(), px, c);
      images.push_back(std::move(img));
    }
    a.Merge(b);
    EXPECT_EQ(a.images, 7);
    std::vector<double> mean, std, want_mean, want_std;
    a.MeanStd(c, &mean, &std);
    TextbookMeanStd(images, c, &want_mean, &want_std);
    ASSERT_EQ(mean.size(), size_t(c));
    for (int k = 0; k < c; ++k) {
      EXPECT_NEAR(mean[k], want_mean[k], 1e-12) << "channel " << k;
      EXPECT_NEAR(std[k], want_std[k], 1e-9) << "channel " << k;
    }
  }
}

// No pixels: no statistics (pack writes none), not NaN.
TEST(PixelMoments, EmptyGivesNoStatistics) {
  PixelMoments m;
  std::vector<double> mean{1}, std{1};
  m.MeanStd(3, &mean, &std);
  EXPECT_TRUE(mean.empty());
  EXPECT_TRUE(std.empty());
}

// Shards pooled from their stored mean/std, weighted by their image counts:
// two shards of equally sized images pool to the statistics of all images.
TEST(PixelMoments, PoolingShardsFromMeanAndStd) {
  std::mt19937 rng(5);
  const int c = 3;
  const size_t px = 64;
  std::vector<std::vector<uint8_t>> all;
  PixelMoments shard[2];
  const int counts[2] = {3, 9};
  for (int s = 0; s < 2; ++s)
    for (int i = 0; i < counts[s]; ++i) {
      std::vector<uint8_t> img(px * c);
      for (auto& v : img) v = static_cast<uint8_t>(s * 100 + rng() % 120);
      shard[s].Add(img.data(), px, c);
      all.push_back(std::move(img));
    }
  PixelMoments pooled;
  for (int s = 0; s < 2; ++s) {
    std::vector<double> mean, std;
    shard[s].MeanStd(c, &mean, &std);
    pooled.Merge(PixelMoments::FromMeanStd(mean, std, shard[s].images));
  }
  EXPECT_EQ(pooled.images, 12);
  std::vector<double> mean, std, want_mean, want_std;
  pooled.MeanStd(c, &mean, &std);
  TextbookMeanStd(all, c, &want_mean, &want_std);
  for (int k = 0; k < c; ++k) {
    EXPECT_NEAR(mean[k], want_mean[k], 1e-12) << "channel " << k;
    EXPECT_NEAR(std[k], want_std[k], 1e-9) << "channel " << k;
  }
}

}  // namespace
}  // namespace imagepack::internal
