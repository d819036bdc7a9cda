// TurboJPEG plumbing shared by the JPEG module's files. Internal to
// lib/src/jpeg/.
#pragma once

#include <turbojpeg.h>

#include <string>

#include "imagepack/status.h"

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

}  // namespace imagepack::internal
