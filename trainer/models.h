// Models for the trainer: torchvision's ResNets and a small BN CNN
// (classification), a small FCN (segmentation) and a small U-Net
// (restoration).
#pragma once

#include <torch/torch.h>

#include <string>

namespace imagepack::trainer {

struct ModelOptions {
  std::string arch = "resnet18";  // resnet18 | resnet50 | small_cnn | mlp | fcn_small | unet_small
  int64_t num_classes = 1000;     // outputs: classes, or (restoration) image channels
  int64_t in_channels = 3;
  int64_t input_size = 224;       // mlp only (its first layer is size-dependent)
  bool zero_init_residual = false;  // last BN of each residual block starts at 0
  // ResNets: a fixed 3x3 binomial blur before every strided convolution
  // of at least 16 input channels (BlurPool, Zhang 2019, as FFCV's ImageNet
  // recipe applies it): no parameters, a buffer `blur` per such convolution.
  bool blurpool = false;
};

// The --arch names MakeModel knows, as its error lists them.
bool KnownArch(const std::string& arch);
extern const char* const kArchNames;

// Returns the model as a type-erased module whose forward maps
// float [N, C, H, W] to logits [N, num_classes] (classification) or to
// [N, num_classes, H, W] (fcn_small, unet_small; H and W multiples of 8).
// Throws std::invalid_argument for an unknown arch.
torch::nn::AnyModule MakeModel(const ModelOptions& opts, std::shared_ptr<torch::nn::Module>* module);

int64_t CountParameters(const torch::nn::Module& m);

}  // namespace imagepack::trainer
