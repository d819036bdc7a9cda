// The geometric operations (F.affine and F.rotate on tensors: a sampling
// grid centred on the image, grid_sample without corner alignment,
// nearest or bilinear, then the fill) and _apply_op, the AutoAugment set's
// one entry point.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <immintrin.h>
#include <vector>

#include "imagepack/augment.h"
#include "image/augment/augment_internal.h"

namespace imagepack {
namespace internal {

bool& UseSse41() {
  static bool use = __builtin_cpu_supports("sse4.1");
  return use;
}

bool& UseAvx2() {
  static bool use = __builtin_cpu_supports("avx2");
  return use;
}

}  // namespace internal
namespace {

constexpr double kPi = 3.14159265358979323846;

double Radians(double deg) { return deg * kPi / 180.0; }
double Degrees(double rad) { return rad * 180.0 / kPi; }

// torch.linspace(start, end, steps)[i] in float32: from the start for the
// first half, from the end for the second.
float Linspace(float start, float end, int steps, int i) {
  if (steps <= 1) return start;
  const float step = (end - start) / static_cast<float>(steps - 1);
  return i < steps / 2 ? start + step * float(i) : end - step * float(steps - i - 1);
}

// One sample of grid_sample(align_corners=False) at unnormalised (ix, iy).
// Returns the coverage (the mask channel torchvision appends) and writes the
// channels' values into `v`.
#define IMAGEPACK_INLINE __attribute__((always_inline)) inline

template <int C>
IMAGEPACK_INLINE float SampleNearest(const Image& src, float ix, float iy, float* v) {
  const float fx = std::nearbyint(ix), fy = std::nearbyint(iy);
  if (!(fx >= 0.f && fx < float(src.width) && fy >= 0.f && fy < float(src.height))) {
    for (int c = 0; c < C; ++c) v[c] = 0.f;
    return 0.f;
  }
  const uint8_t* p = src.pixels.data() + (size_t(fy) * src.width + size_t(fx)) * C;
  for (int c = 0; c < C; ++c) v[c] = float(p[c]);
  return 1.f;
}

template <int C>
IMAGEPACK_INLINE float SampleBilinear(const Image& src, float ix, float iy, float* v) {
  for (int c = 0; c < C; ++c) v[c] = 0.f;
  if (!(std::isfinite(ix) && std::isfinite(iy))) return 0.f;
  // Far outside: every corner is out; keeps the integer conversions bounded.
  if (ix < -2.f || iy < -2.f || ix > float(src.width) + 1.f || iy > float(src.height) + 1.f) return 0.f;
  const float x0f = std::floor(ix), y0f = std::floor(iy);
  const float wx = ix - x0f, wy = iy - y0f;
  const int x0 = static_cast<int>(x0f), y0 = static_cast<int>(y0f);
  const float w[4] = {(1.f - wx) * (1.f - wy), wx * (1.f - wy), (1.f - wx) * wy, wx * wy};
  if (x0 >= 0 && y0 >= 0 && x0 + 1 < src.width && y0 + 1 < src.height) {  // all four corners inside
    const uint8_t* p = src.pixels.data() + (size_t(y0) * src.width + size_t(x0)) * C;
    const uint8_t* q = p + src.stride();
    for (int c = 0; c < C; ++c)
      v[c] = w[0] * float(p[c]) + w[1] * float(p[C + c]) + w[2] * float(q[c]) + w[3] * float(q[C + c]);
    return w[0] + w[1] + w[2] + w[3];
  }
  const int xs[4] = {x0, x0 + 1, x0, x0 + 1}, ys[4] = {y0, y0, y0 + 1, y0 + 1};
  float mask = 0.f;
  for (int k = 0; k < 4; ++k) {
    if (xs[k] < 0 || xs[k] >= src.width || ys[k] < 0 || ys[k] >= src.height) continue;
    const uint8_t* p = src.pixels.data() + (size_t(ys[k]) * src.width + size_t(xs[k])) * C;
    for (int c = 0; c < C; ++c) v[c] += w[k] * float(p[c]);
    mask += w[k];
  }
  return mask;
}

}  // namespace

void InverseAffineMatrix(double cx, double cy, double angle_deg, double tx, double ty, double scale, double shear_x_deg,
                         double shear_y_deg, double out[6]) {
  const double rot = Radians(angle_deg), sx = Radians(shear_x_deg), sy = Radians(shear_y_deg);
  const double a = std::cos(rot - sy) / std::cos(sy);
  const double b = -std::cos(rot - sy) * std::tan(sx) / std::cos(sy) - std::sin(rot);
  const double c = std::sin(rot - sy) / std::cos(sy);
  const double d = -std::sin(rot - sy) * std::tan(sx) / std::cos(sy) + std::cos(rot);
  double m[6] = {d, -b, 0.0, -c, a, 0.0};
  for (double& x : m) x /= scale;
  m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty);
  m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty);
  m[2] += cx;
  m[5] += cy;
  std::memcpy(out, m, sizeof(m));
}

