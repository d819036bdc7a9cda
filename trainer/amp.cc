#include "amp.h"

#include <ATen/autocast_mode.h>

namespace imagepack::trainer {

AutocastScope::AutocastScope(bool enabled, torch::Device device) : enabled_(enabled), cuda_(device.is_cuda()) {
  if (!enabled_) return;
  if (cuda_) {
    at::autocast::set_enabled(true);
  } else {
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
  }
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  if (cuda_) at::autocast::set_enabled(false);
  else at::autocast::set_cpu_enabled(false);
}

GradScaler::GradScaler(Options o) : o_(o), scale_(o.init_scale) {}

torch::Tensor GradScaler::Scale(const torch::Tensor& loss) const {
  return o_.enabled ? loss * scale_ : loss;
}

bool GradScaler::Unscale(const std::vector<torch::Tensor>& params) {
  found_inf_ = false;
  unscaled_ = true;
  if (!o_.enabled) return false;
  torch::NoGradGuard ng;
  const double inv = 1.0 / scale_;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    auto g = p.grad();
    g.mul_(inv);
    if (!torch::isfinite(g).all().item<bool>()) found_inf_ = true;
  }
  return found_inf_;
}

bool GradScaler::Step(torch::optim::Optimizer& opt, const std::vector<torch::Tensor>& params) {
  if (!unscaled_) Unscale(params);
  unscaled_ = false;
  if (!o_.enabled) {
    opt.step();
    return true;
  }
  if (found_inf_) {
    ++skipped_;
    scale_ *= o_.backoff_factor;
    tracker_ = 0;
    return false;
  }
  opt.step();
  if (++tracker_ >= o_.growth_interval) {
    scale_ *= o_.growth_factor;
    tracker_ = 0;
  }
  return true;
}

}  // namespace imagepack::trainer
