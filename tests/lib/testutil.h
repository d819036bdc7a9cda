// Shared test helpers.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "imagepack/image.h"
#include "imagepack/status.h"

#define ASSERT_OK(expr)                                        \
  do {                                                         \
    const auto& _r = (expr);                                   \
    ASSERT_TRUE(_r.ok()) << #expr << ": " << ::imagepack::testing::StatusOf(_r).ToString(); \
  } while (0)
#define EXPECT_OK(expr)                                        \
  do {                                                         \
    const auto& _r = (expr);                                   \
    EXPECT_TRUE(_r.ok()) << #expr << ": " << ::imagepack::testing::StatusOf(_r).ToString(); \
  } while (0)

namespace imagepack::testing {

inline const Status& StatusOf(const Status& s) { return s; }
template <typename T>
const Status& StatusOf(const Result<T>& r) { return r.status(); }

// A fresh directory under /tmp, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "imagepack-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

inline std::vector<uint8_t> Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

inline void Spit(const std::string& path, const std::vector<uint8_t>& data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

inline std::vector<uint8_t> Golden(const std::string& name) {
  return Slurp(std::string(IMAGEPACK_TEST_DATA_DIR) + "/" + name);
}

// The golden picture's quadrant colours (tests/data/make_golden.py).
constexpr uint8_t kQuads[4][3] = {{220, 30, 30}, {30, 200, 40}, {30, 40, 210}, {245, 245, 245}};

// A smooth, asymmetric RGB test image: every pixel differs from its
// neighbours, and no two orientations look alike.
inline Image Gradient(int w, int h, int channels = 3) {
  Image img;
  img.width = w;
  img.height = h;
  img.channels = channels;
  img.pixels.resize(img.stride() * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < channels; ++c)
        img.pixels[(size_t(y) * w + x) * channels + c] =
            static_cast<uint8_t>((c == 0 ? x * 255 / std::max(w - 1, 1)
                                  : c == 1 ? y * 255 / std::max(h - 1, 1)
                                           : (x + 2 * y) * 255 / std::max(w + 2 * h - 3, 1)));
  return img;
}

inline const uint8_t* Pixel(const Image& img, int x, int y) {
  return &img.pixels[(size_t(y) * img.width + x) * img.channels];
}

// Mean absolute difference per sample between two images of the same shape.
inline double MeanAbsDiff(const Image& a, const Image& b) {
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.channels, b.channels);
  if (a.pixels.size() != b.pixels.size() || a.pixels.empty()) return 1e9;
  double s = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) s += std::abs(int(a.pixels[i]) - int(b.pixels[i]));
  return s / a.pixels.size();
}

// Inserts an EXIF APP1 segment with the given orientation after SOI.
inline std::vector<uint8_t> WithExifOrientation(const std::vector<uint8_t>& jpeg, int orientation,
                                                bool big_endian = false) {
  std::vector<uint8_t> tiff;
  auto u16 = [&](uint16_t v) {
    if (big_endian) { tiff.push_back(v >> 8); tiff.push_back(v & 0xFF); }
    else { tiff.push_back(v & 0xFF); tiff.push_back(v >> 8); }
  };
  auto u32 = [&](uint32_t v) {
    if (big_endian) { u16(v >> 16); u16(v & 0xFFFF); }
    else { u16(v & 0xFFFF); u16(v >> 16); }
  };
  tiff.push_back(big_endian ? 'M' : 'I');
  tiff.push_back(big_endian ? 'M' : 'I');
  u16(42); u32(8);                       // IFD0 at offset 8
  u16(1);                                // one entry
  u16(0x0112); u16(3); u32(1); u16(uint16_t(orientation)); u16(0);
  u32(0);                                // no next IFD
  std::vector<uint8_t> seg = {0xFF, 0xE1, 0, 0, 'E', 'x', 'i', 'f', 0, 0};
  seg.insert(seg.end(), tiff.begin(), tiff.end());
  const size_t len = seg.size() - 2;
  seg[2] = uint8_t(len >> 8);
  seg[3] = uint8_t(len & 0xFF);
  std::vector<uint8_t> out(jpeg.begin(), jpeg.begin() + 2);
  out.insert(out.end(), seg.begin(), seg.end());
  out.insert(out.end(), jpeg.begin() + 2, jpeg.end());
  return out;
}

// A copy of database `db` beside it for a trainer's --val (made once):
// the trainers refuse validation files that training reads (formats.h,
// SharedFiles).
inline std::string ValCopy(const std::string& db) {
  const std::string v = db + ".val";
  std::error_code ec;
  if (!std::filesystem::exists(v, ec)) std::filesystem::copy(db, v, std::filesystem::copy_options::recursive, ec);
  return v;
}

}  // namespace imagepack::testing
