// Encoded bytes to upright pixels at the size the limit allows (JPEG with
// libjpeg-turbo at a reduced DCT scale, the rest with libvips), the size
// policy every decoder follows, and JPEG encoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "imagepack/pixels.h"
#include "imagepack/probe.h"
#include "imagepack/resample.h"
#include "imagepack/status.h"

namespace imagepack {

// How output size is capped. Never upscales.
//   kShorterEdge: min(w, h) <= n   (resize_imagenet --max-size)
//   kLongerEdge:  max(w, h) <= n   (--max-edge)
// The capped edge becomes exactly n; the other edge is
// round(other * n / capped) with halves rounded up, and at least 1.
struct SizeLimit {
  enum class Mode { kNone, kShorterEdge, kLongerEdge };
  Mode mode = Mode::kNone;
  int n = 0;
};
std::pair<int, int> TargetSize(int width, int height, const SizeLimit& limit);

struct DecodeOptions {
  int channels = 3;            // 1 or 3
  SizeLimit limit;             // resize while decoding
  int64_t max_pixels = 200000000;  // refuse larger sources (decompression bombs)
  ResampleFilter filter = ResampleFilter::kTriangle;
  bool apply_orientation = true;
  // libjpeg-turbo's fast integer IDCT (TJFLAG_FASTDCT / JDCT_IFAST) at
  // full scale. false (the default): the accurate integer IDCT every other
  // libjpeg client uses (Pillow, torchvision, OpenCV), so that pixels that
  // are stored (raw packs, re-encoded JPEGs) or checked are theirs, byte
  // for byte. The loader, which decodes every epoch, chooses for itself
  // (LoaderOptions::fast_dct). Below full scale libjpeg's scaled IDCTs are
  // used whatever this says.
  bool fast_dct = false;
};

// Decodes any supported format to upright 8-bit pixels resized to the limit.
// JPEGs are decoded at the smallest DCT scale that keeps the target size, so
// huge JPEGs never materialise at full size. Alpha is composited over white.
// CMYK/YCCK JPEGs (Adobe-inverted or not) are converted to RGB.
// A truncated JPEG is an error ("truncated JPEG").
Result<Image> DecodeImage(const uint8_t* data, size_t size, const DecodeOptions& opts);

// DecodeImage's plain case straight into caller memory: a JPEG (`info` from
// ProbeImage) that needs no resize under opts.limit, no orientation change
// and no CMYK conversion, decoded to opts.channels into `dst`
// (info.width * info.height * opts.channels bytes, rows packed). The same
// pixels DecodeImage gives. Returns NotSupported, writing nothing, for any
// other image (then call DecodeImage); decode errors as DecodeImage.
Status DecodeJpegInto(const uint8_t* data, size_t size, const ImageInfo& info, const DecodeOptions& opts,
                      uint8_t* dst);

// Encodes as baseline JPEG, 4:2:0 for colour. channels 4 is read as RGBX
// (the fourth byte ignored).
Result<std::vector<uint8_t>> EncodeJpeg(const Image& img, int quality);

}  // namespace imagepack
