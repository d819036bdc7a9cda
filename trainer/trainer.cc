#include "trainer.h"

#include <boost/algorithm/string.hpp>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "imagepack/classes.h"
#include "imagepack/files.h"
#include "imagepack/store.h"
#include "models.h"
#include "nccl_backend.h"
#include "preemption.h"
#include "run_checks.h"

namespace fs = std::filesystem;

namespace imagepack::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

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

bool IsSmall(const std::string& arch) { return arch == "small_cnn" || arch == "mlp"; }

template <typename T>
T Check(Result<T> r) {
  if (!r.ok()) throw std::runtime_error(r.status().ToString());
  return std::move(r.value());
}
void Check(const Status& st) {
  if (!st.ok()) throw std::runtime_error(st.ToString());
}

}  // namespace

std::vector<MixSource> Trainer::MixSources() const {
  const size_t n = o_.data_list.size();
  if (n <= 1 && o_.weights.empty() && o_.repeat.empty() && o_.choose.empty()) return {};
  const auto weights = Shares("weights", o_.weights, n), repeat = Shares("repeat", o_.repeat, n),
             choose = Shares("choose", o_.choose, n);
  if (!weights.empty() && (!repeat.empty() || !choose.empty()))
    throw std::invalid_argument("--weights (relative shares) or --repeat/--choose (absolute counts), not both");
  std::vector<MixSource> out;
  for (size_t i = 0; i < n; ++i) {
    MixSource s;
    s.paths = SplitCommas(o_.data_list[i]);
    if (!weights.empty()) s.weight = weights[i];
    if (!repeat.empty()) s.repeat = repeat[i];
    if (!choose.empty()) s.choose = static_cast<int64_t>(choose[i]);
    out.push_back(s);
  }
  return out;
}

Trainer::Trainer(const TrainOptions& o)
    : o_(o), env_(ReadDistEnv()), device_(o.device == "cuda" ? torch::kCUDA : torch::kCPU) {
  if (device_.is_cuda()) {
    if (!torch::cuda::is_available()) throw std::runtime_error("--device cuda, but no CUDA device is available");
    ConfigureCuda();
  }
  // Threads: the rank's share of the CPUs (ReadDistEnv), split between
  // torch's and the loader's unless told (ThreadSplit).
  threads_ = SplitThreads(env_.threads, o_.threads, o_.loader_threads, device_.is_cuda());
  torch::set_num_threads(threads_.torch);
  torch::manual_seed(static_cast<uint64_t>(o_.seed));
  // --evaluate writes nothing until its end: signals end it at once.
  if (!o_.evaluate) InstallStopHandlers(/*announce=*/env_.rank == 0);
  dist_ = std::make_unique<Distributed>(env_, device_);
  main_rank_ = dist_->is_main();
  for (const auto& note : o_.notes) Log("=> " + note + ": the option given is used");
  SetUpData();
  arch_ = o_.arch.empty() ? task_->default_arch() : o_.arch;
  SetUpLoaders();
  SetUpModel();
  SetUpOptimizer();
  Resume();
  // Every rank starts from rank 0's parameters and buffers.
  std::vector<torch::Tensor> sync = params_;
  sync.insert(sync.end(), buffers_.begin(), buffers_.end());
  {
    torch::NoGradGuard ng;
    dist_->Broadcast(sync);
  }
  reducer_ = std::make_unique<GradientReducer>(dist_.get(), params_);
  // Nothing is written before every check above passed. --evaluate's
  // rows go to evaluations.jsonl, apart from the training curve.
  if (main_rank_) {
    const std::string rows = o_.evaluate ? EvaluationsPath(o_) : o_.output + "/metrics.jsonl";
    fs::create_directories(fs::path(rows).parent_path());
    if (o_.overwrite) {
      if (std::string err = RemoveRun(o_.output); !err.empty()) throw std::runtime_error(err);
      Log("=> --overwrite: the run that was in " + o_.output + " was removed; starting again");
    }
    metrics_.open(rows, std::ios::app);
    if (!metrics_) throw std::runtime_error("cannot write " + rows);
  }
  // --log-samples: each rank's dataset indices, one line per step.
  if (!o_.log_samples.empty())
    sample_log_.open(o_.log_samples + ".rank" + std::to_string(dist_->rank()), std::ios::app);
  // Room for the largest batch: training (the schedule's largest size) or
  // validation.
  const int64_t largest = std::max<int64_t>(lo_.size, val_loader_ ? val_loader_->output_size() : 0);
  const size_t sample_bytes = size_t(largest) * largest * channels_;
  host_batch_ = torch::empty({static_cast<int64_t>(sample_bytes) * o_.batch},
                             torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(device_.is_cuda()));
  host_labels_.resize(size_t(o_.batch));
  host_indices_.resize(size_t(o_.batch));
  Log("=> " + arch_ + " (" + std::to_string(CountParameters(*module_)) + " parameters), " + task_->name() + ", " +
      task_->Describe() + ", " + std::to_string(dist_->world_size()) +
      " process(es) [" + dist_->backend() + ", " + env_.source + "], batch " + std::to_string(o_.batch) +
      "/rank, threads " + std::to_string(threads_.torch) + " torch + " + std::to_string(threads_.loader) +
      " loader/rank, lr " + std::to_string(schedule_.base_lr) +
      (amp_ ? (device_.is_cuda() ? ", AMP fp16" : ", AMP bf16") : ""));
  if (train_loader_ && mix_.size() > 0) {
    std::string line = "=> training mix, per epoch:";
    for (const auto& s : train_loader_->sources())
      line += " " + s.name + " " + std::to_string(s.samples) + " of " + std::to_string(s.records) + " records;";
    Log(line.substr(0, line.size() - 1));
  }
  if (has_res_)
    Log("=> progressive resolution " + res_.ToString() + ": " + std::to_string(res_.min_res) + " px to epoch " +
        std::to_string(res_.start_ramp) + ", " + std::to_string(res_.max_res) + " px from epoch " +
        std::to_string(res_.end_ramp) + (val_loader_ ? "; evaluation at " + std::to_string(val_loader_->output_size()) + " px" : ""));
  if (train_loader_)
    Log("=> training order " + std::string(OrderName(train_loader_->order())) +
        (train_loader_->order() == Order::kBlocks
             ? " (" + std::to_string(train_loader_->block_records()) + " records per block, " +
                   std::to_string(lo_.window_blocks) + " blocks per window)"
             : "") +
        (o_.in_ram ? ", in RAM" : ""));
  if (train_loader_ && train_loader_->order() == Order::kBlocks && !StoredShuffled(train_loader_->meta()))
    Log("=> warning: " + o_.data +
        " was not packed with --shuffle: a block holds records of few classes and batches mix poorly "
        "(shuffle_quality shows how much); repack with --shuffle, or use --order random");
}

