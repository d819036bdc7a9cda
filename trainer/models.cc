// ResNet-18/50 with torchvision's architecture and initialisation
// (kaiming_normal fan_out for convolutions, BN weight 1 / bias 0), a small
// BN CNN for 28-32 px images, and an MLP without BN (used where exact DDP
// equivalence is tested: BN statistics are per-process).
#include "models.h"

#include <stdexcept>

namespace imagepack::trainer {
namespace {

namespace nn = torch::nn;

nn::Conv2d Conv(int64_t in, int64_t out, int64_t k, int64_t stride = 1, int64_t pad = 0) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(pad).bias(false));
}

// BlurPool's low-pass (Zhang, "Making Convolutional Networks Shift-Invariant
// Again", 2019): [1 2 1]^T [1 2 1] / 16 on each channel, stride 1, padded by
// 1, so that the strided convolution after it subsamples a blurred map. A
// fixed filter: a buffer, never trained.
struct BlurImpl : nn::Module {
  explicit BlurImpl(int64_t channels) : channels_(channels) {
    const auto k = torch::tensor({1.0f, 2.0f, 1.0f});
    filter_ = register_buffer("blur", (k.view({3, 1}) * k.view({1, 3}) / 16).expand({channels, 1, 3, 3}).contiguous());
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::conv2d(x, filter_.to(x.scalar_type()), {}, 1, 1, 1, channels_);
  }
  int64_t channels_;
  torch::Tensor filter_;
};
TORCH_MODULE(Blur);

// The blur before a strided convolution of `in` channels when BlurPool is
// on (a stride above 1 and at least 16 input channels, FFCV's rule), or
// none. Registered as a module of its own beside the convolution, so the
// parameters keep their names (checkpoints load either way).
Blur BlurFor(nn::Module& block, const std::string& name, int64_t in, int64_t stride, bool blurpool) {
  if (!blurpool || stride <= 1 || in < 16) return Blur(nullptr);
  return block.register_module(name, Blur(in));
}
torch::Tensor Blurred(Blur& blur, const torch::Tensor& x) { return blur ? blur->forward(x) : x; }

struct BasicBlockImpl : nn::Module {
  static constexpr int64_t kExpansion = 1;
  BasicBlockImpl(int64_t in, int64_t planes, int64_t stride, bool blurpool)
      : conv1(Conv(in, planes, 3, stride, 1)), bn1(planes), conv2(Conv(planes, planes, 3, 1, 1)), bn2(planes) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    blur_conv = BlurFor(*this, "blur_conv1", in, stride, blurpool);
    if (stride != 1 || in != planes) {
      downsample = nn::Sequential(Conv(in, planes, 1, stride), nn::BatchNorm2d(planes));
      register_module("downsample", downsample);
      blur_down = BlurFor(*this, "blur_downsample", in, stride, blurpool);
    }
  }
  // In-place ReLU and residual add, as torchvision does: on CPU every
  // avoided activation-sized allocation is a page-faulting mmap avoided.
  torch::Tensor forward(torch::Tensor x) {
    auto identity = downsample ? downsample->forward(Blurred(blur_down, x)) : x;
    auto out = bn1(conv1(Blurred(blur_conv, x))).relu_();
    out = bn2(conv2(out));
    out += identity;
    return out.relu_();
  }
  nn::BatchNorm2d& last_bn() { return bn2; }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Sequential downsample{nullptr};
  Blur blur_conv{nullptr}, blur_down{nullptr};  // BlurPool: before conv1 and the downsample
};
TORCH_MODULE(BasicBlock);

struct BottleneckImpl : nn::Module {
  static constexpr int64_t kExpansion = 4;
  BottleneckImpl(int64_t in, int64_t planes, int64_t stride, bool blurpool)
      : conv1(Conv(in, planes, 1)), bn1(planes), conv2(Conv(planes, planes, 3, stride, 1)), bn2(planes),
        conv3(Conv(planes, planes * 4, 1)), bn3(planes * 4) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    register_module("conv3", conv3);
    register_module("bn3", bn3);
    blur_conv = BlurFor(*this, "blur_conv2", planes, stride, blurpool);
    if (stride != 1 || in != planes * 4) {
      downsample = nn::Sequential(Conv(in, planes * 4, 1, stride), nn::BatchNorm2d(planes * 4));
      register_module("downsample", downsample);
      blur_down = BlurFor(*this, "blur_downsample", in, stride, blurpool);
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    auto identity = downsample ? downsample->forward(Blurred(blur_down, x)) : x;
    auto out = bn1(conv1(x)).relu_();
    out = bn2(conv2(Blurred(blur_conv, out))).relu_();
    out = bn3(conv3(out));
    out += identity;
    return out.relu_();
  }
  nn::BatchNorm2d& last_bn() { return bn3; }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Conv2d conv3;
  nn::BatchNorm2d bn3;
  nn::Sequential downsample{nullptr};
  Blur blur_conv{nullptr}, blur_down{nullptr};  // BlurPool: before conv2 (strided) and the downsample
};
TORCH_MODULE(Bottleneck);

