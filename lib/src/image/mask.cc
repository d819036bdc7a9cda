#include "imagepack/mask.h"

#include <png.h>

#include <immintrin.h>

#include <algorithm>
#include <climits>
#include <csetjmp>
#include <cstring>
#include <string>

#include "imagepack/probe.h"

namespace imagepack {
namespace {

struct PngReadState {
  const uint8_t* data;
  size_t size;
  size_t at;
  std::string error;
  std::vector<uint8_t> wide;  // 16-bit rows; owned here, not in DecodePng's frame
  std::vector<uint8_t*> rows; // row pointers: here too, so a longjmp leaks nothing
};

void ReadFromMemory(png_structp png, png_bytep out, png_size_t n) {
  auto* s = static_cast<PngReadState*>(png_get_io_ptr(png));
  if (n > s->size - s->at) png_error(png, "truncated PNG");
  std::memcpy(out, s->data + s->at, n);
  s->at += n;
}

void OnError(png_structp png, png_const_charp msg) {
  auto* s = static_cast<PngReadState*>(png_get_error_ptr(png));
  s->error = msg;
  png_longjmp(png, 1);
}
void OnWarning(png_structp, png_const_charp) {}

// The decode proper; libpng reports errors by longjmp, so no object with a
// destructor may live in this frame across the setjmp.
bool DecodePng(PngReadState* s, int bits, Image* out, bool* sixteen_big) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, s, OnError, OnWarning);
  if (!png) return false;
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
    if (s->error.empty()) s->error = "PNG decode failed";
    return false;
  }
  png_set_read_fn(png, s, ReadFromMemory);
  png_read_info(png, info);
  const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  const int type = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
  if (type != PNG_COLOR_TYPE_GRAY && type != PNG_COLOR_TYPE_PALETTE) {
    s->error = type == PNG_COLOR_TYPE_GRAY_ALPHA ? "mask PNG has an alpha channel: a label map is gray or palette"
                                                 : "mask PNG is RGB: a label map is gray or palette (indices)";
    png_longjmp(png, 1);
  }
  if (uint64_t(w) * h > 200000000ull) {
    s->error = "mask is " + std::to_string(w) + "x" + std::to_string(h) + ", over 200 Mpx";
    png_longjmp(png, 1);
  }
  if (depth < 8) png_set_packing(png);  // 1, 2, 4 bits: one value per byte, as stored (no scaling)
  if (png_get_interlace_type(png, info) != PNG_INTERLACE_NONE) png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const size_t rowbytes = png_get_rowbytes(png, info);
  std::vector<uint8_t>& px = out->pixels;
  std::vector<uint8_t>& wide = s->wide;
  const bool widen = bits > 8 && depth <= 8;  // 8-bit samples as uint16
  uint8_t* base;
  if (depth == 16 || widen) {
    wide.resize(rowbytes * h);
    base = wide.data();
  } else {
    px.resize(size_t(w) * h);
    base = px.data();
  }
  s->rows.resize(h);
  for (png_uint_32 y = 0; y < h; ++y) s->rows[y] = base + y * rowbytes;
  png_read_image(png, s->rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  out->width = static_cast<int>(w);
  out->height = static_cast<int>(h);
  out->channels = bits > 8 ? 2 : 1;
  const size_t n = size_t(w) * h;
  if (widen) {  // one byte per sample in, little-endian uint16 out
    px.assign(2 * n, 0);
    for (size_t i = 0; i < n; ++i) px[2 * i] = wide[i];
  } else if (depth == 16 && bits > 8) {  // big-endian samples to little-endian
    px.resize(2 * n);
    for (size_t i = 0; i < n; ++i) px[2 * i] = wide[2 * i + 1], px[2 * i + 1] = wide[2 * i];
  } else if (depth == 16) {  // values must fit a byte
    px.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const int v = (wide[2 * i] << 8) | wide[2 * i + 1];
      if (v > 255) {
        *sixteen_big = true;
        return false;
      }
      px[i] = static_cast<uint8_t>(v);
    }
  }
  return true;
}

void WriteToVector(png_structp png, png_bytep data, png_size_t n) {
  auto* v = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  v->insert(v->end(), data, data + n);
}

// Nearest source index for output `i` of `n` over [start, start + len).
inline int Nearest(int i, int n, int start, int len) {
  return start + static_cast<int>((2 * int64_t(i) + 1) * len / (2 * int64_t(n)));
}

}  // namespace