Trainer::~Trainer() = default;

void Trainer::SetUpData() {
  // --amp: bf16 autocast only where the CPU computes bf16 natively.
  if (!o_.amp_mode.empty()) {
    if (o_.amp_mode != "auto" && o_.amp_mode != "bf16" && o_.amp_mode != "fp16")
      throw std::invalid_argument("--amp=" + o_.amp_mode + ": expected auto, bf16 or fp16");
    amp_ = true;
    if (!device_.is_cuda() && o_.amp_mode == "auto" && !CpuHasNativeBf16()) {
      amp_ = false;
      Log("=> --amp: this CPU has no native bf16 (AVX512-BF16 or AMX-BF16), where bf16 autocast runs several times "
          "slower than fp32: training in fp32 (--amp=bf16 forces bf16)");
    }
  }
  // What the model is and was trained on: the checkpoint's, when resuming
  // one that says.
  if (!o_.resume_path.empty()) {
    const std::string run = ReadCheckpointRun(o_.resume_path);
    if (!run.empty()) saved_ = RunInfo::FromJson(run, o_.resume_path);
  }
  if (!o_.classes_file.empty()) {
    std::ifstream f(o_.classes_file);
    if (!f) throw std::runtime_error("--classes " + o_.classes_file + ": cannot read it");
    for (std::string line; std::getline(f, line);)
      if (!line.empty()) classes_.push_back(line);
    if (classes_.empty()) throw std::runtime_error("--classes " + o_.classes_file + " names no class");
  }
  if (!o_.res_schedule.empty()) {
    res_ = Check(ParseResolutionSchedule(o_.res_schedule));
    has_res_ = true;
  }
  mix_ = MixSources();
  if (!o_.data.empty()) {
    OpenOptions oo;
    oo.cache_dir = o_.cache_dir;
    oo.cache_limit_mb = o_.cache_limit_mb;
    if (!mix_.empty()) {  // the mix's classes, statistics (pooled by share) and identity
      train_meta_ = Check(OpenMix(mix_, 0, classes_, o_.classes_file, 0, oo)).meta;
    } else {
      const auto source = Check(OpenDatabases(SplitCommas(o_.data), oo));
      train_meta_ = source->meta();
      if (source->size() > 0) {  // the first image's size, for the small models' notice
        auto first = source->NewCursor()->Read(0);
        if (first.ok()) first_edge_ = int(std::min(first.value().fields.width, first.value().fields.height));
      }
      if (!classes_.empty()) {  // the labels as the given classes (LoaderOptions::classes)
        const ClassMap map = Check(MatchClasses(classes_, o_.classes_file, train_meta_.classes, o_.data));
        std::vector<int64_t> counts(classes_.size(), 0);
        for (size_t c = 0; c < train_meta_.label_counts.size(); ++c)
          counts[size_t(map.Map(int64_t(c)))] += train_meta_.label_counts[c];
        train_meta_.classes = classes_;
        train_meta_.label_counts = train_meta_.label_counts.empty() ? std::vector<int64_t>{} : counts;
      }
    }
    train_name_ = o_.data;
  } else if (!saved_.train_meta.empty()) {
    train_meta_ = Check(ParseMeta(reinterpret_cast<const uint8_t*>(saved_.train_meta.data()), saved_.train_meta.size()));
    train_name_ = "the training data of " + o_.resume_path + " (" + saved_.data + ")";
  } else {
    throw std::invalid_argument("--evaluate without --data: " + o_.resume_path +
                                " does not describe its training data (saved by an older version); give --data");
  }
  // A checkpoint's model predicts the classes it was trained on.
  if (!saved_.arch.empty() && !o_.data.empty()) {
    const DatasetMeta was = Check(
        ParseMeta(reinterpret_cast<const uint8_t*>(saved_.train_meta.data()), saved_.train_meta.size()));
    if (was.classes != train_meta_.classes) {
      size_t i = 0;
      while (i < was.classes.size() && i < train_meta_.classes.size() && was.classes[i] == train_meta_.classes[i]) ++i;
      throw std::runtime_error(
          o_.resume_path + " was trained on " + std::to_string(was.classes.size()) + " classes (" + saved_.data +
          ") and --data " + o_.data + " has " + std::to_string(train_meta_.classes.size()) + ": they differ at label " +
          std::to_string(i) + " ('" + (i < was.classes.size() ? was.classes[i] : std::string("none")) + "' vs '" +
          (i < train_meta_.classes.size() ? train_meta_.classes[i] : std::string("none")) +
          "'). Resume with the data it was trained on, or start a new run in another --output");
    }
  }
  channels_ = saved_.arch.empty() ? train_meta_.channels : saved_.channels;
  // The normalisation: the checkpoint's (what its model was trained
  // with), else the training data's statistics, else 0.5 / 0.25.
  DatasetMeta task_meta = train_meta_;
  if (!saved_.arch.empty()) {
    task_meta.mean = saved_.mean;
    task_meta.std = saved_.std;
    run_.normalisation = saved_.normalisation;
  } else if (static_cast<int>(train_meta_.mean.size()) == channels_ &&
             static_cast<int>(train_meta_.std.size()) == channels_) {
    run_.normalisation = "the training data's statistics" +
                         (train_meta_.stats_images > 0 ? " (" + std::to_string(train_meta_.stats_images) + " images)" : std::string());
  } else {
    task_meta.mean.assign(size_t(channels_), 0.5);
    task_meta.std.assign(size_t(channels_), 0.25);
    run_.normalisation = "mean 0.5, std 0.25 (the training data holds no statistics: packed with --stats-sample 0)";
  }
  task_ = MakeTask({o_.task, o_.label_smoothing}, task_meta, channels_, device_);
  if (task_->normalised()) {
    run_.mean = task_meta.mean;
    run_.std = task_meta.std;
    char buf[64];
    std::string figures;
    for (int c = 0; c < channels_; ++c) {
      std::snprintf(buf, sizeof buf, "%s%.4f/%.4f", c ? ", " : "", run_.mean[size_t(c)], run_.std[size_t(c)]);
      figures += buf;
    }
    Log("=> normalising the input with " + run_.normalisation + ": mean/std " + figures);
  }
  run_.task = task_->name();
  run_.channels = channels_;
  run_.data = !o_.data.empty() ? o_.data : saved_.data;
  run_.train_meta = !saved_.arch.empty() && o_.data.empty() ? saved_.train_meta : train_meta_.ToJson();
  run_.options = o_.given;
}

