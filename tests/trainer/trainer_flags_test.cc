// torchvision's reference flags in the C++ trainer, each against an
// independent reference: mixup/cutmix against the formulas of
// references/classification/transforms.py (computed here element by
// element), the EMA against an explicitly computed average, the warm-up
// against torch.optim.lr_scheduler's own SequentialLR (run in Python), the
// norm layers' groups against the module types, clipping against
// torch::nn::utils::clip_grad_norm_; then, with real runs, bit-identical
// digests, exact resume with mixup and EMA, both recipe files, and usage
// errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "checkpoint.h"
#include "ema.h"
#include "imagepack/shard.h"
#include "imagepack/store.h"
#include "mixup.h"
#include "models.h"
#include "param_groups.h"
#include "run_info.h"
#include "schedule.h"
#include "testutil.h"

namespace fs = std::filesystem;

namespace imagepack::trainer {
namespace {

using imagepack::testing::TempDir;
using imagepack::testing::ValCopy;

// ---- mixup and cutmix -------------------------------------------------------

// The batch and its soft targets as the reference builds them, one element
// at a time: sample i is paired with sample i - 1 (a roll by one).
void ExpectMixed(const MixDraw& d, const torch::Tensor& before, const torch::Tensor& after,
                 const std::vector<int64_t>& labels, const torch::Tensor& soft, int64_t classes) {
  const int64_t n = before.size(0), c = before.size(1), h = before.size(2), w = before.size(3);
  auto b = before.accessor<float, 4>();
  auto a = after.accessor<float, 4>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = (i + n - 1) % n;
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          double want = b[i][ch][y][x];
          if (d.kind == MixDraw::Kind::kMixup) want = d.lambda * b[i][ch][y][x] + (1 - d.lambda) * b[j][ch][y][x];
          if (d.kind == MixDraw::Kind::kCutmix && x >= d.x1 && x < d.x2 && y >= d.y1 && y < d.y2) want = b[j][ch][y][x];
          ASSERT_NEAR(a[i][ch][y][x], want, 1e-5) << i << " " << ch << " " << y << " " << x;
        }
    for (int64_t k = 0; k < classes; ++k) {
      const double want = (labels[i] == k ? d.lambda : 0.0) + (labels[j] == k ? 1 - d.lambda : 0.0);
      ASSERT_NEAR(soft[i][k].item<double>(), want, 1e-6) << i << " " << k;
    }
  }
}

TEST(Mixup, BlendsEachSampleWithThePreviousByLambda) {
  MixOptions o;
  o.mixup_alpha = 0.2;
  const std::vector<int64_t> labels = {0, 3, 1, 1, 4};
  for (int64_t step = 0; step < 5; ++step) {
    const MixDraw d = DrawMix(o, 7, 2, step, 0, 6, 9);
    ASSERT_EQ(d.kind, MixDraw::Kind::kMixup);
    EXPECT_EQ(d.lambda, d.beta);
    EXPECT_GE(d.lambda, 0.0);
    EXPECT_LE(d.lambda, 1.0);
    const torch::Tensor before = torch::randn({5, 3, 6, 9});
    torch::Tensor x = before.clone();
    const torch::Tensor soft = ApplyMix(d, x, torch::tensor(labels), 5);
    ExpectMixed(d, before, x, labels, soft, 5);
  }
}

