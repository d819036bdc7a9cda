#include "loader/output.h"

#include <cpuid.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <string>

namespace imagepack::internal {

uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN stays NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return sign | 0x7e00;  // NaN
  if (x >= 0x477ff000u) return sign | 0x7c00;  // 65520 and up (and infinity): infinity
  if (x < 0x38800000u) {                       // below 2^-14: a subnormal half (or zero)
    float a;
    std::memcpy(&a, &x, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));  // units of 2^-24, exact product
  }
  x += 0xfffu + ((x >> 13) & 1u);  // to nearest even; a carry moves into the exponent
  return sign | static_cast<uint16_t>((x - 0x38000000u) >> 13);
}

Result<OutputConverter> OutputConverter::Make(DType dtype, const std::vector<float>& mean,
                                              const std::vector<float>& std, int channels, bool copy) {
  if (dtype != DType::kUint8 && dtype != DType::kFloat32 && dtype != DType::kFloat16 && dtype != DType::kBFloat16)
    return Status::InvalidArgument("output dtype must be uint8, float32, float16 or bfloat16");
  if (dtype == DType::kUint8 && (!mean.empty() || !std.empty()))
    return Status::InvalidArgument("mean and std apply to float outputs (float32, float16, bfloat16), not uint8");
  const auto count_ok = [&](const std::vector<float>& v) {
    return v.empty() || v.size() == 1 || v.size() == static_cast<size_t>(channels);
  };
  if (!count_ok(mean) || !count_ok(std))
    return Status::InvalidArgument("mean and std need 1 or " + std::to_string(channels) + " values (one per channel), got " +
                                   std::to_string(mean.size()) + " and " + std::to_string(std.size()));
  for (float s : std)
    if (!(s > 0) || !std::isfinite(s)) return Status::InvalidArgument("std must be positive and finite");
  for (float m : mean)
    if (!std::isfinite(m)) return Status::InvalidArgument("mean must be finite");
  OutputConverter c;
  c.dtype_ = dtype;
  c.channels_ = channels;
  c.copy_ = copy;
  if (dtype == DType::kUint8) return c;
  c.f32_.resize(size_t(channels) * 256);
  for (int ch = 0; ch < channels; ++ch) {
    const float m = mean.empty() ? 0.0f : mean[mean.size() == 1 ? 0 : size_t(ch)];
    const float s = std.empty() ? 1.0f : std[std.size() == 1 ? 0 : size_t(ch)];
    c.mean_.push_back(m);
    c.std_.push_back(s);
    for (int v = 0; v < 256; ++v) {
      // As torch computes it in float32: x.div(255), then sub(mean).div(std).
      const float x = static_cast<float>(v) / 255.0f;
      c.f32_[size_t(ch) * 256 + size_t(v)] = (x - m) / s;
    }
  }
  if (dtype != DType::kFloat32) {
    c.u16_.resize(c.f32_.size());
    for (size_t i = 0; i < c.f32_.size(); ++i)
      c.u16_[i] = dtype == DType::kFloat16 ? FloatToHalf(c.f32_[i]) : FloatToBFloat16(c.f32_[i]);
  }
  return c;
}

namespace {

template <typename T>
void Lookup(const uint8_t* src, size_t pixels, bool nchw, int channels, const T* table, T* dst) {
  if (nchw) {
    for (int ch = 0; ch < channels; ++ch) {
      const T* t = table + size_t(ch) * 256;
      const uint8_t* s = src + size_t(ch) * pixels;
      T* d = dst + size_t(ch) * pixels;
      for (size_t i = 0; i < pixels; ++i) d[i] = t[s[i]];
    }
    return;
  }
  for (size_t i = 0; i < pixels; ++i)
    for (int ch = 0; ch < channels; ++ch) dst[i * channels + ch] = table[size_t(ch) * 256 + src[i * channels + ch]];
}

#if defined(__x86_64__) && defined(__GNUC__)
// Eight floats y to their 16-bit bits, rounded to nearest even as
// FloatToHalf and FloatToBFloat16 round: F16C's conversion for half (IEEE,
// overflow to infinity, subnormals kept); for bfloat16 the same integer
// rounding as FloatToBFloat16 (y is never NaN: finite over positive std).
__attribute__((target("avx2,f16c"), always_inline)) inline __m128i To16(__m256 y, DType t) {
  if (t == DType::kFloat16) return _mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256i x = _mm256_castps_si256(y);
  x = _mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                                           _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1))));
  x = _mm256_srli_epi32(x, 16);
  return _mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
}

