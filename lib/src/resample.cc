// Separable antialiased resampling with precomputed fixed-point weights.
//
// For each output pixel the filter is stretched by the downscale factor so
// every source pixel contributes (the "antialias" behaviour Pillow and
// libvips use); for upscaling it is the plain interpolation kernel. Weights
// are rounded to 14-bit fixed point and then corrected so each set sums to
// exactly 1 << 14, which keeps flat regions exactly flat.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include <atomic>

#include "imagepack/image.h"
#include "resample_internal.h"

namespace imagepack {
namespace {

constexpr int kPrec = 14;
constexpr int32_t kOne = 1 << kPrec;
constexpr double kPi = 3.14159265358979323846;

// Which kernels run: AVX2 where the CPU has it (checked once at run time;
// the rest of the library is built for the baseline x86-64), else SSE2, else
// plain C++. All three give bit-identical results (same integer arithmetic).
std::atomic<int> g_simd{-1};

int DetectSimd() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) return static_cast<int>(SimdLevel::kAvx2);
#endif
#if defined(__SSE2__)
  return static_cast<int>(SimdLevel::kSse2);
#else
  return static_cast<int>(SimdLevel::kScalar);
#endif
}

SimdLevel Simd() {
  int v = g_simd.load(std::memory_order_relaxed);
  if (v < 0) {
    v = DetectSimd();
    g_simd.store(v, std::memory_order_relaxed);
  }
  return static_cast<SimdLevel>(v);
}

// Per-thread scratch that keeps its capacity between calls: the loader
// resamples thousands of images per second per thread, and a fresh 100-200 KB
// buffer each time costs page faults and zeroing.
uint8_t* Scratch(std::vector<uint8_t>& v, size_t bytes) {
  if (v.size() < bytes) v.resize(bytes);
  return v.data();
}

// The intermediate image between the two passes (one per thread).
uint8_t* PassScratch(size_t bytes) {
  thread_local std::vector<uint8_t> v;
  return Scratch(v, bytes);
}

double Sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= kPi;
  return std::sin(x) / x;
}

double FilterSupport(ResampleFilter f) {
  switch (f) {
    case ResampleFilter::kBox: return 0.5;
    case ResampleFilter::kTriangle: return 1.0;
    case ResampleFilter::kCatmullRom: return 2.0;
    case ResampleFilter::kLanczos3: return 3.0;
  }
  return 1.0;
}

double FilterValue(ResampleFilter f, double x) {
  x = std::fabs(x);
  switch (f) {
    case ResampleFilter::kBox: return x <= 0.5 ? 1.0 : 0.0;
    case ResampleFilter::kTriangle: return x < 1.0 ? 1.0 - x : 0.0;
    case ResampleFilter::kCatmullRom: {
      const double a = -0.5;
      if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
      if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
      return 0.0;
    }
    case ResampleFilter::kLanczos3: return x < 3.0 ? Sinc(x) * Sinc(x / 3.0) : 0.0;
  }
  return 0.0;
}

// floor() for the coordinates and weights here (|x| < 2^31), inline: the
// baseline x86-64 build has no SSE4.1 round instruction, and std::floor
// then becomes a library call, hundreds per image.
inline int FloorInt(double x) {
  const int i = static_cast<int>(x);  // truncates toward zero
  return i - (x < i);
}

// Weights for one axis: out[i] = sum_k w[i][k] * in[start[i] + k].
struct AxisWeights {
  int taps = 0;                  // max taps per output (rows padded with 0)
  std::vector<int> start;
  std::vector<int> count;
  std::vector<int32_t> w;        // out_size * taps
};