TEST(Mixup, CutmixPastesTheBoxOfTheFormulaAndLambdaIsItsComplement) {
  MixOptions o;
  o.cutmix_alpha = 1.0;
  const std::vector<int64_t> labels = {2, 0, 1};
  const int64_t h = 7, w = 10;
  int clipped = 0;
  for (int64_t step = 0; step < 30; ++step) {
    const MixDraw d = DrawMix(o, 7, 0, step, 1, h, w);
    ASSERT_EQ(d.kind, MixDraw::Kind::kCutmix);
    ASSERT_GE(d.cx, 0);
    ASSERT_LT(d.cx, w);
    ASSERT_GE(d.cy, 0);
    ASSERT_LT(d.cy, h);
    // The reference: half-sides int(0.5 * sqrt(1 - lambda) * side) around
    // the centre, clipped; lambda = 1 - area / (W * H).
    const double r = 0.5 * std::sqrt(1.0 - d.beta);
    const int64_t hw = int64_t(r * w), hh = int64_t(r * h);
    const int64_t x1 = std::max<int64_t>(d.cx - hw, 0), x2 = std::min<int64_t>(d.cx + hw, w);
    const int64_t y1 = std::max<int64_t>(d.cy - hh, 0), y2 = std::min<int64_t>(d.cy + hh, h);
    EXPECT_EQ(std::vector<int64_t>({d.x1, d.y1, d.x2, d.y2}), std::vector<int64_t>({x1, y1, x2, y2}));
    EXPECT_DOUBLE_EQ(d.lambda, 1.0 - double((x2 - x1) * (y2 - y1)) / double(w * h));
    clipped += (d.cx - hw < 0 || d.cx + hw > w || d.cy - hh < 0 || d.cy + hh > h);
    const torch::Tensor before = torch::randn({3, 2, h, w});
    torch::Tensor x = before.clone();
    const torch::Tensor soft = ApplyMix(d, x, torch::tensor(labels), 3);
    ExpectMixed(d, before, x, labels, soft, 3);
  }
  EXPECT_GT(clipped, 0);  // boxes at the border were among them
}

TEST(Mixup, DrawsAreAFunctionOfSeedEpochStepRankWithBetaStatistics) {
  MixOptions both;
  both.mixup_alpha = 0.2;
  both.cutmix_alpha = 1.0;
  int cutmix = 0;
  std::vector<double> mixup_lambdas;
  for (int64_t step = 0; step < 2000; ++step) {
    const MixDraw d = DrawMix(both, 3, 1, step, 0, 8, 8);
    cutmix += d.kind == MixDraw::Kind::kCutmix;
    if (d.kind == MixDraw::Kind::kMixup) mixup_lambdas.push_back(d.beta);
  }
  EXPECT_NEAR(cutmix / 2000.0, 0.5, 0.05);  // one of the two, probability 1/2
  // Beta(0.2, 0.2): mean 1/2, variance 1 / (4 (2a + 1)) = 0.1786.
  double mean = 0, var = 0;
  for (double l : mixup_lambdas) mean += l / mixup_lambdas.size();
  for (double l : mixup_lambdas) var += (l - mean) * (l - mean) / mixup_lambdas.size();
  EXPECT_NEAR(mean, 0.5, 0.04);
  EXPECT_NEAR(var, 1.0 / (4 * (2 * 0.2 + 1)), 0.02);
  const MixDraw a = DrawMix(both, 3, 1, 5, 0, 8, 8), again = DrawMix(both, 3, 1, 5, 0, 8, 8);
  EXPECT_EQ(a.beta, again.beta);
  EXPECT_NE(a.beta, DrawMix(both, 3, 1, 5, 1, 8, 8).beta);  // another rank
  EXPECT_NE(a.beta, DrawMix(both, 3, 2, 5, 0, 8, 8).beta);  // another epoch
  EXPECT_NE(a.beta, DrawMix(both, 4, 1, 5, 0, 8, 8).beta);  // another seed
  EXPECT_EQ(DrawMix(MixOptions{}, 3, 1, 5, 0, 8, 8).kind, MixDraw::Kind::kNone);
}

TEST(Mixup, SoftTargetLossIsCrossEntropyWithSmoothing) {
  const torch::Tensor logits = torch::randn({4, 5}, torch::kFloat64);
  torch::Tensor soft = torch::rand({4, 5}, torch::kFloat64);
  soft = soft / soft.sum(1, true);
  const double ls = 0.1;
  // -sum_k ((1 - ls) t_k + ls / K) log softmax_k, averaged over the batch.
  const torch::Tensor smoothed = soft * (1 - ls) + ls / 5;
  const double want = -(smoothed * torch::log_softmax(logits, 1)).sum(1).mean().item<double>();
  EXPECT_NEAR(SoftTargetLoss(logits, soft, ls).item<double>(), want, 1e-12);
}

