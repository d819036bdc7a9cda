// Learning-rate schedules. Plain C++ (no torch): a pure function of progress.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace imagepack::trainer {

struct ScheduleOptions {
  std::string kind = "step";    // step | cosine | onecycle | triangular
  double base_lr = 0.1;         // after any batch scaling
  double warmup_epochs = 0;     // linear from ~0 to base_lr
  int step_size = 30;           // step: decay every step_size epochs ...
  double gamma = 0.1;           // ... by this factor
  double onecycle_pct = 0.3;    // onecycle: fraction of training spent rising
  double final_div = 1e4;       // onecycle: final lr = base_lr / final_div
  double peak_epoch = 2;        // triangular: where the ramp up ends and the ramp down begins
  // torchvision's warm-up (--lr-warmup-*): with lr_warmup_epochs > 0 the lr
  // is the reference's SequentialLR, stepped per epoch: LinearLR (factor
  // from lr_warmup_decay to 1) or ConstantLR (lr_warmup_decay) for
  // lr_warmup_epochs epochs, then StepLR or CosineAnnealingLR (T_max:
  // epochs - lr_warmup_epochs), each epoch's lr constant through it.
  int lr_warmup_epochs = 0;
  std::string lr_warmup_method = "constant";  // linear | constant
  double lr_warmup_decay = 0.01;
};

inline bool KnownSchedule(const std::string& kind) {
  return kind == "step" || kind == "cosine" || kind == "onecycle" || kind == "triangular";
}

// LR at `epoch_progress` (epoch + fraction of it done) of `total_epochs`.
// triangular: FFCV's ImageNet recipe ('cyclic' in ffcv-imagenet): linear
// from base_lr / 1e4 at 0 up to base_lr at peak_epoch, then linear down to
// 0 at total_epochs (FFCV interpolates per step between the epochs' values,
// which is this line); warmup_epochs does not apply (the ramp is one).
// torchvision's per-epoch lr (ScheduleOptions::lr_warmup_epochs > 0) in
// epoch `epoch`; for step and cosine.
inline double TorchvisionLearningRate(const ScheduleOptions& s, int64_t epoch, double total_epochs) {
  const int64_t w = s.lr_warmup_epochs;
  if (epoch < w) {
    const double f = s.lr_warmup_method == "linear"
                         ? s.lr_warmup_decay + (1.0 - s.lr_warmup_decay) * double(epoch) / double(w)
                         : s.lr_warmup_decay;
    return s.base_lr * f;
  }
  const double e = double(epoch - w);
  if (s.kind == "step") return s.base_lr * std::pow(s.gamma, std::floor(e / s.step_size));
  if (s.kind == "cosine") return s.base_lr * 0.5 * (1 + std::cos(M_PI * e / std::max(1.0, total_epochs - w)));
  throw std::invalid_argument("--lr-warmup-epochs: with --schedule step or cosine, not " + s.kind);
}

inline double LearningRate(const ScheduleOptions& s, double epoch_progress, double total_epochs) {
  const double t = epoch_progress;
  if (!KnownSchedule(s.kind))
    throw std::invalid_argument("unknown schedule '" + s.kind + "' (step, cosine, onecycle, triangular)");
  if (s.lr_warmup_epochs > 0) return TorchvisionLearningRate(s, static_cast<int64_t>(std::floor(t)), total_epochs);
  if (s.kind == "triangular") {
    const double peak = std::min(std::max(0.0, s.peak_epoch), total_epochs), start = s.base_lr * 1e-4;
    if (t <= 0) return start;
    if (t < peak) return start + (s.base_lr - start) * t / peak;
    if (t >= total_epochs) return 0;
    return s.base_lr * (total_epochs - t) / std::max(1e-9, total_epochs - peak);
  }
  if (s.kind != "onecycle" && s.warmup_epochs > 0 && t < s.warmup_epochs)
    return s.base_lr * (t + 1e-3) / s.warmup_epochs;
  if (s.kind == "step") return s.base_lr * std::pow(s.gamma, std::floor(t / s.step_size));
  if (s.kind == "cosine") {
    const double span = std::max(1e-9, total_epochs - s.warmup_epochs);
    const double f = std::min(1.0, std::max(0.0, (t - s.warmup_epochs) / span));
    return s.base_lr * 0.5 * (1 + std::cos(M_PI * f));
  }
  if (s.kind == "onecycle") {
    const double up = s.onecycle_pct * total_epochs;
    const double start = s.base_lr / 25.0, end = s.base_lr / s.final_div;
    if (t < up) return start + (s.base_lr - start) * 0.5 * (1 - std::cos(M_PI * t / std::max(up, 1e-9)));
    const double f = std::min(1.0, (t - up) / std::max(1e-9, total_epochs - up));
    return end + (s.base_lr - end) * 0.5 * (1 + std::cos(M_PI * f));
  }
  throw std::invalid_argument("unknown schedule '" + s.kind + "' (step, cosine, onecycle, triangular)");
}

}  // namespace imagepack::trainer