namespace {

// The sampling grid of one image: per-column and per-row products, each the
// same float32 product as in bx * r00 + by * r10 + r20 (left to right).
struct AffineGrid {
  std::vector<float> col0, col1, row0, row1;
  float r20 = 0, r21 = 0, hw = 0, hh = 0;
};

// One output pixel of the affine transform.
template <bool kNearest, int C>
IMAGEPACK_INLINE void AffinePixel(const Image& src, const AffineGrid& g, const uint8_t* fill, int x, int y,
                                  uint8_t* o) {
  float v[3];
  const float gx = g.col0[size_t(x)] + g.row0[size_t(y)] + g.r20;
  const float gy = g.col1[size_t(x)] + g.row1[size_t(y)] + g.r21;
  const float ix = (gx + 1.f) * g.hw - 0.5f, iy = (gy + 1.f) * g.hh - 0.5f;
  const float mask = kNearest ? SampleNearest<C>(src, ix, iy, v) : SampleBilinear<C>(src, ix, iy, v);
  for (int c = 0; c < C; ++c) {
    float value = v[c];
    if (fill) {
      if (kNearest) value = mask < 0.5f ? float(fill[c]) : value;
      else value = value * mask + (1.f - mask) * float(fill[c]);
    }
    o[c] = static_cast<uint8_t>(std::nearbyint(std::clamp(value, 0.f, 255.f)));
  }
}

template <bool kNearest, int C>
IMAGEPACK_INLINE void AffineRows(const Image& src, const AffineGrid& g, const uint8_t* fill, Image* img) {
  const int W = img->width, H = img->height;
  uint8_t* out = img->pixels.data();
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) AffinePixel<kNearest, C>(src, g, fill, x, y, out + (size_t(y) * W + x) * C);
}

// The same loop twice: with SSE4.1 (roundss for nearbyint and floor, in
// line) where the CPU has it, else baseline x86-64 (libm calls). Both are
// IEEE float32 without contraction: the same bytes.
__attribute__((target("sse4.1"))) void AffineSse41(const Image& src, const AffineGrid& g, bool nearest,
                                                    const uint8_t* fill, Image* img) {
  if (src.channels == 3) {
    if (nearest) AffineRows<true, 3>(src, g, fill, img);
    else AffineRows<false, 3>(src, g, fill, img);
  } else {
    if (nearest) AffineRows<true, 1>(src, g, fill, img);
    else AffineRows<false, 1>(src, g, fill, img);
  }
}

void AffineBaseline(const Image& src, const AffineGrid& g, bool nearest, const uint8_t* fill, Image* img) {
  if (src.channels == 3) {
    if (nearest) AffineRows<true, 3>(src, g, fill, img);
    else AffineRows<false, 3>(src, g, fill, img);
  } else {
    if (nearest) AffineRows<true, 1>(src, g, fill, img);
    else AffineRows<false, 1>(src, g, fill, img);
  }
}