void Trainer::SetUpLoaders() {
  const bool small = IsSmall(arch_);
  if (!mix_.empty()) lo_.sources = mix_;
  else if (!o_.data.empty()) lo_.paths = SplitCommas(o_.data);
  lo_.classes = classes_;
  lo_.classes_from = o_.classes_file;
  lo_.in_ram = o_.in_ram;
  lo_.lock_in_ram = o_.lock_in_ram;
  lo_.cache_dir = o_.cache_dir;
  lo_.cache_limit_mb = o_.cache_limit_mb;
  lo_.order = Check(ParseOrder(o_.order));
  if (o_.dct != "fast" && o_.dct != "accurate") throw std::invalid_argument("--dct must be fast or accurate");
  lo_.fast_dct = o_.dct == "fast";
  lo_.block_mb = o_.block_mb;
  lo_.window_blocks = o_.window_blocks;
  lo_.io_threads = o_.io_threads;
  lo_.batch_size = o_.batch;
  lo_.seed = static_cast<uint64_t>(o_.seed);
  lo_.rank = dist_->rank();
  lo_.world_size = dist_->world_size();
  lo_.threads = threads_.loader;
  const int base = o_.size > 0 ? o_.size : (small ? 28 : task_->dense() ? 96 : 224);
  // small_cnn and mlp pad-crop at the stored scale: on large images a
  // 28-px crop is a small patch of each, which is said, not done silently.
  if (small && o_.size == 0 && first_edge_ > 2 * base && !o_.evaluate)
    Log("=> warning: " + arch_ + " takes " + std::to_string(base) + "-px crops at the stored scale, and the first "
        "image of " + o_.data + " has a shorter edge of " + std::to_string(first_edge_) + " px: each sample is a "
        "small patch of its image. Give --size (the crop, e.g. --size " + std::to_string(first_edge_) +
        "), pack with --max-size " + std::to_string(base) + ", or use --arch resnet18");
  // --res-schedule: each epoch's size is set by TrainEpoch; the loader is
  // checked for the largest. Pad-crop (small images) keeps its crop at the
  // stored scale, --size, and resizes it to the epoch's size.
  lo_.size = has_res_ ? res_.max_res : base;
  if (has_res_ && arch_ == "mlp") throw std::invalid_argument("--res-schedule: mlp's first layer takes one input size");
  lo_.crop_size = has_res_ ? base : 0;
  lo_.transform = small ? TransformKind::kPadCrop : TransformKind::kTrain;
  lo_.pad = 2;
  lo_.layout = o_.channels_last ? Layout::kNHWC : Layout::kNCHW;
  LoaderOptions vo = lo_;  // before the training-only augmentations
  ParseAutoAugment(o_.auto_augment, &lo_.augment.kind);  // checked in run_checks
  lo_.augment.ra_magnitude = o_.ra_magnitude;
  lo_.augment.augmix_severity = o_.augmix_severity;
  lo_.erase.p = o_.random_erase;
  lo_.filter = o_.interpolation == "bicubic" ? ResampleFilter::kCatmullRom : ResampleFilter::kTriangle;
  vo.filter = lo_.filter;  // the reference's eval Resize takes --interpolation too
  vo.paths = SplitCommas(o_.val);
  vo.sources.clear();
  vo.classes.clear();
  vo.size = o_.val_size > 0 ? o_.val_size : base;
  vo.crop_size = has_res_ || o_.val_size > 0 ? base : 0;
  vo.eval_resize = o_.val_resize;
  if (task_->labels_are_targets()) {  // labels as the training data's classes (matched by name)
    vo.classes = train_meta_.classes;
    vo.classes_from = train_name_;
  }
  vo.channels = channels_;           // converted to the model's input
  vo.shuffle = false;
  vo.even_partition = false;
  vo.io_threads = -1;
  vo.transform = small ? TransformKind::kPadCropEval : TransformKind::kEval;
  if (std::string(task_->name()) == "segmentation") {
    // Crops of at least a third of the image (garments stay recognisable),
    // flipped; evaluation on the whole image (shorter edge to the size).
    lo_.scale_min = 0.35;
    vo.eval_resize = o_.val_resize > 0 ? o_.val_resize : vo.size;
  } else if (std::string(task_->name()) == "restoration") {
    // Crops at the stored scale (a resize would change the degradation),
    // flipped both ways; evaluation on the centre crop.
    lo_.transform = TransformKind::kPadCrop;
    lo_.pad = 0;
    lo_.vflip = true;
    lo_.crop_size = vo.crop_size = 0;  // with --res-schedule: smaller crops, never resized
    vo.transform = TransformKind::kPadCropEval;
  }
  lo_.channels = channels_;
  if (!o_.evaluate) train_loader_ = Check(Loader::Open(lo_));  // --evaluate reads --val only
  if (o_.val.empty()) return;  // --no-val
  // The validation data as packed, then matched to the training data:
  // its classes by name (or refused naming the first that differs), its
  // fields by the task.
  OpenOptions oo;
  oo.cache_dir = o_.cache_dir;
  oo.cache_limit_mb = o_.cache_limit_mb;
  const DatasetMeta val_meta = Check(OpenDatabases(vo.paths, oo))->meta();
  const std::string matched = task_->MatchEvalData(train_meta_, train_name_, val_meta, o_.val);
  val_loader_ = Check(Loader::Open(vo));
  Log("=> validation " + o_.val + ": " + std::to_string(val_loader_->dataset_size()) + " samples" +
      (matched.empty() ? "" : ", " + matched) +
      (val_meta.channels != channels_ ? ", converted from " + std::to_string(val_meta.channels) + " to " +
                                            std::to_string(channels_) + " channel(s)"
                                      : ""));
}

