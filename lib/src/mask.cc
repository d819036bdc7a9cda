#include "imagepack/mask.h"

#include <png.h>

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
bool DecodePng(PngReadState* s, Image* out, bool* sixteen_big) {
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
  uint8_t* base;
  if (depth == 16) {
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
  if (depth == 16) {  // big-endian samples; values must fit a byte
    px.resize(size_t(w) * h);
    for (size_t i = 0; i < px.size(); ++i) {
      const int v = (wide[2 * i] << 8) | wide[2 * i + 1];
      if (v > 255) {
        *sixteen_big = true;
        return false;
      }
      px[i] = static_cast<uint8_t>(v);
    }
  }
  out->width = static_cast<int>(w);
  out->height = static_cast<int>(h);
  out->channels = 1;
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

Result<Image> DecodeMask(const uint8_t* data, size_t size) {
  const ImageFormat fmt = SniffFormat(data, size);
  if (fmt == ImageFormat::kJpeg)
    return Status::InvalidArgument("mask is a JPEG: lossy compression changes label values; masks must be PNG");
  if (fmt != ImageFormat::kPng)
    return Status::NotSupported(std::string("mask is ") + ImageFormatName(fmt) + "; masks must be PNG (gray or palette)");
  PngReadState s{data, size, 0, {}, {}, {}};
  Image out;
  bool sixteen_big = false;
  if (!DecodePng(&s, &out, &sixteen_big)) {
    if (sixteen_big) return Status::NotSupported("16-bit mask holds values over 255 (masks are uint8)");
    return Status::Corruption("mask PNG: " + s.error);
  }
  return out;
}

Result<std::vector<uint8_t>> EncodeMaskPng(const Image& mask) {
  if (mask.channels != 1) return Status::InvalidArgument("a mask PNG is 1 channel, non-empty");
  return EncodePng(mask);
}

Result<std::vector<uint8_t>> EncodePng(const Image& img) {
  if ((img.channels != 1 && img.channels != 3) || img.width < 1 || img.height < 1)
    return Status::InvalidArgument("a PNG is encoded from a non-empty 1- or 3-channel image");
  std::vector<uint8_t> out;
  PngReadState s{nullptr, 0, 0, {}, {}, {}};
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &s, OnError, OnWarning);
  if (!png) return Status::IOError("png_create_write_struct failed");
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, info ? &info : nullptr);
    return Status::IOError("PNG encode: " + s.error);
  }
  png_set_write_fn(png, &out, WriteToVector, nullptr);
  png_set_IHDR(png, info, img.width, img.height, 8, img.channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_set_compression_level(png, 6);
  png_write_info(png, info);
  const size_t stride = size_t(img.width) * img.channels;
  for (int y = 0; y < img.height; ++y) png_write_row(png, const_cast<png_bytep>(img.pixels.data() + size_t(y) * stride));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

Image ResizeMaskNearest(const uint8_t* src, int w, int h, int tw, int th) {
  Image out;
  out.width = tw;
  out.height = th;
  out.channels = 1;
  out.pixels.resize(size_t(tw) * th);
  std::vector<int> xs(tw);
  for (int x = 0; x < tw; ++x) xs[x] = Nearest(x, tw, 0, w);
  for (int y = 0; y < th; ++y) {
    const uint8_t* row = src + size_t(Nearest(y, th, 0, h)) * w;
    uint8_t* o = out.pixels.data() + size_t(y) * tw;
    for (int x = 0; x < tw; ++x) o[x] = row[xs[x]];
  }
  return out;
}

void RenderMask(const uint8_t* src, int w, int h, const CropBox& box, int out_w, int out_h, bool hflip, bool vflip,
                uint8_t fill, uint8_t* dst) {
  // Source columns once per sample; the columns that fall inside the mask
  // form one run [lo, hi) (the mapping is monotonic), so each row is a fill,
  // a branch-free gather and a fill. Rows that map to the source row of the
  // row before (crops smaller than the output) are copies of it.
  thread_local std::vector<int> xs;
  xs.resize(out_w);
  for (int x = 0; x < out_w; ++x) xs[x] = Nearest(hflip ? out_w - 1 - x : x, out_w, box.x, box.w);
  int lo = 0, hi = out_w;
  while (lo < hi && (xs[lo] < 0 || xs[lo] >= w)) ++lo;
  while (hi > lo && (xs[hi - 1] < 0 || xs[hi - 1] >= w)) --hi;
  int prev_sy = INT32_MIN;
  for (int y = 0; y < out_h; ++y) {
    const int sy = Nearest(vflip ? out_h - 1 - y : y, out_h, box.y, box.h);
    uint8_t* o = dst + size_t(y) * out_w;
    if (sy == prev_sy) {
      std::memcpy(o, o - out_w, out_w);
      continue;
    }
    prev_sy = sy;
    if (sy < 0 || sy >= h) {
      std::memset(o, fill, out_w);
      continue;
    }
    const uint8_t* row = src + size_t(sy) * w;
    std::memset(o, fill, lo);
    for (int x = lo; x < hi; ++x) o[x] = row[xs[x]];
    std::memset(o + hi, fill, out_w - hi);
  }
}

}  // namespace imagepack
