// --model-ema: torchvision's ExponentialMovingAverage (references/
// classification/utils.py, an AveragedModel with use_buffers=True): every
// parameter and buffer averaged as decay * average + (1 - decay) * value,
// the first update (n_averaged 0) a copy.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace imagepack::trainer {

// The decay the reference uses for --model-ema-decay D updated every
// `steps` steps: alpha = 1 - D scaled by world * batch * steps / epochs,
// capped at 1; decay = 1 - alpha.
double AdjustedEmaDecay(double decay, int64_t world, int64_t batch, int64_t steps, int64_t epochs);

class ModelEma {
 public:
  // `average`: a model of the same architecture that holds the average
  // (its tensors are overwritten by the first update).
  ModelEma(std::shared_ptr<torch::nn::Module> average, double decay);

  // One update from `model`'s parameters and buffers (same order).
  void Update(torch::nn::Module& model);
  // n_averaged back to 0: the next update copies (the reference does so
  // after each update of the warm-up epochs).
  void Reset() { n_averaged_ = 0; }

  torch::nn::Module& module() { return *average_; }
  std::shared_ptr<torch::nn::Module> shared() { return average_; }
  int64_t n_averaged() const { return n_averaged_; }
  void set_n_averaged(int64_t n) { n_averaged_ = n; }
  double decay() const { return decay_; }
  // The average's parameters and buffers, in registration order.
  std::vector<torch::Tensor> Tensors() const;

 private:
  std::shared_ptr<torch::nn::Module> average_;
  double decay_;
  int64_t n_averaged_ = 0;
};

}  // namespace imagepack::trainer