void Trainer::SetUpModel() {
  ModelOptions mo;
  mo.arch = arch_;
  mo.num_classes = task_->outputs();
  mo.in_channels = channels_;
  mo.input_size = lo_.size;
  mo.zero_init_residual = o_.zero_init;
  mo.blurpool = o_.blurpool;
  if (o_.blurpool && arch_.rfind("resnet", 0) != 0) throw std::invalid_argument("--blurpool: for the ResNets");
  model_ = MakeModel(mo, &module_);
  run_.arch = arch_;
  run_.size = val_loader_ ? val_loader_->output_size() : lo_.size;
  module_->to(device_);
  if (o_.channels_last) {
    torch::NoGradGuard ng;
    for (auto& p : module_->parameters())
      if (p.dim() == 4) p.set_data(p.contiguous(torch::MemoryFormat::ChannelsLast));
  }
  params_ = module_->parameters();
  buffers_ = module_->buffers();
}

void Trainer::SetUpOptimizer() {
  // SGD; optionally no weight decay on BN and bias parameters.
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : params_) (o_.no_bn_wd && p.dim() <= 1 ? no_decay : decay).push_back(p);
  const double global_batch = double(o_.batch) * dist_->world_size();
  schedule_.kind = o_.schedule;
  schedule_.base_lr = o_.lr_scale ? o_.lr * global_batch / 256.0 : o_.lr;
  schedule_.warmup_epochs = o_.warmup;
  schedule_.step_size = o_.step_size;
  schedule_.peak_epoch = o_.lr_peak_epoch;
  auto sgd = torch::optim::SGDOptions(schedule_.base_lr).momentum(o_.momentum).nesterov(o_.nesterov).weight_decay(o_.wd);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::SGDOptions>(sgd));
  if (!no_decay.empty()) {
    auto nd = sgd;
    nd.weight_decay(0);
    groups.emplace_back(no_decay, std::make_unique<torch::optim::SGDOptions>(nd));
  }
  optimizer_ = std::make_unique<torch::optim::SGD>(groups, sgd);
  GradScaler::Options gso;
  gso.enabled = amp_ && device_.is_cuda();  // bf16 on CPU needs no scaling
  scaler_ = std::make_unique<GradScaler>(gso);
}

