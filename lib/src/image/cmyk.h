// CMYK -> RGB without colour management, one rule for every format (JPEG,
// TIFF, ...): R = (255 - C) * (255 - K) / 255, and likewise G from M and B
// from Y, rounded. It is Pillow's conversion. ICC profiles are not applied
// (docs/USAGE.md, "What each format becomes"). Internal.
#pragma once

#include <cstddef>
#include <cstdint>

#include "imagepack/pixels.h"

namespace imagepack::internal {

// `n` pixels of `stride` bytes (4: CMYK, 5: CMYK + alpha) -> `channels`
// (3: RGB, 1: Rec. 601 luma) at `out`. `inverted`: samples store 255 - ink
// (Adobe's CMYK JPEGs). A fifth (alpha) byte is composited over white.
inline void CmykTo(const uint8_t* cmyk, int stride, size_t n, bool inverted, int channels, uint8_t* out) {
  for (size_t i = 0; i < n; ++i, cmyk += stride) {
    int c = cmyk[0], m = cmyk[1], y = cmyk[2], k = cmyk[3];
    if (inverted) { c = 255 - c; m = 255 - m; y = 255 - y; k = 255 - k; }
    const int nk = 255 - k;
    int r = ((255 - c) * nk + 127) / 255, g = ((255 - m) * nk + 127) / 255, b = ((255 - y) * nk + 127) / 255;
    if (stride >= 5) {
      const int a = cmyk[4];
      r = (r * a + 255 * (255 - a) + 127) / 255;
      g = (g * a + 255 * (255 - a) + 127) / 255;
      b = (b * a + 255 * (255 - a) + 127) / 255;
    }
    if (channels == 3) {
      out[0] = uint8_t(r); out[1] = uint8_t(g); out[2] = uint8_t(b);
      out += 3;
    } else {
      *out++ = Luma(r, g, b);
    }
  }
}

}  // namespace imagepack::internal
