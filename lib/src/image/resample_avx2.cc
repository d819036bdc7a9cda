// AVX2 kernels of the resampler. The library is built for baseline x86-64;
// these functions are compiled for AVX2 one by one (target attributes) and
// run only where the CPU has it (resample.cc checks once).
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "image/resample_kernels.h"

namespace imagepack::internal {

#if defined(IMAGEPACK_HAVE_AVX2_KERNELS)
namespace {

// The four outputs x..x+3 of one row (3 or 4 interleaved channels): tap
// pairs accumulated as int32 (two outputs per register, one per 128-bit
// lane), scaled back and packed to int16: lanes [x, x+2 | x+1, x+3], four
// channels each. `w` holds the group's expanded weights (see below).
template <int C>
__attribute__((target("avx2"), always_inline)) inline __m256i GroupSums16(const uint8_t* s, const AxisWeights& aw,
                                                                         int x, const int32_t* w, int max_pairs,
                                                                         int pairs, __m128i interleave) {
  const uint8_t* p0 = s + size_t(aw.start[x]) * C;
  const uint8_t* p1 = s + size_t(aw.start[x + 1]) * C;
  const uint8_t* p2 = s + size_t(aw.start[x + 2]) * C;
  const uint8_t* p3 = s + size_t(aw.start[x + 3]) * C;
  const __m256i* w01 = reinterpret_cast<const __m256i*>(w);
  const __m256i* w23 = reinterpret_cast<const __m256i*>(w + size_t(max_pairs) * 8);
  const __m256i round = _mm256_set1_epi32(1 << (kPrec - 1));
  __m256i a01 = round, a23 = round;
  for (int p = 0; p < pairs; ++p) {
    const size_t o = size_t(2 * p) * C;
    __m128i v01 = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p0 + o)),
                                     _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p1 + o)));
    __m128i v23 = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p2 + o)),
                                     _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p3 + o)));
    v01 = _mm_shuffle_epi8(v01, interleave);
    v23 = _mm_shuffle_epi8(v23, interleave);
    a01 = _mm256_add_epi32(a01, _mm256_madd_epi16(_mm256_cvtepu8_epi16(v01), _mm256_loadu_si256(w01 + p)));
    a23 = _mm256_add_epi32(a23, _mm256_madd_epi16(_mm256_cvtepu8_epi16(v23), _mm256_loadu_si256(w23 + p)));
  }
  return _mm256_packs_epi32(_mm256_srai_epi32(a01, kPrec), _mm256_srai_epi32(a23, kPrec));
}