// ---- the EMA -------------------------------------------------------------

std::shared_ptr<torch::nn::Module> SmallCnn(torch::nn::AnyModule* any = nullptr) {
  ModelOptions o;
  o.arch = "small_cnn";
  o.num_classes = 4;
  o.in_channels = 1;
  o.input_size = 8;
  std::shared_ptr<torch::nn::Module> m;
  auto made = MakeModel(o, &m);
  if (any) *any = made;
  return m;
}

std::vector<torch::Tensor> FloatTensors(torch::nn::Module& m) {
  std::vector<torch::Tensor> out;
  for (const auto& p : m.parameters()) out.push_back(p.detach().clone());
  for (const auto& b : m.buffers())
    if (b.is_floating_point()) out.push_back(b.detach().clone());
  return out;
}

TEST(ModelEma, AfterKUpdatesIsTheExplicitExponentialAverage) {
  auto model = SmallCnn();
  ModelEma ema(SmallCnn(), 0.9);
  std::vector<torch::Tensor> want;  // float64, by the definition
  torch::NoGradGuard ng;
  for (int k = 0; k < 5; ++k) {
    for (auto& p : model->parameters()) p.copy_(torch::randn_like(p));
    for (auto& b : model->buffers())
      if (b.is_floating_point()) b.copy_(torch::rand_like(b));
    ema.Update(*model);
    const auto now = FloatTensors(*model);
    if (k == 0) {
      for (const auto& t : now) want.push_back(t.to(torch::kFloat64));  // the first update copies
    } else {
      for (size_t i = 0; i < now.size(); ++i) want[i] = want[i] * 0.9 + now[i].to(torch::kFloat64) * 0.1;
    }
  }
  EXPECT_EQ(ema.n_averaged(), 5);
  const auto got = FloatTensors(ema.module());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LT((got[i].to(torch::kFloat64) - want[i]).abs().max().item<double>(), 1e-5) << i;
  ema.Reset();  // the warm-up's rule: the next update copies
  ema.Update(*model);
  const auto copied = FloatTensors(ema.module()), now = FloatTensors(*model);
  for (size_t i = 0; i < copied.size(); ++i) EXPECT_TRUE(copied[i].equal(now[i])) << i;
}

TEST(ModelEma, DecayIsAdjustedAsTorchvisionsReference) {
  // alpha = (1 - D) * world * batch * steps / epochs, capped at 1.
  EXPECT_NEAR(AdjustedEmaDecay(0.99998, 8, 128, 32, 600), 1 - 2e-5 * 8 * 128 * 32 / 600.0, 1e-12);
  EXPECT_NEAR(AdjustedEmaDecay(0.99998, 1, 8, 2, 2), 1 - 2e-5 * 8, 1e-12);
  EXPECT_EQ(AdjustedEmaDecay(0.9, 4, 256, 32, 10), 0.0);
}

// ---- the learning rate ----------------------------------------------------

struct WarmupCase {
  std::string method;
  double decay;
  int warmup;
  std::string main;
  int epochs, step_size;
};

