// The trainer: model sizes, loss scaler, schedules, rendezvous variables,
// and, with real processes, DDP equivalence, checkpoint resume, SIGKILL and
// resume, preemption signals, and elastic resume on another world size.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <tuple>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "amp.h"
#include "continue_command.h"
#include "distributed.h"
#include "imagepack/loader.h"
#include "imagepack/store.h"
#include "models.h"
#include "schedule.h"
#include "task.h"
#include "testutil.h"

namespace fs = std::filesystem;

namespace imagepack::trainer {
namespace {

using imagepack::testing::TempDir;
using imagepack::testing::ValCopy;

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
  const char* vars[] = {"WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                        "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_STEP_ID", "SLURM_JOB_ID",
                        "SLURM_NODEID", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
                        "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                        "SLURM_NODELIST", "SLURM_CPUS_PER_TASK"};
  for (const char* v : vars) unsetenv(v);
  EXPECT_EQ(ReadDistEnv().world_size, 1);
  setenv("SLURM_NTASKS", "4", 1);
  setenv("SLURM_PROCID", "3", 1);
  setenv("SLURM_LOCALID", "1", 1);
  EXPECT_THROW(ReadDistEnv(), std::runtime_error);  // the batch script, not an srun task
  setenv("SLURM_STEP_ID", "0", 1);
  EXPECT_THROW(ReadDistEnv(), std::runtime_error);  // no MASTER_ADDR and no node list
  setenv("SLURM_JOB_NODELIST", "node[7-8]", 1);
  setenv("SLURM_JOB_ID", "31", 1);
  setenv("SLURM_NTASKS_PER_NODE", "2", 1);
  setenv("SLURM_CPUS_PER_TASK", "3", 1);
  DistEnv e = ReadDistEnv();
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.source, "slurm");
  EXPECT_EQ(e.master_addr, "node7");  // derived by the trainer (trainer/slurm_env.h)
  EXPECT_EQ(e.master_port, 20031);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.threads, 3);
  setenv("MASTER_ADDR", "node9", 1);
  EXPECT_EQ(ReadDistEnv().master_addr, "node9");
  setenv("WORLD_SIZE", "2", 1);
  setenv("RANK", "5", 1);
  EXPECT_THROW(ReadDistEnv(), std::runtime_error);  // rank outside the world
  setenv("RANK", "1", 1);
  setenv("MASTER_PORT", "29777", 1);
  e = ReadDistEnv();
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.master_port, 29777);
  EXPECT_EQ(e.local_world_size, 2);
  for (const char* v : vars) unsetenv(v);
}

// The command printed after a Ctrl-C continues the run as it was started:
// the launcher and its process count included (run for real through
// scripts/launch.sh in tests/python/test_trainer_nothing_lost.py).
TEST(Rendezvous, TheCommandThatContinuesARunNamesItsLauncherAndProcesses) {
  EXPECT_EQ(ShellWord("runs/r50"), "runs/r50");
  EXPECT_EQ(ShellWord("my runs/it's"), "'my runs/it'\\''s'");
  EXPECT_EQ(ShellWord(""), "''");
  auto cmd = [](const std::string& source, int world, int local, const std::string& launch, bool torchrun) {
    LaunchInfo l;
    l.source = source;
    l.world_size = world;
    l.local_world_size = local;
    l.launch_cmd = launch;
    l.torchrun = torchrun;
    return ContinueRunCommand(l, "build/trainer/train", "runs/a b");
  };
  ContinueCommand c = cmd("none", 1, 1, "", false);
  EXPECT_EQ(c.command, "build/trainer/train --resume auto --output 'runs/a b'");
  EXPECT_EQ(c.note, "");
  c = cmd("torchrun", 2, 2, "scripts/launch.sh --nproc 2 --", false);
  EXPECT_EQ(c.command, "scripts/launch.sh --nproc 2 -- build/trainer/train --resume auto --output 'runs/a b'");
  EXPECT_EQ(c.note, "");
  c = cmd("torchrun", 8, 4, "scripts/launch.sh --nproc 4 --nnodes 2 --node-rank 0 --master-addr n0 --", false);
  EXPECT_NE(c.command.find("--nnodes 2 --node-rank 0 --master-addr n0 -- build/trainer/train --resume auto"),
            std::string::npos);
  EXPECT_NE(c.note.find("each of the 2 nodes, with its own --node-rank"), std::string::npos);
  c = cmd("torchrun", 8, 4, "", true);
  EXPECT_EQ(c.command, "torchrun --nnodes=2 --nproc_per_node=4 --no_python build/trainer/train --resume auto "
                       "--output 'runs/a b'");
  EXPECT_NE(c.note.find("--node_rank"), std::string::npos);
  c = cmd("torchrun", 2, 2, "", true);
  EXPECT_EQ(c.command, "torchrun --nproc_per_node=2 --no_python build/trainer/train --resume auto --output 'runs/a b'");
  c = cmd("slurm", 8, 4, "", false);
  EXPECT_EQ(c.command, "srun --nodes=2 --ntasks=8 build/trainer/train --resume auto --output 'runs/a b'");
  EXPECT_NE(c.note.find("allocation of 8 task(s)"), std::string::npos);
  c = cmd("openmpi", 4, 4, "", false);
  EXPECT_EQ(c.command, "mpirun -np 4 build/trainer/train --resume auto --output 'runs/a b'");
  c = cmd("torchrun", 2, 2, "", false);  // RANK, WORLD_SIZE... set by hand: the same program in each process
  EXPECT_EQ(c.command, "build/trainer/train --resume auto --output 'runs/a b'");
  EXPECT_NE(c.note.find("each of the 2 processes"), std::string::npos);
}

// Gloo binds the address this host reaches the master from (two network
// namespaces: tests/cli/netns_ddp_cli.sh).
TEST(Rendezvous, LocalAddressTowardTheMaster) {
  EXPECT_EQ(LocalAddressToward("127.0.0.1", 29500), "127.0.0.1");
  EXPECT_EQ(LocalAddressToward("not an address", 29500), "");
}

// A small raw dataset: 64 records of 8x8 gray noise-like images, 4 classes.
// mirrored: every row is its own mirror image.
std::string MakeDb(const TempDir& d, bool mirrored = false, int n = 64) {
  const std::string path = d / ((mirrored ? "mirrored_db" : "db") + std::to_string(n));
  auto w = CreateWriter(ContainerFormat::kLmdb, path);
  EXPECT_TRUE(w.ok());
  SplitMix64 rng(11);
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> px(64);
    for (auto& p : px) p = uint8_t(rng.Below(256));
    for (int k = 0; k < 8; ++k) px[(i % 4) * 16 + k] = 255;  // a learnable class cue
    if (mirrored)
      for (int y = 0; y < 8; ++y)
        for (int x = 4; x < 8; ++x) px[y * 8 + x] = px[y * 8 + 7 - x];
    EXPECT_OK(w.value()->Add(EncodeRecord({Encoding::kRaw, 1, i % 4, 8, 8}, "i" + std::to_string(i), px.data(), px.size())));
  }
  DatasetMeta m;
  m.count = n;
  m.classes = {"a", "b", "c", "d"};
  m.encoding = Encoding::kRaw;
  m.channels = 1;
  m.mean = {0.5};
  m.std = {0.3};
  m.source = path;  // as pack_lmdb records it: two such databases are two datasets
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
  return " --data " + db + " --val " + ValCopy(db) + " --arch mlp --size 8 --lr 0.05 --seed 3 --threads 1 --loader-threads 1";
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

