// Pixel operations on decoded images: channel conversion, EXIF orientation.
#include <immintrin.h>

#include <cstring>

#include "imagepack/pixels.h"

namespace imagepack {

namespace {

// 4 RGBX pixels to 12 RGB bytes at a time, front to back (in place too:
// each 16-byte store ends before the next load begins). Returns the
// pixels done.
__attribute__((target("ssse3"))) size_t RgbxToRgbSsse3(const uint8_t* s, size_t n, uint8_t* d) {
  const __m128i pick = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  size_t i = 0;
  for (; i + 8 <= n; i += 4)  // the store writes 16 bytes: stay 4 pixels short of the end
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 3 * i),
                     _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 4 * i)), pick));
  return i;
}

__attribute__((target("ssse3"))) size_t RgbToPlanesSsse3(const uint8_t* rgb, size_t n, uint8_t* r, uint8_t* g,
                                                          uint8_t* b) {
  const __m128i ra = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i rb = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1);
  const __m128i rc = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13);
  const __m128i ga = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i gb = _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1);
  const __m128i gc = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14);
  const __m128i ba = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m128i bb = _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1);
  const __m128i bc = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rgb + 3 * i));
    const __m128i m = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rgb + 3 * i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rgb + 3 * i + 32));
#define IMAGEPACK_PLANE(px, py, pz) \
  _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, px), _mm_shuffle_epi8(m, py)), _mm_shuffle_epi8(c, pz))
    _mm_storeu_si128(reinterpret_cast<__m128i*>(r + i), IMAGEPACK_PLANE(ra, rb, rc));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(g + i), IMAGEPACK_PLANE(ga, gb, gc));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b + i), IMAGEPACK_PLANE(ba, bb, bc));
#undef IMAGEPACK_PLANE
  }
  return i;
}

bool HasSsse3() {
  static const bool yes = __builtin_cpu_supports("ssse3");
  return yes;
}

}  // namespace

void RgbToPlanes(const uint8_t* rgb, size_t n, uint8_t* r, uint8_t* g, uint8_t* b) {
  size_t i = HasSsse3() ? RgbToPlanesSsse3(rgb, n, r, g, b) : 0;
  for (const uint8_t* px = rgb + 3 * i; i < n; ++i, px += 3) r[i] = px[0], g[i] = px[1], b[i] = px[2];
}

Image ConvertChannels(Image img, int channels) {
  if (img.channels == channels) return img;
  const size_t n = size_t(img.width) * img.height;
  if (channels < img.channels) {  // fewer channels: in place, front to back, no new buffer
    const uint8_t* s = img.pixels.data();
    uint8_t* d = img.pixels.data();
    if (img.channels == 4 && channels == 3) {
      size_t i = HasSsse3() ? RgbxToRgbSsse3(s, n, d) : 0;
      for (; i < n; ++i) d[3 * i] = s[4 * i], d[3 * i + 1] = s[4 * i + 1], d[3 * i + 2] = s[4 * i + 2];
    } else {
      const int cc = img.channels;
      for (size_t i = 0; i < n; ++i) d[i] = Luma(s[cc * i], s[cc * i + 1], s[cc * i + 2]);
    }
    img.channels = channels;
    img.pixels.resize(img.stride() * img.height);
    return img;
  }
  Image out;  // gray to RGB
  out.width = img.width;
  out.height = img.height;
  out.channels = channels;
  out.pixels.resize(out.stride() * out.height);
  const uint8_t* s = img.pixels.data();
  uint8_t* d = out.pixels.data();
  for (size_t i = 0; i < n; ++i, d += 3) d[0] = d[1] = d[2] = s[i];
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

}  // namespace imagepack
