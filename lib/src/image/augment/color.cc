// The AutoAugment set's pixel-wise and histogram operations, as
// torchvision.transforms.functional_tensor computes them on uint8 tensors:
// float32 arithmetic, a blend clamped to [0, 255] and truncated, the
// grayscale of 0.2989 R + 0.587 G + 0.114 B truncated, a blurred image
// rounded half to even.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "image/augment/augment_internal.h"
#include "imagepack/augment.h"

namespace imagepack {
namespace internal {

uint8_t BlendPixel(float ratio, float rest, float a, float b) {
  float v = ratio * a + rest * b;
  v = std::min(std::max(v, 0.f), 255.f);
  return static_cast<uint8_t>(v);  // truncation, as Tensor.to(uint8)
}

uint8_t GrayOf(const uint8_t* p) {
  const float g = 0.2989f * float(p[0]) + 0.587f * float(p[1]) + 0.114f * float(p[2]);
  return static_cast<uint8_t>(g);
}

namespace {

// Eight values a step with AVX2: BlendPixel's float32 operations (two
// products, their sum, the clamp, truncation), so the same bytes.
__attribute__((target("avx2"))) size_t BlendAvx2(uint8_t* px, const uint8_t* other, size_t n, float ratio,
                                                 float rest) {
  const __m256 r = _mm256_set1_ps(ratio), q = _mm256_set1_ps(rest), lo = _mm256_setzero_ps(),
               hi = _mm256_set1_ps(255.f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(px + i))));
    const __m256 b =
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(other + i))));
    const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(_mm256_mul_ps(r, a), _mm256_mul_ps(q, b)), lo), hi);
    const __m256i k = _mm256_cvttps_epi32(v);
    const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(k), _mm256_extracti128_si256(k, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(px + i), _mm_packus_epi16(w, w));
  }
  return i;
}

}  // namespace

void BlendWith(Image* img, const uint8_t* other, double factor) {
  // The two products per value from tables: the same float32 operations
  // (product, product, sum) as computing them in place.
  const BlendTables t(factor);
  uint8_t* px = img->pixels.data();
  const size_t n = size_t(img->width) * img->height * img->channels;
  size_t i = UseAvx2() ? BlendAvx2(px, other, n, static_cast<float>(factor), static_cast<float>(1.0 - factor)) : 0;
  for (; i < n; ++i) px[i] = t.Blend(px[i], other[i]);
}

BlendTables::BlendTables(double factor) {
  const float r = static_cast<float>(factor), rest = static_cast<float>(1.0 - factor);
  for (int v = 0; v < 256; ++v) a[v] = r * float(v), b[v] = rest * float(v);
}

}  // namespace internal

using internal::BlendPixel;
using internal::GrayOf;

namespace {

size_t Samples(const Image& img) { return size_t(img.width) * img.height * img.channels; }

// A blend factor in [0, 1e6]: the float32 products stay finite.
double NonNegative(double f) { return std::isfinite(f) ? std::clamp(f, 0.0, 1e6) : 0.0; }

// Sorted hue, saturation, value of one RGB pixel in [0, 1] (functional_tensor's
// _rgb2hsv, itself Pillow's), and back (_hsv2rgb).
void RgbToHsv(float r, float g, float b, float* h, float* s, float* v) {
  const float maxc = std::max(r, std::max(g, b)), minc = std::min(r, std::min(g, b));
  const bool eqc = maxc == minc;
  const float cr = maxc - minc;
  *s = cr / (eqc ? 1.f : maxc);
  const float div = eqc ? 1.f : cr;
  const float rc = (maxc - r) / div, gc = (maxc - g) / div, bc = (maxc - b) / div;
  float hh;
  if (maxc == r) hh = bc - gc;
  else if (maxc == g) hh = 2.f + rc - bc;
  else hh = 4.f + gc - rc;
  *h = std::fmod(hh / 6.f + 1.f, 1.f);
  *v = maxc;
}

void HsvToRgb(float h, float s, float v, float* rgb) {
  const float fi = std::floor(h * 6.f);
  const float f = h * 6.f - fi;
  int i = static_cast<int>(fi) % 6;
  if (i < 0) i += 6;
  const float p = std::clamp(v * (1.f - s), 0.f, 1.f);
  const float q = std::clamp(v * (1.f - s * f), 0.f, 1.f);
  const float t = std::clamp(v * (1.f - s * (1.f - f)), 0.f, 1.f);
  const float table[3][6] = {{v, q, p, p, t, v}, {t, v, v, q, p, p}, {p, p, t, v, v, q}};
  for (int c = 0; c < 3; ++c) rgb[c] = table[c][i];
}

}  // namespace

