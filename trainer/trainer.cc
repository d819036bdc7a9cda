// The Trainer's set-up: the process group, the training data and its
// normalisation, the task, and the loaders (trainer.h).
#include "trainer.h"

#include <boost/algorithm/string.hpp>
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "imagepack/classes.h"
#include "imagepack/files.h"
#include "imagepack/storage.h"
#include "imagepack/store.h"
#include "models.h"
#include "nccl_backend.h"
#include "preemption.h"
#include "run_checks.h"
#include "trainer_internal.h"

namespace fs = std::filesystem;

namespace imagepack::trainer {
using namespace internal;

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

namespace {

// The --data sources that name a revision (hf://), at the commit this
// process reads (RunInfo::pinned).
std::vector<std::string> PinnedData(const std::vector<std::string>& data_list) {
  std::vector<std::string> out;
  for (const auto& d : data_list)
    for (const auto& path : SplitCommas(d)) {
      auto pinned = PinnedUrl(path);
      if (!pinned.ok()) throw std::runtime_error("--data " + path + ": " + pinned.status().message());
      if (!pinned->empty()) out.push_back(*pinned);
    }
  return out;
}

}  // namespace

void Trainer::CheckPinnedData(const std::string& checkpoint) {
  if (o_.evaluate || saved_.pinned.empty() || saved_.pinned == run_.pinned) return;
  const std::string was = boost::algorithm::join(saved_.pinned, ", "),
                    now = run_.pinned.empty() ? "no hf:// data" : boost::algorithm::join(run_.pinned, ", ");
  if (o_.resume_other_commit) {
    Log("=> --resume-other-commit: " + checkpoint + " was trained on " + was + "; this run reads " + now);
    return;
  }
  throw std::runtime_error("checkpoint " + checkpoint + " was trained on " + was + ", but --data now reads " + now +
                           " (a revision moved): resume on the commit it trained on (--data with @COMMIT), or "
                           "give --resume-other-commit to go on with the new files");
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
    oo.split = o_.split;
    oo.image_column = o_.image_column;
    oo.label_column = o_.label_column;
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
  SetUpTask();
}

// The model's channels, the normalisation (the checkpoint's, else the
// training data's statistics, else 0.5 / 0.25) and the task.
void Trainer::SetUpTask() {
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
  run_.pinned = PinnedData(o_.data_list);
  run_.train_meta = !saved_.arch.empty() && o_.data.empty() ? saved_.train_meta : train_meta_.ToJson();
  run_.options = o_.given;
}

// The data and how it is read: what every loader of the run shares
// (the validation loader starts from a copy).
void Trainer::SetDataOptions() {
  if (!mix_.empty()) lo_.sources = mix_;
  else if (!o_.data.empty()) lo_.paths = SplitCommas(o_.data);
  lo_.classes = classes_;
  lo_.classes_from = o_.classes_file;
  lo_.in_ram = o_.in_ram;
  lo_.lock_in_ram = o_.lock_in_ram;
  lo_.cache_dir = o_.cache_dir;
  lo_.cache_limit_mb = o_.cache_limit_mb;
  lo_.split = o_.split;
  lo_.image_column = o_.image_column;
  lo_.label_column = o_.label_column;
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
}

void Trainer::SetUpLoaders() {
  const bool small = IsSmall(arch_);
  SetDataOptions();
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
  lo_.hflip = o_.hflip;
  ParseAutoAugment(o_.auto_augment, &lo_.augment.kind);  // checked in run_checks
  lo_.augment.ra_magnitude = o_.ra_magnitude;
  lo_.augment.augmix_severity = o_.augmix_severity;
  lo_.erase.p = o_.random_erase;
  // torchvision erases after Normalize with 0, the mean: here, before the
  // normalisation, with the mean's grey levels.
  for (size_t c = 0; c < 3 && !run_.mean.empty(); ++c)
    lo_.erase.value[c] = static_cast<uint8_t>(std::lround(std::clamp(255.0 * run_.mean[std::min(c, run_.mean.size() - 1)], 0.0, 255.0)));
  lo_.filter = o_.interpolation == "bicubic" ? ResampleFilter::kCatmullRom : ResampleFilter::kTriangle;
  vo.filter = lo_.filter;  // the reference's eval Resize takes --interpolation too
  vo.paths = SplitCommas(o_.val);
  vo.split = o_.val_split;
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
  oo.split = o_.val_split;
  oo.image_column = o_.image_column;
  oo.label_column = o_.label_column;
  const DatasetMeta val_meta = Check(OpenDatabases(vo.paths, oo))->meta();
  const std::string matched = task_->MatchEvalData(train_meta_, train_name_, val_meta, o_.val);
  val_loader_ = Check(Loader::Open(vo));
  Log("=> validation " + o_.val + ": " + std::to_string(val_loader_->dataset_size()) + " samples" +
      (matched.empty() ? "" : ", " + matched) +
      (val_meta.channels != channels_ ? ", converted from " + std::to_string(val_meta.channels) + " to " +
                                            std::to_string(channels_) + " channel(s)"
                                      : ""));
}

}  // namespace imagepack::trainer
