#include "amp.h"

#include <ATen/autocast_mode.h>

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace imagepack::trainer {

bool CpuHasNativeBf16() {
  if (const char* v = std::getenv("IMAGEPACK_CPU_BF16"); v && *v) return std::strcmp(v, "0") != 0;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx_bf16 = (d >> 22) & 1;
  const unsigned max_subleaf = a;
  bool avx512_bf16 = false;
  if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) avx512_bf16 = (a >> 5) & 1;
  return amx_bf16 || avx512_bf16;
#else
  return false;
#endif
}

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
