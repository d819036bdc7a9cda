// Decoding by content: the JPEG module for JPEG, libvips for the rest; the
// size policy every decoder resizes to.
#include <string>

#include "imagepack/decode.h"
#include "image/decode_internal.h"
#include "image/jpeg/jpeg.h"
#include "image/vips_util.h"

namespace imagepack {
namespace internal {

Status CheckPixelLimit(int w, int h, int64_t max_pixels) {
  int64_t px = int64_t(w) * h;
  if (px <= max_pixels) return Status::Ok();
  return Status::InvalidArgument("image is " + std::to_string(w) + "x" + std::to_string(h) +
                                 " = " + std::to_string(px) + " pixels, over the limit of " +
                                 std::to_string(max_pixels) + " (--max-pixels)");
}

Result<Image> DecodeProbed(const uint8_t* data, size_t size, const ImageInfo& info,
                           const DecodeOptions& opts, bool rgbx) {
  if (opts.channels != 1 && opts.channels != 3)
    return Status::InvalidArgument("channels must be 1 or 3");
  if (info.format == ImageFormat::kJpeg) return DecodeJpeg(data, size, info, opts, rgbx);
  return VipsDecode(data, size, opts);
}

}  // namespace internal

// The size policy (decode.h): every decoder resizes to this.
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
  return internal::DecodeProbed(data, size, info.value(), opts);
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
  IMAGEPACK_RETURN_IF_ERROR(internal::CheckPixelLimit(info.width, info.height, opts.max_pixels));
  return internal::DecodeJpegFull(data, size, info.width, info.height, opts.channels, opts.fast_dct, dst);
}

}  // namespace imagepack