Result<Image> DecodeMask(const uint8_t* data, size_t size, int bits) {
  const ImageFormat fmt = SniffFormat(data, size);
  if (fmt == ImageFormat::kJpeg)
    return Status::InvalidArgument("mask is a JPEG: lossy compression changes label values; masks must be PNG");
  if (fmt != ImageFormat::kPng)
    return Status::NotSupported(std::string("mask is ") + ImageFormatName(fmt) + "; masks must be PNG (gray or palette)");
  PngReadState s{data, size, 0, {}, {}, {}};
  Image out;
  bool sixteen_big = false;
  if (!DecodePng(&s, bits, &out, &sixteen_big)) {
    if (sixteen_big)
      return Status::NotSupported("16-bit mask holds values over 255, the field is uint8 (pack it as uint16: "
                                  "--mask-dtype uint16)");
    return Status::Corruption("mask PNG: " + s.error);
  }
  return out;
}

namespace {

// An image of `depth`-bit samples (8: gray or RGB bytes; 16: gray, one
// little-endian uint16 per pixel) as a PNG.
Result<std::vector<uint8_t>> WritePng(const Image& img, int depth) {
  std::vector<uint8_t> out;
  std::vector<uint8_t> row;  // a 16-bit row in PNG's big-endian order
  PngReadState s{nullptr, 0, 0, {}, {}, {}};
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &s, OnError, OnWarning);
  if (!png) return Status::IOError("png_create_write_struct failed");
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, info ? &info : nullptr);
    return Status::IOError("PNG encode: " + s.error);
  }
  png_set_write_fn(png, &out, WriteToVector, nullptr);
  png_set_IHDR(png, info, img.width, img.height, depth, img.channels == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, 6);
  png_write_info(png, info);
  const size_t stride = size_t(img.width) * img.channels;
  row.resize(stride);
  for (int y = 0; y < img.height; ++y) {
    const uint8_t* src = img.pixels.data() + size_t(y) * stride;
    if (depth == 16) {
      for (size_t i = 0; i < stride; i += 2) row[i] = src[i + 1], row[i + 1] = src[i];
      src = row.data();
    }
    png_write_row(png, const_cast<png_bytep>(src));
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

}  // namespace

Result<std::vector<uint8_t>> EncodeMaskPng(const Image& mask) {
  if ((mask.channels != 1 && mask.channels != 2) || mask.width < 1 || mask.height < 1)
    return Status::InvalidArgument("a mask PNG is made from a non-empty map of 1 or 2 bytes per pixel");
  return WritePng(mask, mask.channels == 2 ? 16 : 8);
}

Result<std::vector<uint8_t>> EncodePng(const Image& img) {
  if ((img.channels != 1 && img.channels != 3) || img.width < 1 || img.height < 1)
    return Status::InvalidArgument("a PNG is encoded from a non-empty 1- or 3-channel image");
  return WritePng(img, 8);
}

namespace {

// Samples are moved with memcpy: a record's map may start at an odd byte.
template <typename T>
inline void CopySample(uint8_t* dst, const uint8_t* src) {
  std::memcpy(dst, src, sizeof(T));
}

template <typename T>
void ResizeNearest(const uint8_t* src, int w, int h, int tw, int th, uint8_t* dst) {
  constexpr size_t B = sizeof(T);
  std::vector<int> xs(tw);
  for (int x = 0; x < tw; ++x) xs[x] = Nearest(x, tw, 0, w);
  for (int y = 0; y < th; ++y) {
    const uint8_t* row = src + size_t(Nearest(y, th, 0, h)) * w * B;
    uint8_t* o = dst + size_t(y) * tw * B;
    for (int x = 0; x < tw; ++x) CopySample<T>(o + x * B, row + size_t(xs[x]) * B);
  }
}

// `n` samples of value `fill` at dst.
template <typename T>
inline void FillSamples(uint8_t* dst, int n, T fill) {
  if constexpr (sizeof(T) == 1) {
    std::memset(dst, fill, size_t(n));
    return;
  }
  for (int i = 0; i < n; ++i) std::memcpy(dst + size_t(i) * sizeof(T), &fill, sizeof(T));
}

// The gather of one row's inside run [lo, hi) in chunks of 16 bytes of
// output (16 uint8 samples or 8 uint16): where a chunk's source columns lie
// within 32 bytes of the row (any crop up to twice the output's width), one
// or two 16-byte loads and a byte shuffle (SSSE3) instead of a load per
// sample. The plan depends only on the columns, so it is made once per
// sample and used for every row.
struct GatherChunk {
  int out;   // first output byte
  int base;  // first source byte loaded
  bool two;  // a second load at base + 16
  alignas(16) uint8_t lo[16], hi[16];  // shuffle controls (0x80: zero)
};

void PlanGather(const int* xs, int lo, int hi, int w, int bytes, std::vector<GatherChunk>* plan, int* scalar_from) {
  plan->clear();
  const int per = 16 / bytes;  // samples per chunk
  int x = lo;
  for (; x + per <= hi; x += per) {
    const int a = std::min(xs[x], xs[x + per - 1]), b = std::max(xs[x], xs[x + per - 1]);
    if ((b - a + 1) * bytes > 32 || (a + 32 / bytes) > w) break;  // too wide, or a load would pass the row's end
    GatherChunk c;
    c.out = x * bytes;
    c.base = a * bytes;
    c.two = (b - a + 1) * bytes > 16;
    for (int i = 0; i < per; ++i)
      for (int k = 0; k < bytes; ++k) {
        const int d = (xs[x + i] - a) * bytes + k;
        c.lo[i * bytes + k] = d < 16 ? uint8_t(d) : 0x80;
        c.hi[i * bytes + k] = d >= 16 ? uint8_t(d - 16) : 0x80;
      }
    plan->push_back(c);
  }
  *scalar_from = x;
}

__attribute__((target("ssse3"))) void GatherRowSsse3(const uint8_t* row, const std::vector<GatherChunk>& plan,
                                                    uint8_t* o) {
  for (const GatherChunk& c : plan) {
    const __m128i v = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c.base)),
                                       _mm_load_si128(reinterpret_cast<const __m128i*>(c.lo)));
    __m128i r = v;
    if (c.two)
      r = _mm_or_si128(v, _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c.base + 16)),
                                           _mm_load_si128(reinterpret_cast<const __m128i*>(c.hi))));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + c.out), r);
  }
}

