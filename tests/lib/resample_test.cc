#include <gtest/gtest.h>

#include <random>

#include "image/resample_internal.h"
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

// The plain C++, SSE2 and AVX2 kernels do the same integer arithmetic, so
// they must agree to the byte: channels 1-4, up and down, regions, odd
// widths, strides, every filter, mirrored and not, on noise (which makes
// the sharper filters overshoot and clamp).
TEST(Resample, EveryKernelGivesTheSameBytes) {
  const SimdLevel best = ResampleSimdLevel();
  std::mt19937 rng(7);
  struct Case {
    int sw, sh, dw, dh;
    double rx, ry, rw, rh;
  };
  const Case cases[] = {
      {256, 341, 224, 224, 17, 40.5, 150, 131},  // upscale a crop (the loader's usual case)
      {341, 256, 224, 224, 0, 0, 341, 256},      // downscale the whole image
      {300, 200, 37, 53, 3, 9, 280.25, 170},     // odd sizes, fractional region
      {64, 48, 224, 224, 0, 0, 64, 48},          // strong upscale
      {1000, 700, 129, 95, 0, 0, 1000, 700},     // strong downscale (many taps)
      {9, 7, 5, 13, 1, 1, 7, 5},                 // tiny
      {1, 1, 3, 2, 0, 0, 1, 1},
      {57, 33, 57, 20, 0, 0, 57, 33},            // vertical only
      {57, 33, 21, 33, 0, 0, 57, 33},            // horizontal only
  };
  for (const Case& k : cases)
    for (int c = 1; c <= 4; ++c)
      for (ResampleFilter f : {ResampleFilter::kBox, ResampleFilter::kTriangle, ResampleFilter::kCatmullRom,
                               ResampleFilter::kLanczos3})
        for (bool mirror : {false, true}) {
          SCOPED_TRACE(::testing::Message() << k.sw << "x" << k.sh << "->" << k.dw << "x" << k.dh << " c" << c
                                            << " " << ResampleFilterName(f) << (mirror ? " mirror" : ""));
          const size_t stride = size_t(k.sw) * c + 5;  // rows not packed
          std::vector<uint8_t> src(stride * k.sh);
          for (auto& v : src) v = static_cast<uint8_t>(rng());
          std::vector<uint8_t> out[3];
          const SimdLevel levels[] = {SimdLevel::kScalar, SimdLevel::kSse2, SimdLevel::kAvx2};
          for (int l = 0; l < 3; ++l) {
            SetResampleSimdLevel(levels[l]);
            out[l].assign(size_t(k.dw) * c * k.dh + 3, 0xAB);  // 3 guard bytes
            ResampleRegion(src.data(), k.sw, k.sh, stride, c, k.rx, k.ry, k.rw, k.rh, out[l].data(), k.dw, k.dh,
                           size_t(k.dw) * c, f, mirror);
          }
          SetResampleSimdLevel(best);
          ASSERT_EQ(out[0], out[1]);
          ASSERT_EQ(out[0], out[2]);
          for (int g = 1; g <= 3; ++g) ASSERT_EQ(out[0][out[0].size() - g], 0xAB) << "wrote past the end";
          if (c < 3) continue;
          // Planar output: the interleaved result's first three channels,
          // split, at every level; planes with a row stride wider than the
          // row and guard bytes after the last plane.
          const size_t pstride = size_t(k.dw) + 3;
          std::vector<uint8_t> expect(pstride * k.dh * 3 + 3, 0xCD);
          for (int y = 0; y < k.dh; ++y)
            for (int x = 0; x < k.dw; ++x)
              for (int ch = 0; ch < 3; ++ch)
                expect[size_t(ch) * pstride * k.dh + size_t(y) * pstride + x] = out[0][(size_t(y) * k.dw + x) * c + ch];
          for (int l = 0; l < 3; ++l) {
            SetResampleSimdLevel(levels[l]);
            std::vector<uint8_t> planar(expect.size(), 0xCD);
            uint8_t* const p[3] = {planar.data(), planar.data() + pstride * k.dh, planar.data() + 2 * pstride * k.dh};
            ResampleRegionToPlanes(src.data(), k.sw, k.sh, stride, c, k.rx, k.ry, k.rw, k.rh, p, pstride, k.dw, k.dh,
                                   f, mirror);
            SetResampleSimdLevel(best);
            ASSERT_EQ(planar, expect) << "planar, level " << l;
          }
        }
  SetResampleSimdLevel(best);
}

TEST(Resample, MirrorReversesEachRow) {
  Image g = Gradient(90, 70, 3);
  for (auto& v : g.pixels) v = static_cast<uint8_t>(v * 7 + 3);  // not symmetric
  for (int c : {1, 3, 4}) {
    std::vector<uint8_t> src(size_t(90) * 70 * c);
    for (size_t i = 0; i < src.size(); ++i) src[i] = g.pixels[i % g.pixels.size()];
    std::vector<uint8_t> a(size_t(33) * 41 * c), b(a.size());
    ResampleRegion(src.data(), 90, 70, size_t(90) * c, c, 5, 6, 70, 50, a.data(), 33, 41, size_t(33) * c,
                   ResampleFilter::kTriangle, false);
    ResampleRegion(src.data(), 90, 70, size_t(90) * c, c, 5, 6, 70, 50, b.data(), 33, 41, size_t(33) * c,
                   ResampleFilter::kTriangle, true);
    for (int y = 0; y < 41; ++y)
      for (int x = 0; x < 33; ++x)
        for (int ch = 0; ch < c; ++ch)
          ASSERT_EQ(b[(size_t(y) * 33 + x) * c + ch], a[(size_t(y) * 33 + 32 - x) * c + ch]) << c << " " << x << "," << y;
  }
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
