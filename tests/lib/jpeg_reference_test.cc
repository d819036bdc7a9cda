// Every path that turns JPEG bytes into pixels, checked against an
// independent reference: a plain full-size libjpeg decode (accurate integer
// IDCT, fancy upsampling, no DCT scaling) followed by a float resample of
// the same region written here from the filter's definition, with the EXIF
// orientation applied from the specification's table. Nothing of the
// library's own decoding, resampling or orientation code is used for the
// reference.
//
// Inputs are made here with libjpeg: every subsampling it can write (4:4:4,
// 4:2:2, 4:4:0, 4:2:0, 4:1:1, gray), baseline and progressive, with and
// without restart markers, odd and even sizes, every EXIF orientation, and
// targets that select every DCT scale 1/8..8/8.
//
// Results are compared at a quarter of the output size (4x4 box means), so
// that the differences every correct path has (JPEG noise from DCT scaling,
// the fast IDCT and re-encoding; the filter's discrete weights) count for
// little and colour, geometry and orientation errors count fully. Measured
// on these inputs: correct paths stay under 2.3 grey levels of mean
// absolute error per sample (the largest is a re-encoded 4:1:1 output at
// scale 1/8); a chroma plane swapped, offset by two pixels or scaled by 1.5
// gives 5 to 60. kBound sits between the two, and every case checks that
// such damage to its own result would be caught.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>  // after the two above, which it needs

#include <algorithm>
#include <array>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "imagepack/image.h"
#include "imagepack/loader.h"
#include "imagepack/pack.h"
#include "imagepack/store.h"
#include "imagepack/transform.h"
#include "testutil.h"

namespace imagepack {
namespace {
using testing::Spit;
using testing::TempDir;
using testing::WithExifOrientation;

// Mean absolute error, grey levels, at quarter size.
constexpr double kLumaBound = 1.5;
constexpr double kChromaBound = 4.0;
// Full resolution, smooth ramps (GeometryOnRampsAtFullResolution).
constexpr double kRampBound = 1.25;

// ---- libjpeg with errors as a flag (its default handler exits) -------------

struct JpegErr {
  jpeg_error_mgr pub;
  jmp_buf jump;
};
extern "C" void JpegErrExit(j_common_ptr c) { longjmp(reinterpret_cast<JpegErr*>(c->err)->jump, 1); }

struct Sampling {
  const char* name;
  int h, v;  // luma sampling factors (chroma 1x1); gray: one component
  bool gray;
};
constexpr Sampling kSamplings[] = {{"4:4:4", 1, 1, false}, {"4:2:2", 2, 1, false}, {"4:4:0", 1, 2, false},
                                   {"4:2:0", 2, 2, false}, {"4:1:1", 4, 1, false}, {"gray", 1, 1, true}};

struct Mode {
  const char* name;
  bool progressive;
  bool restarts;
};
constexpr Mode kModes[] = {
    {"baseline", false, false}, {"progressive", true, false}, {"baseline+RST", false, true}, {"progressive+RST", true, true}};

// Encodes interleaved RGB with libjpeg itself (not TurboJPEG's wrapper).
std::vector<uint8_t> Encode(const Image& rgb, const Sampling& s, const Mode& m, int quality = 90) {
  jpeg_compress_struct c;
  JpegErr err;
  c.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = JpegErrExit;
  unsigned char* buf = nullptr;
  unsigned long len = 0;
  std::vector<uint8_t> gray;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&c);
    free(buf);
    ADD_FAILURE() << "libjpeg could not encode the test image";
    return {};
  }
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, &buf, &len);
  c.image_width = rgb.width;
  c.image_height = rgb.height;
  c.input_components = s.gray ? 1 : 3;
  c.in_color_space = s.gray ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  if (!s.gray) {
    c.comp_info[0].h_samp_factor = s.h;
    c.comp_info[0].v_samp_factor = s.v;
    for (int i = 1; i < 3; ++i) c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
  }
  if (m.progressive) jpeg_simple_progression(&c);
  if (m.restarts) c.restart_in_rows = 1;
  jpeg_start_compress(&c, TRUE);
  if (s.gray) {
    gray.resize(size_t(rgb.width) * rgb.height);
    for (size_t i = 0; i < gray.size(); ++i)
      gray[i] = Luma(rgb.pixels[i * 3], rgb.pixels[i * 3 + 1], rgb.pixels[i * 3 + 2]);
  }
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(s.gray ? &gray[size_t(c.next_scanline) * rgb.width]
                                               : &rgb.pixels[size_t(c.next_scanline) * rgb.stride()]);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::vector<uint8_t> out(buf, buf + len);
  free(buf);
  return out;
}