// Applies a per-value table to every sample.
void ApplyLut(Image* img, const uint8_t lut[256]) {
  uint8_t* px = img->pixels.data();
  for (size_t i = 0, n = Samples(*img); i < n; ++i) px[i] = lut[px[i]];
}

void AdjustBrightness(Image* img, double factor) {
  factor = NonNegative(factor);
  const float r = static_cast<float>(factor), rest = static_cast<float>(1.0 - factor);
  uint8_t lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = BlendPixel(r, rest, float(v), 0.f);
  ApplyLut(img, lut);
}

namespace {

// Eight RGB pixels (24 bytes at p) as three vectors of int32 channels.
struct Rgb8 {
  __m256i r, g, b;
};

// Channel c of the four pixels at byte `first` of `v`, one int32 each.
__attribute__((target("avx2"), always_inline)) inline __m128i Channel4(__m128i v, int first) {
  const char f = static_cast<char>(first);
  return _mm_shuffle_epi8(v, _mm_setr_epi8(f, -1, -1, -1, char(f + 3), -1, -1, -1, char(f + 6), -1, -1, -1,
                                           char(f + 9), -1, -1, -1));
}

__attribute__((target("avx2"), always_inline)) inline Rgb8 LoadRgb8(const uint8_t* p) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));      // pixels 0..3 (and more)
  const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8));  // bytes 8..23: pixels 4..7 from 4
  Rgb8 out;
  out.r = _mm256_set_m128i(Channel4(hi, 4), Channel4(lo, 0));
  out.g = _mm256_set_m128i(Channel4(hi, 5), Channel4(lo, 1));
  out.b = _mm256_set_m128i(Channel4(hi, 6), Channel4(lo, 2));
  return out;
}

// GrayOf's float32 operations on eight pixels, truncated: int32 values.
__attribute__((target("avx2"), always_inline)) inline __m256i Gray8(const Rgb8& px) {
  const __m256 g = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(0.2989f), _mm256_cvtepi32_ps(px.r)),
                                               _mm256_mul_ps(_mm256_set1_ps(0.587f), _mm256_cvtepi32_ps(px.g))),
                                 _mm256_mul_ps(_mm256_set1_ps(0.114f), _mm256_cvtepi32_ps(px.b)));
  return _mm256_cvttps_epi32(g);
}

// AdjustSaturation's blend of eight pixels with their gray, stored back:
// BlendPixel's operations per channel, the three channels repacked.
__attribute__((target("avx2"))) size_t SaturateAvx2(uint8_t* px, size_t pixels, float ratio, float rest) {
  const __m256 r = _mm256_set1_ps(ratio), q = _mm256_set1_ps(rest), lo = _mm256_setzero_ps(),
               hi = _mm256_set1_ps(255.f);
  const __m256i pack3 = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,  //
                                         0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const __m256i pack_lanes = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7);
  size_t i = 0;
  for (; i + 8 <= pixels; i += 8) {
    uint8_t* p = px + i * 3;
    const Rgb8 v = LoadRgb8(p);
    const __m256 gray = _mm256_mul_ps(q, _mm256_cvtepi32_ps(Gray8(v)));
    __m256i c[3] = {v.r, v.g, v.b};
    for (__m256i& x : c) {
      const __m256 y = _mm256_add_ps(_mm256_mul_ps(r, _mm256_cvtepi32_ps(x)), gray);
      x = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(y, lo), hi));
    }
    const __m256i rgb =
        _mm256_or_si256(c[0], _mm256_or_si256(_mm256_slli_epi32(c[1], 8), _mm256_slli_epi32(c[2], 16)));
    const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(rgb, pack3), pack_lanes);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(p + 16), _mm256_extracti128_si256(packed, 1));
  }
  return i;
}

// The sum of GrayOf over eight pixels at a time (exact: integers).
__attribute__((target("avx2"))) size_t GraySumAvx2(const uint8_t* px, size_t pixels, uint64_t* sum) {
  const size_t whole = pixels & ~size_t(7);
  uint64_t total = 0;
  size_t i = 0;
  while (i < whole) {
    // int32 lanes: blocks of at most 2^20 steps of 255 each, then added up.
    const size_t end = std::min(whole, i + (size_t(8) << 20));
    __m256i acc = _mm256_setzero_si256();
    for (; i < end; i += 8) acc = _mm256_add_epi32(acc, Gray8(LoadRgb8(px + i * 3)));
    alignas(32) uint32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
    for (uint32_t l : lanes) total += l;
  }
  *sum = total;
  return whole;
}

}  // namespace

