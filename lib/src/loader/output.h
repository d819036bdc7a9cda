// The images as the model takes them (LoaderOptions::output_dtype,
// norm_mean, norm_std): the uint8 pixels a sample was rendered to, turned
// into float32, float16 or bfloat16: (x / 255 - mean) / std, computed in
// float32 as torchvision's ToTensor + Normalize compute it (eight values
// at a time with AVX2, else by a per-channel table of the same values),
// then rounded to nearest even for the 16-bit types (torch's casts). The loader's decode threads run it, sample by sample,
// right after rendering (docs/PYTHON.md, "Output as the model takes it").
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "imagepack/loader.h"
#include "imagepack/status.h"

namespace imagepack::internal {

class OutputConverter {
 public:
  OutputConverter() = default;
  // `mean` and `std`: per channel on [0, 1], one value for every channel,
  // or empty (0 and 1). InvalidArgument: a dtype other than uint8,
  // float32, float16 and bfloat16; mean or std with uint8; a count that is
  // neither 1 nor `channels`; a std that is not positive and finite.
  // `copy`: uint8 images are copied to the output buffer too (pinned memory).
  static Result<OutputConverter> Make(DType dtype, const std::vector<float>& mean, const std::vector<float>& std,
                                      int channels, bool copy = false);

  // Whether the images are handed out from the output buffer (converted or copied).
  bool active() const { return dtype_ != DType::kUint8 || copy_; }
  DType dtype() const { return dtype_; }
  size_t element_bytes() const { return DTypeBytes(dtype_); }

  // One sample of `channels` x `pixels` values: planes one after the other
  // (NCHW) or interleaved (NHWC), into `dst` (element_bytes() each).
  void Convert(const uint8_t* src, size_t pixels, bool nchw, uint8_t* dst) const;

 private:
  DType dtype_ = DType::kUint8;
  int channels_ = 0;
  bool copy_ = false;
  std::vector<float> mean_, std_;  // per channel
  std::vector<float> f32_;     // channels x 256: the float32 values
  std::vector<uint16_t> u16_;  // channels x 256: their float16 / bfloat16 bits
};

// A batch's output images (Batch::output): memory from LoaderOptions'
// pinned_alloc / pinned_free (page-locked: CUDA's cudaHostAlloc), or from
// operator new without them or when the pinned allocation fails (said once
// by Warn). Grows, never shrinks; freed the way it was allocated.
class OutputBuffer {
 public:
  using Alloc = void* (*)(size_t);
  using Free = void (*)(void*);
  OutputBuffer() = default;
  OutputBuffer(const OutputBuffer&) = delete;
  OutputBuffer& operator=(const OutputBuffer&) = delete;
  ~OutputBuffer() { Release(); }
  void Reserve(size_t bytes, Alloc alloc, Free free);
  uint8_t* data() const { return data_; }

 private:
  void Release();
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
  Free free_ = nullptr;  // null: operator delete[]
};

// float32 -> IEEE half and bfloat16 bits, rounded to nearest even (c10's
// Half and BFloat16 constructors round the same way).
uint16_t FloatToHalf(float f);
uint16_t FloatToBFloat16(float f);

}  // namespace imagepack::internal
