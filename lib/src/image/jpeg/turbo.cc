// TurboJPEG: whole-image decodes at a reduced DCT scale, and encoding.
#include "image/jpeg/turbo.h"

#include <string>

#include "image/cmyk.h"
#include "image/decode_internal.h"
#include "image/jpeg/jpeg.h"

namespace imagepack {
namespace internal {

TjHandles& Handles() {
  thread_local TjHandles h;
  return h;
}

std::string TjError(tjhandle h) { return tjGetErrorStr2(h); }

tjscalingfactor PickScale(int w, int h, int need_w, int need_h) {
  int count = 0;
  const tjscalingfactor* sf = tjGetScalingFactors(&count);
  tjscalingfactor best{1, 1};
  int64_t best_area = int64_t(w) * h;
  for (int i = 0; i < count; ++i) {
    if (sf[i].num > sf[i].denom) continue;
    const int sw = TJSCALED(w, sf[i]), sh = TJSCALED(h, sf[i]);
    const bool covers = int64_t(w) * sf[i].num >= int64_t(need_w) * sf[i].denom &&
                        int64_t(h) * sf[i].num >= int64_t(need_h) * sf[i].denom;
    if (covers && int64_t(sw) * sh < best_area) {
      best = sf[i];
      best_area = int64_t(sw) * sh;
    }
  }
  return best;
}

namespace {

// One TurboJPEG decode of the whole image into `dst` (dw x dh pixels of
// format `pf`, rows packed); a fresh decompressor, so nothing is carried
// over from another image.
Status TjDecode(const uint8_t* data, size_t size, uint8_t* dst, int dw, int dh, int pf, bool fast_dct) {
  TjDecompressor decompressor;
  tjhandle h = decompressor.get();
  if (!h) return Status::IOError("cannot create a libjpeg-turbo decompressor");
  if (tjDecompress2(h, data, static_cast<unsigned long>(size), dst, dw, 0, dh, pf, fast_dct ? TJFLAG_FASTDCT : 0) != 0)
    return DecodeFailure(h);
  return Status::Ok();
}

}  // namespace

Result<Image> DecodeJpeg(const uint8_t* data, size_t size, const ImageInfo& info,
                         const DecodeOptions& opts, bool rgbx) {
  IMAGEPACK_RETURN_IF_ERROR(CheckPixelLimit(info.width, info.height, opts.max_pixels));
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
    CmykTo(dec.pixels.data(), 4, size_t(dw) * dh, info.adobe_marker, opts.channels,
                     conv.pixels.data());
    dec = std::move(conv);
  }
  if (dw != need_w || dh != need_h)
    dec = ResampleImage(dec, ScaledExtent(info.width, sf), ScaledExtent(info.height, sf), need_w,
                        need_h, opts.filter);
  dec = ApplyOrientation(std::move(dec), orientation);
  return dec;
}

Status DecodeJpegFull(const uint8_t* data, size_t size, int width, int height, int channels, bool fast_dct,
                      uint8_t* dst) {
  return TjDecode(data, size, dst, width, height, channels == 1 ? TJPF_GRAY : TJPF_RGB, fast_dct);
}

}  // namespace internal

Result<std::vector<uint8_t>> EncodeJpeg(const Image& img, int quality) {
  if (img.channels < 1 || img.channels > 4 || img.channels == 2)
    return Status::InvalidArgument("JPEG encode needs 1, 3 or 4 (RGBX) channels");
  if (img.width <= 0 || img.height <= 0) return Status::InvalidArgument("empty image");
  tjhandle h = internal::Handles().enc;
  if (!h) return Status::IOError("cannot create a libjpeg-turbo compressor");
  const int subsamp = img.channels == 1 ? TJSAMP_GRAY : TJSAMP_420;
  std::vector<uint8_t> out(tjBufSize(img.width, img.height, subsamp));
  unsigned char* buf = out.data();
  unsigned long len = out.size();
  const int pf = img.channels == 1 ? TJPF_GRAY : (img.channels == 4 ? TJPF_RGBX : TJPF_RGB);
  if (tjCompress2(h, img.pixels.data(), img.width, 0, img.height, pf, &buf, &len, subsamp, quality,
                  TJFLAG_NOREALLOC) != 0) {
    return Status::IOError("JPEG encode failed: " + internal::TjError(h));
  }
  out.resize(len);
  return out;
}

}  // namespace imagepack
