// train --data DB[,DB...] --val DB --arch A --epochs E --batch-size B --lr LR --output DIR [options]
// Trains on what pack_lmdb wrote and reports accuracy; see docs/TRAINING.md.
// Option parsing only: the run itself is Trainer (trainer.h).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <set>
#include <tuple>

#include <malloc.h>

#include "cli.h"
#include "option_flags.h"
#include "recipe_file.h"
#include "run_checks.h"
#include "run_info.h"
#include "trainer.h"
#include "imagepack/formats.h"
#include "imagepack/storage.h"

namespace po = boost::program_options;
using namespace imagepack;
using namespace imagepack::trainer;
namespace fs = std::filesystem;

namespace {

// Every option of `train`: the option table's rows for it
// (imagepack/option_table.h, which holds their defaults, ranges and help),
// each bound to its field of *o.
void Options(TrainOptions* o, cli::OptionFlags* f) {
  TrainOptions& a = *o;
  f->Bind("data", &a.data_list);
  f->Bind("weights", &a.weights);
  f->Bind("repeat", &a.repeat);
  f->Bind("choose", &a.choose);
  f->Bind("classes", &a.classes_file);
  f->Bind("val", &a.val);
  f->Bind("task", &a.task);
  f->Bind("arch", &a.arch);
  f->Bind("epochs", &a.epochs);
  f->Bind("batch-size", &a.batch);
  f->Bind("lr", &a.lr);
  f->Switch("lr-scale-batch");
  f->Bind("schedule", &a.schedule);
  f->Bind("lr-peak-epoch", &a.lr_peak_epoch);
  f->Bind("step-size", &a.step_size);
  f->Bind("warmup-epochs", &a.warmup);
  f->Bind("momentum", &a.momentum);
  f->Switch("nesterov");
  f->Bind("wd", &a.wd);
  f->Switch("no-bn-wd");
  f->Bind("label-smoothing", &a.label_smoothing);
  f->Bind("auto-augment", &a.auto_augment);
  f->Bind("ra-magnitude", &a.ra_magnitude);
  f->Bind("augmix-severity", &a.augmix_severity);
  f->Bind("random-erase", &a.random_erase);
  f->Bind("interpolation", &a.interpolation);
  f->Bind("hflip", &a.hflip);
  f->Switch("zero-init-residual");
  f->Bind("mixup-alpha", &a.mixup_alpha);
  f->Bind("cutmix-alpha", &a.cutmix_alpha);
  f->Switch("model-ema");
  f->Bind("model-ema-steps", &a.model_ema_steps);
  f->Bind("model-ema-decay", &a.model_ema_decay);
  f->Bind("lr-warmup-epochs", &a.lr_warmup_epochs);
  f->Bind("lr-warmup-method", &a.lr_warmup_method);
  f->Bind("lr-warmup-decay", &a.lr_warmup_decay);
  f->Bind("norm-weight-decay", &a.norm_wd);
  f->Bind("clip-grad-norm", &a.clip_grad_norm);
  f->Bind("recipe", &a.recipe);
  f->Bind("train-crop-size", &a.train_crop_size);
  f->Bind("val-resize-size", &a.val_resize_size);
  f->Bind("val-crop-size", &a.val_crop_size);
  f->Bind("size", &a.size);
  f->Bind("res-schedule", &a.res_schedule);
  f->Bind("val-size", &a.val_size);
  f->Bind("val-resize", &a.val_resize);
  f->Switch("blurpool");
  f->Bind("output", &a.output);
  f->Bind("resume", &a.resume);
  f->Switch("overwrite");
  f->Switch("resume-other-commit");
  f->Switch("evaluate");
  f->Switch("tta-flip");
  f->Switch("no-val");
  f->Bind("amp", &a.amp_mode);
  f->Bind("device", &a.device);
  f->Switch("channels-last");
  f->Switch("in-ram");
  f->Bind("cache-dir", &a.cache_dir);
  f->Bind("split", &a.split);
  f->Bind("val-split", &a.val_split);
  f->Bind("image-column", &a.image_column);
  f->Bind("label-column", &a.label_column);
  f->Bind("cache-limit", &a.cache_limit_mb);
  f->Switch("lock-in-ram");
  f->Bind("order", &a.order);
  f->Bind("block-mb", &a.block_mb);
  f->Bind("window-blocks", &a.window_blocks);
  f->Bind("io-threads", &a.io_threads);
  f->Bind("dct", &a.dct);
  f->Bind("print-freq", &a.print_freq);
  f->Switch("quiet");
  f->Bind("seed", &a.seed);
  f->Bind("threads", &a.threads);
  f->Bind("loader-threads", &a.loader_threads);
  f->Bind("max-steps", &a.max_steps);
  f->Bind("checkpoint-every", &a.checkpoint_every);
  f->Bind("checkpoint-minutes", &a.checkpoint_minutes);
  f->Bind("stop-at-step", &a.stop_at_step);
  f->Bind("log-samples", &a.log_samples);
  f->Bind("save-predictions", &a.save_predictions);
  f->CheckAllBound();
}

// The options on the command line, in order, as given; an option given
// several times (--data) is one entry with all its values.
GivenOptions Given(int argc, char** argv, const po::options_description& opts) {
  GivenOptions out;
  std::vector<std::string> spelled;  // each entry's name as given
  for (const auto& o : po::command_line_parser(argc, argv).options(opts).run().options) {
    if (o.unregistered || o.position_key >= 0) continue;
    // torchvision's names are kept as ours (--train-crop-size: --size), so
    // that a resumed run compares them with the checkpoint's; both names
    // given (with one value: two are refused) count once.
    const std::string key = CanonicalFlag(o.string_key);
    auto same = std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.first == key; });
    if (same == out.end()) {
      out.emplace_back(key, o.value);
      spelled.push_back(o.string_key);
    } else if (spelled[size_t(same - out.begin())] == o.string_key) {
      same->second.insert(same->second.end(), o.value.begin(), o.value.end());
    }
  }
  return out;
}

