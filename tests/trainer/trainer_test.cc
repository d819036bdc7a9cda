// The trainer: model sizes, loss scaler, schedules, rendezvous variables,
// and, with real processes, DDP equivalence and checkpoint resume.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "amp.h"
#include "distributed.h"
#include "imagepack/store.h"
#include "models.h"
#include "schedule.h"
#include "testutil.h"

namespace fs = std::filesystem;

namespace imagepack::trainer {
namespace {

using imagepack::testing::TempDir;

TEST(Models, ParameterCountsMatchTorchvision) {
  for (auto [arch, expect] : {std::pair<const char*, int64_t>{"resnet18", 11689512}, {"resnet50", 25557032}}) {
    ModelOptions o;
    o.arch = arch;
    std::shared_ptr<torch::nn::Module> m;
    auto any = MakeModel(o, &m);
    EXPECT_EQ(CountParameters(*m), expect) << arch;
  }
  ModelOptions o;
  o.arch = "resnet18";
  o.num_classes = 10;
  o.zero_init_residual = true;
  std::shared_ptr<torch::nn::Module> m;
  auto any = MakeModel(o, &m);
  auto out = any.forward(torch::randn({2, 3, 64, 64}));
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 10}));
  EXPECT_THROW(MakeModel(ModelOptions{"vgg"}, &m), std::invalid_argument);
}

TEST(GradScaler, SkipsNonFiniteStepsAndAdaptsTheScale) {
  auto w = torch::ones({3}, torch::requires_grad());
  torch::optim::SGD opt({w}, torch::optim::SGDOptions(1.0));
  GradScaler::Options o;
  o.init_scale = 8;
  o.growth_interval = 2;
  GradScaler s(o);
  auto step = [&](double g) {
    w.mutable_grad() = torch::full({3}, g * s.scale());
    return s.Step(opt, {w});
  };
  EXPECT_TRUE(step(0.5));  // unscaled to 0.5: w = 1 - 0.5
  EXPECT_NEAR(w[0].item<double>(), 0.5, 1e-6);
  EXPECT_TRUE(step(0.25));
  EXPECT_DOUBLE_EQ(s.scale(), 16);  // two clean steps: grown
  EXPECT_FALSE(step(std::numeric_limits<double>::infinity()));
  EXPECT_DOUBLE_EQ(s.scale(), 8);   // backed off, step skipped
  EXPECT_NEAR(w[0].item<double>(), 0.25, 1e-6);
  w.mutable_grad() = torch::full({3}, std::nan(""));
  EXPECT_FALSE(s.Step(opt, {w}));
  EXPECT_EQ(s.skipped_steps(), 2);
  auto loss = torch::tensor(2.0);
  EXPECT_DOUBLE_EQ(s.Scale(loss).item<double>(), 2.0 * s.scale());
  GradScaler off(GradScaler::Options{false});
  EXPECT_DOUBLE_EQ(off.Scale(loss).item<double>(), 2.0);
}

TEST(Autocast, CpuBf16AppliesInsideTheScopeOnly) {
  auto a = torch::randn({4, 4}), b = torch::randn({4, 4});
  {
    AutocastScope s(true, torch::kCPU);
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
  }
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat32);
}

TEST(Schedule, StepCosineOneCycleAndWarmup) {
  ScheduleOptions s;
  s.base_lr = 1.0;
  s.step_size = 30;
  EXPECT_DOUBLE_EQ(LearningRate(s, 0, 90), 1.0);
  EXPECT_NEAR(LearningRate(s, 30, 90), 0.1, 1e-12);
  EXPECT_NEAR(LearningRate(s, 89.9, 90), 0.01, 1e-12);
  s.kind = "cosine";
  EXPECT_NEAR(LearningRate(s, 45, 90), 0.5, 1e-12);
  EXPECT_NEAR(LearningRate(s, 90, 90), 0.0, 1e-12);
  s.warmup_epochs = 5;
  EXPECT_LT(LearningRate(s, 0, 90), 0.01);
  EXPECT_NEAR(LearningRate(s, 2.5, 90), 0.5, 1e-3);
  s.kind = "onecycle";
  EXPECT_NEAR(LearningRate(s, 27, 90), 1.0, 1e-9);
  EXPECT_LT(LearningRate(s, 90, 90), 1e-3);
  s.kind = "bogus";
  EXPECT_THROW(LearningRate(s, 0, 1), std::invalid_argument);
}

