// Per-sample augmentations on decoded 8-bit pixels (HWC, 1 or 3 channels),
// the operations and policies of torchvision's classification recipes:
// the AutoAugment operation set, ColorJitter, RandomErasing, and the
// policies that draw from them (TrivialAugmentWide, RandAugment, AutoAugment
// with its imagenet/cifar10/svhn tables, AugMix).
//
// Each operation computes what torchvision.transforms.functional computes
// on a uint8 CHW tensor with the same parameters (its float32 blends,
// truncations and roundings, its grayscale weights, its affine grid centred
// on the image); docs/LOADER.md lists the measured differences. Every
// parameter is bounded: any magnitude on any size (1x1 included) reads and
// writes only inside the image. Thread-safe; no state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "imagepack/pixels.h"
#include "imagepack/shard.h"
#include "imagepack/status.h"

namespace imagepack {

// The AutoAugment operation set, in torchvision's order of
// TrivialAugmentWide's augmentation space (plus Invert).
enum class AugOp : uint8_t {
  kIdentity,
  kShearX,
  kShearY,
  kTranslateX,
  kTranslateY,
  kRotate,
  kBrightness,
  kColor,
  kContrast,
  kSharpness,
  kPosterize,
  kSolarize,
  kAutoContrast,
  kEqualize,
  kInvert,
};
inline constexpr int kAugOpCount = 15;

// "ShearX", ... as torchvision names them; Parse is false for other names.
const char* AugOpName(AugOp op);
bool ParseAugOp(std::string_view name, AugOp* op);

enum class AugInterpolation : uint8_t { kNearest, kBilinear };

// torchvision.transforms.autoaugment._apply_op: `magnitude` as torchvision
// passes it (ShearX/Y: the shear's tangent; TranslateX/Y: pixels, truncated
// to an integer; Rotate: degrees, counter-clockwise; Brightness, Color,
// Contrast, Sharpness: factor - 1; Posterize: bits kept, truncated;
// Solarize: the threshold). `fill`: the value of pixels the geometric ops
// bring in from outside (per channel); null is torchvision's fill=None
// (zeros, and bilinear edges not blended with the fill).
// Out-of-range magnitudes are clamped to what the operation accepts
// (factors >= 0, bits in [0, 8]) rather than rejected.
void ApplyAugOp(AugOp op, double magnitude, AugInterpolation interpolation, const uint8_t fill[3], Image* img);

// The functional operations on their own (torchvision.transforms.functional).
void AdjustBrightness(Image* img, double factor);
void AdjustSaturation(Image* img, double factor);  // gray: unchanged
void AdjustContrast(Image* img, double factor);
void AdjustSharpness(Image* img, double factor);  // 2 pixels or fewer on a side: unchanged
void AdjustHue(Image* img, double hue);            // hue in [-0.5, 0.5] (clamped); gray: unchanged
void Posterize(Image* img, int bits);
void Solarize(Image* img, double threshold);
void AutoContrast(Image* img);
void Equalize(Image* img);
void Invert(Image* img);

// F.affine on a tensor: the output pixel (x, y) samples the input at
// inverse * (x - w/2 + 0.5, y - h/2 + 0.5, 1) + (w/2 - 0.5, h/2 - 0.5),
// `inverse` being _get_inverse_affine_matrix's 6 numbers (centre-relative);
// `fill` as in ApplyAugOp.
void AffineTransform(Image* img, const double inverse[6], AugInterpolation interpolation, const uint8_t fill[3]);
// _get_inverse_affine_matrix(center, angle, translate, scale, shear) with
// the centre relative to the image's middle, as F.affine passes it.
void InverseAffineMatrix(double cx, double cy, double angle_deg, double tx, double ty, double scale, double shear_x_deg,
                         double shear_y_deg, double out[6]);

// ColorJitter: each factor range [lo, hi] (hi < lo or lo == hi == 1, hue
// 0..0: left out), applied in a random order, as torchvision draws them.
struct ColorJitterOptions {
  double brightness = 0, contrast = 0, saturation = 0, hue = 0;  // torchvision's scalars
};
struct ColorJitterDraw {
  int order[4] = {0, 1, 2, 3};  // 0 brightness, 1 contrast, 2 saturation, 3 hue
  double brightness = 1, contrast = 1, saturation = 1, hue = 0;
};
ColorJitterDraw DrawColorJitter(const ColorJitterOptions& o, SplitMix64& rng);
void ApplyColorJitter(const ColorJitterOptions& o, const ColorJitterDraw& d, Image* img);

// RandomErasing: with probability p, a box of area fraction in [scale_min,
// scale_max] and log-uniform aspect ratio in [ratio_min, ratio_max] (10
// tries, as RandomErasing.get_params) is set to `value` per channel, or,
// with `random`, to per-pixel values mean + std * N(0, 1) (clamped to
// 0..255): torchvision's value="random" after Normalize(mean, std).
struct EraseOptions {
  double p = 0, scale_min = 0.02, scale_max = 0.33, ratio_min = 0.3, ratio_max = 3.3;
  bool random = false;
  uint8_t value[3] = {0, 0, 0};
  float mean[3] = {124.f, 116.f, 104.f}, std[3] = {58.f, 57.f, 57.f};  // for `random`, in grey levels
};
struct EraseBox {
  int x = 0, y = 0, w = 0, h = 0;  // w == 0: nothing erased
};
EraseBox DrawErase(const EraseOptions& o, int width, int height, SplitMix64& rng);
void ApplyErase(const EraseOptions& o, const EraseBox& box, Image* img, SplitMix64& rng);

}  // namespace imagepack