// The reference decoder: full size, accurate IDCT, RGB out (gray
// replicated). Dies loudly on any error or warning.
Image ReferenceDecode(const std::vector<uint8_t>& jpeg) {
  jpeg_decompress_struct d;
  JpegErr err;
  d.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = JpegErrExit;
  Image img;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&d);
    ADD_FAILURE() << "reference decoder failed";
    return {};
  }
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, jpeg.data(), static_cast<unsigned long>(jpeg.size()));
  jpeg_read_header(&d, TRUE);
  d.dct_method = JDCT_ISLOW;
  d.do_fancy_upsampling = TRUE;
  d.out_color_space = JCS_RGB;
  jpeg_start_decompress(&d);
  img.width = d.output_width;
  img.height = d.output_height;
  img.channels = 3;
  img.pixels.resize(img.stride() * img.height);
  while (d.output_scanline < d.output_height) {
    JSAMPROW row = &img.pixels[size_t(d.output_scanline) * img.stride()];
    jpeg_read_scanlines(&d, &row, 1);
  }
  EXPECT_EQ(d.err->num_warnings, 0) << "reference decode had warnings";
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  return img;
}

// ---- the reference geometry ---------------------------------------------

// Float image, 3 channels.
struct FImage {
  int w = 0, h = 0;
  std::vector<double> px;  // w * h * 3
  double* at(int x, int y) { return &px[(size_t(y) * w + x) * 3]; }
  const double* at(int x, int y) const { return &px[(size_t(y) * w + x) * 3]; }
};

FImage ToFloat(const Image& img) {
  FImage f{img.width, img.height, std::vector<double>(size_t(img.width) * img.height * 3)};
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x)
      for (int c = 0; c < 3; ++c)
        f.at(x, y)[c] = img.pixels[(size_t(y) * img.width + x) * img.channels + (img.channels == 1 ? 0 : c)];
  return f;
}

// EXIF 2.3, tag 0x0112: where the stored pixel of upright (X, Y) lies.
// 1 as stored, 2 mirrored left-right, 3 rotated 180, 4 mirrored top-bottom,
// 5 transposed, 6 rotated 90 clockwise to view, 7 transversed, 8 rotated 90
// anticlockwise to view.
FImage Upright(const FImage& s, int orientation) {
  const bool swap = orientation >= 5;
  FImage u{swap ? s.h : s.w, swap ? s.w : s.h, std::vector<double>(s.px.size())};
  for (int Y = 0; Y < u.h; ++Y)
    for (int X = 0; X < u.w; ++X) {
      int x = X, y = Y;
      switch (orientation) {
        case 2: x = s.w - 1 - X; break;
        case 3: x = s.w - 1 - X; y = s.h - 1 - Y; break;
        case 4: y = s.h - 1 - Y; break;
        case 5: x = Y; y = X; break;
        case 6: x = Y; y = s.h - 1 - X; break;
        case 7: x = s.w - 1 - Y; y = s.h - 1 - X; break;
        case 8: x = s.w - 1 - Y; y = X; break;
        default: break;
      }
      std::copy_n(s.at(x, y), 3, u.at(X, Y));
    }
  return u;
}

// Antialiased triangle ("bilinear" in Pillow, "triangle" in libvips): output
// pixel i of n covers [x0 + i*len/n, x0 + (i+1)*len/n); the kernel is
// stretched by the downscale factor; taps outside the image are dropped and
// the rest renormalised.
std::vector<std::vector<std::pair<int, double>>> Taps(int in, double x0, double len, int n) {
  std::vector<std::vector<std::pair<int, double>>> taps(n);
  const double scale = len / n, support = std::max(scale, 1.0);
  for (int i = 0; i < n; ++i) {
    const double center = x0 + (i + 0.5) * scale;
    double total = 0;
    for (int j = std::max(0, int(std::floor(center - support)) - 1); j < std::min(in, int(center + support) + 2); ++j) {
      const double wgt = std::max(0.0, 1.0 - std::fabs((j + 0.5 - center) / support));
      if (wgt > 0) taps[i].push_back({j, wgt}), total += wgt;
    }
    for (auto& t : taps[i]) t.second /= total;
  }
  return taps;
}