void Trainer::Resume() {
  state_.seed = o_.seed;
  const std::string& resume = o_.resume_path;
  if (!resume.empty()) {
    // --evaluate needs the weights only.
    state_ = LoadCheckpoint(resume, *module_, o_.evaluate ? nullptr : optimizer_.get());
    // A mix's position is a place in the order of its sources and shares.
    if (train_loader_ && state_.position > 0) {
      LoaderState at;
      at.position = state_.position;
      at.mix = state_.mix;
      if (Status st = train_loader_->CheckState(at); !st.ok())
        throw std::runtime_error("checkpoint " + resume + " stopped in the middle of epoch " +
                                 std::to_string(state_.epoch) + " (position " + std::to_string(state_.position) +
                                 ") of another mix: " + st.message() +
                                 ". Resume with the --data and shares it was trained on, or start the new mix from "
                                 "the weights in a fresh --output");
    }
    // A position in an epoch is a position in one dataset's order.
    if (train_loader_ && state_.position > 0 && state_.dataset != 0 &&
        static_cast<uint64_t>(state_.dataset) != DatasetIdentity(train_loader_->meta()))
      throw std::runtime_error("checkpoint " + resume + " stopped in the middle of an epoch of another dataset (epoch " +
                               std::to_string(state_.epoch) + ", position " + std::to_string(state_.position) +
                               "); --data is not the dataset it was trained on: resume with that dataset, or start "
                               "the new one from the weights in a fresh --output");
    scaler_->Load(state_.scaler_scale, static_cast<int>(state_.scaler_tracker));
    module_->to(device_);
    // --order auto resolves by what is cached now; the run keeps the order
    // it started with, so its epochs are those of the uninterrupted run.
    const Order saved = state_.order < 0 ? Order::kRandom : static_cast<Order>(state_.order);
    if (train_loader_ && mix_.empty() && lo_.order == Order::kAuto && lo_.shuffle && saved != train_loader_->order()) {
      lo_.order = saved;
      train_loader_ = Check(Loader::Open(lo_));
    }
    Log("=> resumed from " + resume + " (" + (saved_.arch.empty() ? "saved by an older version: options as given" : saved_.arch + ", " + saved_.task + ", " + std::to_string(saved_.size) + " px, trained on " + saved_.data) + ") at epoch " + std::to_string(state_.epoch) +
        (state_.position > 0 ? ", position " + std::to_string(state_.position) + " (saved by " +
                                   std::to_string(state_.world_size) + " process(es))"
                             : ""));
  }
  if (main_rank_ && !o_.output.empty()) {  // temporaries of checkpoints a killed run was writing
    RemoveStaleTempsFor(o_.output + "/checkpoint.pt");
    RemoveStaleTempsFor(o_.output + "/model_best.pt");
  }
}

void Trainer::Log(const std::string& line) {
  if (main_rank_) std::cout << line << std::endl;
}

void Trainer::Emit(const nlohmann::json& record) {
  if (main_rank_) metrics_ << record.dump() << std::endl;
}

void Trainer::PrintDigest() {
  if (main_rank_) std::printf("final weights digest %016llx\n", static_cast<unsigned long long>(WeightsDigest(*module_)));
}

torch::Tensor Trainer::Input(int n) {
  const int64_t s = cur_size_, C = channels_;
  auto x = torch::from_blob(host_batch_.data_ptr<uint8_t>(),
                            o_.channels_last ? torch::IntArrayRef{n, s, s, C} : torch::IntArrayRef{n, C, s, s},
                            torch::kUInt8);
  if (o_.channels_last) x = x.permute({0, 3, 1, 2});  // a channels-last view of NCHW
  x = x.to(device_, /*non_blocking=*/device_.is_cuda()).to(torch::kFloat32);
  return task_->Input(x);
}

int Trainer::NextBatch(Loader& loader, torch::Tensor* target) {
  const BatchView v = Check(loader.NextView());
  if (v.count == 0) return 0;
  cur_size_ = loader.output_size();  // the epoch's (--res-schedule), or the validation size
  const size_t sample_bytes = size_t(cur_size_) * cur_size_ * channels_;
  std::memcpy(host_batch_.data_ptr<uint8_t>(), v.images, size_t(v.count) * sample_bytes);
  std::memcpy(host_labels_.data(), v.labels, size_t(v.count) * sizeof(int64_t));
  std::memcpy(host_indices_.data(), v.indices, size_t(v.count) * sizeof(int64_t));
  *target = task_->Target(v, v.count, device_, &loader == val_loader_.get());
  return v.count;
}

