// The optimizer's parameter groups by weight decay, and gradient clipping.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace imagepack::trainer {

struct DecayGroups {
  // --wd W, --norm-weight-decay N (norm_wd < 0: not given), --no-bn-wd.
  double wd = 0, norm_wd = -1;
  bool no_bn_wd = false;
};

struct ParamGroup {
  std::vector<torch::Tensor> params;
  double weight_decay = 0;
};

// Whether `m` is a normalisation layer (BatchNorm, GroupNorm, LayerNorm,
// InstanceNorm, LocalResponseNorm), whose parameters --norm-weight-decay
// governs (torchvision's utils.set_weight_decay).
bool IsNormLayer(const torch::nn::Module& m);

// The parameters of `model` in groups, in registration order, empty groups
// left out: the normalisation layers' with norm_wd (when given); the rest
// with wd, except, with no_bn_wd, those of one dimension or none (biases,
// and norm layers' when norm_wd is not given) with 0.
std::vector<ParamGroup> GroupByDecay(torch::nn::Module& model, const DecayGroups& o);

// Scales the gradients so that their global 2-norm is at most max_norm
// (torch.nn.utils.clip_grad_norm_: coefficient max_norm / (norm + 1e-6),
// capped at 1). Returns the norm before clipping.
double ClipGradNorm(const std::vector<torch::Tensor>& params, double max_norm);

}  // namespace imagepack::trainer