// Bilinear with AVX2, eight pixels at a time: the scalar path's float32
// operations in its order (separate multiplies and adds: no contraction),
// so the same bytes. Each corner's channels come with one 32-bit gather
// (src holds 4 bytes past its pixels for the last one), masked to the
// corners inside the image: a corner outside gives 0, as the scalar path's
// skipped corner adds nothing (x + 0 * w is x), and its weight leaves the
// mask. Eight pixels with no corner inside are the fill (or 0), written
// at once: a rotated or translated image is mostly that at its edges.
template <int C>
__attribute__((target("avx2"))) void BilinearAvx2(const Image& src, const AffineGrid& g, const uint8_t* fill,
                                                  Image* img) {
  const int W = img->width, H = img->height;
  const int stride = W * C;
  uint8_t* out = img->pixels.data();
  const int* base = reinterpret_cast<const int*>(src.pixels.data());
  const __m256 one = _mm256_set1_ps(1.f), half = _mm256_set1_ps(0.5f), zero = _mm256_setzero_ps();
  const __m256 top = _mm256_set1_ps(255.f), hw = _mm256_set1_ps(g.hw), hh = _mm256_set1_ps(g.hh);
  const __m256 r20 = _mm256_set1_ps(g.r20), r21 = _mm256_set1_ps(g.r21);
  const __m256 minus1 = _mm256_set1_ps(-1.f), xlast = _mm256_set1_ps(float(W - 1)), ylast = _mm256_set1_ps(float(H - 1));
  const __m256 xlast2 = _mm256_set1_ps(float(W - 2)), ylast2 = _mm256_set1_ps(float(H - 2));
  const __m256i byte = _mm256_set1_epi32(0xff), vw = _mm256_set1_epi32(W), vc = _mm256_set1_epi32(C);
  const __m256i zeroi = _mm256_setzero_si256();
  __m256 fills[3] = {zero, zero, zero};
  uint8_t fill_px[3] = {0, 0, 0};
  if (fill)
    for (int c = 0; c < C; ++c) fills[c] = _mm256_set1_ps(float(fill[c])), fill_px[c] = fill[c];
  __m256i got[3];
  const __m256i pack3 = _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,  //
                                         0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  const __m256i pack_lanes = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7);
  for (int y = 0; y < H; ++y) {
    const __m256 row0 = _mm256_set1_ps(g.row0[size_t(y)]), row1 = _mm256_set1_ps(g.row1[size_t(y)]);
    int x = 0;
    for (; x + 8 <= W; x += 8) {
      uint8_t* o = out + (size_t(y) * W + x) * C;
      const __m256 gx = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(&g.col0[size_t(x)]), row0), r20);
      const __m256 gy = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(&g.col1[size_t(x)]), row1), r21);
      const __m256 ix = _mm256_sub_ps(_mm256_mul_ps(_mm256_add_ps(gx, one), hw), half);
      const __m256 iy = _mm256_sub_ps(_mm256_mul_ps(_mm256_add_ps(gy, one), hh), half);
      const __m256 x0f = _mm256_floor_ps(ix), y0f = _mm256_floor_ps(iy);
      // Which corners are inside: x0 in [0, W - 1], x0 + 1 likewise (as
      // x0 in [-1, W - 2]); y the same. NaN and infinities: none.
      const __m256 x0in = _mm256_and_ps(_mm256_cmp_ps(x0f, zero, _CMP_GE_OQ), _mm256_cmp_ps(x0f, xlast, _CMP_LE_OQ));
      const __m256 x1in = _mm256_and_ps(_mm256_cmp_ps(x0f, minus1, _CMP_GE_OQ), _mm256_cmp_ps(x0f, xlast2, _CMP_LE_OQ));
      const __m256 y0in = _mm256_and_ps(_mm256_cmp_ps(y0f, zero, _CMP_GE_OQ), _mm256_cmp_ps(y0f, ylast, _CMP_LE_OQ));
      const __m256 y1in = _mm256_and_ps(_mm256_cmp_ps(y0f, minus1, _CMP_GE_OQ), _mm256_cmp_ps(y0f, ylast2, _CMP_LE_OQ));
      const __m256 in00 = _mm256_and_ps(x0in, y0in), in01 = _mm256_and_ps(x1in, y0in);
      const __m256 in10 = _mm256_and_ps(x0in, y1in), in11 = _mm256_and_ps(x1in, y1in);
      if (_mm256_movemask_ps(_mm256_or_ps(_mm256_or_ps(in00, in01), _mm256_or_ps(in10, in11))) == 0) {
        for (int k = 0; k < 8; ++k) std::memcpy(o + k * C, fill_px, C);
        continue;
      }
      const __m256 wx = _mm256_sub_ps(ix, x0f), wy = _mm256_sub_ps(iy, y0f);
      const __m256 ux = _mm256_sub_ps(one, wx), uy = _mm256_sub_ps(one, wy);
      const __m256 w0 = _mm256_mul_ps(ux, uy), w1 = _mm256_mul_ps(wx, uy), w2 = _mm256_mul_ps(ux, wy),
                   w3 = _mm256_mul_ps(wx, wy);
      // The mask channel: 1 at each corner inside, 0 outside, weighted.
      const __m256 mask = _mm256_add_ps(
          _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(w0, _mm256_and_ps(in00, one)), _mm256_mul_ps(w1, _mm256_and_ps(in01, one))),
                        _mm256_mul_ps(w2, _mm256_and_ps(in10, one))),
          _mm256_mul_ps(w3, _mm256_and_ps(in11, one)));
      // Lanes whose corners are all outside may hold any index: never loaded.
      const __m256i at = _mm256_mullo_epi32(
          _mm256_add_epi32(_mm256_mullo_epi32(_mm256_cvttps_epi32(y0f), vw), _mm256_cvttps_epi32(x0f)), vc);
      const __m256i p00 = _mm256_mask_i32gather_epi32(zeroi, base, at, _mm256_castps_si256(in00), 1);
      const __m256i p01 = _mm256_mask_i32gather_epi32(zeroi, base, _mm256_add_epi32(at, vc), _mm256_castps_si256(in01), 1);
      const __m256i p10 = _mm256_mask_i32gather_epi32(zeroi, base, _mm256_add_epi32(at, _mm256_set1_epi32(stride)),
                                                      _mm256_castps_si256(in10), 1);
      const __m256i p11 = _mm256_mask_i32gather_epi32(zeroi, base, _mm256_add_epi32(at, _mm256_set1_epi32(stride + C)),
                                                      _mm256_castps_si256(in11), 1);
      for (int c = 0; c < C; ++c) {
#define IMAGEPACK_CHANNEL(p) _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(p, 8 * c), byte))
        __m256 v = _mm256_add_ps(
            _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(w0, IMAGEPACK_CHANNEL(p00)), _mm256_mul_ps(w1, IMAGEPACK_CHANNEL(p01))),
                          _mm256_mul_ps(w2, IMAGEPACK_CHANNEL(p10))),
            _mm256_mul_ps(w3, IMAGEPACK_CHANNEL(p11)));