template <typename Block>
struct ResNetImpl : nn::Module {
  ResNetImpl(std::vector<int64_t> layers, const ModelOptions& o)
      : blurpool_(o.blurpool), conv1(Conv(o.in_channels, 64, 7, 2, 3)), bn1(64),
        fc(512 * Block::Impl::kExpansion, o.num_classes) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    layer1 = register_module("layer1", MakeLayer(64, layers[0], 1));
    layer2 = register_module("layer2", MakeLayer(128, layers[1], 2));
    layer3 = register_module("layer3", MakeLayer(256, layers[2], 2));
    layer4 = register_module("layer4", MakeLayer(512, layers[3], 2));
    register_module("fc", fc);
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* c = m->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
      } else if (auto* b = m->as<nn::BatchNorm2d>()) {
        nn::init::ones_(b->weight);
        nn::init::zeros_(b->bias);
      }
    }
    if (o.zero_init_residual)
      for (auto& m : modules(false))
        if (auto* blk = m->as<typename Block::Impl>()) nn::init::zeros_(blk->last_bn()->weight);
  }
  nn::Sequential MakeLayer(int64_t planes, int64_t blocks, int64_t stride) {
    nn::Sequential seq;
    seq->push_back(Block(inplanes_, planes, stride, blurpool_));
    inplanes_ = planes * Block::Impl::kExpansion;
    for (int64_t i = 1; i < blocks; ++i) seq->push_back(Block(inplanes_, planes, 1, blurpool_));
    return seq;
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(bn1(conv1(x)).relu_(), 3, 2, 1);
    x = layer4->forward(layer3->forward(layer2->forward(layer1->forward(x))));
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc(x);
  }
  bool blurpool_;
  int64_t inplanes_ = 64;
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Sequential layer1{nullptr}, layer2{nullptr}, layer3{nullptr}, layer4{nullptr};
  nn::Linear fc;
};

struct SmallCnnImpl : nn::Module {
  explicit SmallCnnImpl(const ModelOptions& o) {
    features = register_module(
        "features", nn::Sequential(Conv(o.in_channels, 32, 3, 1, 1), nn::BatchNorm2d(32), nn::ReLU(nn::ReLUOptions().inplace(true)),
                                   nn::MaxPool2d(2), Conv(32, 64, 3, 1, 1), nn::BatchNorm2d(64), nn::ReLU(nn::ReLUOptions().inplace(true)),
                                   nn::MaxPool2d(2), Conv(64, 128, 3, 1, 1), nn::BatchNorm2d(128), nn::ReLU(nn::ReLUOptions().inplace(true))));
    fc = register_module("fc", nn::Linear(128, o.num_classes));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = features->forward(x);
    return fc(torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
  }
  nn::Sequential features{nullptr};
  nn::Linear fc{nullptr};
};
TORCH_MODULE(SmallCnn);

struct MlpImpl : nn::Module {
  explicit MlpImpl(const ModelOptions& o) {
    fc1 = register_module("fc1", nn::Linear(o.in_channels * o.input_size * o.input_size, 64));
    fc2 = register_module("fc2", nn::Linear(64, o.num_classes));
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x.flatten(1)))); }
  nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Mlp);

// Conv 3x3 + BN + ReLU, the dense models' unit.
nn::Sequential ConvBnRelu(int64_t in, int64_t out, int64_t stride = 1) {
  return nn::Sequential(Conv(in, out, 3, stride, 1), nn::BatchNorm2d(out), nn::ReLU(nn::ReLUOptions().inplace(true)));
}
// Two units, the first with `stride`: one encoder stage.
nn::Sequential Stage(int64_t in, int64_t out, int64_t stride) {
  return nn::Sequential(Conv(in, out, 3, stride, 1), nn::BatchNorm2d(out), nn::ReLU(nn::ReLUOptions().inplace(true)),
                        Conv(out, out, 3, 1, 1), nn::BatchNorm2d(out), nn::ReLU(nn::ReLUOptions().inplace(true)));
}

