// imagepack._augment: the per-sample augmentations (imagepack/augment.h)
// on one HWC uint8 array, for tests that hold them against torchvision and
// for users who want the same pixels outside the loader. Every function
// returns a new array and leaves its argument alone.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "imagepack/augment.h"

namespace py = pybind11;
using namespace imagepack;

namespace {

Image ToImage(const py::array_t<uint8_t, py::array::c_style | py::array::forcecast>& a) {
  if (a.ndim() != 3 || (a.shape(2) != 1 && a.shape(2) != 3))
    throw py::value_error("expected an HxWxC uint8 array with C of 1 or 3");
  Image img;
  img.height = static_cast<int>(a.shape(0));
  img.width = static_cast<int>(a.shape(1));
  img.channels = static_cast<int>(a.shape(2));
  img.pixels.assign(a.data(), a.data() + a.size());
  return img;
}

py::array_t<uint8_t> ToArray(const Image& img) {
  py::array_t<uint8_t> out({py::ssize_t(img.height), py::ssize_t(img.width), py::ssize_t(img.channels)});
  if (!img.pixels.empty()) std::memcpy(out.mutable_data(), img.pixels.data(), img.pixels.size());
  return out;
}

AugInterpolation Interp(const std::string& s) {
  if (s == "nearest") return AugInterpolation::kNearest;
  if (s == "bilinear") return AugInterpolation::kBilinear;
  throw py::value_error("interpolation: nearest or bilinear, not " + s);
}

struct Fill {
  uint8_t v[3] = {0, 0, 0};
  const uint8_t* ptr = nullptr;
  explicit Fill(const std::optional<std::vector<int>>& f) {
    if (!f) return;
    for (size_t c = 0; c < 3; ++c) v[c] = uint8_t((*f)[f->size() == 1 ? 0 : std::min(c, f->size() - 1)]);
    ptr = v;
  }
};

}  // namespace