#undef IMAGEPACK_CHANNEL
        if (fill) v = _mm256_add_ps(_mm256_mul_ps(v, mask), _mm256_mul_ps(_mm256_sub_ps(one, mask), fills[c]));
        v = _mm256_round_ps(_mm256_max_ps(_mm256_min_ps(v, top), zero), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        got[c] = _mm256_cvtps_epi32(v);
      }
      if constexpr (C == 3) {
        // Pixel k's channels as one word (R | G << 8 | B << 16), 3 bytes of
        // each word kept, the two lanes' 12 bytes side by side: 24 bytes.
        const __m256i rgb =
            _mm256_or_si256(got[0], _mm256_or_si256(_mm256_slli_epi32(got[1], 8), _mm256_slli_epi32(got[2], 16)));
        const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(rgb, pack3), pack_lanes);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o), _mm256_castsi256_si128(packed));
        _mm_storel_epi64(reinterpret_cast<__m128i*>(o + 16), _mm256_extracti128_si256(packed, 1));
      } else {
        alignas(32) int32_t one_channel[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(one_channel), got[0]);
        for (int k = 0; k < 8; ++k) o[k] = static_cast<uint8_t>(one_channel[k]);
      }
    }
    for (; x < W; ++x) AffinePixel<false, C>(src, g, fill, x, y, out + (size_t(y) * W + x) * C);
  }
}

}  // namespace

