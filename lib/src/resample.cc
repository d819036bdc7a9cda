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

#include "imagepack/image.h"

namespace imagepack {
namespace {

constexpr int kPrec = 14;
constexpr int32_t kOne = 1 << kPrec;
constexpr double kPi = 3.14159265358979323846;

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

// Weights for one axis: out[i] = sum_k w[i][k] * in[start[i] + k].
struct AxisWeights {
  int taps = 0;                  // max taps per output (rows padded with 0)
  std::vector<int> start;
  std::vector<int> count;
  std::vector<int32_t> w;        // out_size * taps
};

AxisWeights ComputeWeights(int in_size, int out_size, ResampleFilter filter) {
  const double scale = double(in_size) / out_size;
  const double fscale = std::max(scale, 1.0);
  const double support = FilterSupport(filter) * fscale;
  AxisWeights aw;
  aw.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  aw.start.resize(out_size);
  aw.count.resize(out_size);
  aw.w.assign(size_t(out_size) * aw.taps, 0);
  std::vector<double> tmp(aw.taps);
  for (int i = 0; i < out_size; ++i) {
    const double center = (i + 0.5) * scale;
    int lo = std::max(static_cast<int>(std::floor(center - support + 0.5)), 0);
    int hi = std::min(static_cast<int>(std::floor(center + support + 0.5)), in_size);
    if (hi - lo > aw.taps) hi = lo + aw.taps;
    if (hi <= lo) { lo = std::min(static_cast<int>(center), in_size - 1); hi = lo + 1; }
    double total = 0.0;
    for (int x = lo; x < hi; ++x) {
      tmp[x - lo] = FilterValue(filter, (x + 0.5 - center) / fscale);
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
    for (int k = 0; k < hi - lo; ++k) {
      w[k] = static_cast<int32_t>(std::lround(tmp[k] / total * kOne));
      sum += w[k];
      if (w[k] > w[biggest]) biggest = k;
    }
    w[biggest] += kOne - sum;
    aw.start[i] = lo;
    aw.count[i] = hi - lo;
  }
  return aw;
}

inline uint8_t Clamp8(int32_t v) {
  v >>= kPrec;
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

template <int C>
void HorizontalPass(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst,
                    size_t dst_stride, int dst_w, const AxisWeights& aw) {
  for (int y = 0; y < rows; ++y) {
    const uint8_t* s = src + size_t(y) * src_stride;
    uint8_t* d = dst + size_t(y) * dst_stride;
    for (int x = 0; x < dst_w; ++x) {
      const uint8_t* p = s + size_t(aw.start[x]) * C;
      const int32_t* w = &aw.w[size_t(x) * aw.taps];
      const int n = aw.count[x];
      int32_t acc[C];
      for (int c = 0; c < C; ++c) acc[c] = 1 << (kPrec - 1);
      for (int k = 0; k < n; ++k) {
        for (int c = 0; c < C; ++c) acc[c] += w[k] * p[k * C + c];
      }
      for (int c = 0; c < C; ++c) d[x * C + c] = Clamp8(acc[c]);
    }
  }
}

void HorizontalPassAny(int channels, const uint8_t* src, size_t src_stride, int rows,
                       uint8_t* dst, size_t dst_stride, int dst_w, const AxisWeights& aw) {
  switch (channels) {
    case 1: HorizontalPass<1>(src, src_stride, rows, dst, dst_stride, dst_w, aw); break;
    case 2: HorizontalPass<2>(src, src_stride, rows, dst, dst_stride, dst_w, aw); break;
    case 3: HorizontalPass<3>(src, src_stride, rows, dst, dst_stride, dst_w, aw); break;
    default: HorizontalPass<4>(src, src_stride, rows, dst, dst_stride, dst_w, aw); break;
  }
}

// Each output row is a weighted sum of whole input rows: the inner loop runs
// along the row and vectorises.
void VerticalPass(const uint8_t* src, size_t src_stride, size_t row_bytes, uint8_t* dst,
                  size_t dst_stride, int dst_h, const AxisWeights& aw) {
  std::vector<int32_t> acc(row_bytes);
  for (int y = 0; y < dst_h; ++y) {
    std::fill(acc.begin(), acc.end(), 1 << (kPrec - 1));
    const int32_t* w = &aw.w[size_t(y) * aw.taps];
    for (int k = 0; k < aw.count[y]; ++k) {
      const uint8_t* s = src + size_t(aw.start[y] + k) * src_stride;
      const int32_t wk = w[k];
      int32_t* a = acc.data();
      for (size_t i = 0; i < row_bytes; ++i) a[i] += wk * s[i];
    }
    uint8_t* d = dst + size_t(y) * dst_stride;
    for (size_t i = 0; i < row_bytes; ++i) d[i] = Clamp8(acc[i]);
  }
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

void Resample(const uint8_t* src, int src_w, int src_h, size_t src_stride, int channels,
              uint8_t* dst, int dst_w, int dst_h, size_t dst_stride, ResampleFilter filter) {
  const size_t dst_row = size_t(dst_w) * channels;
  if (src_w == dst_w && src_h == dst_h) {
    for (int y = 0; y < dst_h; ++y)
      std::memcpy(dst + size_t(y) * dst_stride, src + size_t(y) * src_stride, dst_row);
    return;
  }
  if (src_h == dst_h) {
    AxisWeights hw = ComputeWeights(src_w, dst_w, filter);
    HorizontalPassAny(channels, src, src_stride, src_h, dst, dst_stride, dst_w, hw);
    return;
  }
  AxisWeights vw = ComputeWeights(src_h, dst_h, filter);
  if (src_w == dst_w) {
    VerticalPass(src, src_stride, dst_row, dst, dst_stride, dst_h, vw);
    return;
  }
  // Horizontal first, over only the source rows the vertical pass reads.
  AxisWeights hw = ComputeWeights(src_w, dst_w, filter);
  const int row_lo = vw.start.front();
  const int row_hi = vw.start.back() + vw.count.back();
  std::vector<uint8_t> tmp(size_t(row_hi - row_lo) * dst_row);
  HorizontalPassAny(channels, src + size_t(row_lo) * src_stride, src_stride, row_hi - row_lo,
                    tmp.data(), dst_row, dst_w, hw);
  for (auto& s : vw.start) s -= row_lo;
  VerticalPass(tmp.data(), dst_row, dst_row, dst, dst_stride, dst_h, vw);
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
