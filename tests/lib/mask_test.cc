#include "imagepack/mask.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "testutil.h"

namespace imagepack {
namespace {

using testing::Golden;

// Both golden masks were written by Pillow with value (x + 2y) % 5 (the
// 16-bit one times 40): a palette PNG must give indices, never colours.
TEST(Mask, PaletteGivesIndicesAndSixteenBitGivesValues) {
  for (const auto& [name, scale] : {std::pair<const char*, int>{"mask_palette.png", 1}, {"mask_gray16.png", 40}}) {
    SCOPED_TRACE(name);
    auto bytes = Golden(name);
    auto m = DecodeMask(bytes.data(), bytes.size());
    ASSERT_OK(m);
    ASSERT_EQ(m->width, 13);
    ASSERT_EQ(m->height, 9);
    ASSERT_EQ(m->channels, 1);
    for (int y = 0; y < 9; ++y)
      for (int x = 0; x < 13; ++x) EXPECT_EQ(m->pixels[y * 13 + x], (x + 2 * y) % 5 * scale) << x << "," << y;
  }
}

TEST(Mask, LossyAndColourMasksAreRefusedByName) {
  auto jpeg = Golden("rgb.jpg");
  auto r = DecodeMask(jpeg.data(), jpeg.size());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("JPEG"), std::string::npos);
  auto rgba = Golden("rgba.png");
  r = DecodeMask(rgba.data(), rgba.size());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("label map is gray or palette"), std::string::npos) << r.status().message();
  auto palette = Golden("mask_palette.png");
  palette.resize(palette.size() / 2);
  EXPECT_FALSE(DecodeMask(palette.data(), palette.size()).ok());
}

TEST(Mask, PngRoundTripIsExact) {
  Image m;
  m.width = 31;
  m.height = 7;
  m.channels = 1;
  for (int i = 0; i < 31 * 7; ++i) m.pixels.push_back(static_cast<uint8_t>(i * 37));
  auto png = EncodeMaskPng(m);
  ASSERT_OK(png);
  auto back = DecodeMask(png->data(), png->size());
  ASSERT_OK(back);
  EXPECT_EQ(back->pixels, m.pixels);
}

// Nearest neighbour never invents a value, and at integer factors it picks
// the pixel under each output centre.
TEST(Mask, NearestResizeKeepsValuesAndCentres) {
  std::vector<uint8_t> src(8 * 6);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i);
  Image half = ResizeMaskNearest(src.data(), 8, 6, 4, 3);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 4; ++x) EXPECT_EQ(half.pixels[y * 4 + x], src[(2 * y + 1) * 8 + 2 * x + 1]);
  Image odd = ResizeMaskNearest(src.data(), 8, 6, 5, 11);
  std::set<uint8_t> in(src.begin(), src.end());
  for (uint8_t v : odd.pixels) EXPECT_TRUE(in.count(v));
}

TEST(Mask, RenderFillsOutsideAndFlips) {
  std::vector<uint8_t> src = {1, 2, 3, 4};  // 2 x 2
  std::vector<uint8_t> out(16);
  RenderMask(src.data(), 2, 2, CropBox{-1, -1, 4, 4}, 4, 4, false, false, 9, out.data());
  EXPECT_EQ(out, (std::vector<uint8_t>{9, 9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9, 9, 9, 9, 9}));
  std::vector<uint8_t> flipped(4);
  RenderMask(src.data(), 2, 2, CropBox{0, 0, 2, 2}, 2, 2, true, true, 0, flipped.data());
  EXPECT_EQ(flipped, (std::vector<uint8_t>{4, 3, 2, 1}));
}

}  // namespace
}  // namespace imagepack