PYBIND11_MODULE(_augment, m) {
  m.doc() = "Per-sample augmentations on HxWxC uint8 arrays (imagepack/augment.h).";
  m.def(
      "apply_op",
      [](const std::string& name, py::array_t<uint8_t, py::array::c_style | py::array::forcecast> a, double magnitude,
         const std::string& interpolation, std::optional<std::vector<int>> fill) {
        AugOp op;
        if (!ParseAugOp(name, &op)) throw py::value_error("unknown operation " + name);
        Image img = ToImage(a);
        Fill f(fill);
        ApplyAugOp(op, magnitude, Interp(interpolation), f.ptr, &img);
        return ToArray(img);
      },
      py::arg("name"), py::arg("image"), py::arg("magnitude") = 0.0, py::arg("interpolation") = "nearest",
      py::arg("fill") = py::none(), "torchvision's autoaugment._apply_op(image, name, magnitude, ...).");
  m.def(
      "adjust",
      [](const std::string& name, py::array_t<uint8_t, py::array::c_style | py::array::forcecast> a, double v) {
        Image img = ToImage(a);
        if (name == "brightness") AdjustBrightness(&img, v);
        else if (name == "saturation") AdjustSaturation(&img, v);
        else if (name == "contrast") AdjustContrast(&img, v);
        else if (name == "sharpness") AdjustSharpness(&img, v);
        else if (name == "hue") AdjustHue(&img, v);
        else if (name == "posterize") Posterize(&img, static_cast<int>(v));
        else if (name == "solarize") Solarize(&img, v);
        else if (name == "autocontrast") AutoContrast(&img);
        else if (name == "equalize") Equalize(&img);
        else if (name == "invert") Invert(&img);
        else throw py::value_error("unknown adjustment " + name);
        return ToArray(img);
      },
      py::arg("name"), py::arg("image"), py::arg("value") = 0.0, "F.adjust_<name>(image, value) and the others.");
  m.def(
      "color_jitter",
      [](py::array_t<uint8_t, py::array::c_style | py::array::forcecast> a, double b, double c, double s, double h,
         uint64_t seed) {
        Image img = ToImage(a);
        ColorJitterOptions o{b, c, s, h};
        SplitMix64 rng(seed);
        const ColorJitterDraw d = DrawColorJitter(o, rng);
        ApplyColorJitter(o, d, &img);
        std::vector<int> order(d.order, d.order + 4);
        return py::make_tuple(ToArray(img), order, std::vector<double>{d.brightness, d.contrast, d.saturation, d.hue});
      },
      py::arg("image"), py::arg("brightness") = 0.0, py::arg("contrast") = 0.0, py::arg("saturation") = 0.0,
      py::arg("hue") = 0.0, py::arg("seed") = 0, "ColorJitter: (image, order, [b, c, s, h]) of one draw.");
  m.def(
      "erase",
      [](py::array_t<uint8_t, py::array::c_style | py::array::forcecast> a, double p, std::pair<double, double> scale,
         std::pair<double, double> ratio, bool random, std::vector<int> value, uint64_t seed) {
        Image img = ToImage(a);
        EraseOptions o;
        o.p = p, o.scale_min = scale.first, o.scale_max = scale.second;
        o.ratio_min = ratio.first, o.ratio_max = ratio.second, o.random = random;
        for (size_t c = 0; c < 3 && !value.empty(); ++c) o.value[c] = uint8_t(value[std::min(c, value.size() - 1)]);
        SplitMix64 rng(seed);
        const EraseBox box = DrawErase(o, img.width, img.height, rng);
        ApplyErase(o, box, &img, rng);
        return py::make_tuple(ToArray(img), std::vector<int>{box.y, box.x, box.h, box.w});
      },
      py::arg("image"), py::arg("p") = 0.5, py::arg("scale") = std::make_pair(0.02, 0.33),
      py::arg("ratio") = std::make_pair(0.3, 3.3), py::arg("random") = false, py::arg("value") = std::vector<int>{0},
      py::arg("seed") = 0, "RandomErasing: (image, [i, j, h, w]) of one draw (w == 0: nothing erased).");
  m.def(
      "auto_augment",
      [](py::array_t<uint8_t, py::array::c_style | py::array::forcecast> a, const std::string& kind, uint64_t seed,
         int num_ops, int magnitude, int num_magnitude_bins, int severity, int width, int depth, double alpha,
         const std::string& interpolation, std::optional<std::vector<int>> fill) {
        AugmentOptions o;
        if (!ParseAutoAugment(kind, &o.kind)) throw py::value_error("unknown policy " + kind);
        o.ra_num_ops = num_ops, o.ra_magnitude = magnitude, o.ra_bins = num_magnitude_bins;
        o.augmix_severity = severity, o.augmix_width = width, o.augmix_depth = depth, o.augmix_alpha = alpha;
        o.interpolation = Interp(interpolation);
        Fill f(fill);
        o.has_fill = f.ptr != nullptr;
        std::copy(f.v, f.v + 3, o.fill);
        const Status st = CheckAugmentOptions(o);
        if (!st.ok()) throw py::value_error(st.message());
        Image img = ToImage(a);
        SplitMix64 rng(seed);
        AugmentLog log;
        AutoAugmentImage(o, rng, &img, &log);
        std::vector<std::pair<std::string, double>> steps;
        for (const AugmentStep& s : log.steps) steps.emplace_back(AugOpName(s.op), s.magnitude);
        return py::make_tuple(ToArray(img), steps, log.chain_end, log.original_weight, log.chain_weights);
      },
      py::arg("image"), py::arg("policy"), py::arg("seed") = 0, py::arg("num_ops") = 2, py::arg("magnitude") = 9,
      py::arg("num_magnitude_bins") = 31, py::arg("severity") = 3, py::arg("width") = 3, py::arg("depth") = -1,
      py::arg("alpha") = 1.0, py::arg("interpolation") = "nearest", py::arg("fill") = py::none(),
      "One policy draw: (image, [(op, magnitude)...], AugMix's chain ends, original weight, chain weights).");
}
