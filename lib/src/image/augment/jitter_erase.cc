// ColorJitter and RandomErasing: their draws (torchvision's get_params,
// from the caller's SplitMix64) and their application.
#include <algorithm>
#include <cmath>

#include "imagepack/augment.h"

namespace imagepack {
namespace {

double UniformIn(SplitMix64& rng, double lo, double hi) { return lo + (hi - lo) * rng.Uniform(); }

double Bounded(double v, double lo, double hi) { return std::isfinite(v) ? std::clamp(v, lo, hi) : lo; }

// One standard normal draw (Box-Muller).
double Normal(SplitMix64& rng) {
  const double u1 = 1.0 - rng.Uniform(), u2 = rng.Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}

}  // namespace

ColorJitterDraw DrawColorJitter(const ColorJitterOptions& o, SplitMix64& rng) {
  ColorJitterDraw d;
  for (int i = 3; i > 0; --i) std::swap(d.order[i], d.order[rng.Below(uint64_t(i) + 1)]);
  auto factor = [&](double v) {
    v = Bounded(v, 0, 1e6);
    return v > 0 ? UniformIn(rng, std::max(0.0, 1.0 - v), 1.0 + v) : 1.0;
  };
  d.brightness = factor(o.brightness);
  d.contrast = factor(o.contrast);
  d.saturation = factor(o.saturation);
  const double h = Bounded(o.hue, 0, 0.5);
  d.hue = h > 0 ? UniformIn(rng, -h, h) : 0.0;
  return d;
}

void ApplyColorJitter(const ColorJitterOptions& o, const ColorJitterDraw& d, Image* img) {
  for (int k : d.order) {
    switch (k) {
      case 0:
        if (o.brightness > 0) AdjustBrightness(img, d.brightness);
        break;
      case 1:
        if (o.contrast > 0) AdjustContrast(img, d.contrast);
        break;
      case 2:
        if (o.saturation > 0) AdjustSaturation(img, d.saturation);
        break;
      default:
        if (o.hue > 0) AdjustHue(img, d.hue);
        break;
    }
  }
}

EraseBox DrawErase(const EraseOptions& o, int width, int height, SplitMix64& rng) {
  EraseBox box;
  if (width < 1 || height < 1 || !(rng.Uniform() < o.p)) return box;
  const double area = double(width) * height;
  const double smin = Bounded(o.scale_min, 0, 1), smax = Bounded(o.scale_max, smin, 1);
  const double rmin = Bounded(o.ratio_min, 1e-6, 1e6), rmax = Bounded(o.ratio_max, rmin, 1e6);
  const double lmin = std::log(rmin), lmax = std::log(rmax);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase_area = area * UniformIn(rng, smin, smax);
    const double aspect = std::exp(UniformIn(rng, lmin, lmax));
    // Python's round(): half to even.
    const int h = static_cast<int>(std::nearbyint(std::sqrt(erase_area * aspect)));
    const int w = static_cast<int>(std::nearbyint(std::sqrt(erase_area / aspect)));
    if (!(h < height && w < width)) continue;
    box.y = static_cast<int>(rng.Below(uint64_t(height - h) + 1));
    box.x = static_cast<int>(rng.Below(uint64_t(width - w) + 1));
    box.w = w, box.h = h;
    return box;
  }
  return box;  // torchvision hands back the image as it was
}

void ApplyErase(const EraseOptions& o, const EraseBox& box, Image* img, SplitMix64& rng) {
  const int C = img->channels;
  const int x0 = std::clamp(box.x, 0, img->width), y0 = std::clamp(box.y, 0, img->height);
  const int x1 = std::clamp(box.x + std::max(box.w, 0), x0, img->width);
  const int y1 = std::clamp(box.y + std::max(box.h, 0), y0, img->height);
  for (int y = y0; y < y1; ++y) {
    uint8_t* row = img->pixels.data() + size_t(y) * img->stride();
    for (int x = x0; x < x1; ++x)
      for (int c = 0; c < C; ++c) {
        if (!o.random) {
          row[size_t(x) * C + c] = o.value[c];
        } else {
          const double v = double(o.mean[c]) + double(o.std[c]) * Normal(rng);
          row[size_t(x) * C + c] = static_cast<uint8_t>(std::nearbyint(std::clamp(v, 0.0, 255.0)));
        }
      }
  }
}

}  // namespace imagepack
