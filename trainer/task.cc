#include "task.h"

#include <cmath>
#include <stdexcept>

#include "imagepack/classes.h"

namespace imagepack::trainer {
namespace {

namespace F = torch::nn::functional;

// Normalisation with the dataset's statistics (0.5 / 0.25 where it has
// none for these channels), on the device.
class Normalised {
 public:
  Normalised(const DatasetMeta& meta, int C, const torch::Device& device) {
    std::vector<double> mean = meta.mean, stdv = meta.std;
    if (static_cast<int>(mean.size()) != C) mean.assign(C, 0.5), stdv.assign(C, 0.25);
    mean_ = torch::tensor(mean, torch::kFloat32).view({1, C, 1, 1}).mul(255).to(device);
    std_ = torch::tensor(stdv, torch::kFloat32).view({1, C, 1, 1}).mul(255).clamp_min(1e-3).to(device);
  }
  torch::Tensor Apply(const torch::Tensor& x) const { return x.sub(mean_).div(std_); }

 private:
  torch::Tensor mean_, std_;
};

// The first field of `kind`, or -1.
int FieldOf(const DatasetMeta& meta, FieldKind kind) {
  for (size_t i = 0; i < meta.fields.size(); ++i)
    if (meta.fields[i].kind == kind) return static_cast<int>(i);
  return -1;
}

// The batch array named `name` (BatchView::fields), or an error naming it.
const BatchField& ArrayOf(const BatchView& b, const std::string& name) {
  for (const auto& f : b.fields)
    if (f.name == name) return f;
  throw std::runtime_error("the batch has no field '" + name + "'");
}

torch::Tensor ToDevice(const BatchField& f, int n, torch::ScalarType type, const torch::Device& device) {
  std::vector<int64_t> shape(f.shape.begin(), f.shape.end());
  shape[0] = n;
  return torch::from_blob(f.data, shape, type).to(device).clone();
}

class Classification : public Task {
 public:
  Classification(const TaskOptions& o, const DatasetMeta& meta, int C, const torch::Device& d)
      : smoothing_(o.label_smoothing), classes_(static_cast<int64_t>(meta.classes.size())), norm_(meta, C, d) {
    if (classes_ < 1) throw std::invalid_argument("classification needs a dataset with classes");
  }
  const char* name() const override { return "classification"; }
  std::string default_arch() const override { return "resnet18"; }
  int64_t outputs() const override { return classes_; }
  bool dense() const override { return false; }
  std::string Describe() const override { return std::to_string(classes_) + " classes"; }
  bool labels_are_targets() const override { return true; }
  // The loader maps the labels (LoaderOptions::classes); this checks and
  // describes the match.
  std::string MatchEvalData(const DatasetMeta& train, const std::string& train_name, const DatasetMeta& eval,
                            const std::string& eval_name) override {
    if (eval.classes.empty())
      throw std::invalid_argument(eval_name + " has no classes (packed with --no-class?): it cannot measure the "
                                  "accuracy of a classifier of " + train_name + "'s classes");
    auto m = MatchClasses(train.classes, train_name, eval.classes, eval_name);
    if (!m.ok()) throw std::invalid_argument(m.status().message());
    return m->Describe();
  }
  torch::Tensor Input(const torch::Tensor& x) const override { return norm_.Apply(x); }
  torch::Tensor Target(const BatchView& b, int n, const torch::Device& d, bool) const override {
    return torch::from_blob(const_cast<int64_t*>(b.labels), {n}, torch::kInt64).to(d).clone();
  }
  torch::Tensor Loss(const torch::Tensor& out, const torch::Tensor& y) const override {
    return F::cross_entropy(out, y, F::CrossEntropyFuncOptions().label_smoothing(smoothing_));
  }
  // Samples whose target is among the top-1 and top-5 logits, and samples.
  std::vector<double> Tally(const torch::Tensor& out, const torch::Tensor& y, const torch::Tensor&) const override {
    const int64_t k = std::min<int64_t>(5, out.size(1));
    auto top = std::get<1>(out.topk(k, 1));
    auto hit = top.eq(y.view({-1, 1}));
    return {double(hit.narrow(1, 0, 1).sum().item<int64_t>()), double(hit.sum().item<int64_t>()), double(out.size(0))};
  }
  std::vector<Figure> StepFigures(const std::vector<double>& t) const override {
    return {{"Error@1", "error1", 100 - 100 * t[0] / t[2]}, {"Error@5", "error5", 100 - 100 * t[1] / t[2]}};
  }
  std::vector<Figure> EvalFigures(const std::vector<double>& t) const override {
    const double a1 = 100 * t[0] / t[2], a5 = 100 * t[1] / t[2];
    return {{"Acc@1", "acc1", a1}, {"Acc@5", "acc5", a5}, {"Error@1", "error1", 100 - a1}, {"", "error5", 100 - a5}};
  }
  double Score(const std::vector<Figure>& f) const override { return f[0].value; }

