#include "imagepack/transform.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "image/jpeg/jpeg.h"

namespace imagepack {
namespace {

Status Finish(const uint8_t* src, int w, int h, size_t stride, int C, double rx, double ry, double rw, double rh,
              const RenderOptions& o, Image* out);

int RandInt(SplitMix64& rng, int lo, int hi) {  // inclusive
  return lo + static_cast<int>(rng.Below(static_cast<uint64_t>(hi - lo) + 1));
}

}  // namespace

CropBox RandomResizedCropBox(int W, int H, double smin, double smax, double rmin, double rmax, SplitMix64& rng) {
  const double area = double(W) * H;
  const double lr0 = std::log(rmin), lr1 = std::log(rmax);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (smin + (smax - smin) * rng.Uniform());
    const double aspect = std::exp(lr0 + (lr1 - lr0) * rng.Uniform());
    const int w = static_cast<int>(std::lround(std::sqrt(target * aspect)));
    const int h = static_cast<int>(std::lround(std::sqrt(target / aspect)));
    if (w > 0 && h > 0 && w <= W && h <= H) {
      const int y = RandInt(rng, 0, H - h);
      const int x = RandInt(rng, 0, W - w);
      return {x, y, w, h};
    }
  }
  const double in_ratio = double(W) / H;
  int w = W, h = H;
  if (in_ratio < rmin) h = static_cast<int>(std::lround(w / rmin));
  else if (in_ratio > rmax) w = static_cast<int>(std::lround(h * rmax));
  return {(W - w) / 2, (H - h) / 2, w, h};
}

CropBox CenterCropBox(int W, int H, int size, int resize_to) {
  const double f = double(resize_to) / std::min(W, H);  // source -> resized
  const int w = std::min(W, std::max(1, static_cast<int>(std::lround(size / f))));
  const int h = std::min(H, std::max(1, static_cast<int>(std::lround(size / f))));
  return {(W - w) / 2, (H - h) / 2, w, h};
}

CropBox PaddedRandomCropBox(int W, int H, int size, int pad, SplitMix64& rng) {
  const int x = RandInt(rng, -pad, std::max(-pad, W + pad - size));
  const int y = RandInt(rng, -pad, std::max(-pad, H + pad - size));
  return {x, y, size, size};
}

Status RenderPixels(const uint8_t* pixels, int W, int H, int C, const CropBox& box, const RenderOptions& o,
                    Image* out) {
  if (box.w <= 0 || box.h <= 0) return Status::InvalidArgument("empty crop box");
  const bool inside = box.x >= 0 && box.y >= 0 && box.x + box.w <= W && box.y + box.h <= H;
  std::vector<uint8_t> padded;
  const uint8_t* src = nullptr;
  size_t stride = size_t(W) * C;
  if (inside) {
    src = pixels + size_t(box.y) * stride + size_t(box.x) * C;
  } else {
    // Zero padding: copy the covered part of the image into a zeroed box.
    padded.assign(size_t(box.w) * box.h * C, 0);
    for (int y = std::max(0, box.y); y < std::min(H, box.y + box.h); ++y) {
      const int x0 = std::max(0, box.x), x1 = std::min(W, box.x + box.w);
      if (x1 <= x0) continue;
      std::memcpy(&padded[(size_t(y - box.y) * box.w + (x0 - box.x)) * C], pixels + size_t(y) * stride + size_t(x0) * C,
                  size_t(x1 - x0) * C);
    }
    src = padded.data();
    stride = size_t(box.w) * C;
  }
  return Finish(src, box.w, box.h, stride, C, 0, 0, box.w, box.h, o, out);
}