std::string Joined(const std::vector<std::string>& parts, const std::string& by) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : by) + p;
  return out;
}

// A run already in --output is not overwritten unless asked: a fresh
// start there (no checkpoint to resume) needs --overwrite, and so does a
// start from another run's checkpoint. "" when the output may be used.
std::string RefusedOutput(const TrainOptions& a) {
  if (a.evaluate || a.overwrite || a.output.empty()) return "";
  const std::vector<std::string> files = RunFilesIn(a.output);
  if (files.empty()) return "";
  const fs::path own = fs::path(a.output) / "checkpoint.pt";
  std::error_code ec;
  if (!a.resume_path.empty() && fs::equivalent(a.resume_path, own, ec)) return "";
  const std::string held = "--output " + a.output + " holds a run (" + Joined(files, ", ") + ")";
  if (a.resume == "auto")
    return held + " but no checkpoint.pt to continue from: --overwrite starts it again (its files are removed), "
                  "or give another --output";
  if (!a.resume_path.empty())
    return held + ", and --resume " + a.resume_path + " is another run's checkpoint: give a new --output for the run "
                  "that starts from it, or --overwrite to replace the run in " + a.output;
  return held + ": --resume auto continues it, --overwrite starts it again (its files are removed), or give "
                "another --output";
}

// A --data or --val path that names nothing, found before any output
// (URLs and shard patterns are left to their readers).
std::string MissingDatabase(const TrainOptions& a) {
  std::vector<std::pair<std::string, std::string>> paths;
  for (const auto& d : a.data_list)
    for (const auto& p : SplitCommas(d)) paths.emplace_back("--data", p);
  if (!a.val.empty())
    for (const auto& p : SplitCommas(a.val)) paths.emplace_back("--val", p);
  std::error_code ec;
  for (const auto& [option, path] : paths) {
    auto storage = OpenStorage(path);  // a remote object, or a pattern: opened (and named) by the loader
    if (!storage.ok() || !storage.value()->local() || IsFilePattern(path)) continue;
    if (!fs::exists(path, ec)) return option + " " + path + ": no such database";
  }
  return "";
}

