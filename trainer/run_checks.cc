#include "run_checks.h"

#include <boost/algorithm/string.hpp>

#include <filesystem>
#include <system_error>

#include "imagepack/resolution.h"
#include "models.h"
#include "schedule.h"
#include "task.h"

namespace fs = std::filesystem;

namespace imagepack::trainer {
namespace {

// The files a run writes into its --output, besides predictions_*.npy.
const char* const kRunFiles[] = {"checkpoint.pt", "model_best.pt", "metrics.jsonl", "evaluations.jsonl"};

// The names only the trainer knows (--arch) and --device cuda without
// CUDA; the option table's choices and ranges are checked before this
// (OptionFlags::Problem).
std::string NameProblem(const TrainOptions& o, bool cuda_available) {
  if (!o.arch.empty() && !KnownArch(o.arch))
    return "unknown --arch '" + o.arch + "' (" + kArchNames + ")";
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