 private:
  double smoothing_;
  int64_t classes_;
  Normalised norm_;
};

// Per-pixel classes from a mask field: cross entropy that skips the ignore
// value; a confusion matrix over the valid pixels gives IoU per class, their
// mean over the classes present (in the target or the prediction), and
// pixel accuracy.
class Segmentation : public Task {
 public:
  Segmentation(const DatasetMeta& meta, int C, const torch::Device& d) : norm_(meta, C, d), device_(d) {
    const int slot = FieldOf(meta, FieldKind::kMask);
    if (slot < 0) throw std::invalid_argument("--task segmentation needs a dataset with a mask field");
    const FieldSpec& spec = meta.fields[size_t(slot)];
    field_ = eval_field_ = spec.name;
    classes_ = static_cast<int64_t>(spec.classes.size());
    names_ = spec.classes;
    ignore_ = spec.ignore;
    if (classes_ < 2) throw std::invalid_argument("mask field '" + field_ + "' declares fewer than 2 classes");
  }
  const char* name() const override { return "segmentation"; }
  std::string default_arch() const override { return "fcn_small"; }
  int64_t outputs() const override { return classes_; }
  bool dense() const override { return true; }
  std::string Describe() const override {
    return std::to_string(classes_) + " mask classes ('" + field_ + "', ignore " + std::to_string(ignore_) + ")";
  }
  // The evaluation data's mask field: its classes matched to the
  // training data's by name (its pixel values then mapped), its ignore
  // value mapped to the training data's.
  std::string MatchEvalData(const DatasetMeta&, const std::string& train_name, const DatasetMeta& eval,
                            const std::string& eval_name) override {
    const int slot = FieldOf(eval, FieldKind::kMask);
    if (slot < 0)
      throw std::invalid_argument(eval_name + " has no mask field; the training data " + train_name + " has '" +
                                  field_ + "'");
    const FieldSpec& spec = eval.fields[size_t(slot)];
    auto m = MatchClasses(names_, train_name, spec.classes, eval_name, "mask classes");
    if (!m.ok()) throw std::invalid_argument(m.status().message());
    eval_field_ = spec.name;
    eval_lut_ = torch::Tensor();
    if (!m->identity() || spec.ignore != ignore_) {
      // Every stored value: a class (mapped), the ignore value, or
      // anything else (not a class of the training data: ignored).
      const int64_t values = spec.bits > 8 ? 65536 : 256;
      std::vector<int64_t> lut(size_t(values), ignore_ >= 0 ? ignore_ : -100);
      for (size_t v = 0; v < spec.classes.size() && int64_t(v) < values; ++v) lut[v] = m->Map(int64_t(v));
      eval_lut_ = torch::tensor(lut, torch::kInt64).to(device_);
    }
    return "mask '" + spec.name + "': " + m->Describe();
  }
  torch::Tensor Input(const torch::Tensor& x) const override { return norm_.Apply(x); }
  torch::Tensor Target(const BatchView& b, int n, const torch::Device& d, bool eval) const override {
    const BatchField& f = ArrayOf(b, eval ? eval_field_ : field_);
    torch::Tensor y;
    if (f.dtype == DType::kUint16)  // LibTorch 1.13 has no uint16: the bits as int16, widened and masked
      y = ToDevice(f, n, torch::kInt16, d).to(torch::kLong).bitwise_and(0xFFFF);
    else y = ToDevice(f, n, torch::kUInt8, d).to(torch::kLong);
    if (eval && eval_lut_.defined()) y = eval_lut_.index_select(0, y.flatten()).view_as(y);
    return y;
  }
  torch::Tensor Loss(const torch::Tensor& out, const torch::Tensor& y) const override {
    return F::cross_entropy(out, y, F::CrossEntropyFuncOptions().ignore_index(ignore_ >= 0 ? ignore_ : -100));
  }
  // The K x K confusion matrix (target-major) over valid pixels.
  std::vector<double> Tally(const torch::Tensor& out, const torch::Tensor& y, const torch::Tensor&) const override {
    auto pred = out.argmax(1).flatten().to(torch::kCPU);
    auto target = y.flatten().to(torch::kCPU);
    auto valid = target.ge(0).logical_and(target.lt(classes_));
    auto idx = target.masked_select(valid) * classes_ + pred.masked_select(valid);
    auto counts = torch::bincount(idx, {}, classes_ * classes_).to(torch::kFloat64).contiguous();
    const double* p = counts.data_ptr<double>();
    return std::vector<double>(p, p + counts.numel());
  }
  std::vector<Figure> StepFigures(const std::vector<double>& t) const override {
    auto f = Scores(t);
    return {f[0], f[1]};
  }
  std::vector<Figure> EvalFigures(const std::vector<double>& t) const override { return Scores(t); }
  double Score(const std::vector<Figure>& f) const override { return f[0].value; }

