// The training run: set-up from TrainOptions (loaders, model, optimizer,
// resume), the epoch loop with its mid-epoch checkpoints and clean stops,
// and evaluation. `train` is option parsing around Trainer::Run().
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "amp.h"
#include "checkpoint.h"
#include "distributed.h"
#include "ema.h"
#include "mixup.h"
#include "models.h"
#include "run_info.h"
#include "imagepack/loader.h"
#include "imagepack/mix.h"
#include "imagepack/resolution.h"
#include "schedule.h"
#include "task.h"

namespace imagepack::trainer {
namespace internal {
struct EpochMeters;  // trainer_internal.h
}

// What `train` was asked to do (its options, docs/TRAINING.md).
struct TrainOptions {
  // --data as given: one dataset (commas: its shards), or several, mixed
  // (--weights, --repeat, --choose). `data`: them joined by " + ", for logs.
  std::vector<std::string> data_list;
  std::string weights, repeat, choose;  // a mix: one share per --data, comma-separated
  std::string classes_file;             // --classes: the class list the model learns (mixes of other lists)
  std::string res_schedule;             // --res-schedule MIN,MAX,START_RAMP,END_RAMP[,STEP] (resolution.h)
  int val_size = 0, val_resize = 0;     // evaluation size and shorter edge (0: --size; size / 0.875)
  double lr_peak_epoch = 2;             // --schedule triangular
  bool blurpool = false;
  std::string data, val, arch, output, resume, device = "cpu", schedule = "step";
  std::string resume_path;  // --resume resolved: the checkpoint to load, or "" (a fresh start)
  std::string program = "train";  // argv[0] as run: the command that continues the run names it
  std::string amp_mode;     // --amp: "" off, "auto", "bf16" (forced on CPU), "fp16"
  std::string task = "classification";  // classification | segmentation | restoration (task.h)
  std::string order = "auto";           // the training data's order (LoaderOptions::order)
  std::string dct = "fast";             // fast | accurate (LoaderOptions::fast_dct), both loaders
  // torchvision's reference flags for the training loader's per-sample
  // augmentations (LoaderOptions::augment, erase, filter).
  std::string auto_augment = "none";    // ta_wide | ra | imagenet | cifar10 | svhn | augmix | none
  std::string interpolation = "bilinear";  // the crops' resampling: bilinear | bicubic
  int ra_magnitude = 9, augmix_severity = 3;
  double random_erase = 0;
  double hflip = 0.5;  // the training crops' horizontal flips (LoaderOptions::hflip)
  // torchvision's reference flags (docs/TRAINING.md, "torchvision's
  // reference flags"): batch mixing, the EMA of the weights, the lr
  // warm-up, norm layers' weight decay, gradient clipping.
  double mixup_alpha = 0, cutmix_alpha = 0;
  bool model_ema = false;
  int model_ema_steps = 32;
  double model_ema_decay = 0.99998;
  int lr_warmup_epochs = 0;
  std::string lr_warmup_method = "constant";  // linear | constant
  double lr_warmup_decay = 0.01;
  double norm_wd = -1;  // --norm-weight-decay (< 0: not given; --wd, or 0 with --no-bn-wd)
  double clip_grad_norm = 0;  // 0: off
  // torchvision's names for --size, --val-resize, --val-size (0: not given).
  int train_crop_size = 0, val_resize_size = 0, val_crop_size = 0;
  double block_mb = 4;
  int window_blocks = 16, io_threads = -1;
  int epochs = 90, batch = 256, print_freq = 10, threads = 0, loader_threads = 0, size = 0, step_size = 30;
  double lr = 0.1, momentum = 0.9, wd = 1e-4, label_smoothing = 0, warmup = 0;
  int64_t seed = 0, max_steps = 0, checkpoint_every = 0, stop_at_step = 0;
  double checkpoint_minutes = 0;
  std::string log_samples;
  std::string recipe;  // --recipe (expanded before parsing: ExpandRecipes)
  int save_predictions = 0;  // write the first N validation samples' inputs, outputs, targets (.npy)
  std::string cache_dir;      // s3:// datasets: node-local block cache
  std::string split, val_split;  // --split, --val-split: the split of files read in place
  std::string image_column, label_column;  // parquet read in place: its columns
  double cache_limit_mb = 0;
  bool in_ram = false, lock_in_ram = false, evaluate = false, tta_flip = false, nesterov = false, no_bn_wd = false,
       lr_scale = false, zero_init = false, channels_last = false, no_val = false, quiet = false;
  bool resume_other_commit = false;  // --resume-other-commit: an hf:// --data may read another commit
  bool overwrite = false;  // --overwrite: a run already in --output is removed and started again
  GivenOptions given;               // the options as given (with the checkpoint's), saved in checkpoints
  std::vector<std::string> notes;   // given options that differ from the checkpoint's run, for the log
};

class Trainer {
 public:
  // Sets everything up: the process group (from the environment), the
  // loaders, the model, the optimizer, and the state of --resume. Throws
  // std::runtime_error (or c10::Error) naming what failed.
  explicit Trainer(const TrainOptions& o);
  ~Trainer();

