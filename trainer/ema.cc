#include "ema.h"

#include <algorithm>
#include <stdexcept>

namespace imagepack::trainer {

double AdjustedEmaDecay(double decay, int64_t world, int64_t batch, int64_t steps, int64_t epochs) {
  const double adjust = double(world) * double(batch) * double(steps) / double(std::max<int64_t>(1, epochs));
  return 1.0 - std::min(1.0, (1.0 - decay) * adjust);
}

ModelEma::ModelEma(std::shared_ptr<torch::nn::Module> average, double decay)
    : average_(std::move(average)), decay_(decay) {
  for (auto& p : average_->parameters()) p.set_requires_grad(false);
}

std::vector<torch::Tensor> ModelEma::Tensors() const {
  std::vector<torch::Tensor> out = average_->parameters();
  for (const auto& b : average_->buffers()) out.push_back(b);
  return out;
}

void ModelEma::Update(torch::nn::Module& model) {
  torch::NoGradGuard ng;
  std::vector<torch::Tensor> from = model.parameters();
  for (const auto& b : model.buffers()) from.push_back(b);
  std::vector<torch::Tensor> to = Tensors();
  if (from.size() != to.size()) throw std::logic_error("--model-ema: the average's tensors are not the model's");
  for (size_t i = 0; i < to.size(); ++i) {
    const torch::Tensor v = from[i].detach().to(to[i].device());
    // The reference's arithmetic: avg_fn(avg, v) = decay * avg + (1 - decay) * v,
    // copied into the average (an integer buffer is truncated back).
    if (n_averaged_ == 0) to[i].copy_(v);
    else to[i].copy_(to[i] * decay_ + v * (1.0 - decay_));
  }
  ++n_averaged_;
}

}  // namespace imagepack::trainer