void AffineTransform(Image* img, const double inverse[6], AugInterpolation interpolation, const uint8_t fill[3]) {
  const int W = img->width, H = img->height;
  if (W < 1 || H < 1) return;
  Image src = *img;
  src.pixels.resize(src.pixels.size() + 4);  // the gathers' last corner reads 4 bytes
  // _gen_affine_grid: theta (float32) over half the size, applied to pixel
  // centres relative to the middle; grid_sample unnormalises with
  // (g + 1) * size / 2 - 0.5.
  float theta[6];
  for (int i = 0; i < 6; ++i) theta[i] = static_cast<float>(inverse[i]);
  AffineGrid g;
  g.hw = 0.5f * float(W), g.hh = 0.5f * float(H);
  const float r00 = theta[0] / g.hw, r10 = theta[1] / g.hw, r01 = theta[3] / g.hh, r11 = theta[4] / g.hh;
  g.r20 = theta[2] / g.hw, g.r21 = theta[5] / g.hh;
  const float xs = static_cast<float>(-W * 0.5 + 0.5), xe = static_cast<float>(W * 0.5 + 0.5 - 1);
  const float ys = static_cast<float>(-H * 0.5 + 0.5), ye = static_cast<float>(H * 0.5 + 0.5 - 1);
  g.col0.resize(size_t(W)), g.col1.resize(size_t(W)), g.row0.resize(size_t(H)), g.row1.resize(size_t(H));
  for (int x = 0; x < W; ++x) {
    const float bx = Linspace(xs, xe, W, x);
    g.col0[size_t(x)] = bx * r00, g.col1[size_t(x)] = bx * r01;
  }
  for (int y = 0; y < H; ++y) {
    const float by = Linspace(ys, ye, H, y);
    g.row0[size_t(y)] = by * r10, g.row1[size_t(y)] = by * r11;
  }
  const bool nearest = interpolation == AugInterpolation::kNearest;
  if (!nearest && internal::UseAvx2() && W < (1 << 20) / 3 && size_t(W) * H * 3 < (size_t(1) << 31)) {
    if (src.channels == 3) BilinearAvx2<3>(src, g, fill, img);
    else BilinearAvx2<1>(src, g, fill, img);
  } else if (internal::UseSse41()) {
    AffineSse41(src, g, nearest, fill, img);
  } else {
    AffineBaseline(src, g, nearest, fill, img);
  }
}

void ApplyAugOp(AugOp op, double magnitude, AugInterpolation interpolation, const uint8_t fill[3], Image* img) {
  if (!std::isfinite(magnitude)) magnitude = 0;
  const double W = img->width, H = img->height;
  double m[6];
  switch (op) {
    case AugOp::kIdentity: return;
    case AugOp::kShearX:
    case AugOp::kShearY: {
      // shear of atan(magnitude) degrees about the top-left corner
      // (center=[0, 0], relative to the middle: -size / 2).
      const double shear = Degrees(std::atan(std::clamp(magnitude, -1e6, 1e6)));
      const bool x = op == AugOp::kShearX;
      InverseAffineMatrix(-W * 0.5, -H * 0.5, 0, 0, 0, 1, x ? shear : 0, x ? 0 : shear, m);
      return AffineTransform(img, m, interpolation, fill);
    }
    case AugOp::kTranslateX:
    case AugOp::kTranslateY: {
      const double t = std::trunc(std::clamp(magnitude, -1e9, 1e9));
      const bool x = op == AugOp::kTranslateX;
      InverseAffineMatrix(0, 0, 0, x ? t : 0, x ? 0 : t, 1, 0, 0, m);
      return AffineTransform(img, m, interpolation, fill);
    }
    case AugOp::kRotate:
      InverseAffineMatrix(0, 0, -std::fmod(magnitude, 360.0), 0, 0, 1, 0, 0, m);
      return AffineTransform(img, m, interpolation, fill);
    case AugOp::kBrightness: return AdjustBrightness(img, 1.0 + magnitude);
    case AugOp::kColor: return AdjustSaturation(img, 1.0 + magnitude);
    case AugOp::kContrast: return AdjustContrast(img, 1.0 + magnitude);
    case AugOp::kSharpness: return AdjustSharpness(img, 1.0 + magnitude);
    case AugOp::kPosterize: return Posterize(img, static_cast<int>(std::clamp(magnitude, 0.0, 8.0)));
    case AugOp::kSolarize: return Solarize(img, magnitude);
    case AugOp::kAutoContrast: return AutoContrast(img);
    case AugOp::kEqualize: return Equalize(img);
    case AugOp::kInvert: return Invert(img);
  }
}

namespace {
constexpr const char* kNames[kAugOpCount] = {"Identity",   "ShearX",    "ShearY",     "TranslateX",   "TranslateY",
                                             "Rotate",     "Brightness", "Color",     "Contrast",     "Sharpness",
                                             "Posterize",  "Solarize",   "AutoContrast", "Equalize", "Invert"};
}  // namespace

const char* AugOpName(AugOp op) {
  const int i = static_cast<int>(op);
  return i < kAugOpCount ? kNames[i] : "?";
}

bool ParseAugOp(std::string_view name, AugOp* op) {
  for (int i = 0; i < kAugOpCount; ++i)
    if (name == kNames[i]) {
      *op = static_cast<AugOp>(i);
      return true;
    }
  return false;
}

}  // namespace imagepack