FImage Resample(const FImage& s, double x0, double y0, double w, double h, int ow, int oh, bool mirror = false) {
  const auto tx = Taps(s.w, x0, w, ow), ty = Taps(s.h, y0, h, oh);
  FImage tmp{ow, s.h, std::vector<double>(size_t(ow) * s.h * 3, 0.0)};
  for (int y = 0; y < s.h; ++y)
    for (int x = 0; x < ow; ++x)
      for (const auto& [j, wgt] : tx[mirror ? ow - 1 - x : x])
        for (int c = 0; c < 3; ++c) tmp.at(x, y)[c] += wgt * s.at(j, y)[c];
  FImage out{ow, oh, std::vector<double>(size_t(ow) * oh * 3, 0.0)};
  for (int y = 0; y < oh; ++y)
    for (const auto& [j, wgt] : ty[y])
      for (int x = 0; x < ow; ++x)
        for (int c = 0; c < 3; ++c) out.at(x, y)[c] += wgt * tmp.at(x, j)[c];
  return out;
}

// Luma and chroma (JFIF's YCbCr) of an RGB sample.
void ToYcc(const double* p, double* out) {
  out[0] = 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2];
  out[1] = 128 - 0.168736 * p[0] - 0.331264 * p[1] + 0.5 * p[2];
  out[2] = 128 + 0.5 * p[0] - 0.418688 * p[1] - 0.081312 * p[2];
}

// Mean absolute differences of the 4x4 box means, in luma and in chroma
// (Cb and Cr together); partial blocks at the right and bottom edges are
// left out.
struct Error {
  double luma = 0, chroma = 0;
};
Error QuarterError(const FImage& a, const FImage& b) {
  if (a.w != b.w || a.h != b.h) {
    ADD_FAILURE() << "size " << a.w << "x" << a.h << " vs reference " << b.w << "x" << b.h;
    return {1e9, 1e9};
  }
  const int qw = std::max(1, a.w / 4), qh = std::max(1, a.h / 4);
  const int bw = a.w / qw, bh = a.h / qh;
  Error e;
  for (int qy = 0; qy < qh; ++qy)
    for (int qx = 0; qx < qw; ++qx) {
      double sa[3] = {0, 0, 0}, sb[3] = {0, 0, 0};
      for (int y = qy * bh; y < (qy + 1) * bh; ++y)
        for (int x = qx * bw; x < (qx + 1) * bw; ++x)
          for (int c = 0; c < 3; ++c) sa[c] += a.at(x, y)[c], sb[c] += b.at(x, y)[c];
      double ya[3], yb[3];
      ToYcc(sa, ya);
      ToYcc(sb, yb);
      const double n = double(bw) * bh;
      e.luma += std::fabs(ya[0] - yb[0]) / n;
      e.chroma += (std::fabs(ya[1] - yb[1]) + std::fabs(ya[2] - yb[2])) / (2 * n);
    }
  e.luma /= double(qw) * qh;
  e.chroma /= double(qw) * qh;
  return e;
}

// What a wrong chroma plane would have given instead of `img`: Cb and Cr
// swapped; Cb moved by 1/16 of the image (at least two pixels) right and
// down; Cr's distance from grey scaled by 1.5 (the fault a wrong
// dequantisation table makes); Cb offset by 12 levels.
constexpr int kDamageKinds = 4;
FImage Damage(const FImage& img, int kind) {
  FImage ycc = img, out = img;
  for (size_t i = 0; i < img.px.size(); i += 3) ToYcc(&img.px[i], &ycc.px[i]);
  const int shift = std::max(2, img.w / 16);
  for (int y = 0; y < img.h; ++y)
    for (int x = 0; x < img.w; ++x) {
      const double* p = ycc.at(x, y);
      double Y = p[0], cb = p[1], cr = p[2];
      if (kind == 0) std::swap(cb, cr);
      if (kind == 1) cb = ycc.at(std::max(0, x - shift), std::max(0, y - shift))[1];
      if (kind == 2) cr = 128 + (cr - 128) * 1.5;
      if (kind == 3) cb += 12;
      double* o = out.at(x, y);
      o[0] = std::clamp(Y + 1.402 * (cr - 128), 0.0, 255.0);
      o[1] = std::clamp(Y - 0.344136 * (cb - 128) - 0.714136 * (cr - 128), 0.0, 255.0);
      o[2] = std::clamp(Y + 1.772 * (cb - 128), 0.0, 255.0);
    }
  return out;
}