namespace {

Status Finish(const uint8_t* src, int w, int h, size_t stride, int C, double rx, double ry, double rw, double rh,
              const RenderOptions& o, Image* out) {
  if (o.planes && o.channels == 3) {
    const size_t plane = size_t(o.out_w) * o.out_h;
    uint8_t* const p[3] = {o.planes, o.planes + plane, o.planes + 2 * plane};
    if (C >= 3) {
      ResampleRegionToPlanes(src, w, h, stride, C, rx, ry, rw, rh, p, size_t(o.out_w), o.out_w, o.out_h, o.filter,
                             o.flip);
    } else {  // gray: one plane, copied to the other two
      ResampleRegion(src, w, h, stride, C, rx, ry, rw, rh, p[0], o.out_w, o.out_h, size_t(o.out_w), o.filter, o.flip);
      std::memcpy(p[1], p[0], plane);
      std::memcpy(p[2], p[0], plane);
    }
    return Status::Ok();
  }
  // `out` keeps its capacity: a caller rendering many images into one Image
  // allocates once.
  out->width = o.out_w;
  out->height = o.out_h;
  out->channels = C;
  out->pixels.resize(out->stride() * out->height);
  ResampleRegion(src, w, h, stride, C, rx, ry, rw, rh, out->pixels.data(), o.out_w, o.out_h, out->stride(), o.filter,
                 o.flip);
  if (o.finish && C != o.channels) *out = ConvertChannels(std::move(*out), o.channels);
  return Status::Ok();
}

}  // namespace

Status RenderJpeg(const uint8_t* data, size_t size, const CropBox& box, const RenderOptions& o, Image* out) {
  auto info = ProbeImage(data, size);
  if (!info.ok()) return info.status();
  const bool inside = box.x >= 0 && box.y >= 0 && box.x + box.w <= info->width && box.y + box.h <= info->height;
  if (info->format != ImageFormat::kJpeg || info->components == 4 || !inside) {
    DecodeOptions d;
    d.channels = o.channels;
    d.fast_dct = o.fast_dct;
    d.apply_orientation = false;  // packed JPEGs are upright; boxes are in stored pixels
    auto img = DecodeImage(data, size, d);
    if (!img.ok()) return img.status();
    return RenderPixels(img->pixels.data(), img->width, img->height, img->channels, box, o, out);
  }
  // Smallest DCT scale n/8 keeping the scaled crop >= the output size.
  int num = 8;
  if (o.dct_scaling)
    for (int n = 1; n < 8; ++n)
      if (box.w * n >= o.out_w * 8 && box.h * n >= o.out_h * 8) {
        num = n;
        break;
      }
  // The box in scaled coordinates (libjpeg's scaled size rounds up).
  auto scaled = [num](int v) { return static_cast<int>(std::floor(double(v) * num / 8.0)); };
  const int sx0 = scaled(box.x), sy0 = scaled(box.y);
  const int sx1 = std::max(sx0 + 1, static_cast<int>(std::ceil(double(box.x + box.w) * num / 8.0)));
  const int sy1 = std::max(sy0 + 1, static_cast<int>(std::ceil(double(box.y + box.h) * num / 8.0)));
  const bool gray_out = o.channels == 1 || info->components == 1;
  // Accurate mode promises the reference decoder's pixels: libjpeg's
  // chroma upsampler treats the edges of a cropped region as the image's
  // (it replicates the last chroma sample there), so a margin is decoded
  // around the box and left unused: a column and a row before it, an iMCU
  // (16 pixels at most) after it. (The decoder clamps to the image.)
  const int mx0 = o.fast_dct ? 0 : 1, mx1 = o.fast_dct ? 0 : 16;
  const int dx0 = std::max(0, sx0 - mx0), dy0 = std::max(0, sy0 - mx0);
  thread_local std::vector<uint8_t> buf;  // keeps its capacity between images
  int got_x0 = 0, got_w = 0, c = 0;
  IMAGEPACK_RETURN_IF_ERROR(internal::DecodeJpegRegion(data, size, num, gray_out, dx0, sx1 + mx1 - dx0, dy0,
                                                       sy1 + mx1 - dy0, o.fast_dct, &buf, &got_x0, &got_w, &c));
  const int rows = static_cast<int>(buf.size() / (size_t(got_w) * c));
  if (rows <= 0 || got_w <= 0) return Status::Corruption("JPEG region decode came back empty");
  // The exact box in the decoded buffer's coordinates (DCT scaling maps each
  // 8x8 block to num x num pixels, so the mapping is proportional).
  const double f = num / 8.0;
  const double rx = std::max(0.0, box.x * f - got_x0), ry = std::max(0.0, box.y * f - dy0);
  const double rw = std::min(box.w * f, got_w - rx), rh = std::min(box.h * f, rows - ry);
  return Finish(buf.data(), got_w, rows, size_t(got_w) * c, c, rx, ry, rw, rh, o, out);
}

}  // namespace imagepack