namespace imagepack {

// The policies of torchvision.transforms.autoaugment, drawing from a
// SplitMix64 (in the loader: the sample's own stream, a function of
// (seed, epoch, position)). Their choices as torchvision makes them: an
// operation uniformly from the policy's augmentation space, a magnitude
// bin, a sign; AutoAugment a sub-policy of its table, each of its two
// operations with its probability; AugMix chains mixed with Dirichlet
// weights.
enum class AutoAugmentKind : uint8_t { kNone, kTrivialAugmentWide, kRandAugment, kImageNet, kCifar10, kSvhn, kAugMix };

// "ta_wide", "ra", "imagenet", "cifar10", "svhn", "augmix" (torchvision's
// reference --auto-augment) or "" / "none".
bool ParseAutoAugment(std::string_view name, AutoAugmentKind* kind);
const char* AutoAugmentName(AutoAugmentKind kind);

struct AugmentOptions {
  AutoAugmentKind kind = AutoAugmentKind::kNone;
  int ta_bins = 31;                                   // TrivialAugmentWide
  int ra_num_ops = 2, ra_magnitude = 9, ra_bins = 31;  // RandAugment
  int augmix_severity = 3, augmix_width = 3, augmix_depth = -1;  // depth < 1: 1 to 3 per chain
  double augmix_alpha = 1.0;
  bool augmix_all_ops = true;
  // torchvision's policies default to nearest (AugMix: bilinear); its
  // reference recipe passes its --interpolation (bilinear) to all.
  AugInterpolation interpolation = AugInterpolation::kBilinear;
  bool has_fill = false;  // false: torchvision's fill=None
  uint8_t fill[3] = {0, 0, 0};
};

// What one call chose, for tests and debugging: the operations applied in
// order (for AugMix: chain after chain, `chain_end` closing each), and
// AugMix's weights (the original's, then one per chain).
struct AugmentStep {
  AugOp op = AugOp::kIdentity;
  double magnitude = 0;
};
struct AugmentLog {
  std::vector<AugmentStep> steps;
  std::vector<int> chain_end;
  float original_weight = 0;
  std::vector<float> chain_weights;
};

// Checks the options' ranges (bins >= 2, magnitude < bins, severity 1..10,
// width >= 1, depth <= 16, alpha > 0, num_ops 0..16); an error names the
// option.
Status CheckAugmentOptions(const AugmentOptions& o);

// Applies the policy to `img` (HWC, 1 or 3 channels). `log`: optional.
void AutoAugmentImage(const AugmentOptions& o, SplitMix64& rng, Image* img, AugmentLog* log = nullptr);

}  // namespace imagepack