// ---- the test image -------------------------------------------------------

// Photo-like: smooth colour fields, saturated patches with sharp edges placed
// asymmetrically (so orientation and chroma placement show), and
// deterministic fine texture (so DCT scaling and re-encoding have noise to
// make, as on real photos).
Image Picture(int w, int h) {
  Image img;
  img.width = w;
  img.height = h;
  img.channels = 3;
  img.pixels.resize(img.stride() * h);
  const double kTau = 6.283185307179586;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const double u = double(x) / w, v = double(y) / h;
      double r = 128 + 80 * std::sin(kTau * (1.3 * u + 0.4 * v));
      double g = 128 + 80 * std::sin(kTau * (0.5 * u - 1.1 * v) + 1.0);
      double b = 128 + 80 * std::cos(kTau * 2.0 * u * v);
      if (u > 0.08 && u < 0.33 && v > 0.12 && v < 0.45) r = 225, g = 30, b = 40;     // red
      if (u > 0.55 && u < 0.72 && v > 0.2 && v < 0.85) r = 20, g = 60, b = 230;      // blue
      if (u > 0.15 && u < 0.45 && v > 0.62 && v < 0.78) r = 240, g = 215, b = 20;    // yellow
      if ((u - 0.85) * (u - 0.85) + (v - 0.3) * (v - 0.3) < 0.01) r = 30, g = 200, b = 60;  // green disc
      const uint32_t hsh = (uint32_t(x) * 73856093u) ^ (uint32_t(y) * 19349663u);
      const double t = double((hsh >> 7) % 25) - 12;  // +-12 texture
      uint8_t* p = &img.pixels[(size_t(y) * w + x) * 3];
      p[0] = uint8_t(std::clamp(r + t, 0.0, 255.0));
      p[1] = uint8_t(std::clamp(g + t, 0.0, 255.0));
      p[2] = uint8_t(std::clamp(b + t, 0.0, 255.0));
    }
  return img;
}

struct Source {
  std::string name;
  Sampling sampling;
  Mode mode;
  std::vector<uint8_t> jpeg;  // without EXIF
  FImage decoded;             // reference decode, as stored
};

// 6 subsamplings x 4 modes x {odd, even} sizes.
const std::vector<Source>& Sources() {
  static const std::vector<Source> sources = [] {
    std::vector<Source> v;
    const std::pair<int, int> sizes[] = {{601, 457}, {640, 488}};
    for (const auto& s : kSamplings)
      for (const auto& m : kModes)
        for (const auto& [w, h] : sizes) {
          Source src{std::string(s.name) + " " + m.name + " " + std::to_string(w) + "x" + std::to_string(h), s, m,
                     Encode(Picture(w, h), s, m), {}};
          src.decoded = ToFloat(ReferenceDecode(src.jpeg));
          v.push_back(std::move(src));
        }
    return v;
  }();
  return sources;
}

// Which DCT scale k/8 a decode of a w x h JPEG to cover need_w x need_h
// takes: the smallest whose scaled size (rounded up) still covers it.
int DctScale(int w, int h, int need_w, int need_h) {
  for (int k = 1; k <= 8; ++k)
    if ((w * k + 7) / 8 >= need_w && (h * k + 7) / 8 >= need_h) return k;
  return 8;
}

// A shorter-edge limit under which a (stored) w x h JPEG decodes at DCT
// scale k/8 before its final resample: the largest n whose target the
// scale (k-1)/8 no longer covers.
int LimitForScale(int w, int h, int k) {
  for (int n = std::min(w, h) - 1; n >= 2; --n) {
    const auto [tw, th] = TargetSize(w, h, {SizeLimit::Mode::kShorterEdge, n});
    if (DctScale(w, h, tw, th) == k) return n;
  }
  return 0;
}

// Worst error seen per path, printed at the end: the measured noise floor.
std::map<std::string, Error>& Worst() {
  static std::map<std::string, Error> worst;
  return worst;
}

