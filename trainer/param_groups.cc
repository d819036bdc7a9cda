#include "param_groups.h"

#include <set>

namespace imagepack::trainer {

bool IsNormLayer(const torch::nn::Module& m) {
  namespace nn = torch::nn;
  return dynamic_cast<const nn::BatchNorm1dImpl*>(&m) || dynamic_cast<const nn::BatchNorm2dImpl*>(&m) ||
         dynamic_cast<const nn::BatchNorm3dImpl*>(&m) || dynamic_cast<const nn::GroupNormImpl*>(&m) ||
         dynamic_cast<const nn::LayerNormImpl*>(&m) || dynamic_cast<const nn::InstanceNorm1dImpl*>(&m) ||
         dynamic_cast<const nn::InstanceNorm2dImpl*>(&m) || dynamic_cast<const nn::InstanceNorm3dImpl*>(&m) ||
         dynamic_cast<const nn::LocalResponseNormImpl*>(&m);
}

std::vector<ParamGroup> GroupByDecay(torch::nn::Module& model, const DecayGroups& o) {
  std::set<const void*> norm;
  if (o.norm_wd >= 0)
    for (const auto& m : model.modules(/*include_self=*/true))
      if (IsNormLayer(*m))
        for (const auto& p : m->parameters(/*recurse=*/false)) norm.insert(p.unsafeGetTensorImpl());
  ParamGroup rest{{}, o.wd}, norms{{}, o.norm_wd}, none{{}, 0.0};
  for (const auto& p : model.parameters()) {
    if (norm.count(p.unsafeGetTensorImpl())) norms.params.push_back(p);
    else if (o.no_bn_wd && p.dim() <= 1) none.params.push_back(p);
    else rest.params.push_back(p);
  }
  std::vector<ParamGroup> out;
  for (auto* g : {&rest, &norms, &none})
    if (!g->params.empty()) out.push_back(*g);
  return out;
}

double ClipGradNorm(const std::vector<torch::Tensor>& params, double max_norm) {
  torch::NoGradGuard ng;
  std::vector<torch::Tensor> norms;
  for (const auto& p : params)
    if (p.grad().defined()) norms.push_back(p.grad().norm(2));
  if (norms.empty()) return 0;
  const torch::Tensor total = torch::stack(norms).norm(2);
  const torch::Tensor coef = (max_norm / (total + 1e-6)).clamp_max(1.0);
  for (const auto& p : params)
    if (p.grad().defined()) p.mutable_grad().mul_(coef);
  return total.item<double>();
}

}  // namespace imagepack::trainer
