#include "imagepack/transform.h"

#include <gtest/gtest.h>

#include <cmath>

#include "testutil.h"

namespace imagepack {
namespace {

using testing::Golden;
using testing::Gradient;
using testing::MeanAbsDiff;

TEST(CropGeometry, RandomResizedCropMatchesTheTorchvisionDefinition) {
  // Over many draws: boxes inside the image, area fraction in [0.08, 1],
  // aspect ratio in [3/4, 4/3] (up to rounding), log-ratio roughly uniform.
  SplitMix64 rng(1);
  const int W = 400, H = 400;  // square: tall and wide boxes fit equally
  int n = 20000;
  double mean_log_ratio = 0, mean_scale = 0;
  for (int i = 0; i < n; ++i) {
    CropBox b = RandomResizedCropBox(W, H, 0.08, 1.0, 3.0 / 4, 4.0 / 3, rng);
    ASSERT_GE(b.x, 0);
    ASSERT_GE(b.y, 0);
    ASSERT_LE(b.x + b.w, W);
    ASSERT_LE(b.y + b.h, H);
    const double scale = double(b.w) * b.h / (W * H);
    const double ratio = double(b.w) / b.h;
    ASSERT_GE(scale, 0.075);
    ASSERT_LE(scale, 1.0);
    ASSERT_GE(ratio, 0.74);
    ASSERT_LE(ratio, 1.35);
    mean_log_ratio += std::log(ratio) / n;
    mean_scale += scale / n;
  }
  EXPECT_NEAR(mean_log_ratio, 0.0, 0.02);
  // Draws with area > W*H*... are rejected for wide boxes, so the mean area
  // fraction falls below the uniform 0.54; torchvision's gives ~0.5 here.
  EXPECT_GT(mean_scale, 0.40);
  EXPECT_LT(mean_scale, 0.56);
}

TEST(CropGeometry, FallbackIsTheClampedCentre) {
  SplitMix64 rng(2);
  // A 1000x10 strip: no random box fits the ratio range, so the fallback
  // takes the central crop of ratio 4/3: 13x10.
  CropBox b = RandomResizedCropBox(1000, 10, 0.9, 1.0, 3.0 / 4, 4.0 / 3, rng);
  EXPECT_EQ(b.h, 10);
  EXPECT_EQ(b.w, 13);
  EXPECT_EQ(b.x, (1000 - 13) / 2);
}

TEST(CropGeometry, CenterCropIsResizeThenCrop) {
  CropBox b = CenterCropBox(500, 375, 224, 256);  // 375 -> 256: 224 is 328 source px
  EXPECT_EQ(b.h, 328);
  EXPECT_EQ(b.w, 328);
  EXPECT_EQ(b.x, 86);
  EXPECT_EQ(b.y, 23);
}

TEST(Render, RoiDecodeIsAlignedWithFullDecodeThenCrop) {
  // On a smooth image any misplacement of the decoded region would show.
  Image src = Gradient(640, 480);
  auto jpeg = EncodeJpeg(src, 95);
  ASSERT_OK(jpeg);
  auto full = DecodeImage(jpeg->data(), jpeg->size(), DecodeOptions{});
  ASSERT_OK(full);
  SplitMix64 rng(4);
  for (int i = 0; i < 30; ++i) {
    CropBox box = RandomResizedCropBox(640, 480, 0.08, 1.0, 0.75, 4.0 / 3, rng);
    RenderOptions ro;
    ro.out_w = ro.out_h = 112;
    Image roi, ref;
    ASSERT_OK(RenderJpeg(jpeg->data(), jpeg->size(), box, ro, &roi));
    ASSERT_OK(RenderPixels(full->pixels.data(), 640, 480, 3, box, ro, &ref));
    EXPECT_LT(MeanAbsDiff(roi, ref), 1.0) << box.x << "," << box.y << " " << box.w << "x" << box.h;
  }
}

TEST(Render, RoiDecodeEqualsFullDecodeThenCrop) {
  Image src = Gradient(640, 480);
  // Texture at a realistic scale (period ~25 px) on top of the gradient.
  for (int y = 0; y < 480; ++y)
    for (int x = 0; x < 640; ++x)
      src.pixels[(size_t(y) * 640 + x) * 3 + 2] = uint8_t(128 + 90 * std::sin(x / 4.0) * std::cos(y / 3.0));
  auto jpeg = EncodeJpeg(src, 95);
  ASSERT_OK(jpeg);
  DecodeOptions full_opts;
  auto full = DecodeImage(jpeg->data(), jpeg->size(), full_opts);
  ASSERT_OK(full);
  SplitMix64 rng(3);
  for (int i = 0; i < 30; ++i) {
    CropBox box = RandomResizedCropBox(640, 480, 0.08, 1.0, 0.75, 4.0 / 3, rng);
    RenderOptions ro;
    ro.out_w = ro.out_h = 112;
    ro.flip = i % 2;
    Image roi, ref;
    ASSERT_OK(RenderJpeg(jpeg->data(), jpeg->size(), box, ro, &roi));
    ASSERT_OK(RenderPixels(full->pixels.data(), 640, 480, 3, box, ro, &ref));
    ASSERT_EQ(roi.width, 112);
    ASSERT_EQ(roi.channels, 3);
    // DCT-scaled partial decode vs full decode + crop: the same picture, up
    // to how the DCT-domain shrink and the resampler filter fine texture.
    EXPECT_LT(MeanAbsDiff(roi, ref), 6.0) << box.x << "," << box.y << " " << box.w << "x" << box.h;
    ro.dct_scaling = false;
    ASSERT_OK(RenderJpeg(jpeg->data(), jpeg->size(), box, ro, &roi));
    EXPECT_LT(MeanAbsDiff(roi, ref), 1.5);
  }
}

TEST(Render, GrayAndChannelConversion) {
  auto gray = Golden("gray.jpg");
  RenderOptions ro;
  ro.out_w = 32;
  ro.out_h = 24;
  Image out;
  ASSERT_OK(RenderJpeg(gray.data(), gray.size(), {0, 0, 64, 48}, ro, &out));
  ASSERT_EQ(out.channels, 3);
  EXPECT_EQ(out.pixels[0], out.pixels[1]);
  ro.channels = 1;
  auto rgb = Golden("rgb.jpg");
  ASSERT_OK(RenderJpeg(rgb.data(), rgb.size(), {0, 0, 64, 48}, ro, &out));
  ASSERT_EQ(out.channels, 1);
  EXPECT_NEAR(out.pixels[5 * 32 + 5], 87, 6);  // luma of the red quadrant
}

TEST(Render, PaddingIsZerosAndFlipMirrors) {
  Image g = Gradient(8, 8, 1);
  RenderOptions ro;
  ro.out_w = ro.out_h = 8;
  ro.channels = 1;
  Image out;
  ASSERT_OK(RenderPixels(g.pixels.data(), 8, 8, 1, {-2, 0, 8, 8}, ro, &out));
  EXPECT_EQ(out.pixels[0], 0);
  EXPECT_EQ(out.pixels[1], 0);
  EXPECT_EQ(out.pixels[2], g.pixels[0]);
  ro.flip = true;
  ASSERT_OK(RenderPixels(g.pixels.data(), 8, 8, 1, {0, 0, 8, 8}, ro, &out));
  for (int x = 0; x < 8; ++x) EXPECT_EQ(out.pixels[x], g.pixels[7 - x]);
}

TEST(Render, TruncatedJpegIsAnError) {
  auto t = Golden("truncated.jpg");
  RenderOptions ro;
  ro.out_w = ro.out_h = 32;
  Image out;
  Status st = RenderJpeg(t.data(), t.size(), {0, 0, 128, 96}, ro, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("truncated JPEG"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace imagepack