// One result against its reference: within the bounds, and each kind of
// chroma damage to it would not be.
void Check(const std::string& path, const std::string& what, const FImage& got, const FImage& want, bool colour) {
  const Error e = QuarterError(got, want);
  if (std::getenv("IMAGEPACK_PIXEL_LOG"))
    std::fprintf(stderr, "ERR %.3f %.3f %s | %s\n", e.luma, e.chroma, path.c_str(), what.c_str());
  EXPECT_LT(e.luma, kLumaBound) << path << ": " << what;
  EXPECT_LT(e.chroma, kChromaBound) << path << ": " << what;
  Error& worst = Worst()[path];
  worst.luma = std::max(worst.luma, e.luma);
  worst.chroma = std::max(worst.chroma, e.chroma);
  if (!colour) return;
  for (int kind = 0; kind < kDamageKinds; ++kind) {
    const Error d = QuarterError(Damage(got, kind), want);
    EXPECT_GT(d.chroma, kChromaBound) << path << ": " << what << ": damage " << kind << " would pass";
    if (std::getenv("IMAGEPACK_PIXEL_LOG")) std::fprintf(stderr, "DMG%d %.3f %s | %s\n", kind, d.chroma, path.c_str(), what.c_str());
  }
}

FImage DecodeOutput(const std::vector<uint8_t>& jpeg) { return ToFloat(ReferenceDecode(jpeg)); }

class JpegReference : public ::testing::Test {
 protected:
  static void TearDownTestSuite() {
    std::printf("worst quarter-size error per path, luma / chroma (bounds %.1f / %.1f):\n", kLumaBound,
                kChromaBound);
    for (const auto& [path, e] : Worst()) std::printf("  %-34s %.2f / %.2f\n", path.c_str(), e.luma, e.chroma);
  }
};

// Resize (resize_imagenet, pack_lmdb --max-size) at every DCT scale and
// every orientation: the planar YCbCr path (PrepareJpeg re-encodes from
// planes), the RGB decode (DecodeImage, as raw packing and verify_db use),
// and its gray output.
TEST_F(JpegReference, ResizeAtEveryDctScaleAndOrientation) {
  std::array<bool, 9> scales{};
  std::array<bool, 9> orientations{};
  for (size_t si = 0; si < Sources().size(); ++si) {
    const Source& src = Sources()[si];
    for (int k = 1; k <= 8; ++k) {
      const int orientation = int((si + k) % 8) + 1;
      const bool swap = orientation >= 5;
      const int n = LimitForScale(src.decoded.w, src.decoded.h, k);
      ASSERT_GT(n, 0) << src.name << " scale " << k;
      const SizeLimit limit{SizeLimit::Mode::kShorterEdge, n};
      const auto [uw, uh] = TargetSize(swap ? src.decoded.h : src.decoded.w, swap ? src.decoded.w : src.decoded.h,
                                       limit);
      scales[k] = orientations[orientation] = true;
      const std::string what = src.name + ", scale " + std::to_string(k) + "/8, orientation " +
                               std::to_string(orientation) + ", max-size " + std::to_string(n);
      const std::vector<uint8_t> jpeg = WithExifOrientation(src.jpeg, orientation);
      const FImage upright = Upright(src.decoded, orientation);
      const FImage want = Resample(upright, 0, 0, upright.w, upright.h, uw, uh);

      PrepareOptions p;
      p.decode.limit = limit;
      auto prepared = PrepareJpeg(jpeg.data(), jpeg.size(), p);
      ASSERT_OK(prepared);
      EXPECT_FALSE(prepared->passed_through);
      Check("PrepareJpeg (planar YCbCr)", what, DecodeOutput(prepared->bytes), want, !src.sampling.gray);

      DecodeOptions d;
      d.limit = limit;
      auto rgb = DecodeImage(jpeg.data(), jpeg.size(), d);
      ASSERT_OK(rgb);
      Check("DecodeImage (RGB)", what, ToFloat(rgb.value()), want, !src.sampling.gray);

      d.channels = 1;
      auto gray = DecodeImage(jpeg.data(), jpeg.size(), d);
      ASSERT_OK(gray);
      FImage luma = want;
      for (size_t i = 0; i < luma.px.size(); i += 3)
        luma.px[i] = luma.px[i + 1] = luma.px[i + 2] =
            0.299 * want.px[i] + 0.587 * want.px[i + 1] + 0.114 * want.px[i + 2];
      Check("DecodeImage (gray out)", what, ToFloat(gray.value()), luma, false);
    }
  }
  for (int k = 1; k <= 8; ++k) {
    EXPECT_TRUE(scales[k]) << "no case selected DCT scale " << k << "/8";
    EXPECT_TRUE(orientations[k]) << "no case had orientation " << k;
  }
}

