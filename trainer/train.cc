// train --data DB[,DB...] --val DB --arch A --epochs E --batch-size B --lr LR --output DIR [options]
// Trains on what pack_lmdb wrote and reports accuracy; see docs/TRAINING.md.
// Option parsing only: the run itself is Trainer (trainer.h).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <tuple>

#include <malloc.h>

#include "cli.h"
#include "recipe_file.h"
#include "run_checks.h"
#include "run_info.h"
#include "trainer.h"
#include "imagepack/storage.h"

namespace po = boost::program_options;
using namespace imagepack;
using namespace imagepack::trainer;
namespace fs = std::filesystem;

namespace {

// torchvision's reference flags (docs/TRAINING.md, "torchvision's
// reference flags") beyond the augmentations, bound to the fields of *o.
void AddReferenceFlags(po::options_description* opts, TrainOptions* o) {
  TrainOptions& a = *o;
  opts->add_options()
      ("mixup-alpha", po::value(&a.mixup_alpha)->default_value(0),
       "mixup: each batch blended with itself rolled by one, lambda ~ Beta(A, A), soft targets (0: off)")
      ("cutmix-alpha", po::value(&a.cutmix_alpha)->default_value(0),
       "cutmix: a box of the rolled batch pasted, side ratio sqrt(1 - lambda) (0: off); with --mixup-alpha one of "
       "the two per batch")
      ("model-ema", "keep an exponential moving average of the weights and buffers, evaluated beside the model")
      ("model-ema-steps", po::value(&a.model_ema_steps)->default_value(32), "--model-ema: update every N steps")
      ("model-ema-decay", po::value(&a.model_ema_decay)->default_value(0.99998),
       "--model-ema: decay, adjusted as torchvision's by world * batch * steps / epochs")
      ("lr-warmup-epochs", po::value(&a.lr_warmup_epochs)->default_value(0),
       "torchvision's warm-up epochs before --schedule step or cosine; the lr then changes per epoch")
      ("lr-warmup-method", po::value(&a.lr_warmup_method)->default_value("constant"),
       "linear (LinearLR from --lr-warmup-decay to 1) or constant (ConstantLR)")
      ("lr-warmup-decay", po::value(&a.lr_warmup_decay)->default_value(0.01), "the warm-up's first factor of --lr")
      ("norm-weight-decay", po::value(&a.norm_wd),
       "weight decay of the normalisation layers' parameters (default: as the others)")
      ("clip-grad-norm", po::value(&a.clip_grad_norm)->default_value(0),
       "clip the gradients' global 2-norm to M (after unscaling under AMP; 0: off)")
      ("recipe", po::value<std::string>(),
       "flags from trainer/recipes/NAME.flags or FILE, one a line; the command line's own win")
      ("train-crop-size", po::value(&a.train_crop_size)->default_value(0), "torchvision's name for --size")
      ("val-resize-size", po::value(&a.val_resize_size)->default_value(0), "torchvision's name for --val-resize")
      ("val-crop-size", po::value(&a.val_crop_size)->default_value(0), "torchvision's name for --val-size");
}

// Every option of `train`, bound to the fields of *o.
po::options_description Options(TrainOptions* o) {
  po::options_description opts("Options");
  TrainOptions& a = *o;
  opts.add_options()
      ("data", po::value(&a.data_list)->composing(),
       "training database(s), comma-separated shards of one dataset; defines the classes, channels and "
       "normalisation. Given again, datasets mixed: --weights, --repeat or --choose")
      ("weights", po::value(&a.weights), "a mix: each --data's relative share of every epoch (0.7,0.3)")
      ("repeat", po::value(&a.repeat), "a mix: each --data's records this many times per epoch (3,1; 0: its --choose)")
      ("choose", po::value(&a.choose), "a mix: each --data's samples per epoch (5000,0; 0: its --repeat, else once)")
      ("classes", po::value(&a.classes_file),
       "the class list the model learns, one name per line: the labels of --data (of each dataset of a mix) "
       "matched to it by name")
      ("val", po::value(&a.val), "validation database(s), comma-separated shards; classes matched to --data's by name")
      ("task", po::value(&a.task)->default_value("classification"),
       "classification, segmentation (a mask field), restoration (a target image field)")
      ("arch", po::value(&a.arch),
       "resnet18, resnet50, small_cnn, mlp; fcn_small, unet_small (default: resnet18, fcn_small, unet_small by task)")
      ("epochs", po::value(&a.epochs)->default_value(90), "epochs")
      ("batch-size,b", po::value(&a.batch)->default_value(256), "batch size per process")
      ("lr", po::value(&a.lr)->default_value(0.1), "learning rate")
      ("lr-scale-batch", "scale lr by global batch / 256")
      ("schedule", po::value(&a.schedule)->default_value("step"),
       "step, cosine, onecycle, triangular (FFCV: linear up to --lr-peak-epoch, linear down to 0)")
      ("lr-peak-epoch", po::value(&a.lr_peak_epoch)->default_value(2), "--schedule triangular: where the lr peaks")
      ("step-size", po::value(&a.step_size)->default_value(30), "step schedule: epochs between decays")
      ("warmup-epochs", po::value(&a.warmup)->default_value(0), "linear warm-up epochs")
      ("momentum", po::value(&a.momentum)->default_value(0.9), "SGD momentum")
      ("nesterov", "Nesterov momentum")
      ("wd", po::value(&a.wd)->default_value(1e-4), "weight decay")
      ("no-bn-wd", "no weight decay on BN and bias parameters")
      ("label-smoothing", po::value(&a.label_smoothing)->default_value(0), "label smoothing")
      ("auto-augment", po::value(&a.auto_augment)->default_value("none"),
       "per-sample policy after the crop: ta_wide, ra, imagenet, cifar10, svhn, augmix or none")
      ("ra-magnitude", po::value(&a.ra_magnitude)->default_value(9), "--auto-augment ra: magnitude bin (0..30)")
      ("augmix-severity", po::value(&a.augmix_severity)->default_value(3), "--auto-augment augmix: severity (1..10)")
      ("random-erase", po::value(&a.random_erase)->default_value(0), "RandomErasing's probability per sample")
      ("interpolation", po::value(&a.interpolation)->default_value("bilinear"),
       "the training crops' resampling: bilinear or bicubic")
      ("zero-init-residual", "zero-init the last BN of each residual block");
  AddReferenceFlags(&opts, o);
  opts.add_options()
      ("size", po::value(&a.size)->default_value(0),
       "input size (0: 224; 28 for small_cnn/mlp; 96 for segmentation and restoration)")
      ("res-schedule", po::value(&a.res_schedule),
       "progressive resolution MIN,MAX,START_RAMP,END_RAMP[,STEP]: each epoch's training size as FFCV's "
       "(160,192,11,13), rounded to STEP (32)")
      ("val-size", po::value(&a.val_size)->default_value(0), "evaluation size (0: --size)")
      ("val-resize", po::value(&a.val_resize)->default_value(0),
       "evaluation: the shorter edge before the centre crop (0: val-size / 0.875)")
      ("blurpool", "ResNets: a blur before each strided convolution (BlurPool)")
      ("output", po::value(&a.output), "directory for checkpoints and metrics.jsonl")
      ("resume", po::value(&a.resume),
       "checkpoint to resume from ('auto': OUTPUT/checkpoint.pt if present); options not given are the checkpoint's")
      ("overwrite", "start again in an --output that holds a run: its checkpoints, metrics and predictions are "
                    "removed (without it such an --output is refused; --resume auto continues it)")
      ("evaluate", "only evaluate --val with the --resume checkpoint (--data not needed); rows go to "
                   "evaluations.jsonl in --output, else beside the checkpoint")
      ("tta-flip", "evaluate on each image and its horizontal mirror, averaging the logits")
      ("no-val", "skip the per-epoch evaluation (profiling); --val may be omitted")
      ("amp", po::value(&a.amp_mode)->implicit_value("auto"),
       "autocast: fp16 with loss scaling on CUDA; bf16 on a CPU with native bf16 (AVX512-BF16, AMX), fp32 with a "
       "notice on others (about 4x slower in bf16 there); --amp=bf16 forces bf16")
      ("device", po::value(&a.device)->default_value("cpu"), "cpu or cuda")
      ("channels-last", "NHWC batches and channels-last model")
      ("in-ram", "hold the databases in RAM, one shared copy per machine")
      ("cache-dir", po::value(&a.cache_dir), "remote datasets (s3://, https://): keep fetched blocks in this local folder")
      ("cache-limit", po::value(&a.cache_limit_mb)->default_value(0), "MB kept in --cache-dir (0: 20480)")
      ("lock-in-ram", "with --in-ram: mlock the copy")
      ("order", po::value(&a.order)->default_value("auto"),
       "training order: random, blocks (for data not in the page cache) or auto")
      ("block-mb", po::value(&a.block_mb)->default_value(4), "--order blocks: block size in MB")
      ("window-blocks", po::value(&a.window_blocks)->default_value(16), "--order blocks: blocks shuffled together")
      ("io-threads", po::value(&a.io_threads)->default_value(-1),
       "reads in flight ahead of decoding (-1: 4 with blocks, none otherwise)")
      ("dct", po::value(&a.dct)->default_value("fast"),
       "JPEG IDCT of the training and validation loaders: fast, or accurate (Pillow's pixels)")
      ("print-freq", po::value(&a.print_freq)->default_value(10), "log every N steps")
      ("quiet,q", "no per-step lines (set-up, evaluation and epoch lines only; metrics.jsonl unchanged)")
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
      ("save-predictions", po::value(&a.save_predictions)->default_value(0),
       "after training, write the first N validation inputs, outputs and targets to OUTPUT/predictions_*.npy")
      ("help,h", "show this help and exit")
      ("version", "show the version and exit");
  return opts;
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
    if (!storage.ok() || !storage.value()->local() || path.find_first_of("{*?[") != std::string::npos) continue;
    if (!fs::exists(path, ec)) return option + " " + path + ": no such database";
  }
  return "";
}

