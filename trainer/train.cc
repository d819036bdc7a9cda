// train --data DB[,DB...] --val DB --arch A --epochs E --batch-size B --lr LR --output DIR [options]
// Trains on what pack_lmdb wrote and reports accuracy; see docs/TRAINING.md.
#include <sys/stat.h>
#include <unistd.h>

#include <boost/algorithm/string.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "amp.h"
#include "checkpoint.h"
#include "cli.h"
#include "distributed.h"
#include "imagepack/files.h"
#include "imagepack/loader.h"
#include "models.h"
#include "nccl_backend.h"
#include "preemption.h"
#include "schedule.h"

namespace fs = std::filesystem;
namespace po = boost::program_options;
using namespace imagepack;
using namespace imagepack::trainer;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string data, val, arch = "resnet18", output, resume, device = "cpu", schedule = "step";
  int epochs = 90, batch = 256, print_freq = 10, threads = 0, loader_threads = 0, size = 0, step_size = 30;
  double lr = 0.1, momentum = 0.9, wd = 1e-4, label_smoothing = 0, warmup = 0;
  int64_t seed = 0, max_steps = 0, checkpoint_every = 0, stop_at_step = 0;
  double checkpoint_minutes = 0;
  std::string log_samples;
  bool amp = false, in_ram = false, evaluate = false, tta_flip = false, nesterov = false, no_bn_wd = false, lr_scale = false,
       zero_init = false, channels_last = false, no_val = false;
};

// Running value and average, as in the reference ImageNet example.
struct Meter {
  double val = 0, sum = 0;
  int64_t n = 0;
  void Add(double v, int64_t k = 1) {
    val = v;
    sum += v * k;
    n += k;
  }
  double avg() const { return n ? sum / n : 0; }
};

// Number of samples whose target is among the top-k logits, for k = 1, 5.
std::pair<int64_t, int64_t> Correct(const torch::Tensor& logits, const torch::Tensor& target) {
  const int64_t k = std::min<int64_t>(5, logits.size(1));
  auto top = std::get<1>(logits.topk(k, 1));
  auto hit = top.eq(target.view({-1, 1}));
  return {hit.narrow(1, 0, 1).sum().item<int64_t>(), hit.sum().item<int64_t>()};
}