// torch.optim.lr_scheduler's SequentialLR([LinearLR or ConstantLR, StepLR
// or CosineAnnealingLR], milestones=[W]) stepped per epoch, as the
// reference builds it: each case's lr per epoch, one line a case, from
// Python's torch (one interpreter for all).
std::vector<std::vector<double>> TorchLrs(const std::vector<WarmupCase>& cases) {
  std::ostringstream py;
  py << "import torch\nfrom torch.optim import lr_scheduler as L\n";
  for (const auto& c : cases) {
    py << "p = torch.nn.Parameter(torch.zeros(1))\nopt = torch.optim.SGD([p], lr=0.5)\n"
       << "w = " << (c.method == "linear" ? "L.LinearLR(opt, start_factor=" : "L.ConstantLR(opt, factor=") << c.decay
       << ", total_iters=" << c.warmup << ")\n"
       << "m = " << (c.main == "cosine" ? "L.CosineAnnealingLR(opt, T_max=" + std::to_string(c.epochs - c.warmup) + ")"
                                        : "L.StepLR(opt, step_size=" + std::to_string(c.step_size) + ", gamma=0.1)")
       << "\ns = L.SequentialLR(opt, schedulers=[w, m], milestones=[" << c.warmup << "])\nlrs = []\n"
       << "for e in range(" << c.epochs << "):\n"
       << "    lrs.append(repr(opt.param_groups[0]['lr']))\n    opt.step()\n    s.step()\n"
       << "print(' '.join(lrs))\n";
  }
  const std::string script = (fs::temp_directory_path() / ("lrs_" + std::to_string(getpid()) + ".py")).string();
  std::ofstream(script) << py.str();
  std::vector<std::vector<double>> out;
  FILE* f = popen(("/usr/bin/python3 -W ignore " + script + " 2>/dev/null").c_str(), "r");
  if (f) {
    char line[8192];
    while (std::fgets(line, sizeof line, f)) {
      std::istringstream in(line);
      out.emplace_back();
      for (double v; in >> v;) out.back().push_back(v);
    }
    pclose(f);
  }
  fs::remove(script);
  return out;
}

TEST(Schedule, TorchvisionWarmupIsTorchsSequentialLrPerEpoch) {
  if (std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "no Python torch to compute the reference with";
  const std::vector<WarmupCase> cases = {{"linear", 0.01, 5, "cosine", 20, 0}, {"constant", 0.1, 3, "step", 15, 4},
                                         {"linear", 0.5, 2, "step", 9, 3}, {"constant", 0.01, 1, "cosine", 6, 0}};
  const auto lrs = TorchLrs(cases);
  ASSERT_EQ(lrs.size(), cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    const WarmupCase& c = cases[k];
    const std::vector<double>& want = lrs[k];
    ASSERT_EQ(want.size(), size_t(c.epochs)) << c.method << " " << c.main;
    ScheduleOptions s;
    s.kind = c.main;
    s.base_lr = 0.5;
    s.step_size = std::max(1, c.step_size);
    s.lr_warmup_epochs = c.warmup;
    s.lr_warmup_method = c.method;
    s.lr_warmup_decay = c.decay;
    for (int e = 0; e < c.epochs; ++e)
      for (double within : {0.0, 0.5, 0.99})  // constant through the epoch
        EXPECT_NEAR(LearningRate(s, e + within, c.epochs), want[size_t(e)], 1e-9 * 0.5)
            << c.method << " " << c.main << " epoch " << e << " + " << within;
  }
}

// ---- weight decay groups and clipping --------------------------------------

struct NormsImpl : torch::nn::Module {
  NormsImpl() {
    register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 4, 3)));
    register_module("gn", torch::nn::GroupNorm(2, 4));
    register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({6})));
    register_module("fc", torch::nn::Linear(6, 3));
    register_module("bn", torch::nn::BatchNorm1d(3));
  }
};

std::set<const void*> Ids(const std::vector<torch::Tensor>& ts) {
  std::set<const void*> out;
  for (const auto& t : ts) out.insert(t.unsafeGetTensorImpl());
  return out;
}

