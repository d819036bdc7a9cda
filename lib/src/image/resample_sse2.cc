// SSE2 kernels of the resampler (every x86-64 CPU has SSE2).
#include <emmintrin.h>

#include <cstring>
#include <vector>

#include "image/resample_kernels.h"

namespace imagepack::internal {

#if defined(__SSE2__)
// 4 interleaved channels (RGBX): two taps per _mm_madd_epi16, all four
// channels at once. Weights fit int16 (|w| <= 2^14 + rounding slack).
void HorizontalPass4Sse2(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst,
                         size_t dst_stride, int dst_w, const AxisWeights& aw) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i round = _mm_set1_epi32(1 << (kPrec - 1));
  // Weights packed once as int16 pairs (w[k], w[k+1]) per output pixel, the
  // form _mm_madd_epi16 takes; an odd last tap pairs with 0.
  const int pairs = (aw.taps + 1) / 2;
  thread_local std::vector<int32_t> wp;
  wp.assign(size_t(dst_w) * pairs, 0);
  for (int x = 0; x < dst_w; ++x) {
    const int32_t* w = &aw.w[size_t(x) * aw.taps];
    for (int k = 0; k < aw.count[x]; k += 2) {
      const uint32_t hi = k + 1 < aw.count[x] ? uint32_t(w[k + 1]) << 16 : 0;
      wp[size_t(x) * pairs + k / 2] = int32_t(hi | (uint32_t(w[k]) & 0xFFFF));
    }
  }
  for (int y = 0; y < rows; ++y) {
    const uint8_t* s = src + size_t(y) * src_stride;
    uint8_t* d = dst + size_t(y) * dst_stride;
    for (int x = 0; x < dst_w; ++x) {
      const uint8_t* p = s + size_t(aw.start[x]) * 4;
      const int32_t* w = &wp[size_t(x) * pairs];
      const int n = aw.count[x];
      __m128i acc = round;
      int k = 0;
      for (; k + 1 < n; k += 2) {
        // r0 r1 g0 g1 b0 b1 x0 x1 as int16 from two adjacent pixels
        __m128i pix = _mm_unpacklo_epi8(_mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + k * 4)),
                                                          _mm_srli_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + k * 4)), 4)),
                                        zero);
        acc = _mm_add_epi32(acc, _mm_madd_epi16(pix, _mm_set1_epi32(w[k / 2])));
      }
      if (k < n) {
        int32_t a;
        std::memcpy(&a, p + k * 4, 4);
        __m128i pix = _mm_unpacklo_epi8(_mm_unpacklo_epi8(_mm_cvtsi32_si128(a), zero), zero);
        acc = _mm_add_epi32(acc, _mm_madd_epi16(pix, _mm_set1_epi32(w[k / 2])));
      }
      acc = _mm_srai_epi32(acc, kPrec);
      __m128i packed = _mm_packus_epi16(_mm_packs_epi32(acc, zero), zero);
      int32_t out = _mm_cvtsi128_si32(packed);
      std::memcpy(d + size_t(x) * 4, &out, 4);
    }
  }
}

// Three interleaved channels: like the 4-channel kernel, loading 4 bytes per
// pixel (the 4th belongs to the next pixel and its lane is discarded). An
// output whose last tap is the row's last pixel would read past the row, so
// it takes the scalar path.
void HorizontalPass3Sse2(const uint8_t* src, size_t src_stride, int src_w, int rows, uint8_t* dst,
                         size_t dst_stride, int dst_w, const AxisWeights& aw) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i round = _mm_set1_epi32(1 << (kPrec - 1));
  for (int y = 0; y < rows; ++y) {
    const uint8_t* s = src + size_t(y) * src_stride;
    uint8_t* d = dst + size_t(y) * dst_stride;
    for (int x = 0; x < dst_w; ++x) {
      const int n = aw.count[x];
      const int32_t* w = &aw.w[size_t(x) * aw.taps];
      const uint8_t* p = s + size_t(aw.start[x]) * 3;
      if (aw.start[x] + n >= src_w) {
        int32_t acc[3] = {1 << (kPrec - 1), 1 << (kPrec - 1), 1 << (kPrec - 1)};
        for (int k = 0; k < n; ++k)
          for (int c = 0; c < 3; ++c) acc[c] += w[k] * p[k * 3 + c];
        for (int c = 0; c < 3; ++c) d[x * 3 + c] = Clamp8(acc[c]);
        continue;
      }
      __m128i acc = round;
      int k = 0;
      for (; k + 1 < n; k += 2) {
        int32_t a, b;
        std::memcpy(&a, p + k * 3, 4);
        std::memcpy(&b, p + k * 3 + 3, 4);
        __m128i pix = _mm_unpacklo_epi8(_mm_unpacklo_epi8(_mm_cvtsi32_si128(a), _mm_cvtsi32_si128(b)), zero);
        __m128i wv = _mm_set1_epi32(int32_t((uint32_t(w[k + 1]) << 16) | (uint32_t(w[k]) & 0xFFFF)));
        acc = _mm_add_epi32(acc, _mm_madd_epi16(pix, wv));
      }
      if (k < n) {
        int32_t a;
        std::memcpy(&a, p + k * 3, 4);
        __m128i pix = _mm_unpacklo_epi8(_mm_unpacklo_epi8(_mm_cvtsi32_si128(a), zero), zero);
        acc = _mm_add_epi32(acc, _mm_madd_epi16(pix, _mm_set1_epi32(w[k] & 0xFFFF)));
      }
      acc = _mm_srai_epi32(acc, kPrec);
      int32_t out = _mm_cvtsi128_si32(_mm_packus_epi16(_mm_packs_epi32(acc, zero), zero));
      std::memcpy(d + size_t(x) * 3, &out, 3);
    }
  }
}