// ---- interruption and resume, with real processes --------------------------

// Runs `cmd` through sh, returning (exit code, stdout, and stderr too
// when asked).
std::pair<int, std::string> Capture(const std::string& cmd, bool with_stderr = false) {
  std::string out;
  FILE* f = popen((cmd + (with_stderr ? " 2>&1" : " 2>/dev/null")).c_str(), "r");
  if (!f) return {-1, ""};
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  const int rc = pclose(f);
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, out};
}

// "final weights digest X" of rank 0's output.
std::string Digest(const std::string& out) {
  const auto at = out.rfind("final weights digest ");
  return at == std::string::npos ? "" : out.substr(at + 21, 16);
}

// Starts `cmd` in a process group of its own (so SIGKILL can reach every
// rank), its output discarded; returns the group leader's pid.
pid_t Spawn(const std::string& cmd) {
  const pid_t pid = fork();
  if (pid == 0) {
    setsid();
    execl("/bin/sh", "sh", "-c", ("exec " + cmd + " > /dev/null 2>&1").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

int Reap(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits until no process of group `pgid` is left: the ranks of a killed
// launcher are reparented and reaped by init a moment later, and until then
// a zombie rank still counts as a live writer of its temporaries.
bool WaitForGroupGone(pid_t pgid) {
  for (int i = 0; i < 400; ++i) {
    if (kill(-pgid, 0) != 0 && errno == ESRCH) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return false;
}

size_t Lines(const std::string& path) {
  std::ifstream f(path);
  size_t n = 0;
  for (std::string line; std::getline(f, line);) ++n;
  return n;
}

// Waits until `path` has at least `n` lines (a rank's --log-samples file).
bool WaitForLines(const std::string& path, size_t n) {
  for (int i = 0; i < 1200; ++i) {
    if (Lines(path) >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The dataset indices of epoch `epoch` in --log-samples files, counted.
void CountEpoch(const std::string& path, int64_t epoch, std::map<int64_t, int>* seen) {
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    std::istringstream in(line);
    int64_t e = -1, step = -1, idx;
    in >> e >> step;
    if (e != epoch) continue;
    while (in >> idx) ++(*seen)[idx];
  }
}

std::string Small(const std::string& db) {  // small_cnn: BN buffers too
  return " --data " + db + " --val " + ValCopy(db) + " --arch small_cnn --size 8 --lr 0.05 --seed 3 --threads 1"
         " --loader-threads 1 --print-freq 1000 --batch-size 8";
}

// SIGKILL of both ranks at a random step, then --resume auto: the final
// weights are bit-identical to an uninterrupted run's (CPU: the loader's
// batches, Gloo's sums and the optimizer's state all repeat exactly).
TEST(Interruption, SigkillAtARandomStepThenResumeGivesTheUninterruptedWeights) {
  TempDir d;
  const std::string db = MakeDb(d, false, 512);  // 32 steps per epoch on 2 ranks
  const std::string run = kLaunch + " --nproc 2 -- " + kTrain + Small(db) + " --epochs 2 --checkpoint-every 3";
  const auto [rc, out] = Capture(run + " --output " + (d / "straight"));
  ASSERT_EQ(rc, 0) << out;
  const std::string want = Digest(out);
  ASSERT_EQ(want.size(), 16u) << out;

  std::random_device rd;
  const size_t kill_at = 4 + rd() % 52;  // somewhere in steps 4..55 of 64
  SCOPED_TRACE("SIGKILL after step " + std::to_string(kill_at));
  const pid_t pid = Spawn(run + " --output " + (d / "killed") + " --log-samples " + (d / "killed.samples"));
  ASSERT_TRUE(WaitForLines(d / "killed.samples.rank0", kill_at));
  kill(-pid, SIGKILL);
  Reap(pid);
  ASSERT_TRUE(WaitForGroupGone(pid));  // as for a job requeued after a kill
  ASSERT_TRUE(fs::exists(d / "killed/checkpoint.pt"));
  const auto [rc2, out2] = Capture(run + " --output " + (d / "killed") + " --resume auto");
  ASSERT_EQ(rc2, 0) << out2;
  EXPECT_NE(out2.find("=> resumed from"), std::string::npos);
  EXPECT_EQ(Digest(out2), want) << out2;
  for (const auto& e : fs::directory_iterator(d / "killed"))
    EXPECT_EQ(e.path().filename().string().find(".ipk-tmp"), std::string::npos) << "left behind: " << e.path();
}

// SIGTERM and SIGUSR1 to the launcher: every rank finishes its step,
// rank 0 writes a checkpoint, all exit 75; --resume auto continues with the
// next step, so the steps of both runs are exactly the uninterrupted run's.
// A second signal stops at once (128 + SIGTERM).
TEST(Interruption, SignalsCheckpointAndExit75AndTheResumedRunContinuesAtTheNextStep) {
  TempDir d;
  const std::string db = MakeDb(d, false, 512);
  const std::string base = kLaunch + " --nproc 2 -- " + kTrain + Small(db), run = base + " --epochs 2";
  const auto [rc, out] = Capture(run + " --output " + (d / "straight") + " --log-samples " + (d / "straight.samples"));
  ASSERT_EQ(rc, 0) << out;
  for (int sig : {SIGTERM, SIGUSR1}) {
    const std::string name = sig == SIGTERM ? "term" : "usr1";
    SCOPED_TRACE(name);
    const std::string log = d / (name + ".samples");
    const pid_t pid = Spawn(run + " --output " + (d / name) + " --log-samples " + log);
    ASSERT_TRUE(WaitForLines(log + ".rank0", 10));
    kill(pid, sig);  // the launcher, which passes it on
    EXPECT_EQ(Reap(pid), 75);
    ASSERT_TRUE(fs::exists(d / (name + "/checkpoint.pt")));
    const size_t done = Lines(log + ".rank0");
    EXPECT_LT(done, 64u);
    const auto [rc2, out2] = Capture(run + " --output " + (d / name) + " --log-samples " + log + " --resume auto");
    ASSERT_EQ(rc2, 0) << out2;
    EXPECT_NE(out2.find("continues at position " + std::to_string(done * 16)), std::string::npos) << out2;
    EXPECT_EQ(Digest(out2), Digest(out));
    for (const char* r : {".rank0", ".rank1"}) EXPECT_EQ(Slurp(log + r), Slurp(d / ("straight.samples" + std::string(r))));
  }
  const std::string log = d / "twice.samples";
  const pid_t pid = Spawn(base + " --epochs 20 --output " + (d / "twice") + " --log-samples " + log);
  ASSERT_TRUE(WaitForLines(log + ".rank0", 5));
  // Two different stop signals to every process of the run (the launcher
  // passes them on too): unlike two of the same, they cannot merge into one
  // pending signal, so each rank handles two whatever the load.
  kill(-pid, SIGUSR1);
  kill(-pid, SIGTERM);
  const int twice = Reap(pid);
  EXPECT_TRUE(twice == 128 + SIGTERM || twice == 128 + SIGUSR1) << twice;
}

// A 2-process run cut mid-epoch and resumed on 1 process, and a 1-process
// run resumed on 2: each epoch's samples, as the ranks logged them, are the
// dataset exactly once, plus the documented padding (the epoch order's
// first positions, when the rest does not divide evenly).
TEST(Interruption, ResumingOnAnotherWorldSizeCoversTheEpochOnce) {
  TempDir d;
  const int n = 509;
  const std::string db = MakeDb(d, false, n);
  const std::vector<int64_t> order = EpochIndices(n, true, 3, 0, 0, 1, false);  // epoch 0, --seed 3
  struct Case {
    int before, after;
  };
  for (const Case c : {Case{2, 1}, Case{1, 2}}) {
    const std::string name = std::to_string(c.before) + "to" + std::to_string(c.after);
    SCOPED_TRACE(name);
    const std::string log = d / (name + ".samples");
    auto launch = [&](int nproc) { return kLaunch + " --nproc " + std::to_string(nproc) + " -- " + kTrain + Small(db); };
    const auto [rc, out] = Capture(launch(c.before) + " --epochs 1 --stop-at-step 5 --output " + (d / name) +
                                   " --log-samples " + log + "." + std::to_string(c.before) + "p");
    ASSERT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("position " + std::to_string(5 * 8 * c.before)), std::string::npos) << out;
    if (c.before == 2) {  // the position is one of this dataset's order: another of the same size is refused
      const std::string other = MakeDb(d, /*mirrored=*/true, n);
      const auto [rc3, out3] = Capture("( (" + kLaunch + " --nproc 1 -- " + kTrain + Small(other) +
                                       " --epochs 1 --resume auto --output " + (d / name) + ") 2>&1 )");
      EXPECT_NE(rc3, 0) << out3;
      EXPECT_NE(out3.find("another dataset"), std::string::npos) << out3;
    }
    const auto [rc2, out2] = Capture(launch(c.after) + " --epochs 1 --resume auto --output " + (d / name) +
                                     " --log-samples " + log + "." + std::to_string(c.after) + "p");
    ASSERT_EQ(rc2, 0) << out2;
    // Allowed, and said: the checkpoint's world size and global batch, and this run's.
    const std::string b = std::to_string(c.before), a = std::to_string(c.after);
    EXPECT_NE(out2.find("=> warning: " + (d / name) + "/checkpoint.pt was saved by " + b + " process(es) x batch 8 = "
                        "global batch " + std::to_string(8 * c.before) + "; this run has " + a + " x 8 = " +
                        std::to_string(8 * c.after) + ". Each step now takes"),
              std::string::npos) << out2;
    std::map<int64_t, int> seen;
    for (int r = 0; r < c.before; ++r) CountEpoch(log + "." + std::to_string(c.before) + "p.rank" + std::to_string(r), 0, &seen);
    for (int r = 0; r < c.after; ++r) CountEpoch(log + "." + std::to_string(c.after) + "p.rank" + std::to_string(r), 0, &seen);
    const int64_t left = n - 5 * 8 * c.before;
    const int64_t padding = (left + c.after - 1) / c.after * c.after - left;
    ASSERT_EQ(seen.size(), size_t(n));
    for (int64_t pos = 0; pos < n; ++pos)
      EXPECT_EQ(seen[order[size_t(pos)]], pos < padding ? 2 : 1) << "position " << pos;
  }
}

// Block order: a run cut by 2 processes and resumed by 1 whose --order auto
// would pick random (the data is small) continues the blocks epoch it
// saved, and the epoch still covers every record.
TEST(Interruption, BlockOrderResumedByAnotherWorldKeepsItsOrder) {
  TempDir d;
  const int n = 509;
  const std::string db = MakeDb(d, false, n);
  const std::string log = d / "blocks.samples";
  auto launch = [&](int nproc) { return kLaunch + " --nproc " + std::to_string(nproc) + " -- " + kTrain + Small(db); };
  const auto [rc, out] = Capture(launch(2) + " --epochs 1 --stop-at-step 5 --order blocks --block-mb 0.01"
                                 " --window-blocks 2 --output " + (d / "b") + " --log-samples " + log + ".2p");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("training order blocks"), std::string::npos) << out;
  const auto [rc2, out2] =
      Capture(launch(1) + " --epochs 1 --resume auto --output " + (d / "b") + " --log-samples " + log + ".1p");
  ASSERT_EQ(rc2, 0) << out2;
  std::map<int64_t, int> seen;
  for (int r = 0; r < 2; ++r) CountEpoch(log + ".2p.rank" + std::to_string(r), 0, &seen);
  CountEpoch(log + ".1p.rank0", 0, &seen);
  ASSERT_EQ(seen.size(), size_t(n));
  int total = 0;
  for (const auto& [index, count] : seen) total += count;
  EXPECT_EQ(total, n);  // one rank left: no padding
  for (const auto& [index, count] : seen) EXPECT_EQ(count, 1) << "record " << index;
}

// The validation loss logged in DIR/metrics.jsonl by the last eval line.
// --evaluate's row, in evaluations.jsonl (apart from the training curve).
double EvalLoss(const std::string& dir) {
  std::ifstream f(dir + "/evaluations.jsonl");
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

// ---- one dataset contract for train, val and checkpoints ------------------

// 8x8 gray noise over one of four textures (vertical, horizontal stripes,
// a checkerboard, flat: learnable whatever the crop's shift and flip) for
// class names "abcd"[k], labelled by
// that name's place in `classes` (names not in it: no records). mean/std
// empty: packed without statistics.
std::string MakeNamedDb(const TempDir& d, const std::string& name, const std::vector<std::string>& classes,
                        bool stats = true, int n = 256) {
  const std::string path = d / name;
  auto w = CreateWriter(ContainerFormat::kLmdb, path);
  EXPECT_TRUE(w.ok());
  SplitMix64 rng(11);
  int64_t count = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> px(64);
    const int cue = i % 4;
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 8; ++x) {
        const bool on = cue == 0 ? x % 2 : cue == 1 ? y % 2 : cue == 2 ? (x + y) % 2 : false;
        px[size_t(y * 8 + x)] = uint8_t(60 + (on ? 120 : 0) + rng.Below(40));
      }
    const auto at = std::find(classes.begin(), classes.end(), std::string(1, char('a' + cue)));
    if (at == classes.end()) continue;
    const int label = static_cast<int>(at - classes.begin());
    EXPECT_OK(w.value()->Add(
        EncodeRecord({Encoding::kRaw, 1, label, 8, 8}, "i" + std::to_string(i), px.data(), px.size())));
    ++count;
  }
  DatasetMeta m;
  m.count = count;
  m.classes = classes;
  m.encoding = Encoding::kRaw;
  m.channels = 1;
  if (stats) m.mean = {0.5}, m.std = {0.3};
  m.source = path;
  EXPECT_OK(w.value()->Finish(m));
  return path;
}

double LastAcc1(const std::string& dir) {
  std::ifstream f(dir + "/metrics.jsonl");
  double acc = -1;
  for (std::string line; std::getline(f, line);)
    if (line.find("\"eval\"") != std::string::npos) acc = nlohmann::json::parse(line)["acc1"].get<double>();
  return acc;
}

// Runs `cmd` through sh, returning (exit code, stdout + stderr).
std::pair<int, std::string> CaptureAll(const std::string& cmd) { return Capture(cmd, /*with_stderr=*/true); }

std::string Contract(const std::string& train, const std::string& val) {
  return kTrain + " --data " + train + " --val " + val +
         " --arch mlp --size 8 --seed 3 --threads 1 --loader-threads 1 --batch-size 16 --print-freq 1000 --lr 0.05";
}

// A validation set packed apart: the classes come from --data, and the
// validation set's are matched to them by name. Reordered: the same
// accuracy as the same samples in the training order; one class missing:
// trained and tested on the rest; a class the training data lacks, or a
// validation set without classes: refused, naming it, before training.
TEST(Contract, ValidationClassesAreMatchedByNameOrRefused) {
  TempDir d;
  const std::string train = MakeNamedDb(d, "train", {"a", "b", "c", "d"});
  const std::string same = MakeNamedDb(d, "val_same", {"a", "b", "c", "d"});
  const std::string reordered = MakeNamedDb(d, "val_reordered", {"d", "b", "a", "c"});
  const std::string missing = MakeNamedDb(d, "val_missing", {"c", "a", "b"});
  const std::string extra = MakeNamedDb(d, "val_extra", {"a", "b", "c", "e"});
  auto [rc, out] = CaptureAll(Contract(train, same) + " --epochs 2 --output " + (d / "same"));
  ASSERT_EQ(rc, 0) << out;
  const double want = LastAcc1(d / "same");
  EXPECT_GT(want, 90) << out;  // the cue is learnable: far from chance (25%)
  EXPECT_NE(out.find("the same 4 classes"), std::string::npos) << out;

  std::tie(rc, out) = CaptureAll(Contract(train, reordered) + " --epochs 2 --output " + (d / "reordered"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_EQ(LastAcc1(d / "reordered"), want) << out;
  EXPECT_NE(out.find("4 of the 4 classes, matched by name (order differs)"), std::string::npos) << out;

  std::tie(rc, out) = CaptureAll(Contract(train, missing) + " --epochs 2 --output " + (d / "missing"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_GT(LastAcc1(d / "missing"), 90) << out;
  EXPECT_NE(out.find("3 of the 4 classes, matched by name (order differs); absent: 'd'"), std::string::npos) << out;
  EXPECT_NE(out.find("192 samples"), std::string::npos) << out;

  std::tie(rc, out) = CaptureAll(Contract(train, extra) + " --epochs 1 --output " + (d / "extra"));
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("'e' (label 3 of 4) is not among the 4 classes of " + train), std::string::npos) << out;
  EXPECT_EQ(out.find("Epoch: ["), std::string::npos) << out;  // refused before training
  EXPECT_EQ(out.find("out of bounds"), std::string::npos) << out;

  // Validation shards, comma-separated, each matched alike.
  std::tie(rc, out) = CaptureAll(Contract(train, missing + "," + reordered) + " --epochs 1 --output " + (d / "shards"));
  EXPECT_EQ(rc, 1) << out;  // shards of one dataset share their class list
  EXPECT_NE(out.find("different class list"), std::string::npos) << out;
  std::tie(rc, out) = CaptureAll(Contract(train, same + "," + same) + " --epochs 1 --output " + (d / "shards"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("512 samples"), std::string::npos) << out;
}

// No statistics in the training data: the log says what the input is
// normalised with; a validation set's own statistics are never used.
TEST(Contract, NormalisationComesFromTheTrainingData) {
  TempDir d;
  const std::string plain = MakeNamedDb(d, "plain", {"a", "b", "c", "d"}, /*stats=*/false);
  const std::string with = MakeNamedDb(d, "with", {"a", "b", "c", "d"});
  auto [rc, out] = CaptureAll(Contract(plain, with) + " --epochs 1 --output " + (d / "none"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("normalising the input with mean 0.5, std 0.25 (the training data holds no statistics"),
            std::string::npos)
      << out;
  std::tie(rc, out) = CaptureAll(Contract(with, plain) + " --epochs 1 --output " + (d / "stats"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("normalising the input with the training data's statistics"), std::string::npos) << out;
  EXPECT_NE(out.find("0.5000/0.3000"), std::string::npos) << out;
}

// A checkpoint says what it holds: --evaluate and --resume need nothing
// repeated, a contradicting --arch is refused by name, another value of a
// training option is used and said.
TEST(Contract, CheckpointsDescribeThemselves) {
  TempDir d;
  const std::string train = MakeNamedDb(d, "train", {"a", "b", "c", "d"});
  const std::string val = MakeNamedDb(d, "val", {"d", "c", "b", "a"});
  const std::string run = d / "run";
  auto [rc, out] = CaptureAll(kTrain + " --data " + train + " --val " + val +
                              " --arch small_cnn --size 8 --lr 0.05 --seed 3 --threads 1 --loader-threads 1"
                              " --batch-size 16 --print-freq 1000 --epochs 3 --stop-at-step 6 --output " + run);
  ASSERT_EQ(rc, 0) << out;
  // --resume auto with only --output: the run's own options, to the end.
  std::tie(rc, out) = CaptureAll(kTrain + " --resume auto --output " + run);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("small_cnn"), std::string::npos) << out;
  EXPECT_NE(out.find("Epoch: [2]"), std::string::npos) << out;
  const auto [rc0, straight] = CaptureAll(kTrain + " --data " + train + " --val " + val +
                                          " --arch small_cnn --size 8 --lr 0.05 --seed 3 --threads 1 "
                                          "--loader-threads 1 --batch-size 16 --print-freq 1000 --epochs 3 --output " +
                                          (d / "straight"));
  ASSERT_EQ(rc0, 0) << straight;
  EXPECT_EQ(Digest(out), Digest(straight)) << out;
  // --evaluate: the checkpoint and the data to evaluate, nothing else.
  std::tie(rc, out) = CaptureAll(kTrain + " --evaluate --resume " + run + "/checkpoint.pt --val " + val);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("Acc@1"), std::string::npos) << out;
  EXPECT_NE(out.find("matched by name"), std::string::npos) << out;
  // A contradicting --arch is refused by name; another --lr is used, said.
  std::tie(rc, out) = CaptureAll(kTrain + " --evaluate --resume " + run + "/checkpoint.pt --val " + val +
                                 " --arch mlp");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("--arch mlp contradicts " + run + "/checkpoint.pt, whose model was trained with --arch small_cnn"),
            std::string::npos)
      << out;
  std::tie(rc, out) = CaptureAll(kTrain + " --resume auto --output " + run + " --epochs 4 --lr 0.01");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("--lr 0.01 (the checkpoint's run: 0.05)"), std::string::npos) << out;
  EXPECT_NE(out.find("Epoch: [3]"), std::string::npos) << out;
  // Resuming with data of other classes is refused, naming the first.
  const std::string other = MakeNamedDb(d, "other", {"a", "c", "b", "d"});
  std::tie(rc, out) = CaptureAll(kTrain + " --resume auto --output " + run + " --epochs 5 --data " + other);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("they differ at label 1 ('b' vs 'c')"), std::string::npos) << out;
}

// --amp on a CPU without native bf16 trains in fp32 and says why;
// --amp=bf16 forces bf16. IMAGEPACK_CPU_BF16 plays either CPU.
TEST(Contract, AmpOnACpuWithoutNativeBf16FallsBackAndSaysSo) {
  TempDir d;
  const std::string db = MakeNamedDb(d, "db", {"a", "b", "c", "d"});
  auto [rc, out] = CaptureAll("IMAGEPACK_CPU_BF16=0 " + Contract(db, ValCopy(db)) + " --epochs 1 --amp --output " + (d / "a"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("this CPU has no native bf16"), std::string::npos) << out;
  EXPECT_EQ(out.find("AMP bf16"), std::string::npos) << out;
  std::tie(rc, out) = CaptureAll("IMAGEPACK_CPU_BF16=1 " + Contract(db, ValCopy(db)) + " --epochs 1 --amp --output " + (d / "b"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("AMP bf16"), std::string::npos) << out;
  std::tie(rc, out) = CaptureAll("IMAGEPACK_CPU_BF16=0 " + Contract(db, ValCopy(db)) + " --epochs 1 --amp=bf16 --output " + (d / "c"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("AMP bf16"), std::string::npos) << out;
}

// ---- tasks beyond classification -------------------------------------------

DatasetMeta SegMeta() {
  DatasetMeta m;
  m.channels = 1;
  m.mean = {0.5};
  m.std = {0.3};
  FieldSpec mask;
  mask.name = "mask";
  mask.kind = FieldKind::kMask;
  mask.classes = {"bg", "a", "b"};
  mask.ignore = 255;
  m.fields = {mask};
  return m;
}

// Segmentation figures from a confusion matrix counted here by hand: 3
// classes, 8 pixels, one ignored.
TEST(Tasks, SegmentationFiguresFromAHandCountedConfusionMatrix) {
  auto task = MakeTask({"segmentation"}, SegMeta(), 1, torch::kCPU);
  // target: 0 0 1 1 2 2 255 0 ; prediction: 0 1 1 1 2 0 2 0
  auto y = torch::tensor({0, 0, 1, 1, 2, 2, 255, 0}, torch::kLong).view({1, 2, 4});
  const int64_t pred[8] = {0, 1, 1, 1, 2, 0, 2, 0};
  auto out = torch::zeros({1, 3, 2, 4});
  for (int i = 0; i < 8; ++i) out[0][pred[i]][i / 4][i % 4] = 1;
  const auto t = task->Tally(out, y, torch::Tensor());
  ASSERT_EQ(t.size(), 9u);
  // Class 0: tp 2 (pixels 0, 7), fn 1 (1), fp 1 (5) -> 2/4; class 1: tp 2,
  // fp 1 -> 2/3; class 2: tp 1, fn 1 -> 1/2. Pixel accuracy 5/7.
  const auto f = task->EvalFigures(t);
  EXPECT_NEAR(f[0].value, 100 * (0.5 + 2.0 / 3 + 0.5) / 3, 1e-9);
  EXPECT_EQ(f[0].key, "miou");
  EXPECT_NEAR(f[1].value, 100 * 5.0 / 7, 1e-9);
  EXPECT_NEAR(f[2].value, 50, 1e-9);
  EXPECT_EQ(f[2].key, "iou_bg");
  // The ignored pixel costs no loss: changing its logits changes nothing.
  auto loss = task->Loss(out, y).item<double>();
  out[0][0][1][2] = 50;
  EXPECT_NEAR(task->Loss(out, y).item<double>(), loss, 1e-9);
}

// A uint16 mask (LibTorch 1.13 has no uint16): every id up to 65535 reaches
// the loss as itself, the ignore value 65535 included.
TEST(Tasks, SegmentationTargetsOfAUint16MaskKeepTheirValues) {
  DatasetMeta m = SegMeta();
  m.fields[0].bits = 16;
  m.fields[0].ignore = 65535;
  for (int i = 3; i < 40000; ++i) m.fields[0].classes.push_back(std::to_string(i));
  auto task = MakeTask({"segmentation"}, m, 1, torch::kCPU);
  std::vector<uint16_t> ids = {0, 1, 32767, 32768, 39999, 65535};
  BatchView b;
  b.count = 1;
  b.fields.push_back({"mask", DType::kUint16, {1, 2, 3}, reinterpret_cast<uint8_t*>(ids.data())});
  const auto y = task->Target(b, 1, torch::kCPU);
  ASSERT_EQ(y.scalar_type(), torch::kLong);
  ASSERT_EQ(y.numel(), 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y.flatten()[i].item<int64_t>(), ids[i]) << i;
}

TEST(Tasks, RestorationPsnrOfOutputAndInput) {
  DatasetMeta m;
  m.channels = 1;
  FieldSpec target;
  target.name = "target";
  target.kind = FieldKind::kImage;
  m.fields = {target};
  auto task = MakeTask({"restoration"}, m, 1, torch::kCPU);
  auto y = torch::zeros({2, 1, 4, 4});
  auto x = y + 0.2;   // an error of 0.1 on [0, 1]: 20 dB
  auto out = y + 0.02;  // 0.01: 40 dB
  const auto f = task->EvalFigures(task->Tally(out, y, x));
  EXPECT_NEAR(f[0].value, 40, 1e-4);
  EXPECT_NEAR(f[1].value, 20, 1e-4);
  EXPECT_NEAR(f[2].value, 20, 1e-4);
  EXPECT_THROW(MakeTask({"segmentation"}, m, 1, torch::kCPU), std::invalid_argument);
}

// 16x16 gray images of two bright squares (classes 1, 2) on noise; the mask
// says which square each pixel is in. target: a second image field holding
// the clean picture, the image is it plus noise (restoration).
std::string MakeDenseDb(const TempDir& d, const std::string& name, bool restoration, int n = 96) {
  const std::string path = d / name;
  auto w = CreateWriter(ContainerFormat::kLmdb, path);
  EXPECT_TRUE(w.ok());
  SplitMix64 rng(5);
  for (int i = 0; i < n; ++i) {
    std::vector<uint8_t> clean(256, 40), mask(256, 0), noisy(256);
    for (int k = 1; k <= 2; ++k) {
      const int x0 = int(rng.Below(10)), y0 = int(rng.Below(10)), v = k == 1 ? 140 : 230;
      for (int y = y0; y < y0 + 6; ++y)
        for (int x = x0; x < x0 + 6; ++x) clean[y * 16 + x] = uint8_t(v), mask[y * 16 + x] = uint8_t(k);
    }
    for (int p = 0; p < 256; ++p) noisy[p] = uint8_t(std::clamp<int>(clean[p] + int(rng.Below(61)) - 30, 0, 255));
    const std::vector<uint8_t>& second = restoration ? clean : mask;
    std::vector<uint8_t> section;
    AppendField(section, {0, restoration ? FieldKind::kImage : FieldKind::kMask, 1, 1, 16, 16, 0, second.data(),
                          second.size()});
    RecordFields f{Encoding::kRaw, 1, -1, 16, 16};
    f.field_count = 1;
    f.fields_size = uint32_t(section.size());
    EXPECT_OK(w.value()->Add(EncodeRecord(f, "i" + std::to_string(i), noisy.data(), noisy.size(), section.data())));
  }
  DatasetMeta m = SegMeta();
  m.count = n;
  m.encoding = Encoding::kRaw;
  if (restoration) {
    m.fields[0] = FieldSpec{"target", FieldKind::kImage, {}, -1};
  }
  EXPECT_OK(w.value()->Finish(m));
  return path;
}

std::map<std::string, double> LastEval(const std::string& dir) {
  std::ifstream f(dir + "/metrics.jsonl");
  std::map<std::string, double> out;
  for (std::string line; std::getline(f, line);)
    if (line.find("\"eval\"") != std::string::npos) {
      const auto row = nlohmann::json::parse(line);
      for (auto& [k, v] : row.items())
        if (v.is_number()) out[k] = v.get<double>();
    }
  return out;
}

std::string Dense(const std::string& task, const std::string& db) {
  return kTrain + " --task " + task + " --data " + db + " --val " + ValCopy(db) +
         " --size 16 --batch-size 8 --lr 0.05 --seed 3 --threads 1 --loader-threads 1 --print-freq 1000";
}

// bf16 autocast on CPU (forced: --amp alone trains in fp32 on a CPU
// without native bf16, where bf16 is emulated and several times slower)
// trains a dense task; a segmentation run cut on 2 processes and resumed
// on 1 reads every sample of the epoch once, masks included (the loader's
// elastic rule, through the trainer). Restoration is trained in fp32 by
// RestorationGainsOverTheNoisyInput.
TEST(Tasks, Bf16AutocastTrainsSegmentationAndAResumeOnAnotherWorldSizeReadsEachSampleOnce) {
  TempDir d;
  const std::string seg = MakeDenseDb(d, "seg", false);
  const auto [rc, out] = Capture(Dense("segmentation", seg) + " --epochs 4 --amp=bf16 --output " + (d / "amp_seg"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("AMP bf16"), std::string::npos) << out;
  EXPECT_GT(LastEval(d / "amp_seg").at("miou"), 50) << out;

  const std::string log = d / "elastic.samples";
  const auto [rc3, out3] = Capture(kLaunch + " --nproc 2 -- " + Dense("segmentation", seg) +
                                   " --epochs 1 --stop-at-step 3 --output " + (d / "elastic") + " --log-samples " +
                                   log + ".2p");
  ASSERT_EQ(rc3, 0) << out3;
  EXPECT_NE(out3.find("position 48"), std::string::npos) << out3;
  const auto [rc4, out4] = Capture(kLaunch + " --nproc 1 -- " + Dense("segmentation", seg) +
                                   " --epochs 1 --resume auto --output " + (d / "elastic") + " --log-samples " +
                                   log + ".1p");
  ASSERT_EQ(rc4, 0) << out4;
  std::map<int64_t, int> seen;
  for (int r = 0; r < 2; ++r) CountEpoch(log + ".2p.rank" + std::to_string(r), 0, &seen);
  CountEpoch(log + ".1p.rank0", 0, &seen);
  ASSERT_EQ(seen.size(), 96u);
  for (const auto& [index, count] : seen) EXPECT_EQ(count, 1) << "sample " << index;
  EXPECT_TRUE(LastEval(d / "elastic").count("miou"));
}

// SSIM against the formula computed directly: every valid 11x11 window,
// Gaussian weights, in double precision.
TEST(Tasks, SsimIsWangsFormula) {
  torch::manual_seed(5);
  const int H = 19, W = 23;
  auto b = torch::rand({2, 2, H, W});
  auto a = (b + 0.1 * torch::randn({2, 2, H, W})).clamp(0, 1);
  const auto got = Ssim(a, b);
  double g[11], sum = 0;
  for (int i = 0; i < 11; ++i) sum += g[i] = std::exp(-(i - 5) * (i - 5) / (2 * 1.5 * 1.5));
  for (double& v : g) v /= sum;
  auto A = a.accessor<float, 4>(), B = b.accessor<float, 4>();
  for (int n = 0; n < 2; ++n) {
    double total = 0;
    int count = 0;
    for (int c = 0; c < 2; ++c)
      for (int y = 0; y + 11 <= H; ++y)
        for (int x = 0; x + 11 <= W; ++x) {
          double ma = 0, mb = 0, aa = 0, bb = 0, ab = 0;
          for (int i = 0; i < 11; ++i)
            for (int j = 0; j < 11; ++j) {
              const double w = g[i] * g[j], u = A[n][c][y + i][x + j], v = B[n][c][y + i][x + j];
              ma += w * u, mb += w * v, aa += w * u * u, bb += w * v * v, ab += w * u * v;
            }
          const double c1 = 1e-4, c2 = 9e-4, va = aa - ma * ma, vb = bb - mb * mb, cov = ab - ma * mb;
          total += (2 * ma * mb + c1) * (2 * cov + c2) / ((ma * ma + mb * mb + c1) * (va + vb + c2));
          ++count;
        }
    EXPECT_NEAR(got[n].item<double>(), total / count, 1e-4) << "image " << n;
  }
  EXPECT_NEAR(Ssim(b, b).mean().item<double>(), 1.0, 1e-5);
  const auto noisier = (b + 0.3 * torch::randn({2, 2, H, W})).clamp(0, 1);
  EXPECT_LT(Ssim(noisier, b).max().item<double>(), got.min().item<double>());
}

TEST(Tasks, SegmentationLearnsAndAKilledRunResumesToTheSameFigures) {
  TempDir d;
  const std::string db = MakeDenseDb(d, "seg", false);
  const std::string run = Dense("segmentation", db) + " --epochs 4 --checkpoint-every 5";
  const auto [rc, out] = Capture(run + " --output " + (d / "straight"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("fcn_small"), std::string::npos) << out;
  EXPECT_NE(out.find("mIoU"), std::string::npos) << out;
  const auto want = LastEval(d / "straight");
  EXPECT_GT(want.at("miou"), 60) << out;  // three classes told apart by brightness and shape
  EXPECT_GT(want.at("pixel_acc"), 85) << out;

  const pid_t pid = Spawn(run + " --output " + (d / "killed") + " --log-samples " + (d / "killed.samples"));
  ASSERT_TRUE(WaitForLines(d / "killed.samples.rank0", 23));  // epoch 1 of 4 (12 steps each)
  kill(-pid, SIGKILL);
  Reap(pid);
  ASSERT_TRUE(WaitForGroupGone(pid));
  // Killed mid-run: fewer evaluations than epochs so far.
  const std::string before = Slurp(d / "killed/metrics.jsonl");
  size_t evals = 0;
  for (size_t at = 0; (at = before.find("\"eval\"", at)) != std::string::npos; ++at) ++evals;
  ASSERT_LT(evals, 4u);
  const auto [rc2, out2] = Capture(run + " --output " + (d / "killed") + " --resume auto");
  ASSERT_EQ(rc2, 0) << out2;
  EXPECT_NE(out2.find("=> resumed from"), std::string::npos);
  EXPECT_EQ(Digest(out2), Digest(out));
  const auto got = LastEval(d / "killed");
  EXPECT_EQ(got.at("miou"), want.at("miou"));
  EXPECT_EQ(got.at("pixel_acc"), want.at("pixel_acc"));
}

TEST(Tasks, RestorationGainsOverTheNoisyInput) {
  TempDir d;
  const std::string db = MakeDenseDb(d, "rest", true);
  const auto [rc, out] = Capture(Dense("restoration", db) + " --epochs 6 --output " + (d / "run") +
                                 " --save-predictions 4");
  ASSERT_EQ(rc, 0) << out;
  const auto e = LastEval(d / "run");
  EXPECT_NEAR(e.at("psnr") - e.at("psnr_input"), e.at("psnr_gain"), 1e-9);
  EXPECT_GT(e.at("psnr_gain"), 1.0) << out;  // denoising flat squares is easy
  for (const char* k : {"input", "output", "target"}) {
    const std::string npy = Slurp(d / ("run/predictions_" + std::string(k) + ".npy"));
    ASSERT_GT(npy.size(), 128u);
    EXPECT_EQ(npy.substr(1, 5), "NUMPY");
    EXPECT_NE(npy.find("'shape': (4, 1, 16, 16, )"), std::string::npos) << npy.substr(0, 128);
  }
}

// ---- recipes: progressive resolution, BlurPool, FFCV's lr, mixes -----------

// FFCV's 'cyclic' lr (ffcv-imagenet get_cyclic_lr, then interpolated per
// step): np.interp(t, [0, peak, epochs], [lr * 1e-4, lr, 0]).
TEST(Schedule, TriangularIsFfcvsLinearRampUpAndDown) {
  ScheduleOptions s;
  s.kind = "triangular";
  s.base_lr = 1.7;
  s.peak_epoch = 2;
  s.warmup_epochs = 5;  // not applied: the ramp is the warm-up
  auto ffcv = [](double t) {
    const double lr = 1.7, peak = 2, total = 16;
    if (t <= peak) return lr * 1e-4 + (lr - lr * 1e-4) * t / peak;
    return lr + (0 - lr) * (t - peak) / (total - peak);
  };
  for (double t : {0.0, 0.25, 1.0, 1.999, 2.0, 2.5, 9.0, 15.75, 16.0}) EXPECT_NEAR(LearningRate(s, t, 16), ffcv(t), 1e-12) << t;
  EXPECT_DOUBLE_EQ(LearningRate(s, 2, 16), 1.7);
  EXPECT_DOUBLE_EQ(LearningRate(s, 16, 16), 0);
}

// BlurPool: buffers, no parameters; a blur before each strided convolution
// of at least 16 channels (ResNet-18 and -50: 6 each, layers 2-4's first
// block: its strided convolution and its downsample); a constant map stays
// constant inside, the finest checkerboard is flattened.
TEST(Models, BlurPoolAddsBuffersNotParametersAndLowPasses) {
  for (auto [arch, params] : {std::pair<const char*, int64_t>{"resnet18", 11689512}, {"resnet50", 25557032}}) {
    ModelOptions o;
    o.arch = arch;
    o.blurpool = true;
    std::shared_ptr<torch::nn::Module> m;
    auto any = MakeModel(o, &m);
    EXPECT_EQ(CountParameters(*m), params) << arch;
    int blurs = 0;
    for (const auto& b : m->named_buffers())
      if (b.key().size() >= 5 && b.key().substr(b.key().size() - 5) == ".blur") ++blurs;
    EXPECT_EQ(blurs, 6) << arch;
    o.num_classes = 5;
    auto small = MakeModel(o, &m);
    EXPECT_EQ(small.forward(torch::randn({2, 3, 32, 32})).sizes(), (std::vector<int64_t>{2, 5}));
    // Without BlurPool the parameters keep their names: old checkpoints load.
    ModelOptions plain = o;
    plain.blurpool = false;
    std::shared_ptr<torch::nn::Module> p;
    MakeModel(plain, &p);
    std::vector<std::string> a, b;
    for (const auto& x : m->named_parameters()) a.push_back(x.key());
    for (const auto& x : p->named_parameters()) b.push_back(x.key());
    EXPECT_EQ(a, b);
  }
  ModelOptions o;
  o.arch = "resnet18";
  o.blurpool = true;
  std::shared_ptr<torch::nn::Module> m;
  MakeModel(o, &m);
  torch::Tensor filter;
  for (const auto& b : m->named_buffers())
    if (b.key() == "layer2.0.blur_conv1.blur") filter = b.value();
  ASSERT_TRUE(filter.defined());
  EXPECT_EQ(filter.sizes(), (std::vector<int64_t>{64, 1, 3, 3}));
  const auto flat = torch::conv2d(torch::full({1, 64, 6, 6}, 3.0), filter, {}, 1, 1, 1, 64);
  EXPECT_NEAR(flat.index({0, 0, 2, 2}).item<double>(), 3.0, 1e-6);
  auto checker = torch::zeros({1, 64, 6, 6});
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 6; ++x) checker.index_put_({0, torch::indexing::Slice(), y, x}, double((x + y) % 2));
  const auto blurred = torch::conv2d(checker, filter, {}, 1, 1, 1, 64);
  EXPECT_NEAR(blurred.index({0, 0, 2, 2}).item<double>(), 0.5, 1e-6);
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

// A 70/30 mix of two packs with a resolution schedule: each epoch's row
// says its size and each source's samples; a run cut inside the ramp's
// epoch and resumed gives the uninterrupted run's samples and weights; a
// resume with other weights is refused naming the source.
TEST(Recipes, MixAndResolutionScheduleResumeExactly) {
  TempDir d;
  const std::string a = MakeNamedDb(d, "a", {"a", "b", "c", "d"}, true, 160);
  const std::string b = MakeNamedDb(d, "b", {"a", "b", "c", "d"}, true, 64);
  const std::string run = kTrain + " --data " + a + " --data " + b + " --weights 0.7,0.3 --val " + ValCopy(b) +
                          " --arch small_cnn --size 8 --res-schedule 4,8,0,2,2 --val-size 8 --lr 0.05 --seed 3"
                          " --threads 1 --loader-threads 1 --batch-size 16 --print-freq 1000 --epochs 3";
  auto [rc, out] = CaptureAll(run + " --output " + (d / "straight") + " --log-samples " + (d / "straight.samples"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("=> training mix, per epoch: " + a + " 157 of 160 records; " + b + " 67 of 64 records"),
            std::string::npos) << out;
  EXPECT_NE(out.find("=> progressive resolution 4,8,0,2,2"), std::string::npos) << out;
  const auto rows = Rows(d / "straight", "epoch");
  ASSERT_EQ(rows.size(), 3u);
  const int want_res[] = {4, 6, 8};
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(rows[e]["res"].get<int>(), want_res[e]) << rows[e];
    EXPECT_EQ(rows[e]["sources"][a].get<int64_t>(), 157) << rows[e];
    EXPECT_EQ(rows[e]["sources"][b].get<int64_t>(), 67) << rows[e];
  }
  // Every epoch's logged samples hold each source's count (a's records
  // first: indices below 160).
  std::map<int64_t, int> epoch1;
  CountEpoch(d / "straight.samples.rank0", 1, &epoch1);
  int64_t from_a = 0, total = 0;
  for (const auto& [index, count] : epoch1) {
    from_a += index < 160 ? count : 0;
    total += count;
  }
  EXPECT_EQ(total, 224);
  EXPECT_EQ(from_a, 157);
  // Cut in epoch 1 (6 px: 14 steps per epoch), resumed: the same samples, the same weights.
  std::tie(rc, out) = CaptureAll(run + " --stop-at-step 19 --output " + (d / "cut") + " --log-samples " + (d / "cut.samples"));
  ASSERT_EQ(rc, 0) << out;
  std::tie(rc, out) = CaptureAll(kTrain + " --resume auto --output " + (d / "cut") + " --weights 0.5,0.5");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("of another mix: source 1 (" + a + "): weight 0.7 in the state, weight 0.5 now"),
            std::string::npos) << out;
  std::tie(rc, out) = CaptureAll(kTrain + " --resume auto --output " + (d / "cut") + " --log-samples " + (d / "cut.samples"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("=> epoch 1: training at 6 px"), std::string::npos) << out;
  const auto [rc0, straight] = CaptureAll(run + " --output " + (d / "again"));
  EXPECT_EQ(Digest(out), Digest(straight)) << out;
  EXPECT_EQ(Slurp(d / "cut.samples.rank0"), Slurp(d / "straight.samples.rank0"));
  const auto resumed = Rows(d / "cut", "epoch");
  ASSERT_EQ(resumed.size(), 3u);
  EXPECT_EQ(resumed[1]["res"].get<int>(), 6);
}

// FFCV's recipe on a ResNet: BlurPool, the triangular lr, a resolution
// ramp and evaluation at its own size and resize (FixRes), in one short run.
TEST(Recipes, ResNetWithBlurPoolTriangularLrAndFixResEvaluation) {
  TempDir d;
  const std::string db = MakeNamedDb(d, "db", {"a", "b", "c", "d"}, true, 64);
  auto [rc, out] = CaptureAll(kTrain + " --data " + db + " --val " + ValCopy(db) +
                              " --arch resnet18 --blurpool --res-schedule 16,32,0,1 --val-size 24 --val-resize 28"
                              " --schedule triangular --lr-peak-epoch 1 --lr 0.1 --label-smoothing 0.1 --no-bn-wd"
                              " --seed 3 --threads 1 --loader-threads 1 --batch-size 16 --print-freq 1 --epochs 2"
                              " --output " + (d / "r18"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("evaluation at 24 px"), std::string::npos) << out;
  const auto rows = Rows(d / "r18", "epoch");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["res"].get<int>(), 16);
  EXPECT_EQ(rows[1]["res"].get<int>(), 32);
  const auto steps = Rows(d / "r18", "train");
  ASSERT_EQ(steps.size(), 8u);
  EXPECT_NEAR(steps[0]["lr"].get<double>(), 1e-5, 1e-12);  // lr * 1e-4 at 0
  EXPECT_NEAR(steps[2]["lr"].get<double>(), 0.1 * 1e-4 + (0.1 - 0.1 * 1e-4) * 0.5, 1e-9);
  EXPECT_NEAR(steps[4]["lr"].get<double>(), 0.1, 1e-12);  // the peak, epoch 1
  EXPECT_NEAR(steps[6]["lr"].get<double>(), 0.05, 1e-12);
  EXPECT_EQ(Rows(d / "r18", "eval").back()["samples"].get<int64_t>(), 64);
  std::tie(rc, out) = CaptureAll(kTrain + " --data " + db + " --val " + ValCopy(db) + " --arch small_cnn --blurpool --epochs 1"
                                 " --output " + (d / "no"));
  EXPECT_EQ(rc, 2) << out;  // a usage error, found before anything is made
  EXPECT_NE(out.find("--blurpool: for the ResNets"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(d / "no"));
}

}  // namespace
}  // namespace imagepack::trainer