int Trainer::Run() {
  if (o_.evaluate) {
    Evaluate(state_.epoch);
    return 0;
  }
  const int64_t world = dist_->world_size();
  // Steps in a whole epoch at this world size: the schedule's unit.
  steps_per_epoch_ = ((train_loader_->epoch_length() + world - 1) / world + o_.batch - 1) / o_.batch;
  global_step_ = state_.global_step > 0 ? state_.global_step : state_.epoch * steps_per_epoch_;
  last_checkpoint_ = Clock::now();
  for (int64_t epoch = state_.epoch; epoch < o_.epochs; ++epoch) {
    const EpochEnd end = TrainEpoch(epoch);
    if (end != EpochEnd::kCompleted) {
      PrintDigest();
      return end == EpochEnd::kPreempted ? kExitPreempted : end == EpochEnd::kInterrupted ? kExitInterrupted : 0;
    }
    const double acc1 = o_.no_val ? 0.0 : Evaluate(epoch);
    const bool best = acc1 > state_.best_acc1;
    state_.best_acc1 = std::max(state_.best_acc1, acc1);
    state_.order = static_cast<int64_t>(train_loader_->order());  // the next epoch's
    state_.order_world = state_.order_block_records = state_.order_window_blocks = 0;
    state_.size = 0;
    state_.mix = train_loader_->state().mix;
    Checkpoint(epoch + 1, 0);
    if (main_rank_ && best) {
      Status st = SaveCheckpoint(o_.output + "/model_best.pt", *module_, *optimizer_, state_);
      if (!st.ok()) throw std::runtime_error(st.ToString());
    }
  }
  PrintDigest();
  SavePredictions();
  return 0;
}

namespace {

// A uint8 array as a .npy file (format 1.0), written atomically.
void WriteNpy(const std::string& path, const torch::Tensor& t) {
  auto a = t.to(torch::kCPU).to(torch::kUInt8).contiguous();
  std::string shape;
  for (auto d : a.sizes()) shape += std::to_string(d) + ", ";
  std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + shape + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += char(header.size() & 0xff);
  bytes += char(header.size() >> 8);
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(a.data_ptr<uint8_t>()), size_t(a.numel()));
  Status st = WriteFileAtomic(path, bytes.data(), bytes.size());
  if (!st.ok()) throw std::runtime_error(st.ToString());
}

}  // namespace

void Trainer::SavePredictions() {
  if (o_.save_predictions <= 0 || !main_rank_ || !val_loader_) return;
  module_->eval();
  torch::NoGradGuard ng;
  Loader& vl = *val_loader_;
  vl.StartEpoch(0);
  torch::Tensor y;
  const int n = std::min(NextBatch(vl, &y), o_.save_predictions);
  if (n == 0) return;
  auto images = torch::from_blob(host_batch_.data_ptr<uint8_t>(), {n, channels_, cur_size_, cur_size_}, torch::kUInt8);
  auto out = model_.forward(Input(n)).to(torch::kFloat32);
  const bool image_out = out.dim() == 4 && out.size(1) == channels_ && y.dim() == 4;
  auto to_u8 = [](const torch::Tensor& t) { return t.clamp(-1, 1).add(1).mul(127.5).round(); };
  WriteNpy(o_.output + "/predictions_input.npy", images);
  WriteNpy(o_.output + "/predictions_output.npy", image_out ? to_u8(out) : out.argmax(1));
  WriteNpy(o_.output + "/predictions_target.npy", image_out ? to_u8(y.narrow(0, 0, n)) : y.narrow(0, 0, n));
  Log("=> " + std::to_string(n) + " validation predictions in " + o_.output + "/predictions_*.npy");
}

Trainer::StepResult Trainer::Step(int n, const torch::Tensor& y, double lr) {
  for (auto& g : optimizer_->param_groups()) static_cast<torch::optim::SGDOptions&>(g.options()).lr(lr);
  auto x = Input(n);
  // BN running statistics: broadcast from rank 0 before every step (what
  // torch's DDP does with broadcast_buffers=True), so all ranks train and
  // evaluate with rank 0's.
  if (dist_->world_size() > 1) dist_->BroadcastCoalesced(buffers_);
  torch::Tensor out;
  {
    AutocastScope ac(amp_, device_);
    out = model_.forward(x);
  }
  out = out.to(torch::kFloat32);
  auto loss = task_->Loss(out, y);
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();  // zero_grad that frees
  reducer_->PrepareForBackward();
  scaler_->Scale(loss).backward();
  reducer_->Finalize();
  scaler_->Step(*optimizer_, params_);
  ++global_step_;
  return {loss, out, x};
}

// After a step: a checkpoint when one is due (every N steps or minutes, or
// before stopping); true, with *end set, when the run stops here (a signal,
// or --stop-at-step). Checkpoint and stop decisions are taken together: a
// signal may reach one rank, and the clock differs between hosts.
bool Trainer::CheckpointOrStop(Loader& tl, int64_t epoch, EpochEnd* end) {
  const double minutes = Seconds(last_checkpoint_, Clock::now()) / 60;
  const int signal = StopSignal();
  auto flags = torch::tensor({double(signal != 0 && signal != SIGINT), double(o_.stop_at_step > 0 && global_step_ >= o_.stop_at_step),
                              double((o_.checkpoint_every > 0 && global_step_ % o_.checkpoint_every == 0) ||
                                     (o_.checkpoint_minutes > 0 && minutes >= o_.checkpoint_minutes)),
                              double(signal == SIGINT)},
                             torch::kFloat64);
  dist_->AllReduceSum(flags);
  // Ctrl-C on any rank stops them all (130); else SIGTERM/SIGUSR1 (75).
  const bool interrupted = flags[3].item<double>() > 0;
  const bool preempted = interrupted || flags[0].item<double>() > 0, stop = flags[1].item<double>() > 0;
  if (!preempted && !stop && flags[2].item<double>() <= 0) return false;
  const LoaderState ls = tl.state();
  const int64_t position = ls.position;
  state_.order = static_cast<int64_t>(ls.order);
  state_.order_world = ls.world;
  state_.order_block_records = ls.block_records;
  state_.order_window_blocks = ls.window_blocks;
  state_.size = ls.size;
  state_.mix = ls.mix;
  Checkpoint(epoch, position);
  if (!preempted && !stop) return false;
  const std::string where = "checkpoint at epoch " + std::to_string(epoch) + ", position " +
                            std::to_string(position) + ", step " + std::to_string(global_step_) + " in " + o_.output +
                            "/checkpoint.pt";
  if (interrupted) {
    if (main_rank_)
      std::cerr << "train: interrupted (Ctrl-C): " << where
                << ". Continue with: train --resume auto --output " << o_.output
                << " (options not given are the checkpoint's run's)" << std::endl;
    *end = EpochEnd::kInterrupted;
    return true;
  }
  Log("=> " + std::string(preempted ? "stop requested by a signal" : "--stop-at-step reached") + ": " + where);
  *end = preempted ? EpochEnd::kPreempted : EpochEnd::kStopped;
  return true;
}