// Output x of a one-channel row, without SIMD (the kernels' row ends).
inline uint8_t ScalarTap1(const uint8_t* s, const AxisWeights& aw, int x) {
  const int32_t* w = &aw.w[size_t(x) * aw.taps];
  int32_t a = 1 << (kPrec - 1);
  for (int k = 0; k < aw.count[x]; ++k) a += w[k] * s[aw.start[x] + k];
  return Clamp8(a);
}

// Weights as int16, `width` per output pixel (zero-padded), for the
// one-channel kernels.
std::vector<int16_t> PackWeights16(const AxisWeights& aw, int dst_w, int width) {
  std::vector<int16_t> w16(size_t(dst_w) * width, 0);
  for (int x = 0; x < dst_w; ++x)
    for (int k = 0; k < aw.count[x]; ++k)
      w16[size_t(x) * width + k] = static_cast<int16_t>(aw.w[size_t(x) * aw.taps + k]);
  return w16;
}

// How many leading outputs (a multiple of 4) can read a `window`-byte span
// from their first tap without leaving the row: those take the SIMD path.
int SimdEnd(const AxisWeights& aw, int dst_w, int src_w, int window) {
  int end = 0;
  while (end < dst_w && aw.start[end] + window <= src_w) ++end;
  return end & ~3;
}

// One channel, at most 4 taps (the usual case after DCT-domain shrinking):
// two outputs share one register, four outputs take two _mm_madd_epi16.
void HorizontalPass1Sse2Taps4(const uint8_t* src, size_t src_stride, int src_w, int rows,
                              uint8_t* dst, size_t dst_stride, int dst_w, const AxisWeights& aw) {
  const std::vector<int16_t> w16 = PackWeights16(aw, dst_w, 4);
  const int simd_end = SimdEnd(aw, dst_w, src_w, 4);
  const __m128i zero = _mm_setzero_si128();
  const __m128i round = _mm_set1_epi32(1 << (kPrec - 1));
  for (int y = 0; y < rows; ++y) {
    const uint8_t* s = src + size_t(y) * src_stride;
    uint8_t* d = dst + size_t(y) * dst_stride;
    int x = 0;
    for (; x < simd_end; x += 4) {
      int32_t q[4];
      for (int j = 0; j < 4; ++j) std::memcpy(&q[j], s + aw.start[x + j], 4);
      // bytes of outputs 0,1 | 2,3 widened to int16: [p0..p3 q0..q3]
      __m128i v01 = _mm_unpacklo_epi8(_mm_unpacklo_epi32(_mm_cvtsi32_si128(q[0]), _mm_cvtsi32_si128(q[1])), zero);
      __m128i v23 = _mm_unpacklo_epi8(_mm_unpacklo_epi32(_mm_cvtsi32_si128(q[2]), _mm_cvtsi32_si128(q[3])), zero);
      __m128i w01 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&w16[size_t(x) * 4]));
      __m128i w23 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&w16[size_t(x) * 4 + 8]));
      __m128i m01 = _mm_madd_epi16(v01, w01);  // [o0a o0b o1a o1b]
      __m128i m23 = _mm_madd_epi16(v23, w23);  // [o2a o2b o3a o3b]
      // [o0a o2a o0b o2b] + [o1a o3a o1b o3b] -> pairwise sums in order.
      __m128i t0 = _mm_unpacklo_epi32(m01, m23);  // o0a o2a o0b o2b
      __m128i t1 = _mm_unpackhi_epi32(m01, m23);  // o1a o3a o1b o3b
      __m128i u0 = _mm_unpacklo_epi32(t0, t1);    // o0a o1a o2a o3a
      __m128i u1 = _mm_unpackhi_epi32(t0, t1);    // o0b o1b o2b o3b
      __m128i sum = _mm_srai_epi32(_mm_add_epi32(_mm_add_epi32(u0, u1), round), kPrec);
      int32_t out = _mm_cvtsi128_si32(_mm_packus_epi16(_mm_packs_epi32(sum, zero), zero));
      std::memcpy(d + x, &out, 4);
    }
    for (; x < dst_w; ++x) d[x] = ScalarTap1(s, aw, x);
  }
}