int Run(const Args& args) {
  const DistEnv env = ReadDistEnv();
  const torch::Device device(args.device == "cuda" ? torch::kCUDA : torch::kCPU);
  if (device.is_cuda()) {
    if (!torch::cuda::is_available()) throw std::runtime_error("--device cuda, but no CUDA device is available");
    ConfigureCuda();
  }
  // Threads: split the cores between the local ranks unless told.
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const int local_ranks = std::max(1, std::getenv("LOCAL_WORLD_SIZE") ? std::atoi(std::getenv("LOCAL_WORLD_SIZE"))
                                                                      : env.world_size);
  const int per_rank = std::max(1, cores / local_ranks);
  torch::set_num_threads(args.threads > 0 ? args.threads : per_rank);
  torch::manual_seed(static_cast<uint64_t>(args.seed));
  InstallStopHandlers();
  Distributed dist(env, device);
  const bool main_rank = dist.is_main();
  auto log = [&](const std::string& s) {
    if (main_rank) {
      std::cout << s << std::endl;
    }
  };

  std::vector<std::string> train_paths;
  boost::split(train_paths, args.data, boost::is_any_of(","));
  LoaderOptions lo;
  lo.paths = train_paths;
  lo.in_ram = args.in_ram;
  lo.batch_size = args.batch;
  lo.seed = static_cast<uint64_t>(args.seed);
  lo.rank = dist.rank();
  lo.world_size = dist.world_size();
  lo.threads = args.loader_threads > 0 ? args.loader_threads : per_rank;
  const bool small = args.arch == "small_cnn" || args.arch == "mlp";
  lo.size = args.size > 0 ? args.size : (small ? 28 : 224);
  lo.transform = small ? TransformKind::kPadCrop : TransformKind::kTrain;
  lo.pad = 2;
  lo.layout = args.channels_last ? Layout::kNHWC : Layout::kNCHW;
  LoaderOptions vo = lo;
  vo.paths = {args.val};
  vo.shuffle = false;
  vo.even_partition = false;
  vo.transform = small ? TransformKind::kPadCropEval : TransformKind::kEval;
  auto train_loader =
      args.evaluate ? Result<std::unique_ptr<Loader>>(std::unique_ptr<Loader>()) : Loader::Open(lo);
  if (!args.evaluate && !train_loader.ok()) throw std::runtime_error(train_loader.status().ToString());
  auto val_loader = Loader::Open(vo);
  if (!val_loader.ok()) throw std::runtime_error(val_loader.status().ToString());
  const DatasetMeta& meta = val_loader.value()->meta();
  const int C = val_loader.value()->channels();

  ModelOptions mo;
  mo.arch = args.arch;
  mo.num_classes = static_cast<int64_t>(meta.classes.size());
  mo.in_channels = C;
  mo.input_size = lo.size;
  mo.zero_init_residual = args.zero_init;
  std::shared_ptr<torch::nn::Module> module;
  torch::nn::AnyModule model = MakeModel(mo, &module);
  module->to(device);
  if (args.channels_last) {
    torch::NoGradGuard ng;
    for (auto& p : module->parameters())
      if (p.dim() == 4) p.set_data(p.contiguous(torch::MemoryFormat::ChannelsLast));
  }

  // Normalisation on the device with the database's statistics.
  std::vector<double> mean = meta.mean, stdv = meta.std;
  if (static_cast<int>(mean.size()) != C) mean.assign(C, 0.5), stdv.assign(C, 0.25);
  auto mean_t = torch::tensor(mean, torch::kFloat32).view({1, C, 1, 1}).mul(255).to(device);
  auto std_t = torch::tensor(stdv, torch::kFloat32).view({1, C, 1, 1}).mul(255).clamp_min(1e-3).to(device);

  // SGD; optionally no weight decay on BN and bias parameters.
  std::vector<torch::Tensor> decay, no_decay, all_params = module->parameters();
  for (auto& p : all_params) (args.no_bn_wd && p.dim() <= 1 ? no_decay : decay).push_back(p);
  const double global_batch = double(args.batch) * dist.world_size();
  ScheduleOptions so;
  so.kind = args.schedule;
  so.base_lr = args.lr_scale ? args.lr * global_batch / 256.0 : args.lr;
  so.warmup_epochs = args.warmup;
  so.step_size = args.step_size;
  auto sgd = torch::optim::SGDOptions(so.base_lr).momentum(args.momentum).nesterov(args.nesterov).weight_decay(args.wd);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::SGDOptions>(sgd));
  if (!no_decay.empty()) {
    auto nd = sgd;
    nd.weight_decay(0);
    groups.emplace_back(no_decay, std::make_unique<torch::optim::SGDOptions>(nd));
  }
  torch::optim::SGD optimizer(groups, sgd);
  GradScaler::Options gso;
  gso.enabled = args.amp && device.is_cuda();  // bf16 on CPU needs no scaling
  GradScaler scaler(gso);

  TrainState state;
  state.seed = args.seed;
  std::string resume = args.resume;
  if (resume == "auto") resume = fs::exists(args.output + "/checkpoint.pt") ? args.output + "/checkpoint.pt" : "";
  if (!resume.empty()) {
    state = LoadCheckpoint(resume, *module, args.evaluate ? nullptr : &optimizer);  // --evaluate needs weights only
    scaler.Load(state.scaler_scale, static_cast<int>(state.scaler_tracker));
    module->to(device);
    log("=> resumed from " + resume + " at epoch " + std::to_string(state.epoch) +
        (state.position > 0 ? ", position " + std::to_string(state.position) + " (saved by " +
                                  std::to_string(state.world_size) + " process(es))"
                            : ""));
  }
  if (main_rank && !args.output.empty()) {  // temporaries of checkpoints a killed run was writing
    RemoveStaleTempsFor(args.output + "/checkpoint.pt");
    RemoveStaleTempsFor(args.output + "/model_best.pt");
  }
  // Every rank starts from rank 0's parameters and buffers.
  std::vector<torch::Tensor> sync = module->parameters();
  for (auto& b : module->buffers()) sync.push_back(b);
  {
    torch::NoGradGuard ng;
    dist.Broadcast(sync);
  }
  GradientReducer reducer(&dist, all_params);
  if (main_rank) fs::create_directories(args.output);
  std::ofstream metrics;
  if (main_rank) metrics.open(args.output + "/metrics.jsonl", std::ios::app);
  auto emit = [&](const nlohmann::json& j) {
    if (main_rank) metrics << j.dump() << std::endl;
  };
  log("=> " + args.arch + " (" + std::to_string(CountParameters(*module)) + " parameters), " +
      std::to_string(meta.classes.size()) + " classes, " + std::to_string(dist.world_size()) + " process(es) [" +
      dist.backend() + ", " + env.source + "], batch " + std::to_string(args.batch) + "/rank, lr " +
      std::to_string(so.base_lr) + (args.amp ? (device.is_cuda() ? ", AMP fp16" : ", AMP bf16") : ""));

  const size_t sample_bytes = size_t(lo.size) * lo.size * C;
  // The loader writes batches straight into this tensor's memory; on CUDA it
  // is pinned so the host-to-device copy can be asynchronous.
  torch::Tensor host_batch = torch::empty({static_cast<int64_t>(sample_bytes) * args.batch},
                                          torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(device.is_cuda()));
  uint8_t* host_images = host_batch.data_ptr<uint8_t>();
  std::vector<int64_t> host_labels(args.batch), host_indices(args.batch);
  // --log-samples: each rank's dataset indices, one line per step.
  std::ofstream sample_log;
  if (!args.log_samples.empty()) sample_log.open(args.log_samples + ".rank" + std::to_string(dist.rank()), std::ios::app);
  // BN running statistics: broadcast from rank 0 before every step (what
  // torch's DDP does with broadcast_buffers=True), so all ranks train and
  // evaluate with rank 0's.
  const std::vector<torch::Tensor> buffers = module->buffers();
  auto to_input = [&](int n) {
    auto x = torch::from_blob(host_images,
                              args.channels_last ? torch::IntArrayRef{n, lo.size, lo.size, C}
                                                 : torch::IntArrayRef{n, C, lo.size, lo.size},
                              torch::kUInt8);
    if (args.channels_last) x = x.permute({0, 3, 1, 2});  // a channels-last view of NCHW
    x = x.to(device, /*non_blocking=*/device.is_cuda()).to(torch::kFloat32);
    return x.sub(mean_t).div(std_t);
  };
  auto labels_t = [&](int n) {
    return torch::from_blob(host_labels.data(), {n}, torch::kInt64).to(device).clone();
  };

  auto evaluate = [&](int64_t epoch) {
    module->eval();
    torch::NoGradGuard ng;
    Loader& vl = *val_loader.value();
    vl.StartEpoch(0);
    double loss_sum = 0;
    int64_t c1 = 0, c5 = 0, total = 0;
    while (true) {
      auto got = vl.Next(host_images, host_labels.data());
      if (!got.ok()) throw std::runtime_error(got.status().ToString());
      if (got.value() == 0) break;
      const int n = got.value();
      auto y = labels_t(n);
      torch::Tensor out;
      {
        AutocastScope ac(args.amp, device);
        auto x = to_input(n);
        out = model.forward(x);
        // Test-time flip: the mean of the logits of the image and its mirror.
        if (args.tta_flip) out = (out + model.forward(x.flip({3}))) / 2;
      }
      out = out.to(torch::kFloat32);
      loss_sum += torch::nn::functional::cross_entropy(out, y).item<double>() * n;
      auto [a, b] = Correct(out, y);
      c1 += a;
      c5 += b;
      total += n;
    }
    // Every validation sample is counted exactly once across ranks.
    auto t = torch::tensor({double(c1), double(c5), double(total), loss_sum}, torch::kFloat64);
    dist.AllReduceSum(t);
    const double n = t[2].item<double>();
    const double acc1 = 100 * t[0].item<double>() / n, acc5 = 100 * t[1].item<double>() / n;
    char buf[256];
    std::snprintf(buf, sizeof buf, " * Epoch %lld  Acc@1 %.3f  Acc@5 %.3f  Error@1 %.3f  Loss %.4f  (%lld samples)",
                  static_cast<long long>(epoch), acc1, acc5, 100 - acc1, t[3].item<double>() / n,
                  static_cast<long long>(n));
    log(buf);
    emit({{"type", "eval"}, {"epoch", epoch}, {"acc1", acc1}, {"acc5", acc5}, {"error1", 100 - acc1},
          {"error5", 100 - acc5}, {"loss", t[3].item<double>() / n}, {"samples", int64_t(n)}});
    return acc1;
  };

  if (args.evaluate) {
    evaluate(state.epoch);
    return 0;
  }
  Loader& tl = *train_loader.value();
  const int64_t world = dist.world_size();
  // Steps in a whole epoch at this world size: the schedule's unit.
  const int64_t steps_per_epoch = ((tl.dataset_size() + world - 1) / world + args.batch - 1) / args.batch;
  int64_t global_step = state.global_step > 0 ? state.global_step : state.epoch * steps_per_epoch;
  auto last_checkpoint = Clock::now();
  // Writes checkpoint.pt (rank 0) for where training is now; every rank
  // waits for it.
  auto checkpoint = [&](int64_t epoch, int64_t position) {
    state.epoch = epoch;
    state.position = position;
    state.global_step = global_step;
    state.scaler_scale = scaler.scale();
    state.scaler_tracker = scaler.growth_tracker();
    state.world_size = world;
    state.batch_size = args.batch;
    if (main_rank) {
      const auto t0 = Clock::now();
      Status st = SaveCheckpoint(args.output + "/checkpoint.pt", *module, optimizer, state);
      if (!st.ok()) throw std::runtime_error(st.ToString());
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      emit({{"type", "checkpoint"}, {"epoch", epoch}, {"position", position}, {"global_step", global_step},
            {"seconds", secs}, {"bytes", static_cast<int64_t>(fs::file_size(args.output + "/checkpoint.pt"))}});
    }
    dist.Barrier();
    last_checkpoint = Clock::now();
  };
  for (int64_t epoch = state.epoch; epoch < args.epochs; ++epoch) {
    module->train();
    const int64_t start = epoch == state.epoch ? state.position : 0;
    tl.Restore({epoch, start});
    // Exact when the world and batch sizes are those that saved the state;
    // otherwise the nearest step (the schedule only needs progress).
    const int64_t first_step = start / (int64_t(args.batch) * world);
    const int64_t steps = tl.batches_per_epoch();
    if (start > 0)
      log("=> epoch " + std::to_string(epoch) + " continues at position " + std::to_string(start) + " of " +
          std::to_string(tl.dataset_size()) + ": " + std::to_string(steps) + " step(s) left");
    Meter batch_time, data_rate, losses, err1, err5;
    double wait_s = 0, compute_s = 0;
    auto t_end = Clock::now();
    for (int64_t i = 0; i < steps; ++i) {
      const int64_t step = first_step + i;
      if (args.max_steps > 0 && i >= args.max_steps) break;
      const auto t0 = Clock::now();
      auto got = tl.Next(host_images, host_labels.data(), host_indices.data());
      if (!got.ok()) throw std::runtime_error(got.status().ToString());
      const int n = got.value();
      if (n == 0) break;
      const auto t1 = Clock::now();
      const double lr = LearningRate(so, epoch + double(step) / steps_per_epoch, args.epochs);
      for (auto& g : optimizer.param_groups()) static_cast<torch::optim::SGDOptions&>(g.options()).lr(lr);
      auto x = to_input(n);
      auto y = labels_t(n);
      if (world > 1) dist.BroadcastCoalesced(buffers);
      torch::Tensor out, loss;
      {
        AutocastScope ac(args.amp, device);
        out = model.forward(x);
      }
      out = out.to(torch::kFloat32);
      loss = torch::nn::functional::cross_entropy(
          out, y, torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(args.label_smoothing));
      for (auto& p : all_params) p.mutable_grad() = torch::Tensor();  // zero_grad that frees
      reducer.PrepareForBackward();
      scaler.Scale(loss).backward();
      reducer.Finalize();
      scaler.Step(optimizer, all_params);
      ++global_step;
      if (sample_log.is_open()) {
        sample_log << epoch << ' ' << step;
        for (int k = 0; k < n; ++k) sample_log << ' ' << host_indices[size_t(k)];
        sample_log << '\n' << std::flush;
      }
      // Checkpoint and stop decisions are taken together: a signal may
      // reach one rank, and the clock differs between hosts.
      {
        const double minutes = std::chrono::duration<double>(Clock::now() - last_checkpoint).count() / 60;
        auto flags = torch::tensor({double(StopSignal() != 0),
                                    double(args.stop_at_step > 0 && global_step >= args.stop_at_step),
                                    double((args.checkpoint_every > 0 && global_step % args.checkpoint_every == 0) ||
                                           (args.checkpoint_minutes > 0 && minutes >= args.checkpoint_minutes))},
                                   torch::kFloat64);
        dist.AllReduceSum(flags);
        const bool preempted = flags[0].item<double>() > 0, stop = flags[1].item<double>() > 0;
        if (preempted || stop || flags[2].item<double>() > 0) {
          const int64_t position = tl.state().position;
          checkpoint(epoch, position);
          if (preempted || stop) {
            log("=> " + std::string(preempted ? "stop requested by a signal" : "--stop-at-step reached") +
                ": checkpoint at epoch " + std::to_string(epoch) + ", position " + std::to_string(position) +
                ", step " + std::to_string(global_step) + " in " + args.output + "/checkpoint.pt");
            if (main_rank) std::printf("final weights digest %016llx\n", static_cast<unsigned long long>(WeightsDigest(*module)));
            return preempted ? kExitPreempted : 0;
          }
        }
      }
      const auto t2 = Clock::now();
      const double wait = std::chrono::duration<double>(t1 - t0).count();
      const double compute = std::chrono::duration<double>(t2 - t1).count();
      wait_s += wait;
      compute_s += compute;
      auto [c1, c5] = Correct(out.detach(), y);
      losses.Add(loss.item<double>(), n);
      err1.Add(100.0 - 100.0 * c1 / n, n);
      err5.Add(100.0 - 100.0 * c5 / n, n);
      const double step_s = std::chrono::duration<double>(t2 - t_end).count();
      batch_time.Add(step_s);
      data_rate.Add(n * dist.world_size() / std::max(step_s, 1e-9));
      t_end = t2;
      if (step % args.print_freq == 0 || i + 1 == steps) {
        char buf[320];
        std::snprintf(buf, sizeof buf,
                      "Epoch: [%lld][%lld/%lld]  Time %.3f (%.3f)  Data %.1f (%.1f)  Loss %.4f (%.4f)  "
                      "Error@1 %.3f (%.3f)  Error@5 %.3f (%.3f)  LR %.5f",
                      static_cast<long long>(epoch), static_cast<long long>(step),
                      static_cast<long long>(steps_per_epoch), batch_time.val, batch_time.avg(), data_rate.val,
                      data_rate.avg(), losses.val, losses.avg(), err1.val, err1.avg(), err5.val, err5.avg(), lr);
        log(buf);
        emit({{"type", "train"}, {"epoch", epoch}, {"step", step}, {"global_step", global_step},
              {"loss", losses.val}, {"loss_avg", losses.avg()}, {"error1", err1.val}, {"error5", err5.val},
              {"lr", lr}, {"images_per_s", data_rate.val}, {"step_seconds", batch_time.val}});
      }
    }
    const double frac = wait_s / std::max(1e-9, wait_s + compute_s);
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "Epoch %lld: waited for data %.1f s, computed %.1f s: %s (%.0f%% of step time waiting)",
                  static_cast<long long>(epoch), wait_s, compute_s, frac > 0.1 ? "INPUT-BOUND" : "compute-bound",
                  100 * frac);
    log(buf);
    emit({{"type", "epoch"}, {"epoch", epoch}, {"wait_seconds", wait_s}, {"compute_seconds", compute_s},
          {"images_per_s", data_rate.avg()}, {"skipped_steps", scaler.skipped_steps()}});
    const double acc1 = args.no_val ? 0.0 : evaluate(epoch);
    const bool best = acc1 > state.best_acc1;
    state.best_acc1 = std::max(state.best_acc1, acc1);
    checkpoint(epoch + 1, 0);
    if (main_rank && best) {
      Status st = SaveCheckpoint(args.output + "/model_best.pt", *module, optimizer, state);
      if (!st.ok()) throw std::runtime_error(st.ToString());
    }
  }
  if (main_rank) std::printf("final weights digest %016llx\n", static_cast<unsigned long long>(WeightsDigest(*module)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  po::options_description opts("Options");
  opts.add_options()
      ("data", po::value(&a.data), "training database(s), comma-separated shards")
      ("val", po::value(&a.val), "validation database")
      ("arch", po::value(&a.arch)->default_value("resnet18"), "resnet18, resnet50, small_cnn, mlp")
      ("epochs", po::value(&a.epochs)->default_value(90), "epochs")
      ("batch-size,b", po::value(&a.batch)->default_value(256), "batch size per process")
      ("lr", po::value(&a.lr)->default_value(0.1), "learning rate")
      ("lr-scale-batch", "scale lr by global batch / 256")
      ("schedule", po::value(&a.schedule)->default_value("step"), "step, cosine, onecycle")
      ("step-size", po::value(&a.step_size)->default_value(30), "step schedule: epochs between decays")
      ("warmup-epochs", po::value(&a.warmup)->default_value(0), "linear warm-up epochs")
      ("momentum", po::value(&a.momentum)->default_value(0.9), "SGD momentum")
      ("nesterov", "Nesterov momentum")
      ("wd", po::value(&a.wd)->default_value(1e-4), "weight decay")
      ("no-bn-wd", "no weight decay on BN and bias parameters")
      ("label-smoothing", po::value(&a.label_smoothing)->default_value(0), "label smoothing")
      ("zero-init-residual", "zero-init the last BN of each residual block")
      ("size", po::value(&a.size)->default_value(0), "input size (0: 224, or 28 for small_cnn/mlp)")
      ("output", po::value(&a.output), "directory for checkpoints and metrics.jsonl")
      ("resume", po::value(&a.resume), "checkpoint to resume from ('auto': OUTPUT/checkpoint.pt if present)")
      ("evaluate", "only evaluate --val (with --resume weights)")
      ("tta-flip", "evaluate on each image and its horizontal mirror, averaging the logits")
      ("no-val", "skip the per-epoch evaluation (profiling); --val may be omitted")
      ("amp", "autocast: bf16 on CPU, fp16 with loss scaling on CUDA")
      ("device", po::value(&a.device)->default_value("cpu"), "cpu or cuda")
      ("channels-last", "NHWC batches and channels-last model")
      ("in-ram", "hold the databases in memory")
      ("print-freq", po::value(&a.print_freq)->default_value(10), "log every N steps")
      ("seed", po::value(&a.seed)->default_value(0), "seed for init, shuffling and augmentation")
      ("threads", po::value(&a.threads)->default_value(0), "torch threads (0: cores / local ranks)")
      ("loader-threads", po::value(&a.loader_threads)->default_value(0), "decode threads (0: cores / local ranks)")
      ("max-steps", po::value(&a.max_steps)->default_value(0), "stop each epoch after N steps (profiling)")
      ("checkpoint-every", po::value(&a.checkpoint_every)->default_value(0),
       "also write checkpoint.pt every N steps, mid-epoch (0: at epoch ends only)")
      ("checkpoint-minutes", po::value(&a.checkpoint_minutes)->default_value(0),
       "also write checkpoint.pt when M minutes passed since the last (0: off)")
      ("stop-at-step", po::value(&a.stop_at_step)->default_value(0),
       "write a checkpoint and exit 0 after global step K (cut a run; --resume auto continues)")
      ("log-samples", po::value(&a.log_samples),
       "append each step's dataset indices to FILE.rankR (debugging, checking resume)")
      ("help,h", "show this help and exit")
      ("version", "show the version and exit");
  po::options_description hidden;
  po::positional_options_description pos;
  auto vm = cli::ParseOrExit(argc, argv, "--data DB --val DB --output DIR [options]", opts, hidden, pos);
  a.no_val = vm.count("no-val");
  if (a.no_val && a.val.empty()) a.val = a.data.substr(0, a.data.find(','));  // for metadata only
  if (a.val.empty() || a.output.empty() || (a.data.empty() && !vm.count("evaluate")))
    return cli::UsageError("--data, --val and --output are required");
  a.amp = vm.count("amp");
  a.in_ram = vm.count("in-ram");
  a.evaluate = vm.count("evaluate");
  a.tta_flip = vm.count("tta-flip") > 0;
  a.nesterov = vm.count("nesterov");
  a.no_bn_wd = vm.count("no-bn-wd");
  a.lr_scale = vm.count("lr-scale-batch");
  a.zero_init = vm.count("zero-init-residual");
  a.channels_last = vm.count("channels-last");
  if (a.print_freq < 1) a.print_freq = 1;
  try {
    return Run(a);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    auto nl = msg.find("\nException raised from");
    if (nl != std::string::npos) msg = msg.substr(0, nl);
    std::cerr << cli::ProgramName() << ": " << msg << "\n";
    return cli::kExitFatal;
  }
}