// Output pixel i covers [offset + i * scale, offset + (i + 1) * scale) of the
// input axis, scale = span / out_size; taps are clamped to [0, in_size).
AxisWeights ComputeWeights(int in_size, int out_size, ResampleFilter filter, double offset = 0,
                           double span = -1) {
  if (span <= 0) span = in_size;
  const double scale = span / out_size;
  const double fscale = std::max(scale, 1.0);
  const double support = FilterSupport(filter) * fscale;
  AxisWeights aw;
  aw.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  aw.start.resize(out_size);
  aw.count.resize(out_size);
  aw.w.assign(size_t(out_size) * aw.taps, 0);
  thread_local std::vector<double> tmp;
  tmp.assign(size_t(aw.taps), 0.0);
  const double inv_fscale = 1.0 / fscale;
  for (int i = 0; i < out_size; ++i) {
    const double center = offset + (i + 0.5) * scale;
    int lo = std::max(FloorInt(center - support + 0.5), 0);
    int hi = std::min(FloorInt(center + support + 0.5), in_size);
    if (hi - lo > aw.taps) hi = lo + aw.taps;
    if (hi <= lo) { lo = std::min(static_cast<int>(center), in_size - 1); hi = lo + 1; }
    double total = 0.0;
    for (int x = lo; x < hi; ++x) {
      tmp[x - lo] = FilterValue(filter, (x + 0.5 - center) * inv_fscale);
      total += tmp[x - lo];
    }
    if (total == 0.0) {  // degenerate: nearest neighbour
      std::fill(tmp.begin(), tmp.end(), 0.0);
      lo = std::min(static_cast<int>(center), in_size - 1);
      hi = lo + 1;
      tmp[0] = total = 1.0;
    }
    int32_t* w = &aw.w[size_t(i) * aw.taps];
    int32_t sum = 0;
    int biggest = 0;
    const double norm = kOne / total;
    for (int k = 0; k < hi - lo; ++k) {
      w[k] = FloorInt(tmp[k] * norm + 0.5);  // >= 0 except for negative lobes
      sum += w[k];
      if (w[k] > w[biggest]) biggest = k;
    }
    w[biggest] += kOne - sum;
    aw.start[i] = lo;
    aw.count[i] = hi - lo;
  }
  return aw;
}

// Output i takes what output n-1-i had: a horizontally mirrored result for
// the cost of reordering the weight sets.
void MirrorAxis(AxisWeights* aw) {
  const int n = static_cast<int>(aw->start.size());
  for (int i = 0, j = n - 1; i < j; ++i, --j) {
    std::swap(aw->start[i], aw->start[j]);
    std::swap(aw->count[i], aw->count[j]);
    std::swap_ranges(aw->w.begin() + size_t(i) * aw->taps, aw->w.begin() + size_t(i + 1) * aw->taps,
                     aw->w.begin() + size_t(j) * aw->taps);
  }
}