// The output types with AVX2 (and F16C): the table's own operations,
// x / 255, - mean, / std, each correctly rounded in float32 (IEEE division
// and subtraction, no fused or reciprocal step), so every float is the
// table's bit for bit and every 16-bit value its rounding
// (tests/lib/output_test.cc compares them). Eight values a step; a 224 px
// sample is 600 KB of float32 (300 KB of 16-bit), past the caches at batch
// size, so the stores are non-temporal where `out` is 32-byte aligned: no
// read of the lines first, and the next sample's pixels stay cached. NHWC
// steps 24 values (8 pixels of 3 channels): three mean/std vectors in turn.
template <DType T>
__attribute__((target("avx2,f16c"))) void NormaliseAvx2(const uint8_t* src, size_t n, int period, const float* mean,
                                                        const float* stdv, const uint16_t* table16, void* out) {
  const __m256 k255 = _mm256_set1_ps(255.0f);
  __m256 m[3], s[3];
  for (int k = 0; k < period; ++k) {  // vector k holds values 8k..8k+7 of the repeating pattern
    alignas(32) float mv[8], sv[8];
    for (int j = 0; j < 8; ++j) {
      mv[j] = mean[(8 * k + j) % period];
      sv[j] = stdv[(8 * k + j) % period];
    }
    m[k] = _mm256_load_ps(mv);
    s[k] = _mm256_load_ps(sv);
  }
  const size_t step = size_t(8) * size_t(period);
  const bool stream = (reinterpret_cast<uintptr_t>(out) & 31) == 0;
  float* dst = static_cast<float*>(out);
  uint16_t* dst16 = static_cast<uint16_t*>(out);
  size_t i = 0;
  for (; i + step <= n; i += step)
    for (int k = 0; k < period; ++k) {
      const size_t at = i + size_t(8 * k);
      const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + at));
      const __m256 x = _mm256_div_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)), k255);
      const __m256 y = _mm256_div_ps(_mm256_sub_ps(x, m[k]), s[k]);
      if constexpr (T == DType::kFloat32) {
        if (stream) _mm256_stream_ps(dst + at, y);
        else _mm256_storeu_ps(dst + at, y);
      } else {
        __m128i* d = reinterpret_cast<__m128i*>(dst16 + at);
        if (stream) _mm_stream_si128(d, To16(y, T));
        else _mm_storeu_si128(d, To16(y, T));
      }
    }
  for (; i < n; ++i) {
    const int c = static_cast<int>(i % size_t(period));
    if constexpr (T == DType::kFloat32) dst[i] = (static_cast<float>(src[i]) / 255.0f - mean[c]) / stdv[c];
    else dst16[i] = table16[size_t(c) * 256 + src[i]];
  }
  if (stream) _mm_sfence();  // the streamed stores are seen before the batch is handed over
}

// AVX2 and F16C (CPUID leaf 1, ECX bit 29: clang's __builtin_cpu_supports
// does not know "f16c").
bool HaveAvx2() {
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
  }();
  return yes;
}
#else
bool HaveAvx2() { return false; }
template <DType T>
void NormaliseAvx2(const uint8_t*, size_t, int, const float*, const float*, const uint16_t*, void*) {}
#endif

// One sample with the vector path: planes one by one, or the interleaved
// pixels with the channels' pattern.
template <DType T>
void NormaliseSample(const uint8_t* src, size_t pixels, bool nchw, int channels, const float* mean, const float* stdv,
                     const uint16_t* table16, uint8_t* dst) {
  if (nchw || channels == 1) {
    const size_t bytes = pixels * (T == DType::kFloat32 ? 4 : 2);
    for (int ch = 0; ch < channels; ++ch)
      NormaliseAvx2<T>(src + size_t(ch) * pixels, pixels, 1, mean + ch, stdv + ch,
                       table16 ? table16 + size_t(ch) * 256 : nullptr,  // float32: none
                       dst + size_t(ch) * bytes);
  } else {
    NormaliseAvx2<T>(src, pixels * size_t(channels), channels, mean, stdv, table16, dst);
  }
}

}  // namespace

void OutputConverter::Convert(const uint8_t* src, size_t pixels, bool nchw, uint8_t* dst) const {
  if (dtype_ != DType::kUint8 && HaveAvx2() && channels_ <= 3) {
    const float* m = mean_.data();
    const float* s = std_.data();
    if (dtype_ == DType::kFloat32)
      NormaliseSample<DType::kFloat32>(src, pixels, nchw, channels_, m, s, nullptr, dst);
    else if (dtype_ == DType::kFloat16)
      NormaliseSample<DType::kFloat16>(src, pixels, nchw, channels_, m, s, u16_.data(), dst);
    else
      NormaliseSample<DType::kBFloat16>(src, pixels, nchw, channels_, m, s, u16_.data(), dst);
  } else if (dtype_ == DType::kFloat32) {
    Lookup(src, pixels, nchw, channels_, f32_.data(), reinterpret_cast<float*>(dst));
  } else if (dtype_ == DType::kFloat16 || dtype_ == DType::kBFloat16) {
    Lookup(src, pixels, nchw, channels_, u16_.data(), reinterpret_cast<uint16_t*>(dst));
  } else {  // uint8 copied (to pinned memory)
    std::memcpy(dst, src, pixels * size_t(channels_));
  }
}

void OutputBuffer::Release() {
  if (!data_) return;
  if (free_) free_(data_);
  else delete[] data_;
  data_ = nullptr;
  bytes_ = 0;
}

void OutputBuffer::Reserve(size_t bytes, Alloc alloc, Free free) {
  if (bytes <= bytes_) return;
  Release();
  if (alloc && free) {
    data_ = static_cast<uint8_t*>(alloc(bytes));
    free_ = free;
    if (!data_) {
      static std::once_flag said;
      std::call_once(said, [&] {
        Warn("pinned memory: allocating " + std::to_string(bytes) + " bytes failed; batches use ordinary memory");
      });
    }
  }
  if (!data_) {
    data_ = new uint8_t[bytes];
    free_ = nullptr;
  }
  bytes_ = bytes;
}

}  // namespace imagepack::internal