// No resize: pass-through keeps the bytes (baseline, upright); progressive
// and rotated files are re-encoded from planes at full scale; the raw
// packer's direct decode (DecodeJpegInto) writes the plain decode.
TEST_F(JpegReference, FullSizePaths) {
  for (const Source& src : Sources()) {
    for (int orientation : {1, 6}) {
      const std::vector<uint8_t> jpeg = orientation == 1 ? src.jpeg : WithExifOrientation(src.jpeg, orientation);
      const FImage want = Upright(src.decoded, orientation);
      const std::string what = src.name + ", orientation " + std::to_string(orientation);
      auto prepared = PrepareJpeg(jpeg.data(), jpeg.size(), PrepareOptions{});
      ASSERT_OK(prepared);
      const bool expect_pass = orientation == 1 && !src.mode.progressive;
      EXPECT_EQ(prepared->passed_through, expect_pass) << what;
      Check(expect_pass ? "PrepareJpeg (pass-through)" : "PrepareJpeg (full-scale re-encode)", what,
            DecodeOutput(prepared->bytes), want, !src.sampling.gray);
      if (orientation != 1) continue;
      auto info = ProbeImage(jpeg.data(), jpeg.size());
      ASSERT_OK(info);
      Image direct;
      direct.width = info->width;
      direct.height = info->height;
      direct.channels = 3;
      direct.pixels.resize(direct.stride() * direct.height);
      ASSERT_OK(DecodeJpegInto(jpeg.data(), jpeg.size(), info.value(), DecodeOptions{}, direct.pixels.data()));
      Check("DecodeJpegInto (raw pack)", what, ToFloat(direct), want, !src.sampling.gray);
    }
  }
}

// The loader's transforms on a stored (upright) JPEG: RandomResizedCrop
// boxes rendered at every DCT scale the region decoder can pick, mirrored or
// not, with and without DCT scaling, and the evaluation centre crop.
TEST_F(JpegReference, LoaderCropsAtEveryDctScale) {
  SplitMix64 rng(7);
  std::array<bool, 9> scales{};
  for (const Source& src : Sources()) {
    const FImage& full = src.decoded;
    for (int k = 1; k <= 8; ++k) {
      const CropBox box = RandomResizedCropBox(full.w, full.h, 0.25, 1.0, 3.0 / 4, 4.0 / 3, rng);
      // The output size that makes the region decoder pick scale k/8.
      int out = std::min(box.w, box.h) * k / 8;
      while (out > 1 && (std::min(box.w, box.h) * (k - 1) >= out * 8)) --out;
      if (out < 16) continue;
      int picked = 8;
      for (int n = 1; n < 8; ++n)
        if (box.w * n >= out * 8 && box.h * n >= out * 8) { picked = n; break; }
      scales[picked] = true;
      for (bool dct : {true, false}) {
        RenderOptions o;
        o.out_w = o.out_h = out;
        o.flip = (k % 2) == 1;
        o.dct_scaling = dct;
        Image img;
        ASSERT_OK(RenderJpeg(src.jpeg.data(), src.jpeg.size(), box, o, &img));
        const FImage want = Resample(full, box.x, box.y, box.w, box.h, out, out, o.flip);
        const std::string what = src.name + ", box " + std::to_string(box.x) + "," + std::to_string(box.y) + " " +
                                 std::to_string(box.w) + "x" + std::to_string(box.h) + " -> " +
                                 std::to_string(out) + (o.flip ? " mirrored" : "");
        Check(dct ? "RenderJpeg (ROI + DCT scaling)" : "RenderJpeg (ROI, full scale)", what, ToFloat(img), want,
              !src.sampling.gray);
        // The loader's NCHW route writes planes straight from the resampler.
        std::vector<uint8_t> planes(size_t(out) * out * 3);
        o.planes = planes.data();
        ASSERT_OK(RenderJpeg(src.jpeg.data(), src.jpeg.size(), box, o, &img));
        Image hwc;
        hwc.width = hwc.height = out;
        hwc.channels = 3;
        hwc.pixels.resize(planes.size());
        for (size_t i = 0; i < size_t(out) * out; ++i)
          for (int c = 0; c < 3; ++c) hwc.pixels[i * 3 + c] = planes[size_t(c) * out * out + i];
        Check(dct ? "RenderJpeg (ROI + DCT, planes)" : "RenderJpeg (ROI, planes)", what, ToFloat(hwc), want,
              !src.sampling.gray);
      }
    }
    const CropBox eval = CenterCropBox(full.w, full.h, 96, 110);
    RenderOptions o;
    o.out_w = o.out_h = 96;
    Image img;
    ASSERT_OK(RenderJpeg(src.jpeg.data(), src.jpeg.size(), eval, o, &img));
    Check("RenderJpeg (eval centre crop)", src.name, ToFloat(img),
          Resample(full, eval.x, eval.y, eval.w, eval.h, 96, 96), !src.sampling.gray);
  }
  for (int k = 1; k <= 8; ++k) EXPECT_TRUE(scales[k]) << "no crop selected DCT scale " << k << "/8";
}

