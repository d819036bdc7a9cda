#include <gtest/gtest.h>

#include "testutil.h"

namespace imagepack {
namespace {

using Mode = SizeLimit::Mode;
using testing::Gradient;
using testing::Pixel;

std::pair<int, int> Shorter(int w, int h, int n) { return TargetSize(w, h, {Mode::kShorterEdge, n}); }
std::pair<int, int> Longer(int w, int h, int n) { return TargetSize(w, h, {Mode::kLongerEdge, n}); }

TEST(TargetSize, ShorterEdgeIsCappedExactly) {
  EXPECT_EQ(Shorter(500, 375, 256), std::make_pair(341, 256));  // 500*256/375 = 341.33
  EXPECT_EQ(Shorter(375, 500, 256), std::make_pair(256, 341));
  EXPECT_EQ(Shorter(1000, 1000, 256), std::make_pair(256, 256));
}

TEST(TargetSize, LongerEdgeIsCappedExactly) {
  EXPECT_EQ(Longer(500, 375, 256), std::make_pair(256, 192));
  EXPECT_EQ(Longer(375, 500, 256), std::make_pair(192, 256));
}

TEST(TargetSize, HalvesRoundUp) {
  // 600 * 256 / 400 = 384 exactly; 301 * 128 / 200 = 192.64 -> 193;
  // 3 * 1 / 2 = 1.5 -> 2.
  EXPECT_EQ(Shorter(600, 400, 256), std::make_pair(384, 256));
  EXPECT_EQ(Shorter(301, 200, 128), std::make_pair(193, 128));
  EXPECT_EQ(Shorter(3, 2, 1), std::make_pair(2, 1));
  EXPECT_EQ(Longer(5, 2, 2), std::make_pair(2, 1));  // 2*2/5 = 0.8 -> 1
  EXPECT_EQ(Longer(4, 1, 2), std::make_pair(2, 1));  // 0.5 -> 1
}

TEST(TargetSize, NeverUpscales) {
  EXPECT_EQ(Shorter(200, 100, 256), std::make_pair(200, 100));
  EXPECT_EQ(Shorter(256, 1000, 256), std::make_pair(256, 1000));
  EXPECT_EQ(Longer(256, 100, 256), std::make_pair(256, 100));
  EXPECT_EQ(Shorter(1, 1, 256), std::make_pair(1, 1));
  EXPECT_EQ(Longer(1, 1, 1), std::make_pair(1, 1));
}

TEST(TargetSize, PanoramasKeepAtLeastOnePixel) {
  EXPECT_EQ(Shorter(10000, 10, 256), std::make_pair(10000, 10));  // shorter edge already small
  EXPECT_EQ(Shorter(100000, 300, 256), std::make_pair(85333, 256));
  EXPECT_EQ(Longer(10000, 10, 256), std::make_pair(256, 1));
  EXPECT_EQ(Longer(10, 10000, 256), std::make_pair(1, 256));
}

TEST(TargetSize, NoLimitKeepsSize) {
  EXPECT_EQ(TargetSize(123, 45, {}), std::make_pair(123, 45));
}

class ResampleFilters : public ::testing::TestWithParam<ResampleFilter> {};

TEST_P(ResampleFilters, FlatStaysExactlyFlat) {
  Image flat;
  flat.width = 97;
  flat.height = 61;
  flat.channels = 3;
  flat.pixels.assign(flat.stride() * flat.height, 0);
  for (size_t i = 0; i < flat.pixels.size(); i += 3) {
    flat.pixels[i] = 17;
    flat.pixels[i + 1] = 128;
    flat.pixels[i + 2] = 250;
  }
  for (auto [w, h] : {std::pair{31, 20}, {97, 13}, {5, 61}, {150, 100}, {1, 1}}) {
    Image out = ResampleImage(flat, w, h, GetParam());
    ASSERT_EQ(out.pixels.size(), size_t(w) * h * 3);
    for (size_t i = 0; i < out.pixels.size(); i += 3) {
      ASSERT_EQ(out.pixels[i], 17) << w << "x" << h;
      ASSERT_EQ(out.pixels[i + 1], 128);
      ASSERT_EQ(out.pixels[i + 2], 250);
    }
  }
}

TEST_P(ResampleFilters, DownscaledCheckerboardIsGrey) {
  // Without antialiasing, sampling a 1-px checkerboard gives black or white;
  // with it, every output pixel is close to the mean.
  Image board;
  board.width = board.height = 240;
  board.channels = 1;
  board.pixels.resize(240 * 240);
  for (int y = 0; y < 240; ++y)
    for (int x = 0; x < 240; ++x) board.pixels[y * 240 + x] = ((x + y) % 2) ? 255 : 0;
  Image out = ResampleImage(board, 37, 37, GetParam());
  for (int y = 2; y < 35; ++y)
    for (int x = 2; x < 35; ++x) EXPECT_NEAR(out.pixels[y * 37 + x], 128, 8) << x << "," << y;
}

TEST_P(ResampleFilters, GradientStaysMonotonicAndInRange) {
  Image g = Gradient(300, 200, 3);
  Image out = ResampleImage(g, 113, 71, GetParam());
  for (int x = 1; x < 113; ++x) {
    // Red grows with x along the middle row (box/triangle: never overshoot).
    EXPECT_GE(Pixel(out, x, 35)[0] + 2, Pixel(out, x - 1, 35)[0]);
  }
  EXPECT_LE(Pixel(out, 0, 35)[0], 5);
  EXPECT_GE(Pixel(out, 112, 35)[0], 250);
}

INSTANTIATE_TEST_SUITE_P(All, ResampleFilters,
                         ::testing::Values(ResampleFilter::kBox, ResampleFilter::kTriangle,
                                           ResampleFilter::kCatmullRom,
                                           ResampleFilter::kLanczos3));

TEST(Resample, UpscaleInterpolatesBetweenNeighbours) {
  Image two;
  two.width = 2;
  two.height = 1;
  two.channels = 1;
  two.pixels = {0, 200};
  Image out = ResampleImage(two, 4, 1, ResampleFilter::kTriangle);
  // Output centres at 0.25, 0.75, 1.25, 1.75 of the input: 0, 50, 150, 200.
  EXPECT_EQ(out.pixels, (std::vector<uint8_t>{0, 50, 150, 200}));
}

TEST(Resample, RegionOfAStridedBufferMatchesACopy) {
  Image g = Gradient(120, 90, 3);
  // Crop (30, 20, 60x50) in place via stride, versus a packed copy.
  Image crop;
  crop.width = 60;
  crop.height = 50;
  crop.channels = 3;
  for (int y = 20; y < 70; ++y)
    crop.pixels.insert(crop.pixels.end(), Pixel(g, 30, y), Pixel(g, 30, y) + 60 * 3);
  Image a = ResampleImage(crop, 24, 20, ResampleFilter::kCatmullRom);
  Image b;
  b.width = 24;
  b.height = 20;
  b.channels = 3;
  b.pixels.resize(b.stride() * 20);
  Resample(Pixel(g, 30, 20), 60, 50, g.stride(), 3, b.pixels.data(), 24, 20, b.stride(),
           ResampleFilter::kCatmullRom);
  EXPECT_EQ(a.pixels, b.pixels);
}

TEST(Resample, ParsesFilterNames) {
  EXPECT_EQ(ParseResampleFilter("lanczos3").value(), ResampleFilter::kLanczos3);
  EXPECT_EQ(ParseResampleFilter("triangle").value(), ResampleFilter::kTriangle);
  auto bad = ParseResampleFilter("nearest");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nearest"), std::string::npos);
}

}  // namespace
}  // namespace imagepack