  // Trains (or, with --evaluate, evaluates) to the end or to a stop. Returns
  // the process's exit status: 0, or kExitPreempted after a stop signal.
  int Run();

 private:
  // How an epoch ended.
  enum class EpochEnd { kCompleted, kStopped, kPreempted, kInterrupted };

  // The training data's metadata (--data, or the checkpoint's for
  // --evaluate), checked against the checkpoint's; the normalisation; the
  // task.
  void SetUpData();
  void SetUpTask();
  void SetDataOptions();
  void SetUpLoaders();
  void SetUpModel();
  void SetUpOptimizer();
  void Resume();
  void WarnOfAnotherGlobalBatch();  // a resume on another world size or batch per rank (Resume)
  EpochEnd TrainEpoch(int64_t epoch);
  bool CheckpointOrStop(Loader& loader, int64_t epoch, EpochEnd* end);
  // One optimizer step on the batch in host memory; the loss, the model's
  // output and its input, for the meters.
  struct StepResult {
    torch::Tensor loss, out, x;
  };
  // --mixup-alpha/--cutmix-alpha draw with (seed, epoch, step, rank).
  StepResult Step(int n, const torch::Tensor& y, double lr, int64_t epoch, int64_t step);
  // After the step of `step` in `epoch`: --model-ema's update when due.
  void UpdateEma(int64_t epoch, int64_t step);
  // A step's line and metrics row.
  struct StepLog {
    int64_t epoch, step, steps;
    double lr;
  };
  void LogStep(const StepLog& at, const std::vector<Figure>& now, const internal::EpochMeters& m);
  // The task's figures on --val over all ranks, of the model and (logged
  // and emitted as "eval_ema") of --model-ema's average; returns the
  // model's score (top-1 %, mIoU, PSNR).
  double Evaluate(int64_t epoch);
  double EvaluateModel(int64_t epoch, torch::nn::AnyModule& model, torch::nn::Module& module, bool ema);
  // --model-ema: the average, a second model of --arch.
  void SetUpEma(const ModelOptions& mo);
  // The next batch of `loader` into host memory, with its target on the
  // device; 0 at the end of the epoch.
  int NextBatch(Loader& loader, torch::Tensor* target);
  // --data as the loader takes it: a mix's sources (empty: one dataset).
  std::vector<MixSource> MixSources() const;
  // --resume: an hf:// --data that now reads other commits than the
  // checkpoint's (RunInfo::pinned) is refused naming both, unless
  // --resume-other-commit.
  void CheckPinnedData(const std::string& checkpoint);
  // checkpoint.pt (rank 0) for the given place; every rank waits for it.
  void Checkpoint(int64_t epoch, int64_t position);
  // The host batch (first n samples) on the device as float, as the task
  // makes it the model's input.
  torch::Tensor Input(int n);
  void Log(const std::string& line);
  void Emit(const nlohmann::json& record);
  void PrintDigest();
  // --save-predictions: OUTPUT/predictions_{input,output,target}.npy.
  void SavePredictions();

  const TrainOptions o_;
  const DistEnv env_;
  const torch::Device device_;
  ThreadSplit threads_;
  std::unique_ptr<Distributed> dist_;
  bool main_rank_ = false;

  LoaderOptions lo_;
  std::unique_ptr<Loader> train_loader_, val_loader_;
  std::vector<MixSource> mix_;          // --data mixed (empty: one dataset)
  std::vector<std::string> classes_;    // --classes (empty: the training data's)
  bool has_res_ = false;                // --res-schedule given
  ResolutionSchedule res_;
  int cur_size_ = 0;                    // the output size of the batch in host_batch_
  int channels_ = 3;
  int first_edge_ = 0;      // the shorter edge of the training data's first image (0: not known)
  bool amp_ = false;        // autocast on (--amp resolved for this device)
  RunInfo saved_;           // the --resume checkpoint's description (empty arch: none)
  RunInfo run_;             // this run's, saved in its checkpoints
  DatasetMeta train_meta_;  // the training data's (classes, fields, channels, statistics)
  std::string train_name_;  // --data, or the checkpoint's data, for messages

  std::unique_ptr<Task> task_;
  std::string arch_;  // --arch, or the task's default
  std::shared_ptr<torch::nn::Module> module_;
  torch::nn::AnyModule model_;
  std::vector<torch::Tensor> params_, buffers_;
  ScheduleOptions schedule_;
  std::unique_ptr<torch::optim::SGD> optimizer_;
  std::unique_ptr<GradScaler> scaler_;
  std::unique_ptr<GradientReducer> reducer_;
  MixOptions mix_opts_;              // --mixup-alpha, --cutmix-alpha
  std::unique_ptr<ModelEma> ema_;    // --model-ema
  torch::nn::AnyModule ema_model_;

  TrainState state_;
  int64_t global_step_ = 0;
  int64_t steps_per_epoch_ = 0;
  std::chrono::steady_clock::time_point last_checkpoint_;

  // The loader writes batches straight into this tensor's memory; on CUDA
  // it is pinned so the host-to-device copy can be asynchronous.
  torch::Tensor host_batch_;
  std::vector<int64_t> host_labels_, host_indices_;
  std::ofstream metrics_, sample_log_;
};

}  // namespace imagepack::trainer