// Validation files that training reads too, found before any epoch (not
// asked with --no-val or --evaluate); "" when they are apart.
std::string ValInsideData(const TrainOptions& a) {
  if (a.evaluate || a.no_val || a.val.empty()) return "";
  std::vector<std::string> data;
  for (const auto& d : a.data_list)
    for (const auto& p : SplitCommas(d)) data.push_back(p);
  const std::string why = SharedFiles(data, a.split, SplitCommas(a.val), a.val_split);
  return why.empty() ? "" : "--val " + a.val + ": " + why;
}

// The reference flags that parsing does not set by itself: --model-ema,
// and torchvision's spellings (--train-crop-size, --val-resize-size,
// --val-crop-size), which set ours; both given with different values is a
// usage error. "" when none.
std::string TakeReferenceFlags(const po::variables_map& vm, TrainOptions* a) {
  a->model_ema = vm.count("model-ema") > 0;
  const std::tuple<const char*, const char*, int*, int*> aliases[] = {
      {"train-crop-size", "size", &a->train_crop_size, &a->size},
      {"val-resize-size", "val-resize", &a->val_resize_size, &a->val_resize},
      {"val-crop-size", "val-size", &a->val_crop_size, &a->val_size}};
  for (const auto& [alias, ours, from, to] : aliases) {
    if (!vm.count(alias) || vm[alias].defaulted()) continue;
    if (vm.count(ours) && !vm[ours].defaulted() && *to != *from)
      return "--" + std::string(alias) + " " + std::to_string(*from) + " and --" + ours + " " + std::to_string(*to) +
             ": one option under two names, with two values; give one";
    *to = *from;
  }
  return "";
}

// The switches of the option table (kSwitch rows) into their fields.
void TakeSwitches(const po::variables_map& vm, TrainOptions* a) {
  a->blurpool = vm.count("blurpool");
  a->no_val = vm.count("no-val");
  a->evaluate = vm.count("evaluate");
  a->in_ram = vm.count("in-ram");
  a->lock_in_ram = vm.count("lock-in-ram");
  a->tta_flip = vm.count("tta-flip") > 0;
  a->nesterov = vm.count("nesterov");
  a->no_bn_wd = vm.count("no-bn-wd");
  a->lr_scale = vm.count("lr-scale-batch");
  a->zero_init = vm.count("zero-init-residual");
  a->channels_last = vm.count("channels-last");
  a->quiet = vm.count("quiet") > 0;
  a->overwrite = vm.count("overwrite") > 0;
  a->resume_other_commit = vm.count("resume-other-commit") > 0;
}

