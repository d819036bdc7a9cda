#include "loader/output.h"

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

}  // namespace

void OutputConverter::Convert(const uint8_t* src, size_t pixels, bool nchw, uint8_t* dst) const {
  if (dtype_ == DType::kFloat32)
    Lookup(src, pixels, nchw, channels_, f32_.data(), reinterpret_cast<float*>(dst));
  else if (dtype_ == DType::kFloat16 || dtype_ == DType::kBFloat16)
    Lookup(src, pixels, nchw, channels_, u16_.data(), reinterpret_cast<uint16_t*>(dst));
  else  // uint8 copied (to pinned memory)
    std::memcpy(dst, src, pixels * size_t(channels_));
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