// Geometry at full output resolution: on smooth ramps JPEG noise is a
// fraction of a grey level, while the output shifted or stretched by a
// fraction of a pixel is not (these ramps climb 2.5-21 levels per output
// pixel at scale 1/8). Odd sizes at every DCT scale and orientation, so a
// partial last block or MCU padding read as picture shows.
TEST_F(JpegReference, GeometryOnRampsAtFullResolution) {
  Image ramps;
  ramps.width = 601;
  ramps.height = 457;
  ramps.channels = 3;
  ramps.pixels.resize(ramps.stride() * ramps.height);
  for (int y = 0; y < ramps.height; ++y)
    for (int x = 0; x < ramps.width; ++x) {
      uint8_t* p = &ramps.pixels[(size_t(y) * ramps.width + x) * 3];
      p[0] = uint8_t(20 + 215 * x / (ramps.width - 1));
      p[1] = uint8_t(20 + 215 * y / (ramps.height - 1));
      p[2] = uint8_t(20 + 215 * (x + y) / (ramps.width + ramps.height - 2));
    }
  for (const Sampling& s : {kSamplings[0], kSamplings[3], kSamplings[4]}) {
    const std::vector<uint8_t> stored = Encode(ramps, s, kModes[0], 95);
    const FImage decoded = ToFloat(ReferenceDecode(stored));
    for (int k = 1; k <= 8; ++k)
      for (int orientation : {1, 2 + k % 7}) {
        const bool swap = orientation >= 5;
        const SizeLimit limit{SizeLimit::Mode::kShorterEdge, LimitForScale(decoded.w, decoded.h, k)};
        const auto [uw, uh] = TargetSize(swap ? decoded.h : decoded.w, swap ? decoded.w : decoded.h, limit);
        const FImage upright = Upright(decoded, orientation);
        const FImage want = Resample(upright, 0, 0, upright.w, upright.h, uw, uh);
        const std::vector<uint8_t> jpeg = WithExifOrientation(stored, orientation);
        const std::string what = std::string(s.name) + ", scale " + std::to_string(k) + "/8, orientation " +
                                 std::to_string(orientation);
        auto full_error = [&](const FImage& got) {
          if (got.w != want.w || got.h != want.h) return 1e9;
          double e = 0;
          for (size_t i = 0; i < got.px.size(); ++i) e += std::fabs(got.px[i] - want.px[i]);
          return e / double(got.px.size());
        };
        PrepareOptions p;
        p.decode.limit = limit;
        p.quality = 100;
        auto prepared = PrepareJpeg(jpeg.data(), jpeg.size(), p);
        ASSERT_OK(prepared);
        DecodeOptions d;
        d.limit = limit;
        auto rgb = DecodeImage(jpeg.data(), jpeg.size(), d);
        ASSERT_OK(rgb);
        const double e_planar = full_error(DecodeOutput(prepared->bytes)), e_rgb = full_error(ToFloat(rgb.value()));
        if (std::getenv("IMAGEPACK_PIXEL_LOG"))
          std::fprintf(stderr, "RAMP %.3f %.3f %s\n", e_planar, e_rgb, what.c_str());
        EXPECT_LT(e_planar, kRampBound) << "PrepareJpeg (planar YCbCr): " << what;
        EXPECT_LT(e_rgb, kRampBound) << "DecodeImage (RGB): " << what;
      }
  }
}