inline uint8_t Clamp8(int32_t v) {
  v >>= kPrec;
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// Output x of one row, C interleaved channels, in plain C++: C bytes to
// `out` (the output pixel).
template <int C>
inline void ScalarOutput(const uint8_t* row, const AxisWeights& aw, int x, uint8_t* out) {
  const uint8_t* p = row + size_t(aw.start[x]) * C;
  const int32_t* w = &aw.w[size_t(x) * aw.taps];
  int32_t acc[C];
  for (int c = 0; c < C; ++c) acc[c] = 1 << (kPrec - 1);
  for (int k = 0; k < aw.count[x]; ++k)
    for (int c = 0; c < C; ++c) acc[c] += w[k] * p[k * C + c];
  for (int c = 0; c < C; ++c) out[c] = Clamp8(acc[c]);
}

// Where a planar result goes: row y of channel c at p[c] + y * stride.
struct Planes {
  uint8_t* p[3];
  size_t stride;
};

// ScalarOutput into three planes (channels 0-2 of C >= 3), row y.
template <int C>
inline void ScalarOutputPlanar(const uint8_t* row, const AxisWeights& aw, int x, const Planes& pl, size_t y) {
  uint8_t px[C];
  ScalarOutput<C>(row, aw, x, px);
  for (int c = 0; c < 3; ++c) pl.p[c][y * pl.stride + size_t(x)] = px[c];
}

template <int C>
void HorizontalPass(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst,
                    size_t dst_stride, int dst_w, const AxisWeights& aw) {
  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < dst_w; ++x)
      ScalarOutput<C>(src + size_t(y) * src_stride, aw, x, dst + size_t(y) * dst_stride + size_t(x) * C);
}

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
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define IMAGEPACK_HAVE_AVX2_KERNELS 1
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
__attribute__((target("avx2"))) void HorizontalPassAvx2(const uint8_t* src, size_t src_stride, int src_w,
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
__attribute__((target("avx2"))) size_t VerticalRowAvx2(const uint8_t* rows0, size_t src_stride, size_t row_bytes,
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
#endif

void HorizontalPassAny(int channels, const uint8_t* src, size_t src_stride, int src_w, int rows,
                       uint8_t* dst, size_t dst_stride, int dst_w, const AxisWeights& aw) {
  const SimdLevel level = Simd();
#if defined(IMAGEPACK_HAVE_AVX2_KERNELS)
  if (level == SimdLevel::kAvx2 && (channels == 3 || channels == 4)) {
    if (channels == 3) HorizontalPassAvx2<3>(src, src_stride, src_w, rows, dst, dst_stride, dst_w, aw);
    else HorizontalPassAvx2<4>(src, src_stride, src_w, rows, dst, dst_stride, dst_w, aw);
    return;
  }
#endif
#if defined(__SSE2__)
  if (level != SimdLevel::kScalar) {
    switch (channels) {
      case 1: HorizontalPass1Sse2(src, src_stride, src_w, rows, dst, dst_stride, dst_w, aw); return;
      case 3: HorizontalPass3Sse2(src, src_stride, src_w, rows, dst, dst_stride, dst_w, aw); return;
      case 4: HorizontalPass4Sse2(src, src_stride, rows, dst, dst_stride, dst_w, aw); return;
      default: break;
    }
  }
#endif
  (void)src_w;
  switch (channels) {
    case 1: HorizontalPass<1>(src, src_stride, rows, dst, dst_stride, dst_w, aw); break;
    case 2: HorizontalPass<2>(src, src_stride, rows, dst, dst_stride, dst_w, aw); break;
    case 3: HorizontalPass<3>(src, src_stride, rows, dst, dst_stride, dst_w, aw); break;
    default: HorizontalPass<4>(src, src_stride, rows, dst, dst_stride, dst_w, aw); break;
  }
}

// HorizontalPassAny with the first three channels of a 3- or 4-channel
// result going to three planes. Without AVX2: each row interleaved into
// scratch, then split (same bytes).
void HorizontalPassToPlanes(int channels, const uint8_t* src, size_t src_stride, int src_w, int rows,
                            const Planes& planes, int dst_w, const AxisWeights& aw) {
#if defined(IMAGEPACK_HAVE_AVX2_KERNELS)
  if (Simd() == SimdLevel::kAvx2) {
    if (channels == 3) HorizontalPassAvx2<3, true>(src, src_stride, src_w, rows, nullptr, 0, dst_w, aw, &planes);
    else HorizontalPassAvx2<4, true>(src, src_stride, src_w, rows, nullptr, 0, dst_w, aw, &planes);
    return;
  }
#endif
  thread_local std::vector<uint8_t> row;
  uint8_t* r = Scratch(row, size_t(dst_w) * channels);
  for (int y = 0; y < rows; ++y) {
    HorizontalPassAny(channels, src + size_t(y) * src_stride, src_stride, src_w, 1, r, size_t(dst_w) * channels,
                      dst_w, aw);
    for (int x = 0; x < dst_w; ++x)
      for (int c = 0; c < 3; ++c) planes.p[c][size_t(y) * planes.stride + x] = r[size_t(x) * channels + c];
  }
}

// Each output row is a weighted sum of whole input rows: the inner loop runs
// along the row. With SSE2, two rows are interleaved so one _mm_madd_epi16
// applies two taps to eight bytes.
void VerticalPass(const uint8_t* src, size_t src_stride, size_t row_bytes, uint8_t* dst,
                  size_t dst_stride, int dst_h, const AxisWeights& aw) {
  thread_local std::vector<int32_t> acc;
  if (acc.size() < row_bytes + 16) acc.resize(row_bytes + 16);
  const SimdLevel level = Simd();
  for (int y = 0; y < dst_h; ++y) {
    const int32_t* w = &aw.w[size_t(y) * aw.taps];
    const int n = aw.count[y];
    const uint8_t* rows0 = src + size_t(aw.start[y]) * src_stride;
    uint8_t* d = dst + size_t(y) * dst_stride;
    size_t i = 0;
#if defined(IMAGEPACK_HAVE_AVX2_KERNELS)
    if (level == SimdLevel::kAvx2) i = VerticalRowAvx2(rows0, src_stride, row_bytes, w, n, d);
#endif
#if defined(__SSE2__)
    const __m128i zero = _mm_setzero_si128();
    const __m128i round = _mm_set1_epi32(1 << (kPrec - 1));
    for (; level != SimdLevel::kScalar && i + 16 <= row_bytes; i += 16) {
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
#endif
    if (i < row_bytes) {
      std::fill(acc.begin(), acc.begin() + (row_bytes - i), 1 << (kPrec - 1));
      for (int k = 0; k < n; ++k) {
        const uint8_t* s = rows0 + size_t(k) * src_stride + i;
        const int32_t wk = w[k];
        for (size_t j = 0; j < row_bytes - i; ++j) acc[j] += wk * s[j];
      }
      for (size_t j = 0; j < row_bytes - i; ++j) d[i + j] = Clamp8(acc[j]);
    }
  }
}

// The vertical pass first, over only the columns the horizontal taps read,
// into per-thread scratch (dst_h rows); `hw` is rebased to that window.
struct Window {
  const uint8_t* data;
  size_t stride;
  int width;
};

Window VerticalFirst(const uint8_t* src, size_t src_stride, int channels, int dst_h, const AxisWeights& vw,
                     AxisWeights* hw) {
  const int col_lo = *std::min_element(hw->start.begin(), hw->start.end());
  int col_hi = col_lo + 1;
  for (size_t i = 0; i < hw->start.size(); ++i) col_hi = std::max(col_hi, hw->start[i] + hw->count[i]);
  const size_t row = size_t(col_hi - col_lo) * channels;
  uint8_t* tmp = PassScratch(size_t(dst_h) * row);
  VerticalPass(src + size_t(col_lo) * channels, src_stride, row, tmp, row, dst_h, vw);
  for (auto& s : hw->start) s -= col_lo;
  return {tmp, row, col_hi - col_lo};
}

// The source rows the vertical taps read: (first, count); `vw` is rebased
// to them.
std::pair<int, int> RebaseRows(AxisWeights* vw) {
  const int row_lo = vw->start.front();
  const int rows = vw->start.back() + vw->count.back() - row_lo;
  for (auto& s : vw->start) s -= row_lo;
  return {row_lo, rows};
}

}  // namespace

Result<ResampleFilter> ParseResampleFilter(const std::string& name) {
  if (name == "box") return ResampleFilter::kBox;
  if (name == "triangle" || name == "bilinear") return ResampleFilter::kTriangle;
  if (name == "catrom" || name == "bicubic") return ResampleFilter::kCatmullRom;
  if (name == "lanczos3" || name == "lanczos") return ResampleFilter::kLanczos3;
  return Status::InvalidArgument("unknown filter '" + name +
                                 "' (expected box, triangle, catrom or lanczos3)");
}

const char* ResampleFilterName(ResampleFilter f) {
  switch (f) {
    case ResampleFilter::kBox: return "box";
    case ResampleFilter::kTriangle: return "triangle";
    case ResampleFilter::kCatmullRom: return "catrom";
    case ResampleFilter::kLanczos3: return "lanczos3";
  }
  return "?";
}

SimdLevel ResampleSimdLevel() { return Simd(); }

SimdLevel SetResampleSimdLevel(SimdLevel level) {
  const int best = DetectSimd();
  g_simd.store(std::min(static_cast<int>(level), best), std::memory_order_relaxed);
  return Simd();
}

void Resample(const uint8_t* src, int src_w, int src_h, size_t src_stride, int channels,
              uint8_t* dst, int dst_w, int dst_h, size_t dst_stride, ResampleFilter filter) {
  ResampleRegion(src, src_w, src_h, src_stride, channels, 0, 0, src_w, src_h, dst, dst_w, dst_h, dst_stride,
                 filter);
}

void ResampleRegion(const uint8_t* src, int src_w, int src_h, size_t src_stride, int channels, double rx,
                    double ry, double rw, double rh, uint8_t* dst, int dst_w, int dst_h, size_t dst_stride,
                    ResampleFilter filter, bool mirror) {
  const size_t dst_row = size_t(dst_w) * channels;
  const bool whole = rx == 0 && ry == 0 && rw == src_w && rh == src_h;
  if (whole && src_w == dst_w && src_h == dst_h && !mirror) {
    for (int y = 0; y < dst_h; ++y)
      std::memcpy(dst + size_t(y) * dst_stride, src + size_t(y) * src_stride, dst_row);
    return;
  }
  AxisWeights hw = ComputeWeights(src_w, dst_w, filter, rx, rw);
  if (mirror) MirrorAxis(&hw);
  if (whole && src_h == dst_h) {
    HorizontalPassAny(channels, src, src_stride, src_w, src_h, dst, dst_stride, dst_w, hw);
    return;
  }
  AxisWeights vw = ComputeWeights(src_h, dst_h, filter, ry, rh);
  if (whole && src_w == dst_w && !mirror) {
    VerticalPass(src, src_stride, dst_row, dst, dst_stride, dst_h, vw);
    return;
  }
  if (dst_h <= src_h) {
    // Shrinking vertically: the vertical pass first leaves fewer rows for the
    // (costlier per output) horizontal pass.
    const Window t = VerticalFirst(src, src_stride, channels, dst_h, vw, &hw);
    HorizontalPassAny(channels, t.data, t.stride, t.width, dst_h, dst, dst_stride, dst_w, hw);
    return;
  }
  // Horizontal first, over only the source rows the vertical pass reads.
  const auto [row_lo, rows] = RebaseRows(&vw);
  uint8_t* tmp = PassScratch(size_t(rows) * dst_row);
  HorizontalPassAny(channels, src + size_t(row_lo) * src_stride, src_stride, src_w, rows, tmp, dst_row, dst_w, hw);
  VerticalPass(tmp, dst_row, dst_row, dst, dst_stride, dst_h, vw);
}

void ResampleRegionToPlanes(const uint8_t* src, int src_w, int src_h, size_t src_stride, int channels, double rx,
                            double ry, double rw, double rh, uint8_t* const planes[3], size_t plane_stride,
                            int dst_w, int dst_h, ResampleFilter filter, bool mirror) {
  const Planes out{{planes[0], planes[1], planes[2]}, plane_stride};
  AxisWeights hw = ComputeWeights(src_w, dst_w, filter, rx, rw);
  if (mirror) MirrorAxis(&hw);
  AxisWeights vw = ComputeWeights(src_h, dst_h, filter, ry, rh);
  if (dst_h <= src_h) {
    // Vertical first (interleaved), then the horizontal pass writes the
    // planes.
    const Window t = VerticalFirst(src, src_stride, channels, dst_h, vw, &hw);
    HorizontalPassToPlanes(channels, t.data, t.stride, t.width, dst_h, out, dst_w, hw);
    return;
  }
  // Horizontal first into planar rows [R | G | B] of the source rows the
  // vertical pass reads; then one vertical pass per plane.
  const auto [row_lo, rows] = RebaseRows(&vw);
  const size_t tmp_row = size_t(dst_w) * 3;
  uint8_t* tmp = PassScratch(size_t(rows) * tmp_row);
  const Planes planar_rows{{tmp, tmp + dst_w, tmp + 2 * size_t(dst_w)}, tmp_row};
  HorizontalPassToPlanes(channels, src + size_t(row_lo) * src_stride, src_stride, src_w, rows, planar_rows, dst_w,
                         hw);
  for (int c = 0; c < 3; ++c)
    VerticalPass(tmp + size_t(c) * dst_w, tmp_row, size_t(dst_w), planes[c], plane_stride, dst_h, vw);
}

Image ResampleImage(const Image& src, int dst_w, int dst_h, ResampleFilter filter) {
  Image out;
  out.width = dst_w;
  out.height = dst_h;
  out.channels = src.channels;
  out.pixels.resize(out.stride() * dst_h);
  Resample(src.pixels.data(), src.width, src.height, src.stride(), src.channels,
           out.pixels.data(), dst_w, dst_h, out.stride(), filter);
  return out;
}

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

}  // namespace imagepack
