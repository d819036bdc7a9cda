// torchvision's batch mixing (references/classification/transforms.py,
// RandomMixup and RandomCutmix, v0.14): each batch is paired with itself
// rolled by one sample; the targets become one-hot, then mixed by the
// same lambda. Every draw is a function of (seed, epoch, step, rank), so a
// run repeats bit for bit and a resumed run draws what the uninterrupted
// one drew.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace imagepack::trainer {

struct MixOptions {
  double mixup_alpha = 0;   // --mixup-alpha: lambda ~ Beta(a, a), images blended
  double cutmix_alpha = 0;  // --cutmix-alpha: lambda ~ Beta(a, a), a box pasted
  bool enabled() const { return mixup_alpha > 0 || cutmix_alpha > 0; }
};

// What one batch drew.
struct MixDraw {
  enum class Kind { kNone, kMixup, kCutmix } kind = Kind::kNone;
  double beta = 1;   // the Beta(a, a) draw
  int64_t cx = 0, cy = 0;            // cutmix: the box's centre (uniform over the image)
  int64_t x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // cutmix: the box, clipped, [x1, x2) x [y1, y2)
  double lambda = 1;  // the first image's share: beta (mixup), 1 - box area / image area (cutmix)
};

// The draw for a batch of h x w images: mixup or cutmix (probability 1/2
// each when both alphas are > 0), lambda, and for cutmix the box: centre
// uniform, half-sides int(0.5 * sqrt(1 - lambda) * side), clipped to the
// image.
MixDraw DrawMix(const MixOptions& o, uint64_t seed, int64_t epoch, int64_t step, int64_t rank, int64_t h,
                int64_t w);

// Applies `d` to the batch x [n, C, H, W] (in place) and returns the soft
// targets [n, classes] (float32): lambda * onehot(y) + (1 - lambda) *
// onehot(y rolled by one).
torch::Tensor ApplyMix(const MixDraw& d, torch::Tensor& x, const torch::Tensor& labels, int64_t classes);

// Cross entropy of `logits` against soft targets, with label smoothing
// (torch's cross_entropy with class probabilities).
torch::Tensor SoftTargetLoss(const torch::Tensor& logits, const torch::Tensor& soft, double label_smoothing);

}  // namespace imagepack::trainer
