// libjpeg-turbo plumbing shared by the decode paths. Internal.
#pragma once

#include <turbojpeg.h>

#include <string>

#include "imagepack/image.h"

namespace imagepack::internal {

// One compressor per thread: TurboJPEG handles are not thread-safe.
struct TjHandles {
  tjhandle enc = tjInitCompress();
  ~TjHandles() {
    if (enc) tjDestroy(enc);
  }
};
TjHandles& Handles();

// A decompressor for one image. Never reused: libjpeg keeps quantisation
// tables across images in one decompressor, so a JPEG missing its own
// tables would silently decode with the previous image's (found by
// fuzz_verify). Creating one costs well under a microsecond.
class TjDecompressor {
 public:
  TjDecompressor() : h_(tjInitDecompress()) {}
  ~TjDecompressor() {
    if (h_) tjDestroy(h_);
  }
  TjDecompressor(const TjDecompressor&) = delete;
  TjDecompressor& operator=(const TjDecompressor&) = delete;
  tjhandle get() const { return h_; }

 private:
  tjhandle h_;
};

std::string TjError(tjhandle h);

// The one rule for damaged JPEG data, on every decode path (TurboJPEG's
// and the loader's libjpeg region decoder): `fatal` (libjpeg stopped on
// `message`) is "JPEG decode failed: <message>"; otherwise a file whose data
// ran out before its EOI (`ran_out`: libjpeg's JWRN_JPEG_EOF, "Premature end
// of JPEG file", always the first warning of a cut file) is "truncated
// JPEG"; any other warning (damaged scan data: extraneous bytes before a
// marker, which real ImageNet files have, bad codes, a scan that ends
// early inside a complete file, whose missing blocks decode flat) is
// tolerated, as Pillow, OpenCV and torchvision tolerate it.
Status JpegDamage(const std::string& message, bool fatal, bool ran_out);

// JpegDamage for a failed tjDecompress*.
Status DecodeFailure(tjhandle h);

// Smallest libjpeg-turbo DCT scale (n/8, n = 1..8) whose output still covers
// need_w x need_h with picture: the scaled picture is w * n / 8 pixels wide,
// and TJSCALED's rounding up only adds a last pixel that lies partly past
// the edge, so that extent (not TJSCALED) must cover the need.
tjscalingfactor PickScale(int w, int h, int need_w, int need_h);

// How many decoded pixels of a DCT-scaled decode are picture: `size` * sf.
// Pixel j of the decode covers source pixels [j / sf, (j + 1) / sf), so a
// resample to the target reads exactly this region (from 0) of the decode.
inline double ScaledExtent(int size, tjscalingfactor sf) { return double(size) * sf.num / sf.denom; }

// The fast path for YCbCr and gray JPEGs: decode to Y/Cb/Cr planes at the
// best DCT scale, resample each plane, apply the orientation, and encode
// from the planes (4:2:0, or gray). It skips both colour conversions and
// chroma up/down-sampling, and resamples 1.5 bytes per pixel instead of 3.
// Resampling commutes with the (affine) YCbCr transform, so the result
// matches the RGB path up to rounding. Returns NotSupported when the source
// is not a YCbCr/gray JPEG (the caller then takes the RGB path).
Result<PreparedJpeg> PrepareViaYuv(const uint8_t* data, size_t size, const ImageInfo& info,
                                   const PrepareOptions& opts);

}  // namespace imagepack::internal