// Dense prediction, per-pixel outputs at the input's size:
//   fcn_small  (segmentation): an encoder of strided conv blocks (1, 1/2,
//              1/4, 1/8 of the input; 16-32-64-128 channels) and a decoder
//              that upsamples (bilinear), convolves (3x3 + BN + ReLU) and
//              adds the encoder's feature of the same scale (FCN-style
//              skips, 1x1 projections), to logits.
//   unet_small (restoration): the same encoder, a decoder that concatenates
//              each skip (U-Net) and convolves; output = input + residual,
//              so an untrained network starts as the identity.
// Sizes must be multiples of 8.
struct DenseNetImpl : nn::Module {
  DenseNetImpl(const ModelOptions& o, bool unet) : unet_(unet), residual_(unet) {
    const int64_t w[4] = {16, 32, 64, 128};
    enc0 = register_module("enc0", Stage(o.in_channels, w[0], 1));
    enc1 = register_module("enc1", Stage(w[0], w[1], 2));
    enc2 = register_module("enc2", Stage(w[1], w[2], 2));
    enc3 = register_module("enc3", Stage(w[2], w[3], 2));
    for (int k = 2; k >= 0; --k) {
      // U-Net: conv over [upsampled, skip]; FCN: conv of the upsampled, plus a 1x1 projection of the skip.
      dec.push_back(register_module("dec" + std::to_string(k),
                                    unet ? ConvBnRelu(w[k + 1] + w[k], w[k]) : ConvBnRelu(w[k + 1], w[k])));
      skip.push_back(register_module("skip" + std::to_string(k),
                                     unet ? nn::Sequential(nn::Identity()) : nn::Sequential(Conv(w[k], w[k], 1))));
    }
    head = register_module("head", nn::Conv2d(nn::Conv2dOptions(w[0], o.num_classes, 1)));
    for (auto& m : modules(/*include_self=*/false)) {
      if (auto* c = m->as<nn::Conv2d>()) nn::init::kaiming_normal_(c->weight, 0, torch::kFanOut, torch::kReLU);
    }
    if (residual_) {  // start as the identity
      nn::init::zeros_(head->weight);
      nn::init::zeros_(head->bias);
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    const auto e0 = enc0->forward(x);
    const auto e1 = enc1->forward(e0);
    const auto e2 = enc2->forward(e1);
    auto y = enc3->forward(e2);
    const torch::Tensor skips[3] = {e2, e1, e0};
    for (size_t i = 0; i < 3; ++i) {
      const auto& s = skips[i];
      y = torch::upsample_bilinear2d(y, {s.size(2), s.size(3)}, /*align_corners=*/false);
      y = unet_ ? dec[i]->forward(torch::cat({y, s}, 1)) : dec[i]->forward(y) + skip[i]->forward(s);
    }
    auto out = head(y);
    return residual_ ? out + x : out;
  }
  bool unet_, residual_;
  nn::Sequential enc0{nullptr}, enc1{nullptr}, enc2{nullptr}, enc3{nullptr};
  std::vector<nn::Sequential> dec, skip;
  nn::Conv2d head{nullptr};
};

}  // namespace

const char* const kArchNames = "resnet18, resnet50, small_cnn, mlp; dense: fcn_small, unet_small";

bool KnownArch(const std::string& a) {
  return a == "resnet18" || a == "resnet50" || a == "small_cnn" || a == "mlp" || a == "fcn_small" ||
         a == "unet_small";
}

torch::nn::AnyModule MakeModel(const ModelOptions& o, std::shared_ptr<torch::nn::Module>* module) {
  if (o.arch == "resnet18") {
    auto m = std::make_shared<ResNetImpl<BasicBlock>>(std::vector<int64_t>{2, 2, 2, 2}, o);
    *module = m;
    return torch::nn::AnyModule(m);
  }
  if (o.arch == "resnet50") {
    auto m = std::make_shared<ResNetImpl<Bottleneck>>(std::vector<int64_t>{3, 4, 6, 3}, o);
    *module = m;
    return torch::nn::AnyModule(m);
  }
  if (o.arch == "small_cnn") {
    SmallCnn m(o);
    *module = m.ptr();
    return torch::nn::AnyModule(m);
  }
  if (o.arch == "mlp") {
    Mlp m(o);
    *module = m.ptr();
    return torch::nn::AnyModule(m);
  }
  if (o.arch == "fcn_small" || o.arch == "unet_small") {
    auto m = std::make_shared<DenseNetImpl>(o, o.arch == "unet_small");
    *module = m;
    return torch::nn::AnyModule(m);
  }
  throw std::invalid_argument("unknown --arch '" + o.arch + "' (" + kArchNames + ")");
}

int64_t CountParameters(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace imagepack::trainer