// AVX2, 3 or 4 interleaved channels: four outputs per step. Each 128-bit
// lane holds one output's two taps of every channel as int16 (r0 r1 g0 g1
// b0 b1 x0 x1), so one _mm256_madd_epi16 applies a tap pair to two outputs.
// Taps past an output's count have weight 0; outputs whose padded taps
// would read past the row end, and the last dst_w % 4, are done in scalar.
// kPlanar: the first three channels go to three planes (`planes`, row y
// of plane c at planes->p[c] + y * planes->stride) instead of `dst`.
template <int C, bool kPlanar = false>
__attribute__((target("avx2"))) void HorizontalPassAvx2T(const uint8_t* src, size_t src_stride, int src_w,
                                                        int rows, uint8_t* dst, size_t dst_stride, int dst_w,
                                                        const AxisWeights& aw, const Planes* planes = nullptr) {
  static_assert(C == 3 || C == 4, "3 or 4 channels");
  const int groups = dst_w / 4;
  // Per group of four: tap pairs to run (the most any of the four needs),
  // and the weights expanded to one 256-bit vector per (output pair, tap
  // pair): [w(x) w(x) w(x) w(x) | w(x+1) ...] as packed int16 pairs.
  thread_local std::vector<int32_t> we;
  thread_local std::vector<int> gpairs;
  int max_pairs = 1;
  for (int x = 0; x < dst_w; ++x) max_pairs = std::max(max_pairs, (aw.count[x] + 1) / 2);
  gpairs.assign(size_t(groups), 0);
  we.assign(size_t(groups) * 2 * max_pairs * 8, 0);
  for (int g = 0; g < groups; ++g) {
    int np = 0;
    for (int j = 0; j < 4; ++j) np = std::max(np, (aw.count[g * 4 + j] + 1) / 2);
    bool inside = true;  // every 8-byte load of every tap pair within the row
    for (int j = 0; j < 4; ++j) inside &= (aw.start[g * 4 + j] + 2 * (np - 1)) * C + 8 <= src_w * C;
    if (!inside) continue;  // gpairs[g] == 0: this group is done in scalar
    gpairs[g] = np;
    for (int j = 0; j < 4; ++j) {
      const int x = g * 4 + j;
      const int32_t* w = &aw.w[size_t(x) * aw.taps];
      for (int p = 0; p < np; ++p) {
        const int k = 2 * p;
        const uint32_t lo = k < aw.count[x] ? uint32_t(w[k]) & 0xFFFF : 0;
        const uint32_t hi = k + 1 < aw.count[x] ? uint32_t(w[k + 1]) << 16 : 0;
        int32_t* dstw = &we[((size_t(g) * 2 + j / 2) * max_pairs + p) * 8 + (j % 2) * 4];
        for (int c = 0; c < 4; ++c) dstw[c] = int32_t(hi | lo);
      }
    }
  }
  const __m128i interleave = C == 4 ? _mm_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15)
                                    : _mm_setr_epi8(0, 3, 1, 4, 2, 5, -1, -1, 8, 11, 9, 12, 10, 13, -1, -1);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0);
  const __m128i compact3 = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const __m128i split = _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m256i split8 = _mm256_broadcastsi128_si256(split);
  for (int y = 0; y < rows; ++y) {
    const uint8_t* s = src + size_t(y) * src_stride;
    uint8_t* d = dst + size_t(y) * dst_stride;
    for (int g = 0; g < groups; ++g) {
      const int x = g * 4;
      if (gpairs[g] == 0) {
        for (int j = 0; j < 4; ++j) {
          if (kPlanar) ScalarOutputPlanar<C>(s, aw, x + j, *planes, size_t(y));
          else ScalarOutput<C>(s, aw, x + j, d + size_t(x + j) * C);
        }
        continue;
      }
      const __m256i s16 = GroupSums16<C>(s, aw, x, &we[(size_t(g) * 2) * max_pairs * 8], max_pairs, gpairs[g],
                                         interleave);
      if (kPlanar && g + 1 < groups && gpairs[g + 1] != 0) {
        // Eight outputs: both groups' bytes in one register (lanes:
        // [x0 x2 x4 x6 | x1 x3 x5 x7], 4 channels each), each channel's
        // bytes gathered per lane, then the two lanes interleaved: 8 bytes
        // of R, G and B in output order.
        const __m256i s16b = GroupSums16<C>(s, aw, x + 4, &we[(size_t(g + 1) * 2) * max_pairs * 8], max_pairs,
                                            gpairs[g + 1], interleave);
        const __m256i bytes = _mm256_shuffle_epi8(_mm256_packus_epi16(s16, s16b), split8);
        const __m128i lo = _mm256_castsi256_si128(bytes), hi = _mm256_extracti128_si256(bytes, 1);
        const __m128i rg = _mm_unpacklo_epi8(lo, hi), bx = _mm_unpackhi_epi8(lo, hi);
        const size_t at = size_t(y) * planes->stride + size_t(x);
        _mm_storel_epi64(reinterpret_cast<__m128i*>(planes->p[0] + at), rg);
        _mm_storeh_pd(reinterpret_cast<double*>(planes->p[1] + at), _mm_castsi128_pd(rg));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(planes->p[2] + at), bx);
        ++g;
        continue;
      }
      // lanes: [x0 x2 | x1 x3] as int16, then bytes; reorder to x0 x1 x2 x3.
      __m256i b = _mm256_packus_epi16(s16, _mm256_setzero_si256());
      __m128i out = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(b, order));
      if (kPlanar) {
        out = _mm_shuffle_epi8(out, split);  // r0-3 g0-3 b0-3 -
        const int32_t r = _mm_cvtsi128_si32(out), gg = _mm_extract_epi32(out, 1), b = _mm_extract_epi32(out, 2);
        const size_t at = size_t(y) * planes->stride + size_t(x);
        std::memcpy(planes->p[0] + at, &r, 4);
        std::memcpy(planes->p[1] + at, &gg, 4);
        std::memcpy(planes->p[2] + at, &b, 4);
      } else if (C == 4) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + size_t(x) * 4), out);
      } else {
        out = _mm_shuffle_epi8(out, compact3);
        _mm_storel_epi64(reinterpret_cast<__m128i*>(d + size_t(x) * 3), out);
        const int32_t tail = _mm_extract_epi32(out, 2);
        std::memcpy(d + size_t(x) * 3 + 8, &tail, 4);
      }
    }
    for (int x = groups * 4; x < dst_w; ++x) {
      if (kPlanar) ScalarOutputPlanar<C>(s, aw, x, *planes, size_t(y));
      else ScalarOutput<C>(s, aw, x, d + size_t(x) * C);
    }
  }
}