void AdjustSaturation(Image* img, double factor) {
  if (img->channels != 3) return;
  factor = NonNegative(factor);
  const internal::BlendTables t(factor);
  uint8_t* px = img->pixels.data();
  const size_t n = size_t(img->width) * img->height;
  size_t i = internal::UseAvx2()
                 ? SaturateAvx2(px, n, static_cast<float>(factor), static_cast<float>(1.0 - factor))
                 : 0;
  for (; i < n; ++i) {
    uint8_t* p = px + i * 3;
    const uint8_t g = GrayOf(p);
    for (int c = 0; c < 3; ++c) p[c] = t.Blend(p[c], g);
  }
}

void AdjustContrast(Image* img, double factor) {
  factor = NonNegative(factor);
  const size_t n = size_t(img->width) * img->height;
  if (n == 0) return;
  const uint8_t* px = img->pixels.data();
  uint64_t sum = 0;
  size_t i = 0;
  if (img->channels == 3 && internal::UseAvx2()) i = GraySumAvx2(px, n, &sum);
  for (; i < n; ++i) sum += img->channels == 3 ? GrayOf(px + i * 3) : px[i * img->channels];
  const float mean = static_cast<float>(double(sum) / double(n));
  const float r = static_cast<float>(factor), rest = static_cast<float>(1.0 - factor);
  uint8_t lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = BlendPixel(r, rest, float(v), mean);
  ApplyLut(img, lut);
}

namespace {

// One row of _blurred_degenerate_image's inside: samples [C, (W - 1) * C)
// of `row`, each from its 3x3 neighbours C samples apart, in the order
// torchvision's kernel lists them.
__attribute__((always_inline)) inline void BlurRow(const uint8_t* up, const uint8_t* row, const uint8_t* down,
                                                   uint8_t* out, ptrdiff_t C, ptrdiff_t end) {
  const float k = 1.f / 13.f, kc = 5.f / 13.f;
  for (ptrdiff_t i = C; i < end; ++i) {
    float s = float(up[i - C]) * k;
    s += float(up[i]) * k;
    s += float(up[i + C]) * k;
    s += float(row[i - C]) * k;
    s += float(row[i]) * kc;
    s += float(row[i + C]) * k;
    s += float(down[i - C]) * k;
    s += float(down[i]) * k;
    s += float(down[i + C]) * k;
    out[i] = static_cast<uint8_t>(std::nearbyint(std::clamp(s, 0.f, 255.f)));
  }
}

// With SSE4.1 the rounding is in line and the loop vectorises, with AVX2
// eight values wide (no FMA: the target does not enable it); the same
// float32 operations every way.
__attribute__((target("sse4.1"))) void BlurRowsSse41(const Image& img, uint8_t* out) {
  const size_t stride = img.stride();
  const uint8_t* px = img.pixels.data();
  for (int y = 1; y < img.height - 1; ++y)
    BlurRow(px + (y - 1) * stride, px + y * stride, px + (y + 1) * stride, out + y * stride, img.channels,
            ptrdiff_t(stride) - img.channels);
}

__attribute__((target("avx2"))) void BlurRowsAvx2(const Image& img, uint8_t* out) {
  const size_t stride = img.stride();
  const uint8_t* px = img.pixels.data();
  for (int y = 1; y < img.height - 1; ++y)
    BlurRow(px + (y - 1) * stride, px + y * stride, px + (y + 1) * stride, out + y * stride, img.channels,
            ptrdiff_t(stride) - img.channels);
}

void BlurRowsBaseline(const Image& img, uint8_t* out) {
  const size_t stride = img.stride();
  const uint8_t* px = img.pixels.data();
  for (int y = 1; y < img.height - 1; ++y)
    BlurRow(px + (y - 1) * stride, px + y * stride, px + (y + 1) * stride, out + y * stride, img.channels,
            ptrdiff_t(stride) - img.channels);
}

}  // namespace

void AdjustSharpness(Image* img, double factor) {
  if (img->width <= 2 || img->height <= 2) return;
  factor = NonNegative(factor);
  // _blurred_degenerate_image: the 3x3 kernel (1 1 1 / 1 5 1 / 1 1 1) / 13
  // inside, rounded half to even; the border rows and columns as they were.
  std::vector<uint8_t> blurred(img->pixels);
  if (internal::UseAvx2()) BlurRowsAvx2(*img, blurred.data());
  else if (internal::UseSse41()) BlurRowsSse41(*img, blurred.data());
  else BlurRowsBaseline(*img, blurred.data());
  internal::BlendWith(img, blurred.data(), factor);
}