TEST(Rendezvous, ReadsTorchrunThenSlurmVariables) {
  for (const char* v : {"WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_NTASKS",
                        "SLURM_PROCID", "SLURM_LOCALID"})
    unsetenv(v);
  EXPECT_EQ(ReadDistEnv().world_size, 1);
  setenv("SLURM_NTASKS", "4", 1);
  setenv("SLURM_PROCID", "3", 1);
  EXPECT_THROW(ReadDistEnv(), std::runtime_error);  // Slurm needs MASTER_ADDR
  setenv("MASTER_ADDR", "node7", 1);
  DistEnv e = ReadDistEnv();
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.source, "slurm");
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "5", 1);
  EXPECT_THROW(ReadDistEnv(), std::runtime_error);  // rank outside the world
  setenv("RANK", "1", 1);
  setenv("MASTER_PORT", "29777", 1);
  e = ReadDistEnv();
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.master_port, 29777);
  for (const char* v : {"WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_NTASKS", "SLURM_PROCID"})
    unsetenv(v);
}

// A small raw dataset: 64 records of 8x8 gray noise-like images, 4 classes.
// mirrored: every row is its own mirror image.
std::string MakeDb(const TempDir& d, bool mirrored = false) {
  const std::string path = d / (mirrored ? "mirrored_db" : "db");
  auto w = CreateWriter(ContainerFormat::kLmdb, path);
  EXPECT_TRUE(w.ok());
  SplitMix64 rng(11);
  for (int i = 0; i < 64; ++i) {
    std::vector<uint8_t> px(64);
    for (auto& p : px) p = uint8_t(rng.Below(256));
    for (int k = 0; k < 8; ++k) px[(i % 4) * 16 + k] = 255;  // a learnable class cue
    if (mirrored)
      for (int y = 0; y < 8; ++y)
        for (int x = 4; x < 8; ++x) px[y * 8 + x] = px[y * 8 + 7 - x];
    EXPECT_OK(w.value()->Add(EncodeRecord({Encoding::kRaw, 1, i % 4, 8, 8}, "i" + std::to_string(i), px.data(), px.size())));
  }
  DatasetMeta m;
  m.count = 64;
  m.classes = {"a", "b", "c", "d"};
  m.encoding = Encoding::kRaw;
  m.channels = 1;
  m.mean = {0.5};
  m.std = {0.3};
  EXPECT_OK(w.value()->Finish(m));
  return path;
}

int RunCommand(const std::string& cmd) {
  int rc = std::system((cmd + " > /dev/null 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::vector<torch::Tensor> Params(const std::string& ckpt) {
  ModelOptions o;
  o.arch = "mlp";
  o.num_classes = 4;
  o.in_channels = 1;
  o.input_size = 8;
  std::shared_ptr<torch::nn::Module> m;
  auto any = MakeModel(o, &m);
  torch::serialize::InputArchive a, mm;
  a.load_from(ckpt);
  a.read("model", mm);
  m->load(mm);
  return m->parameters();
}

double MaxRelDiff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, ((a[i] - b[i]).abs().max() / b[i].abs().max().clamp_min(1e-12)).item<double>());
  return worst;
}

const std::string kTrain = IMAGEPACK_TRAIN_BIN;
const std::string kLaunch = IMAGEPACK_LAUNCH;

std::string Common(const std::string& db) {
  return " --data " + db + " --val " + db + " --arch mlp --size 8 --lr 0.05 --seed 3 --threads 1 --loader-threads 1";
}

