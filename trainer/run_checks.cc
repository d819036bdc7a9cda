#include "run_checks.h"

#include <boost/algorithm/string.hpp>

#include <filesystem>
#include <system_error>

#include "imagepack/augment.h"
#include "imagepack/order.h"
#include "imagepack/resolution.h"
#include "models.h"
#include "schedule.h"
#include "task.h"

namespace fs = std::filesystem;

namespace imagepack::trainer {
namespace {

// The files a run writes into its --output, besides predictions_*.npy.
const char* const kRunFiles[] = {"checkpoint.pt", "model_best.pt", "metrics.jsonl", "evaluations.jsonl"};

std::string Num(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// "--name V: must be WHAT" when `bad`, else "".
std::string Unless(bool good, const std::string& name, double value, const std::string& what) {
  return good ? "" : "--" + name + " " + Num(value) + ": must be " + what;
}

std::string RangeProblem(const TrainOptions& o) {
  for (const std::string& p : {
           Unless(o.epochs >= 1 || o.evaluate, "epochs", o.epochs, "at least 1"),
           Unless(o.batch >= 1, "batch-size", o.batch, "at least 1"),
           Unless(o.lr >= 0, "lr", o.lr, "0 or more"),
           Unless(o.momentum >= 0 && o.momentum < 1, "momentum", o.momentum, "in [0, 1)"),
           Unless(o.wd >= 0, "wd", o.wd, "0 or more"),
           Unless(o.label_smoothing >= 0 && o.label_smoothing < 1, "label-smoothing", o.label_smoothing, "in [0, 1)"),
           Unless(o.ra_magnitude >= 0 && o.ra_magnitude <= 30, "ra-magnitude", o.ra_magnitude, "0 to 30"),
           Unless(o.augmix_severity >= 1 && o.augmix_severity <= 10, "augmix-severity", o.augmix_severity, "1 to 10"),
           Unless(o.random_erase >= 0 && o.random_erase <= 1, "random-erase", o.random_erase, "in [0, 1]"),
           Unless(o.warmup >= 0, "warmup-epochs", o.warmup, "0 or more"),
           Unless(o.step_size >= 1, "step-size", o.step_size, "at least 1"),
           Unless(o.lr_peak_epoch >= 0, "lr-peak-epoch", o.lr_peak_epoch, "0 or more"),
           Unless(o.size >= 0 && o.size <= 16384, "size", o.size, "0 (the default) to 16384"),
           Unless(o.val_size >= 0 && o.val_size <= 16384, "val-size", o.val_size, "0 (--size) to 16384"),
           Unless(o.val_resize >= 0 && o.val_resize <= 16384, "val-resize", o.val_resize, "0 (automatic) to 16384"),
           Unless(o.threads >= 0, "threads", o.threads, "0 (automatic) or more"),
           Unless(o.loader_threads >= 0, "loader-threads", o.loader_threads, "0 (automatic) or more"),
           Unless(o.block_mb > 0, "block-mb", o.block_mb, "more than 0"),
           Unless(o.window_blocks >= 1, "window-blocks", o.window_blocks, "at least 1"),
           Unless(o.io_threads >= -1, "io-threads", o.io_threads, "-1 (automatic) or more"),
           Unless(o.max_steps >= 0, "max-steps", double(o.max_steps), "0 (off) or more"),
           Unless(o.checkpoint_every >= 0, "checkpoint-every", double(o.checkpoint_every), "0 (off) or more"),
           Unless(o.checkpoint_minutes >= 0, "checkpoint-minutes", o.checkpoint_minutes, "0 (off) or more"),
           Unless(o.stop_at_step >= 0, "stop-at-step", double(o.stop_at_step), "0 (off) or more"),
           Unless(o.save_predictions >= 0, "save-predictions", o.save_predictions, "0 (off) or more"),
           Unless(o.cache_limit_mb >= 0, "cache-limit", o.cache_limit_mb, "0 (the default) or more"),
           Unless(o.print_freq >= 1, "print-freq", o.print_freq, "at least 1"),
           Unless(o.seed >= 0, "seed", double(o.seed), "0 or more"),
           Unless(o.mixup_alpha >= 0, "mixup-alpha", o.mixup_alpha, "0 (off) or more"),
           Unless(o.cutmix_alpha >= 0, "cutmix-alpha", o.cutmix_alpha, "0 (off) or more"),
           Unless(o.model_ema_steps >= 1, "model-ema-steps", o.model_ema_steps, "at least 1"),
           Unless(o.model_ema_decay > 0 && o.model_ema_decay < 1, "model-ema-decay", o.model_ema_decay, "in (0, 1)"),
           Unless(o.lr_warmup_epochs >= 0, "lr-warmup-epochs", o.lr_warmup_epochs, "0 (off) or more"),
           Unless(o.lr_warmup_decay > 0 && o.lr_warmup_decay <= 1, "lr-warmup-decay", o.lr_warmup_decay, "in (0, 1]"),
           Unless(o.clip_grad_norm >= 0, "clip-grad-norm", o.clip_grad_norm, "0 (off) or more"),
           Unless(o.train_crop_size >= 0 && o.train_crop_size <= 16384, "train-crop-size", o.train_crop_size,
                  "0 (the default) to 16384"),
           Unless(o.val_crop_size >= 0 && o.val_crop_size <= 16384, "val-crop-size", o.val_crop_size,
                  "0 (--size) to 16384"),
           Unless(o.val_resize_size >= 0 && o.val_resize_size <= 16384, "val-resize-size", o.val_resize_size,
                  "0 (automatic) to 16384"),
       })
    if (!p.empty()) return p;
  return "";
}

std::string NameProblem(const TrainOptions& o, bool cuda_available) {
  if (!o.arch.empty() && !KnownArch(o.arch))
    return "unknown --arch '" + o.arch + "' (" + kArchNames + ")";
  if (!KnownTask(o.task)) return "unknown --task '" + o.task + "' (classification, segmentation, restoration)";
  if (!KnownSchedule(o.schedule))
    return "unknown --schedule '" + o.schedule + "' (step, cosine, onecycle, triangular)";
  if (!ParseOrder(o.order).ok()) return "unknown --order '" + o.order + "' (random, blocks, auto, sequential)";
  if (o.dct != "fast" && o.dct != "accurate") return "--dct " + o.dct + ": fast or accurate";
  if (AutoAugmentKind k; !ParseAutoAugment(o.auto_augment, &k))
    return "unknown --auto-augment '" + o.auto_augment + "' (ta_wide, ra, imagenet, cifar10, svhn, augmix, none)";
  if (o.interpolation != "bilinear" && o.interpolation != "bicubic")
    return "--interpolation " + o.interpolation + ": bilinear or bicubic";
  if (!o.amp_mode.empty() && o.amp_mode != "auto" && o.amp_mode != "bf16" && o.amp_mode != "fp16")
    return "--amp=" + o.amp_mode + ": expected auto, bf16 or fp16";
  if (o.device != "cpu" && o.device != "cuda") return "--device " + o.device + ": cpu or cuda";
  if (o.lr_warmup_method != "linear" && o.lr_warmup_method != "constant")
    return "--lr-warmup-method " + o.lr_warmup_method + ": linear or constant";
  if (o.device == "cuda" && !cuda_available)
    return "--device cuda: no CUDA device is available to this LibTorch (Debian's libtorch-dev is CPU-only); "
           "use --device cpu";
  return "";
}

// Combinations of torchvision's reference flags that cannot work.
std::string ReferenceFlagProblem(const TrainOptions& o) {
  if ((o.mixup_alpha > 0 || o.cutmix_alpha > 0) && o.task != "classification")
    return "--mixup-alpha/--cutmix-alpha: for --task classification (soft class targets), not " + o.task;
  if ((o.auto_augment != "none" || o.random_erase > 0) && o.task != "classification")
    return "--auto-augment/--random-erase change the image alone, which --task " + o.task +
           "'s per-pixel targets must follow: for --task classification";
  if (o.lr_warmup_epochs > 0 && o.schedule != "step" && o.schedule != "cosine")
    return "--lr-warmup-epochs: torchvision's warm-up precedes --schedule step or cosine, not " + o.schedule;
  if (o.lr_warmup_epochs > 0 && o.warmup > 0)
    return "--lr-warmup-epochs (torchvision's, per epoch) and --warmup-epochs (per step): give one";
  return "";
}

}  // namespace

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  boost::split(parts, text, boost::is_any_of(","));
  return parts;
}

std::vector<double> Shares(const std::string& option, const std::string& text, size_t sources) {
  if (text.empty()) return {};
  std::vector<double> out;
  for (const auto& part : SplitCommas(text)) {
    char* end = nullptr;
    const double v = std::strtod(part.c_str(), &end);
    if (part.empty() || end != part.c_str() + part.size() || !(v >= 0))
      throw std::invalid_argument("--" + option + " " + text + ": '" + part + "' is not a number of 0 or more");
    out.push_back(v);
  }
  if (out.size() != sources)
    throw std::invalid_argument("--" + option + " " + text + " has " + std::to_string(out.size()) + " values for " +
                                std::to_string(sources) + " --data: one per dataset");
  return out;
}

std::string UsageProblem(const TrainOptions& o, bool cuda_available) {
  if (std::string p = NameProblem(o, cuda_available); !p.empty()) return p;
  if (std::string p = RangeProblem(o); !p.empty()) return p;
  if (!o.res_schedule.empty()) {
    auto r = ParseResolutionSchedule(o.res_schedule);
    if (!r.ok()) return "--res-schedule: " + r.status().message();
    if (o.arch == "mlp") return "--res-schedule: mlp's first layer takes one input size";
  }
  if (o.blurpool && !o.arch.empty() && o.arch.rfind("resnet", 0) != 0) return "--blurpool: for the ResNets";
  if (std::string p = ReferenceFlagProblem(o); !p.empty()) return p;
  try {
    const size_t n = o.data_list.size();
    const bool absolute = !o.repeat.empty() || !o.choose.empty();
    Shares("weights", o.weights, n);
    Shares("repeat", o.repeat, n);
    Shares("choose", o.choose, n);
    if (!o.weights.empty() && absolute)
      return "--weights (relative shares) or --repeat/--choose (absolute counts), not both";
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  if (o.overwrite && o.resume == "auto")
    return "--overwrite starts the run in --output again, --resume auto continues it: give one";
  if (o.overwrite && o.evaluate) return "--overwrite: --evaluate writes no run (its rows go to evaluations.jsonl)";
  return "";
}

std::vector<std::string> RunFilesIn(const std::string& output) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const char* name : kRunFiles)
    if (fs::exists(fs::path(output) / name, ec)) found.push_back(name);
  return found;
}

std::string RemoveRun(const std::string& output) {
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (const char* name : kRunFiles) doomed.push_back(fs::path(output) / name);
  for (const char* kind : {"input", "output", "target"})
    doomed.push_back(fs::path(output) / ("predictions_" + std::string(kind) + ".npy"));
  for (const auto& p : doomed) {
    fs::remove(p, ec);
    if (ec) return "--overwrite: cannot remove " + p.string() + ": " + ec.message();
  }
  return "";
}

std::string EvaluationsPath(const TrainOptions& o) {
  if (!o.output.empty()) return (fs::path(o.output) / "evaluations.jsonl").string();
  return (fs::path(o.resume_path).parent_path() / "evaluations.jsonl").string();
}

}  // namespace imagepack::trainer
