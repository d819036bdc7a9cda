// What the augmentation files share: torchvision's blend of two uint8
// values (float32, clamped, truncated), its grayscale, AutoAugment's
// tables. Internal.
#pragma once

#include <cstdint>
#include <iterator>

#include "imagepack/augment.h"
#include "imagepack/pixels.h"

namespace imagepack::internal {

// ratio * a + rest * b in float32, clamped to [0, 255], truncated.
uint8_t BlendPixel(float ratio, float rest, float a, float b);
// rgb_to_grayscale of one RGB pixel: 0.2989 R + 0.587 G + 0.114 B, truncated.
uint8_t GrayOf(const uint8_t* rgb);
// BlendPixel(factor, 1 - factor, a, b) from two tables of products.
struct BlendTables {
  explicit BlendTables(double factor);
  uint8_t Blend(uint8_t x, uint8_t y) const {
    float v = a[x] + b[y];
    v = v < 0.f ? 0.f : v > 255.f ? 255.f : v;
    return static_cast<uint8_t>(v);
  }
  float a[256], b[256];
};
// _blend(img, other, factor) over all samples; `other` has img's layout.
void BlendWith(Image* img, const uint8_t* other, double factor);

// Whether the SSE4.1 builds of the affine and blur loops run (the CPU has
// SSE4.1); a test turns it off to hold the baseline builds to the same
// bytes. Not for concurrent use while turned.
bool& UseSse41();
// Likewise the AVX2 build of the bilinear affine loop (eight pixels at a
// time, the same float32 operations: the same bytes).
bool& UseAvx2();

// One of AutoAugment's sub-policies: two (operation, probability,
// magnitude bin) entries; bin -1: no magnitude.
struct PolicyEntry {
  AugOp op;
  float p;
  int bin;
};
struct SubPolicy {
  PolicyEntry first, second;
};
// The imagenet, cifar10 or svhn table (null, 0 for other kinds).
const SubPolicy* AutoAugmentTable(AutoAugmentKind kind, int* count);

}  // namespace imagepack::internal