TEST(ParamGroups, NormWeightDecayHoldsExactlyTheNormLayersParameters) {
  ModelOptions ro;
  ro.arch = "resnet18";
  ro.num_classes = 4;
  std::shared_ptr<torch::nn::Module> resnet;
  MakeModel(ro, &resnet);
  auto norms = std::make_shared<NormsImpl>();
  for (const auto& model : std::vector<std::shared_ptr<torch::nn::Module>>{SmallCnn(), resnet, norms}) {
    std::vector<torch::Tensor> norm_params, other;
    for (const auto& m : model->modules()) {
      const bool is_norm = m->as<torch::nn::BatchNorm1d>() || m->as<torch::nn::BatchNorm2d>() ||
                           m->as<torch::nn::GroupNorm>() || m->as<torch::nn::LayerNorm>();
      for (const auto& p : m->parameters(false)) (is_norm ? norm_params : other).push_back(p);
    }
    ASSERT_FALSE(norm_params.empty());
    const auto groups = GroupByDecay(*model, {1e-4, 0.0, false});
    ASSERT_EQ(groups.size(), 2u);
    EXPECT_EQ(groups[0].weight_decay, 1e-4);
    EXPECT_EQ(Ids(groups[0].params), Ids(other));
    EXPECT_EQ(groups[1].weight_decay, 0.0);
    EXPECT_EQ(Ids(groups[1].params), Ids(norm_params));
    EXPECT_EQ(groups[0].params.size() + groups[1].params.size(), model->parameters().size());
  }
  // With --no-bn-wd besides: the other biases without decay, the norm
  // layers' with --norm-weight-decay.
  const auto groups = GroupByDecay(*norms, {1e-4, 0.5, true});
  ASSERT_EQ(groups.size(), 3u);
  auto named = norms->named_parameters();
  EXPECT_EQ(Ids(groups[0].params), Ids({named["conv.weight"], named["fc.weight"]}));
  EXPECT_EQ(groups[1].weight_decay, 0.5);
  EXPECT_EQ(groups[1].params.size(), 6u);
  EXPECT_EQ(Ids(groups[2].params), Ids({named["conv.bias"], named["fc.bias"]}));
  // Not given: two groups as before (--wd, and 0 for 1-d with --no-bn-wd).
  EXPECT_EQ(GroupByDecay(*norms, {1e-4, -1, false}).size(), 1u);
}

TEST(ParamGroups, ClipGradNormIsTorchsClipGradNorm) {
  for (double max_norm : {0.5, 1e3}) {
    std::vector<torch::Tensor> a, b;
    for (auto shape : {std::vector<int64_t>{3, 4}, {5}, {2, 2, 3}}) {
      auto p = torch::zeros(shape, torch::requires_grad());
      p.mutable_grad() = torch::randn(shape) * 3;
      auto q = torch::zeros(shape, torch::requires_grad());
      q.mutable_grad() = p.grad().clone();
      a.push_back(p);
      b.push_back(q);
    }
    const double norm = ClipGradNorm(a, max_norm);
    const double want = torch::nn::utils::clip_grad_norm_(b, max_norm);
    EXPECT_NEAR(norm, want, 1e-5 * want);
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::allclose(a[i].grad(), b[i].grad(), 1e-6, 1e-7)) << i;
    double total = 0;
    for (const auto& p : a) total += p.grad().pow(2).sum().item<double>();
    EXPECT_LE(std::sqrt(total), std::max(max_norm, want) * (1 + 1e-5));
  }
}

// ---- real runs ----------------------------------------------------------

const std::string kTrain = IMAGEPACK_TRAIN_BIN;

// 64 records of 8x8 gray noise with a learnable cue, 4 classes.
std::string MakeDb(const TempDir& d) {
  const std::string path = d / "db";
  auto w = CreateWriter(ContainerFormat::kLmdb, path);
  EXPECT_TRUE(w.ok());
  SplitMix64 rng(11);
  for (int i = 0; i < 64; ++i) {
    std::vector<uint8_t> px(64);
    for (auto& p : px) p = uint8_t(rng.Below(256));
    for (int k = 0; k < 8; ++k) px[(i % 4) * 16 + k] = 255;
    const std::string key = "i" + std::to_string(i);
    EXPECT_OK(w.value()->Add(EncodeRecord({Encoding::kRaw, 1, i % 4, 8, 8}, key, px.data(), px.size())));
  }
  DatasetMeta m;
  m.count = 64;
  m.classes = {"a", "b", "c", "d"};
  m.encoding = Encoding::kRaw;
  m.channels = 1;
  m.mean = {0.5};
  m.std = {0.3};
  m.source = path;
  EXPECT_OK(w.value()->Finish(m));
  return path;
}