 private:
  // mIoU, pixel accuracy (%), then each class's IoU (metrics.jsonl only).
  std::vector<Figure> Scores(const std::vector<double>& cm) const {
    const int64_t K = classes_;
    double diag = 0, total = 0, iou_sum = 0;
    int64_t present = 0;
    std::vector<Figure> per_class;
    for (int64_t c = 0; c < K; ++c) {
      double row = 0, col = 0;
      for (int64_t j = 0; j < K; ++j) row += cm[size_t(c * K + j)], col += cm[size_t(j * K + c)];
      const double tp = cm[size_t(c * K + c)], uni = row + col - tp;
      diag += tp;
      total += row;
      const double iou = uni > 0 ? 100 * tp / uni : std::nan("");
      if (uni > 0) iou_sum += iou, ++present;
      per_class.push_back({"", "iou_" + names_[size_t(c)], uni > 0 ? iou : -1});
    }
    std::vector<Figure> out = {{"mIoU", "miou", present ? iou_sum / present : 0},
                               {"PixAcc", "pixel_acc", total > 0 ? 100 * diag / total : 0}};
    out.insert(out.end(), per_class.begin(), per_class.end());
    return out;
  }

  Normalised norm_;
  torch::Device device_;
  std::string field_, eval_field_;
  int64_t classes_ = 0;
  std::vector<std::string> names_;
  int ignore_ = -1;
  torch::Tensor eval_lut_;  // evaluation mask value -> training class (undefined: the same)
};

// Paired images: input (the degraded image) and target (an image field)
// scaled to [-1, 1] on the device, L1 loss; PSNR of the output and of the
// input against the target (per image, on [0, 1], averaged): the gain is
// what the network adds.
}  // namespace

torch::Tensor Ssim(const torch::Tensor& a, const torch::Tensor& b) {
  const int64_t C = a.size(1), H = a.size(2), W = a.size(3);
  const int64_t k = std::min<int64_t>({11, H, W});
  auto g = torch::arange(k, torch::kFloat32).sub((k - 1) / 2.0).pow(2).div(-2 * 1.5 * 1.5).exp();
  g = g.div(g.sum()).to(a.device());
  const auto kv = g.view({1, 1, k, 1}).expand({C, 1, k, 1}).contiguous();
  const auto kh = g.view({1, 1, 1, k}).expand({C, 1, 1, k}).contiguous();
  auto blur = [&](const torch::Tensor& t) {
    return F::conv2d(F::conv2d(t, kv, F::Conv2dFuncOptions().groups(C)), kh, F::Conv2dFuncOptions().groups(C));
  };
  const double c1 = 0.01 * 0.01, c2 = 0.03 * 0.03;
  const auto af = a.to(torch::kFloat32), bf = b.to(torch::kFloat32);
  const auto ma = blur(af), mb = blur(bf);
  const auto saa = blur(af * af) - ma * ma, sbb = blur(bf * bf) - mb * mb, sab = blur(af * bf) - ma * mb;
  const auto map = (2 * ma * mb + c1) * (2 * sab + c2) / ((ma * ma + mb * mb + c1) * (saa + sbb + c2));
  return map.flatten(1).mean(1);
}

namespace {

class Restoration : public Task {
 public:
  Restoration(const DatasetMeta& meta, int C) : channels_(C) {
    const int slot = FieldOf(meta, FieldKind::kImage);
    if (slot < 0) throw std::invalid_argument("--task restoration needs a dataset with a target image field");
    field_ = eval_field_ = meta.fields[size_t(slot)].name;
  }
  const char* name() const override { return "restoration"; }
  std::string default_arch() const override { return "unet_small"; }
  int64_t outputs() const override { return channels_; }
  bool dense() const override { return true; }
  std::string Describe() const override { return "target image '" + field_ + "', L1"; }
  bool normalised() const override { return false; }
  std::string MatchEvalData(const DatasetMeta&, const std::string& train_name, const DatasetMeta& eval,
                            const std::string& eval_name) override {
    const int slot = FieldOf(eval, FieldKind::kImage);
    if (slot < 0)
      throw std::invalid_argument(eval_name + " has no target image field; the training data " + train_name +
                                  " has '" + field_ + "'");
    eval_field_ = eval.fields[size_t(slot)].name;
    return "target image '" + eval_field_ + "'";
  }
  torch::Tensor Input(const torch::Tensor& x) const override { return x.div(127.5).sub(1); }
  torch::Tensor Target(const BatchView& b, int n, const torch::Device& d, bool eval) const override {
    return Input(ToDevice(ArrayOf(b, eval ? eval_field_ : field_), n, torch::kUInt8, d).to(torch::kFloat32));
  }
  torch::Tensor Loss(const torch::Tensor& out, const torch::Tensor& y) const override { return F::l1_loss(out, y); }
  std::vector<double> Tally(const torch::Tensor& out, const torch::Tensor& y, const torch::Tensor& x) const override {
    auto psnr = [&](const torch::Tensor& a) {
      auto mse = (a.clamp(-1, 1) - y).div(2).pow(2).flatten(1).mean(1).clamp_min(1e-10);
      return mse.log10().mul(-10).sum().item<double>();
    };
    auto ssim = [&](const torch::Tensor& a) {
      return Ssim(a.clamp(-1, 1).add(1).div(2), y.add(1).div(2)).sum().item<double>();
    };
    return {psnr(out), psnr(x), double(out.size(0)), ssim(out), ssim(x)};
  }
  std::vector<Figure> StepFigures(const std::vector<double>& t) const override {
    return {{"PSNR", "psnr", t[0] / t[2]}, {"Gain", "psnr_gain", (t[0] - t[1]) / t[2]}};
  }
  std::vector<Figure> EvalFigures(const std::vector<double>& t) const override {
    return {{"PSNR", "psnr", t[0] / t[2]},
            {"Input", "psnr_input", t[1] / t[2]},
            {"Gain", "psnr_gain", (t[0] - t[1]) / t[2]},
            {"SSIM", "ssim", t[3] / t[2]},
            {"SSIM-input", "ssim_input", t[4] / t[2]}};
  }
  double Score(const std::vector<Figure>& f) const override { return f[0].value; }

 private:
  int channels_;
  std::string field_, eval_field_;
};

}  // namespace

bool KnownTask(const std::string& name) {
  return name == "classification" || name == "segmentation" || name == "restoration";
}

std::unique_ptr<Task> MakeTask(const TaskOptions& o, const DatasetMeta& meta, int channels,
                               const torch::Device& device) {
  if (o.name == "classification") return std::make_unique<Classification>(o, meta, channels, device);
  if (o.name == "segmentation") return std::make_unique<Segmentation>(meta, channels, device);
  if (o.name == "restoration") return std::make_unique<Restoration>(meta, channels);
  throw std::invalid_argument("unknown --task '" + o.name + "' (classification, segmentation, restoration)");
}

}  // namespace imagepack::trainer
