// The policies of torchvision.transforms.autoaugment: their augmentation
// spaces (an operation, its magnitude bins, whether a sign is drawn) and
// their draws, from the caller's SplitMix64.
#include <algorithm>
#include <cmath>
#include <string>

#include "image/augment/augment_internal.h"
#include "imagepack/augment.h"

namespace imagepack {
namespace {

using internal::AutoAugmentTable;
using internal::SubPolicy;

enum class Space : uint8_t { kTrivialWide, kRand, kAuto, kAugMix };

constexpr AugOp kTrivialOps[] = {AugOp::kIdentity,   AugOp::kShearX,    AugOp::kShearY,       AugOp::kTranslateX,
                                 AugOp::kTranslateY, AugOp::kRotate,    AugOp::kBrightness,   AugOp::kColor,
                                 AugOp::kContrast,   AugOp::kSharpness, AugOp::kPosterize,    AugOp::kSolarize,
                                 AugOp::kAutoContrast, AugOp::kEqualize};
// AugMix's space, in the order torchvision's dict holds it (the four
// colour operations appended when all_ops).
constexpr AugOp kAugMixOps[] = {AugOp::kShearX,    AugOp::kShearY,   AugOp::kTranslateX,   AugOp::kTranslateY,
                                AugOp::kRotate,    AugOp::kPosterize, AugOp::kSolarize,    AugOp::kAutoContrast,
                                AugOp::kEqualize,  AugOp::kBrightness, AugOp::kColor,      AugOp::kContrast,
                                AugOp::kSharpness};

bool Signed(AugOp op) {
  switch (op) {
    case AugOp::kShearX: case AugOp::kShearY: case AugOp::kTranslateX: case AugOp::kTranslateY:
    case AugOp::kRotate: case AugOp::kBrightness: case AugOp::kColor: case AugOp::kContrast:
    case AugOp::kSharpness: return true;
    default: return false;
  }
}

bool HasMagnitude(AugOp op) {
  return op != AugOp::kIdentity && op != AugOp::kAutoContrast && op != AugOp::kEqualize && op != AugOp::kInvert;
}

// torch.linspace(0, end, bins)[i] in float32.
float LinspaceAt(double start, double end, int bins, int i) {
  const float s = float(start), e = float(end);
  if (bins <= 1) return s;
  const float step = (e - s) / float(bins - 1);
  return i < bins / 2 ? s + step * float(i) : e - step * float(bins - i - 1);
}

// The magnitude of bin `i` of `bins` for `op` in `space` (the image's
// width and height for the translations that scale with it).
double BinMagnitude(Space space, AugOp op, int bins, int i, int width, int height) {
  const bool wide = space == Space::kTrivialWide;
  switch (op) {
    case AugOp::kShearX:
    case AugOp::kShearY: return LinspaceAt(0, wide ? 0.99 : 0.3, bins, i);
    case AugOp::kTranslateX:
    case AugOp::kTranslateY: {
      const double side = op == AugOp::kTranslateX ? width : height;
      const double end = wide ? 32.0 : space == Space::kAugMix ? side / 3.0 : 150.0 / 331.0 * side;
      return LinspaceAt(0, end, bins, i);
    }
    case AugOp::kRotate: return LinspaceAt(0, wide ? 135.0 : 30.0, bins, i);
    case AugOp::kBrightness:
    case AugOp::kColor:
    case AugOp::kContrast:
    case AugOp::kSharpness: return LinspaceAt(0, wide ? 0.99 : 0.9, bins, i);
    case AugOp::kPosterize: {
      // 8 - (arange(bins) / ((bins - 1) / k)).round(): float32, half to even.
      const float div = float(double(bins - 1) / (wide ? 6.0 : 4.0));
      const int base = space == Space::kAugMix ? 4 : 8;
      return base - static_cast<int>(std::nearbyint(float(i) / div));
    }
    case AugOp::kSolarize: return LinspaceAt(255.0, 0.0, bins, i);
    default: return 0.0;
  }
}

void Apply(const AugmentOptions& o, AugOp op, double magnitude, Image* img, AugmentLog* log) {
  ApplyAugOp(op, magnitude, o.interpolation, o.has_fill ? o.fill : nullptr, img);
  if (log) log->steps.push_back({op, magnitude});
}

// One operation drawn from `ops` with a magnitude bin from [0, bin_limit)
// (fixed_bin >= 0: that bin) and a sign.
void RandomOp(const AugmentOptions& o, Space space, const AugOp* ops, int n_ops, int bins, int bin_limit,
              int fixed_bin, SplitMix64& rng, Image* img, AugmentLog* log) {
  const AugOp op = ops[rng.Below(uint64_t(n_ops))];
  double magnitude = 0;
  if (HasMagnitude(op)) {
    const int bin = fixed_bin >= 0 ? fixed_bin : static_cast<int>(rng.Below(uint64_t(bin_limit)));
    magnitude = BinMagnitude(space, op, bins, bin, img->width, img->height);
  }
  if (Signed(op) && (rng.Next() & 1)) magnitude = -magnitude;
  Apply(o, op, magnitude, img, log);
}

void AutoAugmentPolicy(const AugmentOptions& o, SplitMix64& rng, Image* img, AugmentLog* log) {
  int count = 0;
  const SubPolicy* table = AutoAugmentTable(o.kind, &count);
  if (!table || count == 0) return;
  const SubPolicy& sub = table[rng.Below(uint64_t(count))];
  for (const internal::PolicyEntry& e : {sub.first, sub.second}) {
    const float u = static_cast<float>(rng.Uniform());
    const bool negative = rng.Next() & 1;
    if (!(u <= e.p)) continue;
    double magnitude = e.bin >= 0 ? BinMagnitude(Space::kAuto, e.op, 10, e.bin, img->width, img->height) : 0.0;
    if (Signed(e.op) && negative) magnitude = -magnitude;
    Apply(o, e.op, magnitude, img, log);
  }
}

// Gamma(alpha, 1) (Marsaglia and Tsang; alpha < 1 through alpha + 1).
double Gamma(double alpha, SplitMix64& rng) {
  auto normal = [&] {
    const double u1 = 1.0 - rng.Uniform(), u2 = rng.Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
  };
  double boost = 1.0;
  if (alpha < 1.0) {
    boost = std::pow(1.0 - rng.Uniform(), 1.0 / alpha);
    alpha += 1.0;
  }
  const double d = alpha - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (int tries = 0; tries < 1000; ++tries) {
    const double x = normal(), v0 = 1.0 + c * x;
    if (v0 <= 0) continue;
    const double v = v0 * v0 * v0, u = 1.0 - rng.Uniform();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return boost * d * v;
  }
  return boost * d;
}

// Dirichlet(alpha, ..., alpha) of `n` weights, in float32 as torch's.
std::vector<float> Dirichlet(double alpha, int n, SplitMix64& rng) {
  std::vector<double> g(static_cast<size_t>(n));
  double sum = 0;
  for (double& x : g) sum += (x = Gamma(alpha, rng));
  std::vector<float> w(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) w[size_t(i)] = sum > 0 ? float(g[size_t(i)] / sum) : 1.f / float(n);
  return w;
}

void AugMix(const AugmentOptions& o, SplitMix64& rng, Image* img, AugmentLog* log) {
  const int n_ops = o.augmix_all_ops ? 13 : 9;
  const int width = std::clamp(o.augmix_width, 1, 16), severity = std::clamp(o.augmix_severity, 1, 10);
  const double alpha = o.augmix_alpha > 0 && std::isfinite(o.augmix_alpha) ? o.augmix_alpha : 1.0;
  const std::vector<float> m = Dirichlet(alpha, 2, rng);
  std::vector<float> weights = Dirichlet(alpha, width, rng);
  for (float& w : weights) w *= m[1];
  const size_t n = img->pixels.size();
  std::vector<float> mix(n);
  for (size_t i = 0; i < n; ++i) mix[i] = m[0] * float(img->pixels[i]);
  Image chain;
  for (int c = 0; c < width; ++c) {
    chain = *img;
    const int depth = o.augmix_depth > 0 ? std::min(o.augmix_depth, 16) : 1 + static_cast<int>(rng.Below(3));
    for (int k = 0; k < depth; ++k) RandomOp(o, Space::kAugMix, kAugMixOps, n_ops, 10, severity, -1, rng, &chain, log);
    if (log) log->chain_end.push_back(static_cast<int>(log->steps.size()));
    for (size_t i = 0; i < n; ++i) mix[i] += weights[size_t(c)] * float(chain.pixels[i]);
  }
  for (size_t i = 0; i < n; ++i) img->pixels[i] = static_cast<uint8_t>(std::clamp(mix[i], 0.f, 255.f));
  if (log) log->original_weight = m[0], log->chain_weights = weights;
}

constexpr const char* kKindNames[] = {"none", "ta_wide", "ra", "imagenet", "cifar10", "svhn", "augmix"};

}  // namespace

bool ParseAutoAugment(std::string_view name, AutoAugmentKind* kind) {
  if (name.empty()) name = "none";
  for (int i = 0; i < int(std::size(kKindNames)); ++i)
    if (name == kKindNames[i]) {
      *kind = static_cast<AutoAugmentKind>(i);
      return true;
    }
  return false;
}

const char* AutoAugmentName(AutoAugmentKind kind) {
  const int i = static_cast<int>(kind);
  return i < int(std::size(kKindNames)) ? kKindNames[i] : "?";
}

Status CheckAugmentOptions(const AugmentOptions& o) {
  auto bad = [](const std::string& what) { return Status::InvalidArgument(what); };
  if (o.ta_bins < 2 || o.ta_bins > 1000) return bad("TrivialAugmentWide bins must be 2..1000");
  if (o.ra_bins < 2 || o.ra_bins > 1000) return bad("RandAugment num_magnitude_bins must be 2..1000");
  if (o.ra_magnitude < 0 || o.ra_magnitude >= o.ra_bins)
    return bad("RandAugment magnitude must be 0.." + std::to_string(o.ra_bins - 1));
  if (o.ra_num_ops < 0 || o.ra_num_ops > 16) return bad("RandAugment num_ops must be 0..16");
  if (o.augmix_severity < 1 || o.augmix_severity > 10) return bad("AugMix severity must be 1..10");
  if (o.augmix_width < 1 || o.augmix_width > 16) return bad("AugMix width must be 1..16");
  if (o.augmix_depth > 16) return bad("AugMix depth must be at most 16");
  if (!(o.augmix_alpha > 0) || !std::isfinite(o.augmix_alpha)) return bad("AugMix alpha must be positive");
  return Status::Ok();
}

void AutoAugmentImage(const AugmentOptions& o, SplitMix64& rng, Image* img, AugmentLog* log) {
  if (img->width < 1 || img->height < 1 || img->pixels.empty()) return;
  switch (o.kind) {
    case AutoAugmentKind::kNone: return;
    case AutoAugmentKind::kTrivialAugmentWide: {
      const int bins = std::clamp(o.ta_bins, 2, 1000);
      return RandomOp(o, Space::kTrivialWide, kTrivialOps, 14, bins, bins, -1, rng, img, log);
    }
    case AutoAugmentKind::kRandAugment: {
      const int bins = std::clamp(o.ra_bins, 2, 1000), mag = std::clamp(o.ra_magnitude, 0, bins - 1);
      for (int k = 0; k < std::clamp(o.ra_num_ops, 0, 16); ++k)
        RandomOp(o, Space::kRand, kTrivialOps, 14, bins, bins, mag, rng, img, log);
      return;
    }
    case AutoAugmentKind::kImageNet:
    case AutoAugmentKind::kCifar10:
    case AutoAugmentKind::kSvhn: return AutoAugmentPolicy(o, rng, img, log);
    case AutoAugmentKind::kAugMix: return AugMix(o, rng, img, log);
  }
}

}  // namespace imagepack