Trainer::EpochEnd Trainer::TrainEpoch(int64_t epoch) {
  module_->train();
  Loader& tl = *train_loader_;
  const int64_t world = dist_->world_size();
  const bool resumed = epoch == state_.epoch && state_.position > 0;
  const int64_t start = resumed ? state_.position : 0;
  // The epoch's size (--res-schedule); a restored epoch keeps its own.
  const int planned = has_res_ ? res_.At(epoch) : lo_.size;
  Check(tl.SetOutputSize(planned));
  LoaderState from{epoch, start};
  if (resumed && state_.order >= 0) {
    from.order = static_cast<Order>(state_.order);
    from.world = static_cast<int>(state_.order_world);
    from.block_records = state_.order_block_records;
    from.window_blocks = state_.order_window_blocks;
  }
  if (resumed) {
    from.size = static_cast<int>(state_.size);
    from.mix = state_.mix;
  }
  tl.Restore(from);
  if (has_res_ && (epoch == state_.epoch || res_.At(epoch - 1) != tl.output_size()))
    Log("=> epoch " + std::to_string(epoch) + ": training at " + std::to_string(tl.output_size()) + " px");
  // Exact when the world and batch sizes are those that saved the state;
  // otherwise the nearest step (the schedule only needs progress).
  const int64_t first_step = start / (int64_t(o_.batch) * world);
  const int64_t steps = tl.batches_per_epoch();
  if (start > 0)
    Log("=> epoch " + std::to_string(epoch) + " continues at position " + std::to_string(start) + " of " +
        std::to_string(tl.dataset_size()) + ": " + std::to_string(steps) + " step(s) left");
  Meter batch_time, data_rate, losses;
  std::vector<Meter> figures;
  double wait_s = 0, compute_s = 0;
  auto t_end = Clock::now();
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t step = first_step + i;
    if (o_.max_steps > 0 && i >= o_.max_steps) break;
    const auto t0 = Clock::now();
    torch::Tensor y;
    const int n = NextBatch(tl, &y);
    if (n == 0) break;
    const auto t1 = Clock::now();
    const double lr = LearningRate(schedule_, epoch + double(step) / steps_per_epoch_, o_.epochs);
    auto [loss, out, x] = Step(n, y, lr);
    if (sample_log_.is_open()) {
      sample_log_ << epoch << ' ' << step;
      for (int k = 0; k < n; ++k) sample_log_ << ' ' << host_indices_[size_t(k)];
      sample_log_ << '\n' << std::flush;
    }
    if (EpochEnd end; CheckpointOrStop(tl, epoch, &end)) return end;
    const auto t2 = Clock::now();
    wait_s += Seconds(t0, t1);
    compute_s += Seconds(t1, t2);
    const std::vector<Figure> now = task_->StepFigures(task_->Tally(out.detach(), y, x.detach()));
    figures.resize(now.size());
    for (size_t f = 0; f < now.size(); ++f) figures[f].Add(now[f].value, n);
    losses.Add(loss.item<double>(), n);
    const double step_s = Seconds(t_end, t2);
    batch_time.Add(step_s);
    data_rate.Add(n * world / std::max(step_s, 1e-9));
    t_end = t2;
    if (step % o_.print_freq == 0 || i + 1 == steps) {
      char buf[320];
      std::snprintf(buf, sizeof buf, "Epoch: [%lld][%lld/%lld]  Time %.3f (%.3f)  Data %.1f (%.1f)  Loss %.4f (%.4f)",
                    static_cast<long long>(epoch), static_cast<long long>(step),
                    static_cast<long long>(steps_per_epoch_), batch_time.val, batch_time.avg(), data_rate.val,
                    data_rate.avg(), losses.val, losses.avg());
      std::string line = buf;
      nlohmann::json record = {{"type", "train"}, {"epoch", epoch}, {"step", step}, {"global_step", global_step_},
                               {"loss", losses.val}, {"loss_avg", losses.avg()}, {"lr", lr},
                               {"images_per_s", data_rate.val}, {"step_seconds", batch_time.val}};
      for (size_t f = 0; f < now.size(); ++f) {
        std::snprintf(buf, sizeof buf, "  %s %.3f (%.3f)", now[f].label.c_str(), figures[f].val, figures[f].avg());
        if (!now[f].label.empty()) line += buf;
        record[now[f].key] = figures[f].val;
      }
      std::snprintf(buf, sizeof buf, "  LR %.5f", lr);
      if (!o_.quiet) Log(line + buf);
      Emit(record);
    }
  }
  const double frac = wait_s / std::max(1e-9, wait_s + compute_s);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "Epoch %lld: %d px, waited for data %.1f s, computed %.1f s: %s (%.0f%% of step time waiting)",
                static_cast<long long>(epoch), tl.output_size(), wait_s, compute_s,
                frac > 0.1 ? "INPUT-BOUND" : "compute-bound", 100 * frac);
  // Each source's samples in the epoch (a mix's exact counts).
  nlohmann::json sources = nlohmann::json::object();
  std::string shares;
  for (const auto& s : tl.sources()) {
    sources[s.name] = s.samples;
    shares += (shares.empty() ? "; samples: " : ", ") + s.name + " " + std::to_string(s.samples);
  }
  Log(buf + (mix_.empty() ? std::string() : shares));
  Emit({{"type", "epoch"}, {"epoch", epoch}, {"wait_seconds", wait_s}, {"compute_seconds", compute_s},
        {"images_per_s", data_rate.avg()}, {"skipped_steps", scaler_->skipped_steps()}, {"res", tl.output_size()},
        {"sources", sources}});
  return EpochEnd::kCompleted;
}