// The reference flags that parsing does not set by itself: --model-ema,
// and torchvision's spellings (--train-crop-size, --val-resize-size,
// --val-crop-size), which set ours; both given with different values is a
// usage error, as a negative --norm-weight-decay. "" when none.
std::string TakeReferenceFlags(const po::variables_map& vm, TrainOptions* a) {
  a->model_ema = vm.count("model-ema") > 0;
  if (vm.count("norm-weight-decay") && !(a->norm_wd >= 0))
    return "--norm-weight-decay " + (std::ostringstream() << a->norm_wd).str() + ": must be 0 or more";
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
  po::options_description opts = Options(&a);
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
  a.blurpool = vm.count("blurpool");
  a.no_val = vm.count("no-val");
  a.evaluate = vm.count("evaluate");
  if (a.evaluate && a.resume_path.empty()) return cli::UsageError("--evaluate needs --resume CHECKPOINT");
  if (a.evaluate ? a.val.empty() : (a.data.empty() || (a.val.empty() && !a.no_val) || a.output.empty()))
    return cli::UsageError(a.evaluate ? "--evaluate needs --val" : "--data, --val (or --no-val) and --output are required");
  a.in_ram = vm.count("in-ram");
  a.lock_in_ram = vm.count("lock-in-ram");
  a.tta_flip = vm.count("tta-flip") > 0;
  a.nesterov = vm.count("nesterov");
  a.no_bn_wd = vm.count("no-bn-wd");
  a.lr_scale = vm.count("lr-scale-batch");
  a.zero_init = vm.count("zero-init-residual");
  a.channels_last = vm.count("channels-last");
  a.quiet = vm.count("quiet") > 0;
  a.overwrite = vm.count("overwrite") > 0;
  if (std::string problem = TakeReferenceFlags(vm, &a); !problem.empty()) return cli::UsageError(problem);
  // Every option is checked before any work or output (docs/USAGE.md).
  if (std::string problem = UsageProblem(a, torch::cuda::is_available()); !problem.empty())
    return cli::UsageError(problem);
  if (std::string refused = RefusedOutput(a); !refused.empty()) return cli::UsageError(refused);
  // An --output (for --evaluate: the folder of its rows) that cannot be
  // made or written is the environment's failure, found before any work.
  const fs::path rows_dir = fs::path(a.evaluate ? EvaluationsPath(a) : a.output + "/metrics.jsonl").parent_path();
  if (std::string why = cli::CheckOutputFolder(a.evaluate && a.output.empty() ? "--resume" : "--output",
                                               rows_dir.empty() ? "." : rows_dir.string());
      !why.empty())
    return cli::FatalError(why);
  if (std::string why = MissingDatabase(a); !why.empty()) return cli::FatalError(why);
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
