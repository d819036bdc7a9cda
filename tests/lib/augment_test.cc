// The augmentations (imagepack/augment.h) on their own: every operation and
// policy stays inside the image for any magnitude and any size (1x1, 1x7,
// gray; the sanitizer builds run this), the functional ops' known values,
// and the policies' draws as functions of their generator's seed.
// tests/python/test_augment_torchvision.py holds them to torchvision.
#include "imagepack/augment.h"

#include "image/augment/augment_internal.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

namespace imagepack {
namespace {

Image Noise(int w, int h, int c, uint64_t seed) {
  Image img;
  img.width = w, img.height = h, img.channels = c;
  img.pixels.resize(size_t(w) * h * c);
  SplitMix64 rng(seed);
  for (uint8_t& p : img.pixels) p = uint8_t(rng.Next());
  return img;
}

const double kMagnitudes[] = {-1e300, -1e9, -300, -1, -0.5, 0, 0.5, 1, 7, 300, 1e9, 1e300,
                              std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()};

TEST(Augment, EveryOpAnyMagnitudeAnySizeKeepsTheShape) {
  const uint8_t fill[3] = {1, 2, 3};
  for (auto [w, h, c] : {std::tuple{1, 1, 3}, {1, 7, 3}, {7, 1, 1}, {2, 2, 1}, {3, 5, 3}, {17, 9, 3}}) {
    for (int k = 0; k < kAugOpCount; ++k)
      for (double m : kMagnitudes)
        for (auto interp : {AugInterpolation::kNearest, AugInterpolation::kBilinear})
          for (const uint8_t* f : {static_cast<const uint8_t*>(nullptr), fill}) {
            Image img = Noise(w, h, c, 1);
            ApplyAugOp(static_cast<AugOp>(k), m, interp, f, &img);
            ASSERT_EQ(img.pixels.size(), size_t(w) * h * c) << AugOpName(static_cast<AugOp>(k));
            ASSERT_EQ(img.width, w);
          }
    for (double m : kMagnitudes) {
      Image img = Noise(w, h, c, 2);
      AdjustHue(&img, m);
      Posterize(&img, int(std::fmax(-100, std::fmin(100, std::isnan(m) ? 0 : m))));
      Solarize(&img, m);
    }
  }
}

TEST(Augment, KnownValues) {
  Image img = Noise(4, 3, 3, 5);
  const Image orig = img;
  Invert(&img);
  for (size_t i = 0; i < img.pixels.size(); ++i) EXPECT_EQ(img.pixels[i], 255 - orig.pixels[i]);
  img = orig;
  Posterize(&img, 2);
  for (size_t i = 0; i < img.pixels.size(); ++i) EXPECT_EQ(img.pixels[i], orig.pixels[i] & 0xC0);
  img = orig;
  AdjustBrightness(&img, 0.5);  // float32 blend, truncated
  for (size_t i = 0; i < img.pixels.size(); ++i) EXPECT_EQ(img.pixels[i], uint8_t(float(orig.pixels[i]) * 0.5f));
  img = orig;
  ApplyAugOp(AugOp::kIdentity, 5, AugInterpolation::kNearest, nullptr, &img);
  EXPECT_EQ(img.pixels, orig.pixels);
  // A translation by 1 px to the right: the first column is the fill.
  const uint8_t fill[3] = {9, 8, 7};
  img = orig;
  ApplyAugOp(AugOp::kTranslateX, 1.9, AugInterpolation::kNearest, fill, &img);  // truncated to 1
  for (int y = 0; y < 3; ++y) {
    EXPECT_EQ(img.pixels[size_t(y) * 12], 9);
    for (int x = 1; x < 4; ++x)
      for (int ch = 0; ch < 3; ++ch)
        EXPECT_EQ(img.pixels[size_t(y) * 12 + x * 3 + ch], orig.pixels[size_t(y) * 12 + (x - 1) * 3 + ch]);
  }
  // Rotating by 360 degrees, or a 0 magnitude shear, changes nothing.
  img = orig;
  ApplyAugOp(AugOp::kRotate, 360, AugInterpolation::kNearest, nullptr, &img);
  EXPECT_EQ(img.pixels, orig.pixels);
}

TEST(Augment, BaselineSse41AndAvx2LoopsGiveTheSameBytes) {
  bool& sse41 = internal::UseSse41();
  bool& avx2 = internal::UseAvx2();
  const bool had_sse41 = sse41, had_avx2 = avx2;
  for (auto [w, h, c] : {std::tuple{37, 29, 3}, {5, 3, 1}, {224, 17, 3}, {61, 40, 1}, {224, 224, 3}}) {
    for (int k = 0; k < kAugOpCount; ++k)
      for (double m : {-0.7, -0.2, 0.3, 0.9, 13.0, -25.0, 135.0, -0.99})
        for (auto interp : {AugInterpolation::kNearest, AugInterpolation::kBilinear}) {
          const uint8_t fill[3] = {10, 200, 30};
          Image a = Noise(w, h, c, 11), b = a, v = a;
          sse41 = false, avx2 = false;
          ApplyAugOp(static_cast<AugOp>(k), m, interp, k % 2 ? fill : nullptr, &a);
          sse41 = true;
          ApplyAugOp(static_cast<AugOp>(k), m, interp, k % 2 ? fill : nullptr, &b);
          avx2 = had_avx2;  // the CPU's: AVX2 where it has it
          ApplyAugOp(static_cast<AugOp>(k), m, interp, k % 2 ? fill : nullptr, &v);
          ASSERT_EQ(a.pixels, b.pixels) << AugOpName(static_cast<AugOp>(k)) << " " << m;
          ASSERT_EQ(a.pixels, v.pixels) << AugOpName(static_cast<AugOp>(k)) << " " << m << " (AVX2)";
        }
  }
  sse41 = had_sse41, avx2 = had_avx2;
}

// Contrast's gray sum runs in blocks of 2^20 eight-pixel steps: an image
// past one block gives the baseline's bytes too.
TEST(Augment, ContrastOfAnImagePastOneSumBlockIsTheBaselines) {
  bool& avx2 = internal::UseAvx2();
  const bool had_avx2 = avx2;
  Image a = Noise(4096, 2100, 3, 5), v = a;  // 8,601,600 pixels > 8 x 2^20
  avx2 = false;
  ApplyAugOp(AugOp::kContrast, 0.4, AugInterpolation::kBilinear, nullptr, &a);
  avx2 = had_avx2;
  ApplyAugOp(AugOp::kContrast, 0.4, AugInterpolation::kBilinear, nullptr, &v);
  EXPECT_EQ(a.pixels, v.pixels);
}

TEST(Augment, EqualizeAndAutoContrastOfAFlatImageChangeNothing) {
  Image img = Noise(5, 5, 1, 3);
  std::fill(img.pixels.begin(), img.pixels.end(), 77);
  Equalize(&img);
  AutoContrast(&img);
  for (uint8_t p : img.pixels) EXPECT_EQ(p, 77);
}

TEST(Augment, EraseStaysInsideAndFollowsP) {
  EraseOptions o;
  o.p = 0.5;
  o.value[0] = o.value[1] = o.value[2] = 3;
  int erased = 0;
  for (uint64_t s = 0; s < 400; ++s) {
    SplitMix64 rng(s);
    const EraseBox b = DrawErase(o, 40, 30, rng);
    if (b.w == 0) continue;
    ++erased;
    EXPECT_GE(b.x, 0);
    EXPECT_GE(b.y, 0);
    EXPECT_LE(b.x + b.w, 40);
    EXPECT_LE(b.y + b.h, 30);
  }
  EXPECT_GT(erased, 150);
  EXPECT_LT(erased, 250);
  o.p = 1, o.scale_min = 0, o.scale_max = 1e9, o.ratio_min = -5, o.ratio_max = 1e300, o.random = true;
  for (auto [w, h] : {std::pair{1, 1}, {1, 7}, {2, 2}}) {
    Image img = Noise(w, h, 3, 4);
    SplitMix64 rng(9);
    ApplyErase(o, DrawErase(o, w, h, rng), &img, rng);
    ApplyErase(o, EraseBox{-5, -5, 100, 100}, &img, rng);  // clamped to the image
    EXPECT_EQ(img.pixels.size(), size_t(w) * h * 3);
  }
}

TEST(Augment, PoliciesAreFunctionsOfTheSeedAndStayInside) {
  for (const char* name : {"ta_wide", "ra", "imagenet", "cifar10", "svhn", "augmix"}) {
    AugmentOptions o;
    ASSERT_TRUE(ParseAutoAugment(name, &o.kind));
    EXPECT_STREQ(AutoAugmentName(o.kind), name);
    ASSERT_TRUE(CheckAugmentOptions(o).ok());
    std::set<std::vector<uint8_t>> outputs;
    for (uint64_t s = 0; s < 20; ++s) {
      Image a = Noise(19, 13, 3, 7), b = a;
      SplitMix64 r1(s), r2(s);
      AutoAugmentImage(o, r1, &a);
      AutoAugmentImage(o, r2, &b);
      ASSERT_EQ(a.pixels, b.pixels) << name;
      outputs.insert(a.pixels);
    }
    EXPECT_GT(outputs.size(), 5u) << name;
    for (auto [w, h, c] : {std::tuple{1, 1, 3}, {1, 7, 1}, {2, 3, 3}}) {
      for (uint64_t s = 0; s < 30; ++s) {
        Image img = Noise(w, h, c, s);
        SplitMix64 rng(s);
        AutoAugmentImage(o, rng, &img);
        ASSERT_EQ(img.pixels.size(), size_t(w) * h * c);
      }
    }
  }
  AugmentOptions bad;
  bad.kind = AutoAugmentKind::kRandAugment;
  bad.ra_magnitude = 31;
  EXPECT_FALSE(CheckAugmentOptions(bad).ok());
  bad.ra_magnitude = 9, bad.augmix_severity = 0;
  EXPECT_FALSE(CheckAugmentOptions(bad).ok());
  AutoAugmentKind k;
  EXPECT_FALSE(ParseAutoAugment("autoaugment", &k));
}

TEST(Augment, TrivialAugmentDrawsEveryOpEvenly) {
  AugmentOptions o;
  o.kind = AutoAugmentKind::kTrivialAugmentWide;
  int counts[kAugOpCount] = {};
  for (uint64_t s = 0; s < 2800; ++s) {
    Image img = Noise(4, 4, 3, 1);
    SplitMix64 rng(s);
    AugmentLog log;
    AutoAugmentImage(o, rng, &img, &log);
    ASSERT_EQ(log.steps.size(), 1u);
    ++counts[int(log.steps[0].op)];
  }
  for (int k = 0; k < kAugOpCount; ++k) {
    if (AugOp(k) == AugOp::kInvert) EXPECT_EQ(counts[k], 0);
    else EXPECT_NEAR(counts[k], 200, 70) << AugOpName(AugOp(k));
  }
}

}  // namespace
}  // namespace imagepack
