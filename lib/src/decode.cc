// Decoding (libjpeg-turbo for JPEG, libvips for the rest), EXIF orientation,
// JPEG encoding, and the one-image "prepare" step shared by the tools.
#include <turbojpeg.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "imagepack/image.h"
#include "cmyk.h"
#include "jpeg_internal.h"
#include "vips_util.h"

namespace imagepack {
using internal::Handles;
using internal::PickScale;
using internal::TjError;
namespace {

Status PixelLimit(int w, int h, int64_t max_pixels) {
  int64_t px = int64_t(w) * h;
  if (px <= max_pixels) return Status::Ok();
  return Status::InvalidArgument("image is " + std::to_string(w) + "x" + std::to_string(h) +
                                 " = " + std::to_string(px) + " pixels, over the limit of " +
                                 std::to_string(max_pixels) + " (--max-pixels)");
}

// One TurboJPEG decode of the whole image into `dst` (dw x dh pixels of
// format `pf`, rows packed); a fresh decompressor, so nothing is carried
// over from another image.
Status TjDecode(const uint8_t* data, size_t size, uint8_t* dst, int dw, int dh, int pf, bool fast_dct) {
  internal::TjDecompressor decompressor;
  tjhandle h = decompressor.get();
  if (!h) return Status::IOError("cannot create a libjpeg-turbo decompressor");
  if (tjDecompress2(h, data, static_cast<unsigned long>(size), dst, dw, 0, dh, pf, fast_dct ? TJFLAG_FASTDCT : 0) != 0)
    return internal::DecodeFailure(h);
  return Status::Ok();
}

// With `rgbx`, 3-channel results come back as 4-byte RGBX pixels
// (channels == 4): libjpeg-turbo writes them as cheaply as RGB and the
// encoder reads them directly. Without, as RGB straight from the decoder
// (raw records: no conversion pass afterwards).
Result<Image> DecodeJpeg(const uint8_t* data, size_t size, const ImageInfo& info,
                         const DecodeOptions& opts, bool rgbx) {
  IMAGEPACK_RETURN_IF_ERROR(PixelLimit(info.width, info.height, opts.max_pixels));
  const int orientation = opts.apply_orientation ? info.orientation : 1;
  const bool transposed = orientation >= 5;
  const int up_w = transposed ? info.height : info.width;
  const int up_h = transposed ? info.width : info.height;
  auto [tw, th] = TargetSize(up_w, up_h, opts.limit);
  const int need_w = transposed ? th : tw;
  const int need_h = transposed ? tw : th;

  tjscalingfactor sf = PickScale(info.width, info.height, need_w, need_h);
  const int dw = TJSCALED(info.width, sf);
  const int dh = TJSCALED(info.height, sf);

  const bool cmyk = info.jpeg_color == JpegColor::kCmyk || info.jpeg_color == JpegColor::kYcck;
  int pf;
  int dc;
  if (cmyk) { pf = TJPF_CMYK; dc = 4; }
  else if (opts.channels == 1) { pf = TJPF_GRAY; dc = 1; }
  else if (rgbx) { pf = TJPF_RGBX; dc = 4; }
  else { pf = TJPF_RGB; dc = 3; }

  Image dec;
  dec.width = dw;
  dec.height = dh;
  dec.channels = dc;
  dec.pixels.resize(size_t(dw) * dh * dc);
  IMAGEPACK_RETURN_IF_ERROR(TjDecode(data, size, dec.pixels.data(), dw, dh, pf, opts.fast_dct));
  if (cmyk) {
    Image conv;
    conv.width = dw;
    conv.height = dh;
    conv.channels = opts.channels;
    conv.pixels.resize(conv.stride() * dh);
    internal::CmykTo(dec.pixels.data(), 4, size_t(dw) * dh, info.adobe_marker, opts.channels,
                     conv.pixels.data());
    dec = std::move(conv);
  }
  if (dw != need_w || dh != need_h)
    dec = ResampleImage(dec, internal::ScaledExtent(info.width, sf), internal::ScaledExtent(info.height, sf), need_w,
                        need_h, opts.filter);
  dec = ApplyOrientation(std::move(dec), orientation);
  return dec;
}

Result<Image> DecodeProbed(const uint8_t* data, size_t size, const ImageInfo& info,
                           const DecodeOptions& opts, bool rgbx = false) {
  if (opts.channels != 1 && opts.channels != 3)
    return Status::InvalidArgument("channels must be 1 or 3");
  if (info.format == ImageFormat::kJpeg) return DecodeJpeg(data, size, info, opts, rgbx);
  return internal::VipsDecode(data, size, opts);
}

}  // namespace

Image ConvertChannels(Image img, int channels) {
  if (img.channels == channels) return img;
  Image out;
  out.width = img.width;
  out.height = img.height;
  out.channels = channels;
  out.pixels.resize(out.stride() * out.height);
  const size_t n = size_t(img.width) * img.height;
  const uint8_t* s = img.pixels.data();
  uint8_t* d = out.pixels.data();
  if (img.channels == 3 && channels == 1) {
    for (size_t i = 0; i < n; ++i, s += 3) d[i] = Luma(s[0], s[1], s[2]);
  } else if (img.channels == 1 && channels == 3) {
    for (size_t i = 0; i < n; ++i, d += 3) d[0] = d[1] = d[2] = s[i];
  } else if (img.channels == 4 && channels == 3) {  // RGBX
    for (size_t i = 0; i < n; ++i, s += 4, d += 3) {
      d[0] = s[0]; d[1] = s[1]; d[2] = s[2];
    }
  } else if (img.channels == 4 && channels == 1) {
    for (size_t i = 0; i < n; ++i, s += 4) d[i] = Luma(s[0], s[1], s[2]);
  }
  return out;
}

Image ApplyOrientation(Image img, int orientation) {
  if (orientation <= 1 || orientation > 8) return img;
  const int W = img.width, H = img.height, C = img.channels;
  const bool transposed = orientation >= 5;
  Image out;
  out.width = transposed ? H : W;
  out.height = transposed ? W : H;
  out.channels = C;
  out.pixels.resize(img.pixels.size());
  for (int yo = 0; yo < out.height; ++yo) {
    uint8_t* d = &out.pixels[size_t(yo) * out.stride()];
    for (int xo = 0; xo < out.width; ++xo) {
      int x, y;
      switch (orientation) {
        case 2: x = W - 1 - xo; y = yo; break;
        case 3: x = W - 1 - xo; y = H - 1 - yo; break;
        case 4: x = xo; y = H - 1 - yo; break;
        case 5: x = yo; y = xo; break;
        case 6: x = yo; y = H - 1 - xo; break;
        case 7: x = W - 1 - yo; y = H - 1 - xo; break;
        default: x = W - 1 - yo; y = xo; break;  // 8
      }
      std::memcpy(d + size_t(xo) * C, &img.pixels[(size_t(y) * W + x) * C], C);
    }
  }
  return out;
}

Status DecodeJpegInto(const uint8_t* data, size_t size, const ImageInfo& info, const DecodeOptions& opts,
                      uint8_t* dst) {
  if (opts.channels != 1 && opts.channels != 3) return Status::InvalidArgument("channels must be 1 or 3");
  const bool cmyk = info.jpeg_color == JpegColor::kCmyk || info.jpeg_color == JpegColor::kYcck;
  const int orientation = opts.apply_orientation ? info.orientation : 1;
  const auto target = TargetSize(info.width, info.height, opts.limit);
  if (info.format != ImageFormat::kJpeg || cmyk || orientation > 1 || target.first != info.width ||
      target.second != info.height)
    return Status::NotSupported("needs more than a plain decode");
  IMAGEPACK_RETURN_IF_ERROR(PixelLimit(info.width, info.height, opts.max_pixels));
  return TjDecode(data, size, dst, info.width, info.height, opts.channels == 1 ? TJPF_GRAY : TJPF_RGB,
                  opts.fast_dct);
}

// The size policy (image.h): every decoder resizes to this.
std::pair<int, int> TargetSize(int width, int height, const SizeLimit& limit) {
  if (limit.mode == SizeLimit::Mode::kNone || limit.n <= 0) return {width, height};
  const bool cap_shorter = limit.mode == SizeLimit::Mode::kShorterEdge;
  const bool width_is_capped = cap_shorter ? (width <= height) : (width >= height);
  const int64_t capped = width_is_capped ? width : height;
  const int64_t other = width_is_capped ? height : width;
  if (capped <= limit.n) return {width, height};
  int64_t scaled = (other * limit.n * 2 + capped) / (capped * 2);  // round half up
  if (scaled < 1) scaled = 1;
  return width_is_capped ? std::pair<int, int>(limit.n, int(scaled))
                         : std::pair<int, int>(int(scaled), limit.n);
}

Result<Image> DecodeImage(const uint8_t* data, size_t size, const DecodeOptions& opts) {
  auto info = ProbeImage(data, size);
  if (!info.ok()) return info.status();
  return DecodeProbed(data, size, info.value(), opts);
}

Result<std::vector<uint8_t>> EncodeJpeg(const Image& img, int quality) {
  if (img.channels < 1 || img.channels > 4 || img.channels == 2)
    return Status::InvalidArgument("JPEG encode needs 1, 3 or 4 (RGBX) channels");
  if (img.width <= 0 || img.height <= 0) return Status::InvalidArgument("empty image");
  tjhandle h = Handles().enc;
  if (!h) return Status::IOError("cannot create a libjpeg-turbo compressor");
  const int subsamp = img.channels == 1 ? TJSAMP_GRAY : TJSAMP_420;
  std::vector<uint8_t> out(tjBufSize(img.width, img.height, subsamp));
  unsigned char* buf = out.data();
  unsigned long len = out.size();
  const int pf = img.channels == 1 ? TJPF_GRAY : (img.channels == 4 ? TJPF_RGBX : TJPF_RGB);
  if (tjCompress2(h, img.pixels.data(), img.width, 0, img.height, pf, &buf, &len, subsamp, quality,
                  TJFLAG_NOREALLOC) != 0) {
    return Status::IOError("JPEG encode failed: " + TjError(h));
  }
  out.resize(len);
  return out;
}

bool CanPassThrough(const uint8_t* data, size_t size, const ImageInfo& info, const PrepareOptions& opts) {
  if (info.format != ImageFormat::kJpeg || info.progressive || info.arithmetic || !info.has_eoi)
    return false;
  if (info.orientation != 1 && opts.decode.apply_orientation) return false;
  if (info.jpeg_color != JpegColor::kGray &&
      !(info.jpeg_color == JpegColor::kYCbCr && opts.decode.channels == 3))
    return false;
  if (int64_t(info.width) * info.height > opts.decode.max_pixels) return false;
  return TargetSize(info.width, info.height, opts.decode.limit) == std::make_pair(info.width, info.height) &&
         CheckJpegStructure(data, size).ok();
}

Result<PreparedJpeg> PrepareJpeg(const uint8_t* data, size_t size, const PrepareOptions& opts) {
  auto info = ProbeImage(data, size);
  if (!info.ok()) return info.status();
  PreparedJpeg out;
  if (!opts.reencode && CanPassThrough(data, size, info.value(), opts)) {
    out.bytes.assign(data, data + size);
    out.width = info->width;
    out.height = info->height;
    out.channels = info->components;
    out.passed_through = true;
    return out;
  }
  // Checked here, before any path allocates (found by tests/cli/bounds_cli.sh:
  // the planar path decoded a 65500x65500 header without asking).
  IMAGEPACK_RETURN_IF_ERROR(PixelLimit(info->width, info->height, opts.decode.max_pixels));
  auto fast = internal::PrepareViaYuv(data, size, info.value(), opts);
  if (fast.ok() || fast.status().code() != Status::Code::kNotSupported) return fast;
  auto img = DecodeProbed(data, size, info.value(), opts.decode, /*rgbx=*/true);
  if (!img.ok()) return img.status();
  auto enc = EncodeJpeg(img.value(), opts.quality);
  if (!enc.ok()) return enc.status();
  out.bytes = std::move(enc.value());
  out.width = img->width;
  out.height = img->height;
  out.channels = img->channels == 1 ? 1 : 3;
  return out;
}

}  // namespace imagepack