// AVX2 vertical pass: the SSE2 kernel below on 32 bytes at a time (the
// unpack and pack steps work within 128-bit lanes, so bytes stay in order).
__attribute__((target("avx2"))) size_t VerticalRowAvx2Impl(const uint8_t* rows0, size_t src_stride, size_t row_bytes,
                                                       const int32_t* w, int n, uint8_t* d) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i round = _mm256_set1_epi32(1 << (kPrec - 1));
  size_t i = 0;
  for (; i + 32 <= row_bytes; i += 32) {
    __m256i a0 = round, a1 = round, a2 = round, a3 = round;
    int k = 0;
    for (; k + 1 < n; k += 2) {
      __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows0 + size_t(k) * src_stride + i));
      __m256i r1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows0 + size_t(k + 1) * src_stride + i));
      __m256i wv = _mm256_set1_epi32(int32_t((uint32_t(w[k + 1]) << 16) | (uint32_t(w[k]) & 0xFFFF)));
      __m256i lo = _mm256_unpacklo_epi8(r0, r1), hi = _mm256_unpackhi_epi8(r0, r1);
      a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), wv));
      a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), wv));
      a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), wv));
      a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), wv));
    }
    if (k < n) {
      __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows0 + size_t(k) * src_stride + i));
      __m256i wv = _mm256_set1_epi32(w[k] & 0xFFFF);
      __m256i lo = _mm256_unpacklo_epi8(r0, zero), hi = _mm256_unpackhi_epi8(r0, zero);
      a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi16(lo, zero), wv));
      a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi16(lo, zero), wv));
      a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi16(hi, zero), wv));
      a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi16(hi, zero), wv));
    }
    a0 = _mm256_srai_epi32(a0, kPrec);
    a1 = _mm256_srai_epi32(a1, kPrec);
    a2 = _mm256_srai_epi32(a2, kPrec);
    a3 = _mm256_srai_epi32(a3, kPrec);
    __m256i out = _mm256_packus_epi16(_mm256_packs_epi32(a0, a1), _mm256_packs_epi32(a2, a3));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), out);
  }
  return i;
}

}  // namespace

void HorizontalPassAvx2(int channels, const uint8_t* src, size_t src_stride, int src_w, int rows, uint8_t* dst,
                        size_t dst_stride, int dst_w, const AxisWeights& aw, const Planes* planes) {
  if (channels == 3) {
    if (planes) HorizontalPassAvx2T<3, true>(src, src_stride, src_w, rows, nullptr, 0, dst_w, aw, planes);
    else HorizontalPassAvx2T<3>(src, src_stride, src_w, rows, dst, dst_stride, dst_w, aw);
  } else {
    if (planes) HorizontalPassAvx2T<4, true>(src, src_stride, src_w, rows, nullptr, 0, dst_w, aw, planes);
    else HorizontalPassAvx2T<4>(src, src_stride, src_w, rows, dst, dst_stride, dst_w, aw);
  }
}

size_t VerticalRowAvx2(const uint8_t* rows0, size_t src_stride, size_t row_bytes, const int32_t* w, int n,
                       uint8_t* d) {
  return VerticalRowAvx2Impl(rows0, src_stride, row_bytes, w, n, d);
}
#endif

}  // namespace imagepack::internal
