// Separable antialiased resampling with precomputed fixed-point weights:
// the filters and weights, the dispatch between the plain C++ kernels here
// and the SSE2 / AVX2 ones (resample_sse2.cc, resample_avx2.cc, declared in
// resample_kernels.h), and the planning of the two passes.
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

#include <atomic>

#include "imagepack/resample.h"
#include "image/resample_internal.h"
#include "image/resample_kernels.h"

namespace imagepack {
namespace {

using internal::AxisWeights;
using internal::Clamp8;
using internal::kPrec;
using internal::Planes;
using internal::ScalarOutput;
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

template <int C>
void HorizontalPass(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst,
                    size_t dst_stride, int dst_w, const AxisWeights& aw) {
  for (int y = 0; y < rows; ++y)
    for (int x = 0; x < dst_w; ++x)
      ScalarOutput<C>(src + size_t(y) * src_stride, aw, x, dst + size_t(y) * dst_stride + size_t(x) * C);
}



void HorizontalPassAny(int channels, const uint8_t* src, size_t src_stride, int src_w, int rows,
                       uint8_t* dst, size_t dst_stride, int dst_w, const AxisWeights& aw) {
  const SimdLevel level = Simd();
#if defined(IMAGEPACK_HAVE_AVX2_KERNELS)
  if (level == SimdLevel::kAvx2 && (channels == 3 || channels == 4)) {
    internal::HorizontalPassAvx2(channels, src, src_stride, src_w, rows, dst, dst_stride, dst_w, aw, nullptr);
    return;
  }
#endif
#if defined(__SSE2__)
  if (level != SimdLevel::kScalar) {
    switch (channels) {
      case 1: internal::HorizontalPass1Sse2(src, src_stride, src_w, rows, dst, dst_stride, dst_w, aw); return;
      case 3: internal::HorizontalPass3Sse2(src, src_stride, src_w, rows, dst, dst_stride, dst_w, aw); return;
      case 4: internal::HorizontalPass4Sse2(src, src_stride, rows, dst, dst_stride, dst_w, aw); return;
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
    internal::HorizontalPassAvx2(channels, src, src_stride, src_w, rows, nullptr, 0, dst_w, aw, &planes);
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
    if (level == SimdLevel::kAvx2) i = internal::VerticalRowAvx2(rows0, src_stride, row_bytes, w, n, d);
#endif
#if defined(__SSE2__)
    if (level != SimdLevel::kScalar) i = internal::VerticalRowSse2(rows0, src_stride, row_bytes, w, n, d, i);
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
  return ResampleImage(src, src.width, src.height, dst_w, dst_h, filter);
}

Image ResampleImage(const Image& src, double extent_w, double extent_h, int dst_w, int dst_h,
                    ResampleFilter filter) {
  Image out;
  out.width = dst_w;
  out.height = dst_h;
  out.channels = src.channels;
  out.pixels.resize(out.stride() * dst_h);
  ResampleRegion(src.pixels.data(), src.width, src.height, src.stride(), src.channels, 0, 0, extent_w, extent_h,
                 out.pixels.data(), dst_w, dst_h, out.stride(), filter);
  return out;
}

}  // namespace imagepack
