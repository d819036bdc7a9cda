// One source image as a training JPEG: pass-through, the planar YCbCr
// path, or decode + resize + encode.
#include "imagepack/prepare.h"
#include "image/decode_internal.h"
#include "image/jpeg/jpeg.h"

namespace imagepack {

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
  IMAGEPACK_RETURN_IF_ERROR(internal::CheckPixelLimit(info->width, info->height, opts.decode.max_pixels));
  auto fast = internal::PrepareViaYuv(data, size, info.value(), opts);
  if (fast.ok() || fast.status().code() != Status::Code::kNotSupported) return fast;
  auto img = internal::DecodeProbed(data, size, info.value(), opts.decode, /*rgbx=*/true);
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