TEST(Ddp, TwoProcessesWithBatchBMatchOneProcessWithBatch2B) {
  TempDir d;
  const std::string db = MakeDb(d);
  ASSERT_EQ(RunCommand(kTrain + Common(db) + " --epochs 2 --batch-size 16 --output " + (d / "one")), 0);
  ASSERT_EQ(RunCommand(kLaunch + " --nproc 2 -- " + kTrain + Common(db) + " --epochs 2 --batch-size 8 --output " + (d / "two")),
            0);
  auto one = Params(d / "one/checkpoint.pt"), two = Params(d / "two/checkpoint.pt");
  EXPECT_LT(MaxRelDiff(two, one), 1e-5);
  // And training moved the parameters at all (train seeds, then builds).
  torch::manual_seed(3);
  ModelOptions o;
  o.arch = "mlp";
  o.num_classes = 4;
  o.in_channels = 1;
  o.input_size = 8;
  std::shared_ptr<torch::nn::Module> init;
  auto any = MakeModel(o, &init);
  EXPECT_GT(MaxRelDiff(one, init->parameters()), 1e-3);
}

TEST(Checkpoint, ResumeEqualsUninterruptedTraining) {
  TempDir d;
  const std::string db = MakeDb(d);
  ASSERT_EQ(RunCommand(kTrain + Common(db) + " --epochs 3 --batch-size 16 --output " + (d / "straight")), 0);
  ASSERT_EQ(RunCommand(kTrain + Common(db) + " --epochs 1 --batch-size 16 --output " + (d / "resumed")), 0);
  ASSERT_EQ(RunCommand(kTrain + Common(db) + " --epochs 3 --batch-size 16 --resume auto --output " + (d / "resumed")), 0);
  EXPECT_LT(MaxRelDiff(Params(d / "resumed/checkpoint.pt"), Params(d / "straight/checkpoint.pt")), 1e-6);
  EXPECT_TRUE(fs::exists(d / "resumed/model_best.pt"));
  EXPECT_TRUE(fs::exists(d / "resumed/metrics.jsonl"));
}

// The validation loss logged in DIR/metrics.jsonl by the last eval line.
double EvalLoss(const std::string& dir) {
  std::ifstream f(dir + "/metrics.jsonl");
  double loss = -1;
  for (std::string line; std::getline(f, line);)
    if (line.find("\"eval\"") != std::string::npos) loss = nlohmann::json::parse(line)["loss"].get<double>();
  return loss;
}

TEST(Evaluate, TtaFlipAveragesEachImageWithItsMirror) {
  TempDir d;
  const std::string db = MakeDb(d), mirrored = MakeDb(d, true);
  // --no-bn-wd makes two optimiser groups: --evaluate must not need them.
  ASSERT_EQ(RunCommand(kTrain + Common(db) + " --epochs 1 --batch-size 16 --no-bn-wd --output " + (d / "w")), 0);
  auto eval = [&](const std::string& data, const std::string& extra, const std::string& out) {
    EXPECT_EQ(RunCommand(kTrain + " --evaluate --val " + data + " --arch mlp --size 8 --threads 1 --loader-threads 1"
                         " --resume " + (d / "w/checkpoint.pt") + extra + " --output " + (d / out)), 0);
    return EvalLoss(d / out);
  };
  // Images that are their own mirror: flipping changes nothing.
  const double sym = eval(mirrored, "", "sym"), sym_tta = eval(mirrored, " --tta-flip", "sym_tta");
  ASSERT_GT(sym, 0);
  EXPECT_NEAR(sym_tta, sym, 1e-6);
  // Noise is not: the averaged logits give another loss.
  const double plain = eval(db, "", "plain"), tta = eval(db, " --tta-flip", "tta");
  ASSERT_GT(plain, 0);
  ASSERT_GT(tta, 0);
  EXPECT_GT(std::abs(tta - plain), 1e-4);
}

}  // namespace
}  // namespace imagepack::trainer
