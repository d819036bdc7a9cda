// Mixed precision: autocast scopes and a dynamic loss scaler.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace imagepack::trainer {

// Whether this CPU computes bf16 natively (x86: AVX512-BF16 or AMX-BF16).
// Without it, LibTorch emulates bf16 and CPU autocast runs several times
// slower than fp32 (a resnet18 run on an AMD EPYC with AVX2: ~4x).
// IMAGEPACK_CPU_BF16=0 or 1 overrides the answer (tests, or a user who
// knows better).
bool CpuHasNativeBf16();

// Enables autocast for its lifetime: bf16 on CPU, fp16 on CUDA.
class AutocastScope {
 public:
  AutocastScope(bool enabled, torch::Device device);
  ~AutocastScope();

 private:
  bool enabled_;
  bool cuda_;
};

// Dynamic loss scaling for fp16 (the logic of torch.cuda.amp.GradScaler,
// written here): multiply the loss by `scale`, unscale gradients before the
// step, skip steps whose gradients hold inf/nan and back the scale off, grow
// it after `growth_interval` clean steps. Device-independent: the same code
// runs (and is tested) on CPU. Disabled, it is a pass-through.
class GradScaler {
 public:
  struct Options {
    bool enabled = true;
    double init_scale = 65536.0;
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int growth_interval = 2000;
  };
  explicit GradScaler(Options o);

  torch::Tensor Scale(const torch::Tensor& loss) const;
  // Divides every gradient by the scale; returns true if any is inf/nan.
  bool Unscale(const std::vector<torch::Tensor>& params);
  // Unscales (unless done), steps the optimizer unless gradients were
  // non-finite, updates the scale. Returns true if the step was taken.
  bool Step(torch::optim::Optimizer& opt, const std::vector<torch::Tensor>& params);

  double scale() const { return scale_; }
  int64_t skipped_steps() const { return skipped_; }
  bool enabled() const { return o_.enabled; }
  void Load(double scale, int growth_tracker) { scale_ = scale; tracker_ = growth_tracker; }
  int growth_tracker() const { return tracker_; }

 private:
  Options o_;
  double scale_;
  int tracker_ = 0;
  int64_t skipped_ = 0;
  bool unscaled_ = false;
  bool found_inf_ = false;
};

}  // namespace imagepack::trainer