// Whole pipelines on disk: one-pass resize + pack (JPEG and raw records)
// into a real LMDB, then the loader's evaluation batches (NCHW) from it.
TEST_F(JpegReference, PackAndLoaderPipelines) {
  TempDir dir;
  std::map<std::string, const Source*> by_path;
  std::map<std::string, int> orientation_of;
  int i = 0;
  for (const Source& src : Sources()) {
    const int orientation = i % 8 + 1;
    const std::string path = "c" + std::to_string(i % 2) + "/img" + std::to_string(i) + ".jpg";
    Spit(dir / ("tree/" + path), WithExifOrientation(src.jpeg, orientation));
    by_path[path] = &src;
    orientation_of[path] = orientation;
    ++i;
  }
  const int n = 100;  // DCT scales 3/8 to 4/8 on these sizes, then a resample
  for (Encoding enc : {Encoding::kJpeg, Encoding::kRaw}) {
    PackOptions o;
    o.src = dir / "tree";
    o.dst = dir / (std::string("db-") + EncodingName(enc) + ".lmdb");
    o.encoding = enc;
    o.prepare.decode.limit = {SizeLimit::Mode::kShorterEdge, n};
    o.threads = 2;
    o.stats_sample = 0;
    auto summary = PackDataset(o);
    ASSERT_OK(summary);
    ASSERT_EQ(summary->written, int64_t(by_path.size()));
    auto db = OpenDatabase(o.dst);
    ASSERT_OK(db);
    auto cursor = db.value()->NewCursor();
    for (int64_t r = 0; r < db.value()->size(); ++r) {
      auto rec = cursor->Read(r);
      ASSERT_OK(rec);
      const std::string path(rec->path);
      const Source& src = *by_path.at(path);
      const FImage upright = Upright(src.decoded, orientation_of.at(path));
      const FImage want = Resample(upright, 0, 0, upright.w, upright.h, int(rec->fields.width), int(rec->fields.height));
      FImage got;
      if (enc == Encoding::kJpeg) {
        got = DecodeOutput(std::vector<uint8_t>(rec->payload, rec->payload + rec->payload_size));
      } else {
        Image raw;
        raw.width = int(rec->fields.width);
        raw.height = int(rec->fields.height);
        raw.channels = rec->fields.channels;
        raw.pixels.assign(rec->payload, rec->payload + rec->payload_size);
        got = ToFloat(raw);
      }
      Check(enc == Encoding::kJpeg ? "pack_lmdb --max-size (JPEG)" : "pack_lmdb --max-size (raw)",
            src.name + " as " + path, got, want, !src.sampling.gray);
    }
  }

  // The loader on the JPEG records: evaluation crops, NCHW, one batch.
  LoaderOptions lo;
  lo.paths = {dir / "db-jpeg.lmdb"};
  lo.transform = TransformKind::kEval;
  lo.size = 64;
  lo.eval_resize = 80;
  lo.shuffle = false;
  lo.channels = 3;
  lo.batch_size = int(by_path.size());
  lo.threads = 2;
  lo.even_partition = false;
  auto loader = Loader::Open(lo);
  ASSERT_OK(loader);
  auto db = OpenDatabase(lo.paths[0]);
  ASSERT_OK(db);
  auto cursor = db.value()->NewCursor();
  loader.value()->StartEpoch(0);
  auto batch = loader.value()->NextView();
  ASSERT_OK(batch);
  ASSERT_EQ(batch->count, int(by_path.size()));
  for (int s = 0; s < batch->count; ++s) {
    auto rec = cursor->Read(s);
    ASSERT_OK(rec);
    const std::vector<uint8_t> stored(rec->payload, rec->payload + rec->payload_size);
    const FImage full = DecodeOutput(stored);  // the packed JPEG, as any decoder sees it
    const CropBox box = CenterCropBox(full.w, full.h, 64, 80);
    const FImage want = Resample(full, box.x, box.y, box.w, box.h, 64, 64);
    FImage got{64, 64, std::vector<double>(64 * 64 * 3)};
    const uint8_t* sample = batch->images + size_t(s) * 3 * 64 * 64;
    for (int p = 0; p < 64 * 64; ++p)
      for (int c = 0; c < 3; ++c) got.px[size_t(p) * 3 + c] = sample[size_t(c) * 64 * 64 + p];
    Check("Loader (eval, NCHW)", std::string(rec->path), got, want, !by_path.at(std::string(rec->path))->sampling.gray);
  }
}

}  // namespace
}  // namespace imagepack
