// AutoAugment's learned sub-policies (Cubuk et al., "AutoAugment: Learning
// Augmentation Strategies from Data", as torchvision's AutoAugmentPolicy
// holds them): per policy 25 pairs of (operation, probability, magnitude
// bin of 10; -1: the operation takes none).
#include "image/augment/augment_internal.h"

namespace imagepack::internal {
namespace {

// imagenet: 25 sub-policies.
constexpr SubPolicy kImageNetTable[] = {
    {{AugOp::kPosterize, 0.4f, 8}, {AugOp::kRotate, 0.6f, 9}},
    {{AugOp::kSolarize, 0.6f, 5}, {AugOp::kAutoContrast, 0.6f, -1}},
    {{AugOp::kEqualize, 0.8f, -1}, {AugOp::kEqualize, 0.6f, -1}},
    {{AugOp::kPosterize, 0.6f, 7}, {AugOp::kPosterize, 0.6f, 6}},
    {{AugOp::kEqualize, 0.4f, -1}, {AugOp::kSolarize, 0.2f, 4}},
    {{AugOp::kEqualize, 0.4f, -1}, {AugOp::kRotate, 0.8f, 8}},
    {{AugOp::kSolarize, 0.6f, 3}, {AugOp::kEqualize, 0.6f, -1}},
    {{AugOp::kPosterize, 0.8f, 5}, {AugOp::kEqualize, 1.0f, -1}},
    {{AugOp::kRotate, 0.2f, 3}, {AugOp::kSolarize, 0.6f, 8}},
    {{AugOp::kEqualize, 0.6f, -1}, {AugOp::kPosterize, 0.4f, 6}},
    {{AugOp::kRotate, 0.8f, 8}, {AugOp::kColor, 0.4f, 0}},
    {{AugOp::kRotate, 0.4f, 9}, {AugOp::kEqualize, 0.6f, -1}},
    {{AugOp::kEqualize, 0.0f, -1}, {AugOp::kEqualize, 0.8f, -1}},
    {{AugOp::kInvert, 0.6f, -1}, {AugOp::kEqualize, 1.0f, -1}},
    {{AugOp::kColor, 0.6f, 4}, {AugOp::kContrast, 1.0f, 8}},
    {{AugOp::kRotate, 0.8f, 8}, {AugOp::kColor, 1.0f, 2}},
    {{AugOp::kColor, 0.8f, 8}, {AugOp::kSolarize, 0.8f, 7}},
    {{AugOp::kSharpness, 0.4f, 7}, {AugOp::kInvert, 0.6f, -1}},
    {{AugOp::kShearX, 0.6f, 5}, {AugOp::kEqualize, 1.0f, -1}},
    {{AugOp::kColor, 0.4f, 0}, {AugOp::kEqualize, 0.6f, -1}},
    {{AugOp::kEqualize, 0.4f, -1}, {AugOp::kSolarize, 0.2f, 4}},
    {{AugOp::kSolarize, 0.6f, 5}, {AugOp::kAutoContrast, 0.6f, -1}},
    {{AugOp::kInvert, 0.6f, -1}, {AugOp::kEqualize, 1.0f, -1}},
    {{AugOp::kColor, 0.6f, 4}, {AugOp::kContrast, 1.0f, 8}},
    {{AugOp::kEqualize, 0.8f, -1}, {AugOp::kEqualize, 0.6f, -1}},
};
// cifar10: 25 sub-policies.
constexpr SubPolicy kCifar10Table[] = {
    {{AugOp::kInvert, 0.1f, -1}, {AugOp::kContrast, 0.2f, 6}},
    {{AugOp::kRotate, 0.7f, 2}, {AugOp::kTranslateX, 0.3f, 9}},
    {{AugOp::kSharpness, 0.8f, 1}, {AugOp::kSharpness, 0.9f, 3}},
    {{AugOp::kShearY, 0.5f, 8}, {AugOp::kTranslateY, 0.7f, 9}},
    {{AugOp::kAutoContrast, 0.5f, -1}, {AugOp::kEqualize, 0.9f, -1}},
    {{AugOp::kShearY, 0.2f, 7}, {AugOp::kPosterize, 0.3f, 7}},
    {{AugOp::kColor, 0.4f, 3}, {AugOp::kBrightness, 0.6f, 7}},
    {{AugOp::kSharpness, 0.3f, 9}, {AugOp::kBrightness, 0.7f, 9}},
    {{AugOp::kEqualize, 0.6f, -1}, {AugOp::kEqualize, 0.5f, -1}},
    {{AugOp::kContrast, 0.6f, 7}, {AugOp::kSharpness, 0.6f, 5}},
    {{AugOp::kColor, 0.7f, 7}, {AugOp::kTranslateX, 0.5f, 8}},
    {{AugOp::kEqualize, 0.3f, -1}, {AugOp::kAutoContrast, 0.4f, -1}},
    {{AugOp::kTranslateY, 0.4f, 3}, {AugOp::kSharpness, 0.2f, 6}},
    {{AugOp::kBrightness, 0.9f, 6}, {AugOp::kColor, 0.2f, 8}},
    {{AugOp::kSolarize, 0.5f, 2}, {AugOp::kInvert, 0.0f, -1}},
    {{AugOp::kEqualize, 0.2f, -1}, {AugOp::kAutoContrast, 0.6f, -1}},
    {{AugOp::kEqualize, 0.2f, -1}, {AugOp::kEqualize, 0.6f, -1}},
    {{AugOp::kColor, 0.9f, 9}, {AugOp::kEqualize, 0.6f, -1}},
    {{AugOp::kAutoContrast, 0.8f, -1}, {AugOp::kSolarize, 0.2f, 8}},
    {{AugOp::kBrightness, 0.1f, 3}, {AugOp::kColor, 0.7f, 0}},
    {{AugOp::kSolarize, 0.4f, 5}, {AugOp::kAutoContrast, 0.9f, -1}},
    {{AugOp::kTranslateY, 0.9f, 9}, {AugOp::kTranslateY, 0.7f, 9}},
    {{AugOp::kAutoContrast, 0.9f, -1}, {AugOp::kSolarize, 0.8f, 3}},
    {{AugOp::kEqualize, 0.8f, -1}, {AugOp::kInvert, 0.1f, -1}},
    {{AugOp::kTranslateY, 0.7f, 9}, {AugOp::kAutoContrast, 0.9f, -1}},
};
// svhn: 25 sub-policies.
constexpr SubPolicy kSvhnTable[] = {
    {{AugOp::kShearX, 0.9f, 4}, {AugOp::kInvert, 0.2f, -1}},
    {{AugOp::kShearY, 0.9f, 8}, {AugOp::kInvert, 0.7f, -1}},
    {{AugOp::kEqualize, 0.6f, -1}, {AugOp::kSolarize, 0.6f, 6}},
    {{AugOp::kInvert, 0.9f, -1}, {AugOp::kEqualize, 0.6f, -1}},
    {{AugOp::kEqualize, 0.6f, -1}, {AugOp::kRotate, 0.9f, 3}},
    {{AugOp::kShearX, 0.9f, 4}, {AugOp::kAutoContrast, 0.8f, -1}},
    {{AugOp::kShearY, 0.9f, 8}, {AugOp::kInvert, 0.4f, -1}},
    {{AugOp::kShearY, 0.9f, 5}, {AugOp::kSolarize, 0.2f, 6}},
    {{AugOp::kInvert, 0.9f, -1}, {AugOp::kAutoContrast, 0.8f, -1}},
    {{AugOp::kEqualize, 0.6f, -1}, {AugOp::kRotate, 0.9f, 3}},
    {{AugOp::kShearX, 0.9f, 4}, {AugOp::kSolarize, 0.3f, 3}},
    {{AugOp::kShearY, 0.8f, 8}, {AugOp::kInvert, 0.7f, -1}},
    {{AugOp::kEqualize, 0.9f, -1}, {AugOp::kTranslateY, 0.6f, 6}},
    {{AugOp::kInvert, 0.9f, -1}, {AugOp::kEqualize, 0.6f, -1}},
    {{AugOp::kContrast, 0.3f, 3}, {AugOp::kRotate, 0.8f, 4}},
    {{AugOp::kInvert, 0.8f, -1}, {AugOp::kTranslateY, 0.0f, 2}},
    {{AugOp::kShearY, 0.7f, 6}, {AugOp::kSolarize, 0.4f, 8}},
    {{AugOp::kInvert, 0.6f, -1}, {AugOp::kRotate, 0.8f, 4}},
    {{AugOp::kShearY, 0.3f, 7}, {AugOp::kTranslateX, 0.9f, 3}},
    {{AugOp::kShearX, 0.1f, 6}, {AugOp::kInvert, 0.6f, -1}},
    {{AugOp::kSolarize, 0.7f, 2}, {AugOp::kTranslateY, 0.6f, 7}},
    {{AugOp::kShearY, 0.8f, 4}, {AugOp::kInvert, 0.8f, -1}},
    {{AugOp::kShearX, 0.7f, 9}, {AugOp::kTranslateY, 0.8f, 3}},
    {{AugOp::kShearY, 0.8f, 5}, {AugOp::kAutoContrast, 0.7f, -1}},
    {{AugOp::kShearX, 0.7f, 2}, {AugOp::kInvert, 0.1f, -1}},
};

}  // namespace

const SubPolicy* AutoAugmentTable(AutoAugmentKind kind, int* count) {
  switch (kind) {
    case AutoAugmentKind::kImageNet: *count = int(std::size(kImageNetTable)); return kImageNetTable;
    case AutoAugmentKind::kCifar10: *count = int(std::size(kCifar10Table)); return kCifar10Table;
    case AutoAugmentKind::kSvhn: *count = int(std::size(kSvhnTable)); return kSvhnTable;
    default: *count = 0; return nullptr;
  }
}

}  // namespace imagepack::internal