// (exit status, stdout and stderr) of `cmd`, run with a time limit so that a
// hung trainer is killed: timeout runs it in a process group of its own
// and kills the group (launch.sh's ranks too).
std::pair<int, std::string> RunTrain(const std::string& cmd) {
  std::string out;
  FILE* f = popen(("timeout -s KILL 240 " + cmd + " 2>&1").c_str(), "r");
  if (!f) return {-1, ""};
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  const int rc = pclose(f);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

std::string After(const std::string& out, const std::string& label) {
  const auto at = out.rfind(label);
  return at == std::string::npos ? "" : out.substr(at + label.size(), 16);
}

std::vector<nlohmann::json> Rows(const std::string& dir, const std::string& type) {
  std::vector<nlohmann::json> out;
  std::ifstream f(dir + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["type"] == type) out.push_back(j);
  }
  return out;
}

std::string Base(const std::string& db) {
  return kTrain + " --data " + db + " --val " + ValCopy(db) +
         " --arch small_cnn --size 8 --lr 0.05 --seed 3 --threads 1"
         " --loader-threads 1 --print-freq 1 --batch-size 8 --quiet";
}

const std::string kAllFlags =
    " --mixup-alpha 0.2 --cutmix-alpha 1.0 --label-smoothing 0.1 --model-ema --model-ema-steps 3"
    " --model-ema-decay 0.999 --lr-warmup-epochs 1 --lr-warmup-method linear --lr-warmup-decay 0.1"
    " --schedule cosine --norm-weight-decay 0 --clip-grad-norm 1";

TEST(ReferenceFlags, EveryFlagOnGivesTheSameDigestTwiceAndResumesExactly) {
  TempDir d;
  const std::string db = MakeDb(d);
  const std::string run = Base(db) + kAllFlags + " --epochs 2";
  auto [rc, one] = RunTrain(run + " --output " + (d / "one"));
  ASSERT_EQ(rc, 0) << one;
  auto [rc2, two] = RunTrain(run + " --output " + (d / "two"));
  ASSERT_EQ(rc2, 0) << two;
  ASSERT_EQ(After(one, "final weights digest ").size(), 16u) << one;
  EXPECT_EQ(After(one, "final weights digest "), After(two, "final weights digest "));
  ASSERT_EQ(After(one, "final EMA weights digest ").size(), 16u) << one;
  EXPECT_EQ(After(one, "final EMA weights digest "), After(two, "final EMA weights digest "));
  EXPECT_NE(After(one, "final EMA weights digest "), After(one, "final weights digest "));
  // Both models evaluated each epoch; the lr per epoch: 0.05 * 0.1 in the
  // warm-up epoch, then the cosine's start.
  EXPECT_EQ(Rows(d / "one", "eval").size(), 2u);
  EXPECT_EQ(Rows(d / "one", "eval_ema").size(), 2u);
  for (const auto& r : Rows(d / "one", "train"))
    EXPECT_NEAR(r["lr"].get<double>(), r["epoch"].get<int>() == 0 ? 0.005 : 0.05, 1e-12) << r;
  // Mixing changes the training: without it, other weights.
  auto [rc3, plain] = RunTrain(Base(db) + " --label-smoothing 0.1 --epochs 2 --output " + (d / "plain"));
  ASSERT_EQ(rc3, 0) << plain;
  EXPECT_NE(After(plain, "final weights digest "), After(one, "final weights digest "));
  // Cut mid-epoch (after global step 11 of 16: epoch 1's steps 0 to 2,
  // after its EMA update at step 0, before the one at step 3) and resumed:
  // the same weights and average as the uninterrupted run.
  auto [rc4, cut] = RunTrain(run + " --stop-at-step 11 --output " + (d / "cut"));
  ASSERT_EQ(rc4, 0) << cut;
  EXPECT_NE(cut.find("--stop-at-step reached"), std::string::npos) << cut;
  auto [rc5, resumed] = RunTrain(kTrain + " --resume auto --output " + (d / "cut"));
  ASSERT_EQ(rc5, 0) << resumed;
  EXPECT_NE(resumed.find("continues at position 24"), std::string::npos) << resumed;
  EXPECT_EQ(After(resumed, "final weights digest "), After(one, "final weights digest ")) << resumed;
  EXPECT_EQ(After(resumed, "final EMA weights digest "), After(one, "final EMA weights digest ")) << resumed;
}