bool HasSsse3() {
  static const bool yes = __builtin_cpu_supports("ssse3");
  return yes;
}

template <typename T>
void Render(const uint8_t* src, int w, int h, const CropBox& box, int out_w, int out_h, bool hflip, bool vflip, T fill,
            uint8_t* dst) {
  // Source columns once per sample; the columns that fall inside the mask
  // form one run [lo, hi) (the mapping is monotonic), so each row is a fill,
  // a gather and a fill. Rows that map to the source row of the row before
  // (crops smaller than the output) are copies of it.
  constexpr size_t B = sizeof(T);
  thread_local std::vector<int> columns;
  thread_local std::vector<GatherChunk> chunks;
  std::vector<int>& xv = columns;  // thread_local looked up once, not per pixel
  std::vector<GatherChunk>& plan = chunks;
  xv.resize(out_w);
  int* const xs = xv.data();
  for (int x = 0; x < out_w; ++x) xs[x] = Nearest(hflip ? out_w - 1 - x : x, out_w, box.x, box.w);
  int lo = 0, hi = out_w;
  while (lo < hi && (xs[lo] < 0 || xs[lo] >= w)) ++lo;
  while (hi > lo && (xs[hi - 1] < 0 || xs[hi - 1] >= w)) --hi;
  int scalar_from = lo;
  plan.clear();
  if (HasSsse3()) PlanGather(xs, lo, hi, w, int(B), &plan, &scalar_from);
  int prev_sy = INT32_MIN;
  const size_t row_bytes = size_t(out_w) * B;
  for (int y = 0; y < out_h; ++y) {
    const int sy = Nearest(vflip ? out_h - 1 - y : y, out_h, box.y, box.h);
    uint8_t* o = dst + size_t(y) * row_bytes;
    if (sy == prev_sy) {
      std::memcpy(o, o - row_bytes, row_bytes);
      continue;
    }
    prev_sy = sy;
    if (sy < 0 || sy >= h) {
      FillSamples<T>(o, out_w, fill);
      continue;
    }
    const uint8_t* row = src + size_t(sy) * w * B;
    FillSamples<T>(o, lo, fill);
    if (!plan.empty()) GatherRowSsse3(row, plan, o);
    for (int x = scalar_from; x < hi; ++x) CopySample<T>(o + x * B, row + size_t(xs[x]) * B);
    FillSamples<T>(o + hi * B, out_w - hi, fill);
  }
}

}  // namespace

Image ResizeMaskNearest(const uint8_t* src, int w, int h, int tw, int th, int bytes) {
  Image out;
  out.width = tw;
  out.height = th;
  out.channels = bytes;
  out.pixels.resize(size_t(tw) * th * bytes);
  if (bytes == 2)
    ResizeNearest<uint16_t>(src, w, h, tw, th, out.pixels.data());
  else
    ResizeNearest<uint8_t>(src, w, h, tw, th, out.pixels.data());
  return out;
}

void RenderMask(const uint8_t* src, int w, int h, const CropBox& box, int out_w, int out_h, bool hflip, bool vflip,
                uint16_t fill, uint8_t* dst, int bytes) {
  if (bytes == 2)
    Render<uint16_t>(src, w, h, box, out_w, out_h, hflip, vflip, fill, dst);
  else
    Render<uint8_t>(src, w, h, box, out_w, out_h, hflip, vflip, static_cast<uint8_t>(fill), dst);
}

}  // namespace imagepack