void AdjustHue(Image* img, double hue) {
  if (img->channels != 3) return;
  const float shift = static_cast<float>(std::isfinite(hue) ? std::clamp(hue, -0.5, 0.5) : 0.0);
  uint8_t* px = img->pixels.data();
  for (size_t i = 0, n = size_t(img->width) * img->height; i < n; ++i) {
    uint8_t* p = px + i * 3;
    float h, s, v, rgb[3];
    RgbToHsv(float(p[0]) / 255.f, float(p[1]) / 255.f, float(p[2]) / 255.f, &h, &s, &v);
    h = h + shift;
    h = h - std::floor(h);  // Python's % 1.0
    if (h >= 1.f) h = 0.f;
    HsvToRgb(h, s, v, rgb);
    for (int c = 0; c < 3; ++c) p[c] = static_cast<uint8_t>(std::clamp(rgb[c] * 255.f, 0.f, 255.f));
  }
}

void Posterize(Image* img, int bits) {
  bits = std::clamp(bits, 0, 8);
  const uint8_t mask = static_cast<uint8_t>(~((1u << (8 - bits)) - 1u));
  uint8_t* px = img->pixels.data();
  for (size_t i = 0, n = Samples(*img); i < n; ++i) px[i] &= mask;
}

void Solarize(Image* img, double threshold) {
  const float t = static_cast<float>(std::isnan(threshold) ? 256.0 : threshold);
  uint8_t lut[256];
  for (int v = 0; v < 256; ++v) lut[v] = float(v) >= t ? static_cast<uint8_t>(255 - v) : static_cast<uint8_t>(v);
  ApplyLut(img, lut);
}

namespace {

// Per channel, one table applied to every sample of that channel: the
// value's own float32 arithmetic, computed once per grey level.
void ApplyChannelLuts(Image* img, const uint8_t (*lut)[256]) {
  const int C = img->channels;
  const size_t n = size_t(img->width) * img->height;
  uint8_t* px = img->pixels.data();
  if (C == 3) {
    for (size_t i = 0; i < n; ++i, px += 3) px[0] = lut[0][px[0]], px[1] = lut[1][px[1]], px[2] = lut[2][px[2]];
  } else {
    for (size_t i = 0; i < n * size_t(C); ++i) px[i] = lut[i % size_t(C)][px[i]];
  }
}

}  // namespace

void AutoContrast(Image* img) {
  const int C = img->channels;
  if (C < 1 || C > 4) return;
  const size_t n = size_t(img->width) * img->height;
  const uint8_t* px = img->pixels.data();
  uint8_t lo[4] = {255, 255, 255, 255}, hi[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < n; ++i)
    for (int c = 0; c < C; ++c) lo[c] = std::min(lo[c], px[i * C + c]), hi[c] = std::max(hi[c], px[i * C + c]);
  uint8_t lut[4][256];
  for (int c = 0; c < C; ++c) {
    float minimum = float(lo[c]), scale = 1.f;
    if (hi[c] != lo[c]) scale = 255.f / (float(hi[c]) - float(lo[c]));
    else minimum = 0.f;
    for (int v = 0; v < 256; ++v)
      lut[c][v] = static_cast<uint8_t>(std::clamp((float(v) - minimum) * scale, 0.f, 255.f));
  }
  ApplyChannelLuts(img, lut);
}

void Equalize(Image* img) {
  const int C = img->channels;
  if (C < 1 || C > 4) return;
  const size_t n = size_t(img->width) * img->height;
  const uint8_t* px = img->pixels.data();
  int64_t hist[4][256] = {};
  for (size_t i = 0; i < n; ++i)
    for (int c = 0; c < C; ++c) ++hist[c][px[i * C + c]];
  uint8_t lut[4][256];
  for (int c = 0; c < C; ++c) {
    for (int v = 0; v < 256; ++v) lut[c][v] = static_cast<uint8_t>(v);  // a flat channel is left as it is
    // step: the count of every value but the last one present, over 255.
    int last = 255;
    while (last > 0 && hist[c][last] == 0) --last;
    int64_t total = 0;
    for (int v = 0; v < last; ++v) total += hist[c][v];
    const int64_t step = total / 255;
    if (step == 0) continue;
    int64_t cum = 0;
    for (int v = 0; v < 256; ++v) {
      lut[c][v] = static_cast<uint8_t>(std::min<int64_t>(255, (cum + step / 2) / step));
      cum += hist[c][v];
    }
  }
  ApplyChannelLuts(img, lut);
}

void Invert(Image* img) {
  uint8_t* px = img->pixels.data();
  for (size_t i = 0, n = Samples(*img); i < n; ++i) px[i] = static_cast<uint8_t>(255 - px[i]);
}

}  // namespace imagepack