// Two ranks, each mixing its own batches (the draws' rank) and keeping
// an average whose BN statistics are rank 0's at each evaluation: cut
// mid-epoch and resumed, rank 0's weights and average are the
// uninterrupted run's.
TEST(ReferenceFlags, TwoRanksWithMixupAndEmaResumeExactly) {
  TempDir d;
  const std::string db = MakeDb(d);
  const std::string run = std::string(IMAGEPACK_LAUNCH) + " --nproc 2 -- " + Base(db) +
                          " --mixup-alpha 0.2 --cutmix-alpha 1.0 --model-ema --model-ema-steps 2 --epochs 2";
  auto [rc, straight] = RunTrain(run + " --output " + (d / "straight"));
  ASSERT_EQ(rc, 0) << straight;
  ASSERT_EQ(After(straight, "final EMA weights digest ").size(), 16u) << straight;
  EXPECT_EQ(Rows(d / "straight", "eval_ema").size(), 2u);
  // 4 steps per epoch (64 samples, 2 ranks of 8): cut after global step 6.
  auto [rc2, cut] = RunTrain(run + " --stop-at-step 6 --output " + (d / "cut"));
  ASSERT_EQ(rc2, 0) << cut;
  auto [rc3, resumed] = RunTrain(std::string(IMAGEPACK_LAUNCH) + " --nproc 2 -- " + kTrain + " --resume auto --output " +
                                 (d / "cut"));
  ASSERT_EQ(rc3, 0) << resumed;
  EXPECT_NE(resumed.find("continues at position 32"), std::string::npos) << resumed;
  EXPECT_EQ(After(resumed, "final weights digest "), After(straight, "final weights digest ")) << resumed;
  EXPECT_EQ(After(resumed, "final EMA weights digest "), After(straight, "final EMA weights digest ")) << resumed;
}