// --recipe's flags joined to the command line (ExpandRecipes): *argc and
// *argv then point into *words and *args. A message when a recipe cannot
// be read or holds a line that is not a flag.
std::string WithRecipes(int* argc, char*** argv, std::vector<std::string>* words, std::vector<char*>* args) {
  try {
    *words = ExpandRecipes(std::vector<std::string>(*argv, *argv + *argc));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  for (auto& w : *words) args->push_back(w.data());
  *argc = static_cast<int>(args->size());
  *argv = args->data();
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  // LibTorch allocates activation-sized tensors (MBs) in every step; with
  // glibc's defaults those are mmapped and unmapped each time, so every
  // step faults them in afresh, zero-filled. 40 steps of fcn_small at 96 px,
  // batch 32, 2 cores: 26.9 s wall of which 8.5 s system time; with freed
  // memory kept for reuse, 21.2 s and 0.6 s. Resident memory stays at the
  // run's peak instead of shrinking between steps.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  TrainOptions a;
  const std::string program = argc > 0 && argv[0] && *argv[0] ? argv[0] : "train";
  po::options_description opts("Options");
  cli::OptionFlags flags(&opts, kTrainFlag);
  Options(&a, &flags);
  opts.add_options()("help,h", "show this help and exit")("version", "show the version and exit");
  po::options_description hidden;
  po::positional_options_description pos;
  const std::string synopsis = "--data DB --val DB --output DIR [options]";
  // --recipe: the file's flags join the command line's (which win); the
  // run's options are the flags so given, without --recipe.
  std::vector<std::string> expanded;
  std::vector<char*> expanded_args;
  if (std::string problem = WithRecipes(&argc, &argv, &expanded, &expanded_args); !problem.empty())
    return cli::UsageError(problem);
  auto vm = cli::ParseOrExit(argc, argv, synopsis, opts, hidden, pos);
  GivenOptions given = Given(argc, argv, opts);
  std::vector<std::string> notes;
  try {
    // A checkpoint holds its run's options: those not given now are its.
    if (a.resume == "auto" && a.output.empty()) return cli::UsageError("--resume auto needs --output");
    a.resume_path = a.resume != "auto" ? a.resume
                    : fs::exists(a.output + "/checkpoint.pt") ? a.output + "/checkpoint.pt"
                                                              : "";
    if (!a.resume_path.empty()) {
      if (!fs::exists(a.resume_path)) throw std::runtime_error("--resume " + a.resume_path + ": no such checkpoint");
      const std::string run = ReadCheckpointRun(a.resume_path);
      if (!run.empty()) {
        // --evaluate writes beside the checkpoint unless told: the saved
        // run's --output (where it trained, maybe elsewhere) is not taken.
        GivenOptions saved = RunInfo::FromJson(run, a.resume_path).options;
        if (vm.count("evaluate"))
          saved.erase(std::remove_if(saved.begin(), saved.end(), [](const auto& o) { return o.first == "output"; }),
                      saved.end());
        given = MergeWithCheckpoint(given, saved, a.resume_path, &notes);
        std::vector<std::string> words = ToArgs(argv[0], given);
        std::vector<char*> args;
        for (auto& w : words) args.push_back(w.data());
        const std::string resume_path = a.resume_path;
        a = TrainOptions{};
        vm = cli::ParseOrExit(static_cast<int>(args.size()), args.data(), synopsis, opts, hidden, pos);
        a.resume_path = resume_path;
      }
    }
  } catch (const std::exception& e) {
    std::cerr << cli::ProgramName() << ": " << e.what() << "\n";
    return cli::kExitFatal;
  }
  for (const auto& g : given)
    if (!OptionIsPerInvocation(g.first)) a.given.push_back(g);
  a.notes = notes;
  a.program = program;
  a.data = Joined(a.data_list, " + ");
  TakeSwitches(vm, &a);
  if (a.evaluate && a.resume_path.empty()) return cli::UsageError("--evaluate needs --resume CHECKPOINT");
  if (a.evaluate ? a.val.empty() : (a.data.empty() || (a.val.empty() && !a.no_val) || a.output.empty()))
    return cli::UsageError(a.evaluate ? "--evaluate needs --val" : "--data, --val (or --no-val) and --output are required");
  if (std::string problem = TakeReferenceFlags(vm, &a); !problem.empty()) return cli::UsageError(problem);
  // Every option is checked before any work or output (docs/USAGE.md):
  // each value against its row of the option table, then the rules that
  // join several.
  const std::set<std::string> unchecked = a.evaluate ? std::set<std::string>{"epochs"} : std::set<std::string>{};
  if (std::string problem = flags.Problem(vm, unchecked); !problem.empty()) return cli::UsageError(problem);
  if (std::string problem = UsageProblem(a, torch::cuda::is_available()); !problem.empty())
    return cli::UsageError(problem);
  if (a.device == "auto") a.device = torch::cuda::is_available() ? "cuda" : "cpu";
  if (std::string refused = RefusedOutput(a); !refused.empty()) return cli::UsageError(refused);
  // An --output (for --evaluate: the folder of its rows) that cannot be
  // made or written is the environment's failure, found before any work.
  const fs::path rows_dir = fs::path(a.evaluate ? EvaluationsPath(a) : a.output + "/metrics.jsonl").parent_path();
  if (std::string why = cli::CheckOutputFolder(a.evaluate && a.output.empty() ? "--resume" : "--output",
                                               rows_dir.empty() ? "." : rows_dir.string());
      !why.empty())
    return cli::FatalError(why);
  if (std::string why = MissingDatabase(a); !why.empty()) return cli::FatalError(why);
  if (std::string why = ValInsideData(a); !why.empty()) return cli::FatalError(why);
  try {
    return Trainer(a).Run();
  } catch (const std::exception& e) {
    std::string msg = e.what();
    auto nl = msg.find("\nException raised from");
    if (nl != std::string::npos) msg = msg.substr(0, nl);
    std::cerr << cli::ProgramName() << ": " << msg << "\n";
    return cli::kExitFatal;
  }
}
