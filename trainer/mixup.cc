#include "mixup.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>

namespace imagepack::trainer {
namespace {

uint64_t Mix64(uint64_t z) {  // SplitMix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

MixDraw DrawMix(const MixOptions& o, uint64_t seed, int64_t epoch, int64_t step, int64_t rank, int64_t h,
                int64_t w) {
  MixDraw d;
  if (!o.enabled()) return d;
  uint64_t key = Mix64(seed ^ 0x6d69787570ULL);  // "mixup": apart from the loader's streams
  for (int64_t part : {epoch, step, rank}) key = Mix64(key + static_cast<uint64_t>(part) + 0x9e3779b97f4a7c15ULL);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(key);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  bool cutmix = o.cutmix_alpha > 0;
  if (o.mixup_alpha > 0 && o.cutmix_alpha > 0) cutmix = torch::rand({1}, gen, f64).item<double>() < 0.5;
  const double alpha = cutmix ? o.cutmix_alpha : o.mixup_alpha;
  d.beta = at::_sample_dirichlet(torch::full({2}, alpha, f64), gen)[0].item<double>();
  if (!cutmix) {
    d.kind = MixDraw::Kind::kMixup;
    d.lambda = d.beta;
    return d;
  }
  d.kind = MixDraw::Kind::kCutmix;
  d.cx = torch::randint(w, {1}, gen, torch::kInt64).item<int64_t>();
  d.cy = torch::randint(h, {1}, gen, torch::kInt64).item<int64_t>();
  const double r = 0.5 * std::sqrt(1.0 - d.beta);
  const auto half_w = static_cast<int64_t>(r * double(w)), half_h = static_cast<int64_t>(r * double(h));
  d.x1 = std::max<int64_t>(0, d.cx - half_w);
  d.y1 = std::max<int64_t>(0, d.cy - half_h);
  d.x2 = std::min<int64_t>(w, d.cx + half_w);
  d.y2 = std::min<int64_t>(h, d.cy + half_h);
  d.lambda = 1.0 - double((d.x2 - d.x1) * (d.y2 - d.y1)) / double(w * h);
  return d;
}

torch::Tensor ApplyMix(const MixDraw& d, torch::Tensor& x, const torch::Tensor& labels, int64_t classes) {
  auto target = torch::one_hot(labels.to(torch::kInt64), classes).to(torch::kFloat32);
  if (d.kind == MixDraw::Kind::kNone) return target;
  torch::NoGradGuard ng;
  const auto rolled = x.roll(1, 0);
  if (d.kind == MixDraw::Kind::kMixup) {
    x.mul_(d.lambda).add_(rolled * (1.0 - d.lambda));
  } else if (d.x2 > d.x1 && d.y2 > d.y1) {
    using torch::indexing::Slice;
    x.index_put_({Slice(), Slice(), Slice(d.y1, d.y2), Slice(d.x1, d.x2)},
                 rolled.index({Slice(), Slice(), Slice(d.y1, d.y2), Slice(d.x1, d.x2)}));
  }
  return target.mul(d.lambda).add_(target.roll(1, 0).mul(1.0 - d.lambda));
}

torch::Tensor SoftTargetLoss(const torch::Tensor& logits, const torch::Tensor& soft, double label_smoothing) {
  namespace F = torch::nn::functional;
  return F::cross_entropy(logits, soft, F::CrossEntropyFuncOptions().label_smoothing(label_smoothing));
}

}  // namespace imagepack::trainer