TEST(ReferenceFlags, BothRecipeFilesAreAcceptedAndTheCommandLineWins) {
  TempDir d;
  const std::string db = MakeDb(d);
  const std::string small = " --data " + db + " --val " + ValCopy(db) +
                            " --threads 1 --loader-threads 1 --epochs 1 --batch-size 16 --print-freq 1000";
  auto [rc, out] = RunTrain(kTrain + " --recipe torchvision_resnet50" + small + " --arch small_cnn" +
                            " --train-crop-size 8 --val-crop-size 8 --val-resize-size 8 --output " + (d / "tv"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("=> --model-ema"), std::string::npos) << out;
  EXPECT_EQ(Rows(d / "tv", "eval_ema").size(), 1u);
  // The run's options: the recipe's, except those given on the command line.
  const RunInfo info = RunInfo::FromJson(ReadCheckpointRun(d / "tv/checkpoint.pt"), "tv");
  std::map<std::string, std::vector<std::string>> given(info.options.begin(), info.options.end());
  EXPECT_EQ(given["arch"], std::vector<std::string>{"small_cnn"});
  EXPECT_EQ(given["epochs"], std::vector<std::string>{"1"});
  EXPECT_EQ(given["size"], std::vector<std::string>{"8"});  // --train-crop-size, kept as ours
  EXPECT_EQ(given.count("train-crop-size"), 0u);
  EXPECT_EQ(given["lr"], std::vector<std::string>{"0.5"});
  EXPECT_EQ(given["mixup-alpha"], std::vector<std::string>{"0.2"});
  EXPECT_EQ(given["lr-warmup-method"], std::vector<std::string>{"linear"});
  EXPECT_EQ(given.count("recipe"), 0u);
  const auto steps = Rows(d / "tv", "train");
  ASSERT_FALSE(steps.empty());
  EXPECT_NEAR(steps[0]["lr"].get<double>(), 0.5 * 0.01, 1e-12);  // the warm-up's first epoch
  // Resumed for a second epoch with the size under our name: the same
  // option as the checkpoint's, the recipe's other flags the checkpoint's.
  std::tie(rc, out) = RunTrain(kTrain + " --resume auto --epochs 2 --size 8 --output " + (d / "tv"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(out.find("--size 8 (the checkpoint"), std::string::npos) << out;
  EXPECT_NE(out.find("--epochs 2 (the checkpoint's run: 1)"), std::string::npos) << out;
  const auto resumed = Rows(d / "tv", "train");
  ASSERT_GT(resumed.size(), steps.size());
  EXPECT_NEAR(resumed.back()["lr"].get<double>(), 0.5 * (0.01 + 0.99 / 5), 1e-12);  // LinearLR, epoch 1 of 5
  std::tie(rc, out) = RunTrain(kTrain + " --recipe " + IMAGEPACK_RECIPES "/ffcv_resnet50_88.flags" + small +
                          " --arch resnet18 --res-schedule 16,32,0,1 --val-size 16 --output " + (d / "ffcv"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("=> progressive resolution 16,32,0,1"), std::string::npos) << out;
  const RunInfo ffcv = RunInfo::FromJson(ReadCheckpointRun(d / "ffcv/checkpoint.pt"), "ffcv");
  std::map<std::string, std::vector<std::string>> f(ffcv.options.begin(), ffcv.options.end());
  EXPECT_EQ(f["lr"], std::vector<std::string>{"1.7"});
  EXPECT_EQ(f["schedule"], std::vector<std::string>{"triangular"});
  EXPECT_EQ(f.count("blurpool"), 1u);
  EXPECT_EQ(f.count("tta-flip"), 1u);
}

TEST(ReferenceFlags, BadValuesAreUsageErrorsNamingTheFlag) {
  TempDir d;
  const std::string db = MakeDb(d);
  std::ofstream(d / "bad.flags") << "# a comment\n\n--lr 0.1 0.2\n";
  const std::pair<std::string, std::string> cases[] = {
      {"--mixup-alpha -0.5", "--mixup-alpha -0.5: must be 0 (off) or more"},
      {"--cutmix-alpha -1", "--cutmix-alpha -1: must be 0 (off) or more"},
      {"--model-ema --model-ema-decay 1", "--model-ema-decay 1: must be in (0, 1)"},
      {"--model-ema-decay 0", "--model-ema-decay 0: must be in (0, 1)"},
      {"--model-ema-steps 0", "--model-ema-steps 0: must be at least 1"},
      {"--lr-warmup-decay 0", "--lr-warmup-decay 0: must be in (0, 1]"},
      {"--lr-warmup-decay 1.5", "--lr-warmup-decay 1.5: must be in (0, 1]"},
      {"--lr-warmup-epochs -1", "--lr-warmup-epochs -1: must be 0 (off) or more"},
      {"--lr-warmup-method cosine", "--lr-warmup-method cosine: must be constant or linear"},
      {"--lr-warmup-epochs 2 --schedule onecycle", "--lr-warmup-epochs: torchvision's warm-up precedes"},
      {"--lr-warmup-epochs 2 --warmup-epochs 1", "give one"},
      {"--clip-grad-norm -1", "--clip-grad-norm -1: must be 0 (off) or more"},
      {"--norm-weight-decay -0.1", "--norm-weight-decay"},
      {"--train-crop-size 16", "--train-crop-size 16 and --size 8"},
      {"--val-size 8 --val-crop-size 16", "--val-crop-size 16 and --val-size 8"},
      {"--task segmentation --auto-augment ta_wide", "--auto-augment/--random-erase change the image alone"},
      {"--task restoration --random-erase 0.5", "--auto-augment/--random-erase change the image alone"},
      {"--recipe no_such_recipe", "no_such_recipe.flags: cannot read it"},
      {"--recipe " + (d / "bad.flags"), "bad.flags line 3"},
  };
  for (const auto& [flags, message] : cases) {
    const std::string out_dir = d / "never";
    auto [rc, out] = RunTrain(Base(db) + " --epochs 1 " + flags + " --output " + out_dir);
    EXPECT_EQ(rc, 2) << flags << "\n" << out;
    EXPECT_NE(out.find(message), std::string::npos) << flags << "\n" << out;
    EXPECT_FALSE(fs::exists(out_dir)) << flags;
  }
}

}  // namespace
}  // namespace imagepack::trainer
