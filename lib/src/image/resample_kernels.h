// The resampler's shared pieces and its per-instruction-set kernels
// (resample_sse2.cc, resample_avx2.cc; the plain C++ ones and the dispatch
// are in resample.cc). Every kernel gives the same bytes as the plain C++
// path: the same integer arithmetic (tests/lib/resample_test.cc). Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace imagepack::internal {

constexpr int kPrec = 14;  // fixed-point weights: 1.0 is 1 << kPrec

// Weights for one axis: out[i] = sum_k w[i][k] * in[start[i] + k].
struct AxisWeights {
  int taps = 0;                  // max taps per output (rows padded with 0)
  std::vector<int> start;
  std::vector<int> count;
  std::vector<int32_t> w;        // out_size * taps
};

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

#if defined(__SSE2__)
// SSE2 (every x86-64): one row pass with 1, 3 or 4 interleaved channels,
// and the vertical pass over bytes [from, ...) of one output row; returns
// where it stopped (a multiple of 16 from `from`; the caller finishes).
void HorizontalPass1Sse2(const uint8_t* src, size_t src_stride, int src_w, int rows, uint8_t* dst,
                         size_t dst_stride, int dst_w, const AxisWeights& aw);
void HorizontalPass3Sse2(const uint8_t* src, size_t src_stride, int src_w, int rows, uint8_t* dst,
                         size_t dst_stride, int dst_w, const AxisWeights& aw);
void HorizontalPass4Sse2(const uint8_t* src, size_t src_stride, int rows, uint8_t* dst, size_t dst_stride, int dst_w,
                         const AxisWeights& aw);
size_t VerticalRowSse2(const uint8_t* rows0, size_t src_stride, size_t row_bytes, const int32_t* w, int n,
                       uint8_t* d, size_t from);
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define IMAGEPACK_HAVE_AVX2_KERNELS 1
// AVX2 (compiled for it per function; call only where the CPU has it):
// the row pass for 3 or 4 channels, to interleaved `dst` or, with
// `planes`, to three planes; and the vertical pass's row from byte 0.
void HorizontalPassAvx2(int channels, const uint8_t* src, size_t src_stride, int src_w, int rows, uint8_t* dst,
                        size_t dst_stride, int dst_w, const AxisWeights& aw, const Planes* planes);
size_t VerticalRowAvx2(const uint8_t* rows0, size_t src_stride, size_t row_bytes, const int32_t* w, int n,
                       uint8_t* d);
#endif

}  // namespace imagepack::internal