// One channel: each output is a dot product of up to T8 consecutive bytes
// (taps zero-padded to a multiple of 8) with int16 weights; four outputs are
// computed together and reduced with one transpose-add.
void HorizontalPass1Sse2(const uint8_t* src, size_t src_stride, int src_w, int rows, uint8_t* dst,
                         size_t dst_stride, int dst_w, const AxisWeights& aw) {
  int max_count = 0;
  for (int c : aw.count) max_count = std::max(max_count, c);
  if (max_count <= 4) {
    HorizontalPass1Sse2Taps4(src, src_stride, src_w, rows, dst, dst_stride, dst_w, aw);
    return;
  }
  const int t8 = (aw.taps + 7) / 8 * 8;
  const std::vector<int16_t> w16 = PackWeights16(aw, dst_w, t8);
  const int simd_end = SimdEnd(aw, dst_w, src_w, t8);
  const __m128i zero = _mm_setzero_si128();
  const __m128i round = _mm_set1_epi32(1 << (kPrec - 1));
  for (int y = 0; y < rows; ++y) {
    const uint8_t* s = src + size_t(y) * src_stride;
    uint8_t* d = dst + size_t(y) * dst_stride;
    int x = 0;
    for (; x < simd_end; x += 4) {
      __m128i acc[4];
      for (int j = 0; j < 4; ++j) {
        const uint8_t* p = s + aw.start[x + j];
        const int16_t* w = &w16[size_t(x + j) * t8];
        __m128i a = zero;
        for (int c = 0; c < t8; c += 8) {
          __m128i pix = _mm_unpacklo_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + c)), zero);
          a = _mm_add_epi32(a, _mm_madd_epi16(pix, _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + c))));
        }
        acc[j] = a;
      }
      __m128i s01 = _mm_add_epi32(_mm_unpacklo_epi32(acc[0], acc[1]), _mm_unpackhi_epi32(acc[0], acc[1]));
      __m128i s23 = _mm_add_epi32(_mm_unpacklo_epi32(acc[2], acc[3]), _mm_unpackhi_epi32(acc[2], acc[3]));
      __m128i sum = _mm_add_epi32(_mm_unpacklo_epi64(s01, s23), _mm_unpackhi_epi64(s01, s23));
      sum = _mm_srai_epi32(_mm_add_epi32(sum, round), kPrec);
      int32_t out = _mm_cvtsi128_si32(_mm_packus_epi16(_mm_packs_epi32(sum, zero), zero));
      std::memcpy(d + x, &out, 4);
    }
    for (; x < dst_w; ++x) d[x] = ScalarTap1(s, aw, x);
  }
}

size_t VerticalRowSse2(const uint8_t* rows0, size_t src_stride, size_t row_bytes, const int32_t* w, int n,
                       uint8_t* d, size_t from) {
  size_t i = from;
  const __m128i zero = _mm_setzero_si128();
  const __m128i round = _mm_set1_epi32(1 << (kPrec - 1));
  for (; i + 16 <= row_bytes; i += 16) {
    __m128i a0 = round, a1 = round, a2 = round, a3 = round;
    int k = 0;
    for (; k + 1 < n; k += 2) {
      __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows0 + size_t(k) * src_stride + i));
      __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows0 + size_t(k + 1) * src_stride + i));
      __m128i wv = _mm_set1_epi32(int32_t((uint32_t(w[k + 1]) << 16) | (uint32_t(w[k]) & 0xFFFF)));
      __m128i lo = _mm_unpacklo_epi8(r0, r1), hi = _mm_unpackhi_epi8(r0, r1);
      a0 = _mm_add_epi32(a0, _mm_madd_epi16(_mm_unpacklo_epi8(lo, zero), wv));
      a1 = _mm_add_epi32(a1, _mm_madd_epi16(_mm_unpackhi_epi8(lo, zero), wv));
      a2 = _mm_add_epi32(a2, _mm_madd_epi16(_mm_unpacklo_epi8(hi, zero), wv));
      a3 = _mm_add_epi32(a3, _mm_madd_epi16(_mm_unpackhi_epi8(hi, zero), wv));
    }
    if (k < n) {
      __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows0 + size_t(k) * src_stride + i));
      __m128i wv = _mm_set1_epi32(w[k] & 0xFFFF);
      __m128i lo = _mm_unpacklo_epi8(r0, zero), hi = _mm_unpackhi_epi8(r0, zero);
      a0 = _mm_add_epi32(a0, _mm_madd_epi16(_mm_unpacklo_epi16(lo, zero), wv));
      a1 = _mm_add_epi32(a1, _mm_madd_epi16(_mm_unpackhi_epi16(lo, zero), wv));
      a2 = _mm_add_epi32(a2, _mm_madd_epi16(_mm_unpacklo_epi16(hi, zero), wv));
      a3 = _mm_add_epi32(a3, _mm_madd_epi16(_mm_unpackhi_epi16(hi, zero), wv));
    }
    a0 = _mm_srai_epi32(a0, kPrec);
    a1 = _mm_srai_epi32(a1, kPrec);
    a2 = _mm_srai_epi32(a2, kPrec);
    a3 = _mm_srai_epi32(a3, kPrec);
    __m128i out = _mm_packus_epi16(_mm_packs_epi32(a0, a1), _mm_packs_epi32(a2, a3));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), out);
  }
  return i;
}
#endif

}  // namespace imagepack::internal