double Trainer::Evaluate(int64_t epoch) {
  module_->eval();
  torch::NoGradGuard ng;
  Loader& vl = *val_loader_;
  vl.StartEpoch(0);
  double loss_sum = 0, total = 0;
  std::vector<double> tally;
  while (true) {
    torch::Tensor y;
    const int n = NextBatch(vl, &y);
    if (n == 0) break;
    torch::Tensor out, x;
    {
      AutocastScope ac(amp_, device_);
      x = Input(n);
      out = model_.forward(x);
      // Test-time flip: the mean of the outputs for the image and its
      // mirror (a dense output is mirrored back first).
      if (o_.tta_flip) {
        auto mirrored = model_.forward(x.flip({3}));
        out = (out + (task_->dense() ? mirrored.flip({3}) : mirrored)) / 2;
      }
    }
    out = out.to(torch::kFloat32);
    loss_sum += task_->Loss(out, y).item<double>() * n;
    total += n;
    const std::vector<double> t = task_->Tally(out, y, x);
    tally.resize(t.size(), 0.0);
    for (size_t k = 0; k < t.size(); ++k) tally[k] += t[k];
  }
  // Every validation sample is counted exactly once across ranks.
  tally.push_back(loss_sum);
  tally.push_back(total);
  auto t = torch::tensor(tally, torch::kFloat64);
  dist_->AllReduceSum(t);
  const double* sums = t.data_ptr<double>();
  tally.assign(sums, sums + t.numel());
  const double n = tally.back(), loss = tally[tally.size() - 2] / n;
  tally.resize(tally.size() - 2);
  const std::vector<Figure> figures = task_->EvalFigures(tally);
  std::string line = o_.evaluate ? " * " + o_.val + " (the checkpoint of epoch " + std::to_string(epoch) + ")"
                                 : " * Epoch " + std::to_string(epoch);
  nlohmann::json record = {{"type", "eval"}, {"epoch", epoch}, {"val", o_.val}};
  if (o_.evaluate) {
    record["checkpoint"] = o_.resume_path;
    record["global_step"] = state_.global_step;
  }
  char buf[160];
  for (const auto& f : figures) {
    std::snprintf(buf, sizeof buf, "  %s %.3f", f.label.c_str(), f.value);
    if (!f.label.empty()) line += buf;
    record[f.key] = f.value;
  }
  std::snprintf(buf, sizeof buf, "  Loss %.4f  (%lld samples)", loss, static_cast<long long>(n));
  Log(line + buf);
  record["loss"] = loss;
  record["samples"] = int64_t(n);
  Emit(record);
  return task_->Score(figures);
}

void Trainer::Checkpoint(int64_t epoch, int64_t position) {
  state_.epoch = epoch;
  state_.position = position;
  state_.global_step = global_step_;
  state_.scaler_scale = scaler_->scale();
  state_.scaler_tracker = scaler_->growth_tracker();
  state_.world_size = dist_->world_size();
  state_.batch_size = o_.batch;
  state_.dataset = static_cast<int64_t>(DatasetIdentity(train_loader_->meta()));
  state_.run = run_.ToJson();
  if (main_rank_) {
    const std::string path = o_.output + "/checkpoint.pt";
    const auto t0 = Clock::now();
    Status st = SaveCheckpoint(path, *module_, *optimizer_, state_);
    if (!st.ok()) throw std::runtime_error(st.ToString());
    Emit({{"type", "checkpoint"}, {"epoch", epoch}, {"position", position}, {"global_step", global_step_},
          {"seconds", Seconds(t0, Clock::now())}, {"bytes", static_cast<int64_t>(fs::file_size(path))}});
  }
  dist_->Barrier();
  last_checkpoint_ = Clock::now();
}

}  // namespace imagepack::trainer
