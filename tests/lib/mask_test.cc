#include "imagepack/mask.h"

#include <gtest/gtest.h>

#include <cstring>

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

// A 16-bit map: any gray PNG decodes to its values as uint16 (an 8-bit one
// widened, never scaled), encodes to a 16-bit PNG that decodes to the same
// values, and resizes and renders by nearest neighbour from a source at
// an odd address (a record's map need not be aligned), filling outside
// with any uint16.
TEST(Mask, SixteenBitMapsDecodeEncodeResizeAndRender) {
  auto bytes = Golden("mask_gray16.png");
  auto wide = DecodeMask(bytes.data(), bytes.size(), 16);
  ASSERT_OK(wide);
  ASSERT_EQ(wide->channels, 2);
  auto at = [](const Image& m, int x, int y) {
    return m.pixels[2 * (y * m.width + x)] | m.pixels[2 * (y * m.width + x) + 1] << 8;
  };
  EXPECT_EQ(at(wide.value(), 4, 1), (4 + 2) % 5 * 40);
  auto pal = Golden("mask_palette.png");
  auto widened = DecodeMask(pal.data(), pal.size(), 16);
  ASSERT_OK(widened);
  EXPECT_EQ(at(widened.value(), 3, 2), (3 + 4) % 5);

  Image m;
  m.width = 5;
  m.height = 3;
  m.channels = 2;
  for (int i = 0; i < 15; ++i) {
    const int v = 60000 + 300 * i - (i % 2) * 59000;
    m.pixels.push_back(uint8_t(v & 0xFF));
    m.pixels.push_back(uint8_t(v >> 8));
  }
  auto png = EncodeMaskPng(m);
  ASSERT_OK(png);
  EXPECT_EQ((*png)[24], 16);  // IHDR bit depth
  auto back = DecodeMask(png->data(), png->size(), 16);
  ASSERT_OK(back);
  EXPECT_EQ(back->pixels, m.pixels);
  auto narrow = DecodeMask(png->data(), png->size());
  EXPECT_NE(narrow.status().message().find("--mask-dtype uint16"), std::string::npos) << narrow.status().ToString();

  std::vector<uint8_t> odd(1 + m.pixels.size());
  std::memcpy(odd.data() + 1, m.pixels.data(), m.pixels.size());
  Image r = ResizeMaskNearest(odd.data() + 1, 5, 3, 10, 6, 2);
  ASSERT_EQ(r.channels, 2);
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 10; ++x) EXPECT_EQ(at(r, x, y), at(m, x / 2, y / 2)) << x << "," << y;

  std::vector<uint8_t> out(2 * 4 * 4 + 1);
  RenderMask(odd.data() + 1, 5, 3, CropBox{-1, 0, 4, 4}, 4, 4, /*hflip=*/true, false, 65000, out.data() + 1, 2);
  auto px = [&](int x, int y) { return out[1 + 2 * (y * 4 + x)] | out[2 + 2 * (y * 4 + x)] << 8; };
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) {
      const int sx = -1 + (3 - x), sy = y;  // 4 -> 4: no scaling; flipped
      EXPECT_EQ(px(x, y), sx < 0 || sy >= 3 ? 65000 : at(m, sx, sy)) << x << "," << y;
    }
}

// RenderMask (8 and 16 bits) against the rule written out per pixel, over random boxes
// from a tenth to three times the output (the shuffle gather's one- and
// two-load chunks, its fallback, and the boxes reaching outside), both
// flips, odd widths; the source is an exact-size heap buffer, so a load
// past the map's end shows under AddressSanitizer.
TEST(Mask, RenderEqualsThePerPixelRuleOverRandomBoxes) {
  uint32_t seed = 12345;
  auto next = [&](int n) {
    seed = seed * 1664525u + 1013904223u;
    return int((seed >> 8) % uint32_t(n));
  };
  for (int bytes : {1, 2})
    for (int trial = 0; trial < 400; ++trial) {
      const int w = 17 + next(300), h = 5 + next(60), out = 1 + next(120);
      std::vector<uint8_t> src(size_t(w) * h * bytes);
      for (auto& v : src) v = uint8_t(next(250));
      const int bw = std::max(1, out / 10 + next(3 * out)), bh = 1 + next(2 * h);
      const CropBox box{next(w + 20) - 10, next(h + 10) - 5, bw, bh};
      const bool hf = next(2), vf = next(2);
      const int fill = bytes == 2 ? 65000 : 255;
      std::vector<uint8_t> got(size_t(out) * out * bytes);
      RenderMask(src.data(), w, h, box, out, out, hf, vf, uint16_t(fill), got.data(), bytes);
      auto sample = [&](const uint8_t* p) { return bytes == 2 ? p[0] | p[1] << 8 : p[0]; };
      for (int y = 0; y < out; ++y)
        for (int x = 0; x < out; ++x) {
          const int xx = hf ? out - 1 - x : x, yy = vf ? out - 1 - y : y;
          const int sx = box.x + int((2 * int64_t(xx) + 1) * box.w / (2 * out));
          const int sy = box.y + int((2 * int64_t(yy) + 1) * box.h / (2 * out));
          const int want =
              sx < 0 || sx >= w || sy < 0 || sy >= h ? fill : sample(&src[(size_t(sy) * w + sx) * bytes]);
          ASSERT_EQ(sample(&got[(size_t(y) * out + x) * bytes]), want)
              << bytes << " bytes, trial " << trial << " at " << x << "," << y;
        }
    }
}

}  // namespace
}  // namespace imagepack
