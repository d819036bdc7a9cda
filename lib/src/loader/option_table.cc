// The one declaration of each trainer and Loader option (option_table.h).
// A new option is a row here, the code that uses it, a test and a line of
// docs: `train --help`, `train_imagepack.py --help`, both trainers' range
// checks and help(imagepack.Loader) read the row.
#include "imagepack/option_table.h"

#include <cmath>
#include <sstream>

#include "imagepack/augment.h"

namespace imagepack {
namespace {

using K = OptionKind;

constexpr OptionRange None{};
constexpr OptionRange AtLeast(double lo, const char* says) { return {lo, HUGE_VAL, false, false, says}; }
constexpr OptionRange Within(double lo, double hi, const char* says) { return {lo, hi, false, false, says}; }
constexpr OptionRange Open(double lo, double hi, bool lo_open, bool hi_open, const char* says) {
  return {lo, hi, lo_open, hi_open, says};
}
constexpr unsigned kTrain = kTrainFlag, kBoth = kBothTrainers, kLoader = kLoaderKeyword;
constexpr unsigned kTrainLoader = kTrainFlag | kScriptFlag | kLoaderKeyword;
constexpr unsigned kAugment = kEverywhere | kInspectFlag;  // the training Loader's augmentations

// "ta_wide,ra,...,none": the policies augment.h parses, in its order.
const char* AutoAugmentChoices() {
  static const std::string names = [] {
    std::string s;
    for (auto k : {AutoAugmentKind::kTrivialAugmentWide, AutoAugmentKind::kRandAugment, AutoAugmentKind::kImageNet,
                   AutoAugmentKind::kCifar10, AutoAugmentKind::kSvhn, AutoAugmentKind::kAugMix,
                   AutoAugmentKind::kNone})
      s += (s.empty() ? "" : ",") + std::string(AutoAugmentName(k));
    return s;
  }();
  return names.c_str();
}

// The data, where it is read from and in what order.
std::vector<OptionSpec> DataRows() {
  return {
      {"data", 0, K::kList, "", "", None,
       "training database(s), comma-separated shards of one dataset; defines the classes, channels and "
       "normalisation. Given again: datasets mixed (--weights, --repeat or --choose)", kBoth},
      {"weights", 0, K::kText, "", "", None, "a mix: each --data's relative share of every epoch (0.7,0.3)", kBoth},
      {"repeat", 0, K::kText, "", "", None, "a mix: each --data's records this many times per epoch (3,1; 0: its "
       "--choose)", kBoth},
      {"choose", 0, K::kText, "", "", None, "a mix: each --data's samples per epoch (5000,0; 0: its --repeat, else "
       "once)", kBoth},
      {"classes", 0, K::kText, "", "", None, "the class list the model learns, one name per line: the labels of "
       "each --data matched to it by name", kBoth},
      {"val", 0, K::kText, "", "", None, "validation database(s), comma-separated shards; classes matched to "
       "--data's by name", kBoth},
      {"split", 0, K::kText, "", "", None, "another tool's files read in place (parquet, TFRecord, WebDataset): "
       "only this split's (train, validation, test, or NAME of NAME-00000-of-00004 files); needed when they hold "
       "several", kEverywhere},
      {"val-split", 0, K::kText, "", "", None, "--split for --val's files (e.g. validation)", kBoth},
      {"image-column", 0, K::kText, "", "", None, "parquet read in place: the image column (struct<bytes, path> or "
       "binary) where the metadata does not say", kEverywhere},
      {"label-column", 0, K::kText, "", "", None, "parquet read in place: the label column (integers) where the "
       "metadata does not say", kEverywhere},
      {"no-class", 0, K::kSwitch, "", "", None, "files read in place without labels: every record unlabelled, no "
       "class list (as pack_lmdb --no-class)", kLoader},
      {"in-ram", 0, K::kSwitch, "", "", None, "hold the databases in RAM, one shared copy per machine", kTrainLoader},
      {"lock-in-ram", 0, K::kSwitch, "", "", None, "with --in-ram: mlock the copy", kTrain | kLoader},
      {"cache-dir", 0, K::kText, "", "", None, "remote datasets (s3://, https://): keep fetched blocks in this local "
       "folder", kTrain},
      {"cache-limit", 0, K::kReal, "0", "", AtLeast(0, "0 (the default) or more"), "MB kept in --cache-dir (0: "
       "$IMAGEPACK_CACHE_LIMIT_MB, else 20480)", kTrain | kLoader, "", "cache_limit_mb"},
      {"order", 0, K::kChoice, "auto", "random,blocks,auto,sequential", None, "training order: random, blocks (for "
       "data not in the page cache), auto (random when in RAM, small or cached; blocks otherwise) or sequential",
       kTrainLoader},
      {"block-mb", 0, K::kReal, "4", "", Open(0, HUGE_VAL, true, false, "more than 0"),
       "--order blocks: block size in MB", kTrain | kLoader},
      {"window-blocks", 0, K::kInt, "16", "", AtLeast(1, "at least 1"), "--order blocks: blocks shuffled together",
       kTrain | kLoader},
      {"io-threads", 0, K::kInt, "-1", "", AtLeast(-1, "-1 (automatic) or more"),
       "reads in flight ahead of decoding (-1: 4 with blocks, none otherwise)", kTrain | kLoader},
      {"dct", 0, K::kChoice, "fast", "fast,accurate", None, "JPEG IDCT of the loaders: fast, or accurate (Pillow's "
       "pixels)", kTrain | kLoader},
  };
}

// The model and the task.
std::vector<OptionSpec> ModelRows() {
  return {
      {"task", 0, K::kChoice, "classification", "classification,segmentation,restoration", None,
       "classification, segmentation (a mask field) or restoration (a target image field)", kBoth},
      {"arch", 0, K::kText, "", "", None, "the model: resnet18, resnet50, small_cnn, mlp, fcn_small, unet_small "
       "(train_imagepack.py: also any torchvision classification model); default resnet18, dense tasks fcn_small",
       kBoth},
      {"zero-init-residual", 0, K::kSwitch, "", "", None, "ResNets: zero-init the last BN of each residual block",
       kBoth},
      {"blurpool", 0, K::kSwitch, "", "", None, "ResNets: a blur before each strided convolution (BlurPool)", kBoth},
  };
}

// The optimisation.
std::vector<OptionSpec> OptimiserRows() {
  return {
      {"epochs", 0, K::kInt, "90", "", AtLeast(1, "at least 1"), "epochs", kBoth},
      {"batch-size", 'b', K::kInt, "256", "", AtLeast(1, "at least 1"), "batch size per process", kBoth},
      {"lr", 0, K::kReal, "0.1", "", AtLeast(0, "0 or more"), "learning rate", kBoth},
      {"lr-scale-batch", 0, K::kSwitch, "", "", None, "scale the lr by global batch / 256", kBoth},
      {"schedule", 0, K::kChoice, "step", "step,cosine,onecycle,triangular", None,
       "step, cosine, onecycle or triangular (FFCV's: linear up to --lr-peak-epoch, linear down to 0)", kBoth},
      {"lr-peak-epoch", 0, K::kReal, "2", "", AtLeast(0, "0 or more"), "--schedule triangular: where the lr peaks",
       kBoth},
      {"step-size", 0, K::kInt, "30", "", AtLeast(1, "at least 1"), "--schedule step: epochs between decays", kBoth},
      {"warmup-epochs", 0, K::kReal, "0", "", AtLeast(0, "0 or more"), "linear warm-up from 0, per step "
       "(torchvision's, per epoch: --lr-warmup-epochs)", kBoth},
      {"momentum", 0, K::kReal, "0.9", "", Open(0, 1, false, true, "in [0, 1)"), "SGD momentum", kBoth},
      {"nesterov", 0, K::kSwitch, "", "", None, "Nesterov momentum", kBoth},
      {"wd", 0, K::kReal, "0.0001", "", AtLeast(0, "0 or more"), "weight decay", kBoth},
      {"no-bn-wd", 0, K::kSwitch, "", "", None, "no weight decay on BN and bias parameters", kBoth},
      {"label-smoothing", 0, K::kReal, "0", "", Open(0, 1, false, true, "in [0, 1)"), "label smoothing", kBoth},
  };
}

// The augmentations (the training Loader's).
std::vector<OptionSpec> AugmentRows() {
  return {
      {"auto-augment", 0, K::kChoice, "none", AutoAugmentChoices(), None,
       "per-sample policy after the crop: torchvision's TrivialAugmentWide (ta_wide), RandAugment (ra), "
       "AutoAugment's tables (imagenet, cifar10, svhn), AugMix (augmix) or none", kAugment},
      {"ra-magnitude", 0, K::kInt, "9", "", Within(0, 30, "0 to 30"), "--auto-augment ra: magnitude bin", kAugment},
      {"augmix-severity", 0, K::kInt, "3", "", Within(1, 10, "1 to 10"), "--auto-augment augmix: severity", kAugment},
      {"random-erase", 0, K::kReal, "0", "", Within(0, 1, "in [0, 1]"), "RandomErasing's probability per sample",
       kAugment},
      {"interpolation", 0, K::kChoice, "bilinear", "bilinear,bicubic", None, "the training crops' resampling", kAugment},
      {"hflip", 0, K::kReal, "0.5", "", Within(0, 1, "in [0, 1]"),
       "probability of a horizontal flip in the training transforms (timm's --hflip; 0 for digits and text)", kAugment},
  };
}

// torchvision's reference flags (docs/TRAINING.md).
std::vector<OptionSpec> ReferenceRows() {
  const char* sizes = "0 (the default) to 16384";
  return {
      {"mixup-alpha", 0, K::kReal, "0", "", AtLeast(0, "0 (off) or more"),
       "mixup: each batch blended with itself rolled by one, lambda ~ Beta(A, A), soft targets (0: off)", kBoth},
      {"cutmix-alpha", 0, K::kReal, "0", "", AtLeast(0, "0 (off) or more"),
       "cutmix: a box of the rolled batch pasted, side ratio sqrt(1 - lambda) (0: off); with --mixup-alpha one of "
       "the two per batch", kBoth},
      {"model-ema", 0, K::kSwitch, "", "", None, "keep an exponential moving average of the weights and buffers, "
       "evaluated beside the model", kBoth},
      {"model-ema-steps", 0, K::kInt, "32", "", AtLeast(1, "at least 1"), "--model-ema: update every N steps", kBoth},
      {"model-ema-decay", 0, K::kReal, "0.99998", "", Open(0, 1, true, true, "in (0, 1)"),
       "--model-ema: decay, adjusted as torchvision's by world * batch * steps / epochs", kBoth},
      {"lr-warmup-epochs", 0, K::kInt, "0", "", AtLeast(0, "0 (off) or more"),
       "torchvision's warm-up epochs before --schedule step or cosine; the lr then changes per epoch", kBoth},
      {"lr-warmup-method", 0, K::kChoice, "constant", "constant,linear", None,
       "linear (LinearLR from --lr-warmup-decay to 1) or constant (ConstantLR)", kBoth},
      {"lr-warmup-decay", 0, K::kReal, "0.01", "", Open(0, 1, true, false, "in (0, 1]"),
       "the warm-up's first factor of --lr", kBoth},
      {"norm-weight-decay", 0, K::kReal, "", "", AtLeast(0, "0 or more"),
       "weight decay of the normalisation layers' parameters (default: as the others)", kBoth},
      {"clip-grad-norm", 0, K::kReal, "0", "", AtLeast(0, "0 (off) or more"),
       "clip the gradients' global 2-norm to M (after unscaling under AMP; 0: off)", kBoth},
      {"recipe", 0, K::kText, "", "", None, "flags from trainer/recipes/NAME.flags or FILE, one a line; the command "
       "line's own win", kBoth},
      {"train-crop-size", 0, K::kInt, "0", "", Within(0, 16384, sizes), "torchvision's name for --size", kBoth},
      {"val-resize-size", 0, K::kInt, "0", "", Within(0, 16384, "0 (automatic) to 16384"),
       "torchvision's name for --val-resize", kBoth},
      {"val-crop-size", 0, K::kInt, "0", "", Within(0, 16384, "0 (--size) to 16384"),
       "torchvision's name for --val-size", kBoth},
  };
}

// Sizes and evaluation.
std::vector<OptionSpec> SizeRows() {
  const char* sizes = "0 (the default) to 16384";
  return {
      {"size", 0, K::kInt, "0", "", Within(0, 16384, sizes),
       "input size (0: 224; 28 for small_cnn and mlp; 96 for segmentation and restoration)", kBoth},
      {"res-schedule", 0, K::kText, "", "", None, "progressive resolution MIN,MAX,START_RAMP,END_RAMP[,STEP]: each "
       "epoch's training size as FFCV's (160,192,11,13), rounded to STEP (32)", kBoth},
      {"val-size", 0, K::kInt, "0", "", Within(0, 16384, "0 (--size) to 16384"), "evaluation size (0: --size)",
       kBoth},
      {"val-resize", 0, K::kInt, "0", "", Within(0, 16384, "0 (automatic) to 16384"),
       "evaluation: the shorter edge before the centre crop (0: --val-size / 0.875)", kBoth},
      {"tta-flip", 0, K::kSwitch, "", "", None, "evaluate on each image and its horizontal mirror, averaging the "
       "outputs", kBoth},
  };
}

// The run: output, resuming, devices, threads, logs.
std::vector<OptionSpec> RunRows() {
  return {
      {"output", 0, K::kText, "", "", None, "folder for checkpoint.pt and metrics.jsonl (one that holds a run: "
       "--resume auto continues it, --overwrite starts it again)", kBoth},
      {"resume", 0, K::kText, "", "", None, "checkpoint to continue ('auto': OUTPUT/checkpoint.pt if present); "
       "options not given are the checkpoint's", kBoth},
      {"overwrite", 0, K::kSwitch, "", "", None, "start again in an --output that holds a run: its checkpoints, "
       "metrics and predictions are removed (without it such an --output is refused)", kBoth},
      {"resume-other-commit", 0, K::kSwitch, "", "", None, "resume although an hf:// --data now reads another "
       "commit than the checkpoint's (its revision moved): the new files from the next epoch on (a checkpoint "
       "saved mid-epoch still needs its own)", kBoth},
      {"evaluate", 0, K::kSwitch, "", "", None, "only evaluate --val with the --resume checkpoint (--data not "
       "needed); rows go to evaluations.jsonl in --output, else beside the checkpoint", kBoth},
      {"no-val", 0, K::kSwitch, "", "", None, "skip the per-epoch evaluation; --val may be omitted", kBoth},
      {"amp", 0, K::kChoice, "", "auto,bf16,fp16", None,
       "autocast: fp16 with loss scaling on CUDA; bf16 on a CPU with native bf16 (AVX512-BF16, AMX), fp32 with a "
       "notice on others; --amp=bf16 forces bf16", kBoth, "auto"},
      {"device", 0, K::kChoice, "auto", "auto,cpu,cuda", None, "auto (CUDA where it is available, else the CPU), "
       "cpu or cuda", kBoth},
      {"channels-last", 0, K::kSwitch, "", "", None, "NHWC batches and a channels-last model", kTrain},
      {"seed", 0, K::kInt, "0", "", AtLeast(0, "0 or more"), "seed for init, shuffling and augmentation", kTrainLoader},
      {"threads", 0, K::kInt, "0", "", AtLeast(0, "0 (automatic) or more"),
       "torch's threads (0: this process's share of the cores, less the loader's)", kBoth},
      {"loader-threads", 0, K::kInt, "0", "", AtLeast(0, "0 (automatic) or more"),
       "decode threads (0: this process's share of the cores; a quarter of it for train_imagepack.py on a CPU)",
       kTrainLoader, "", "threads"},
      {"print-freq", 0, K::kInt, "10", "", AtLeast(1, "at least 1"), "log every N steps", kBoth},
      {"quiet", 'q', K::kSwitch, "", "", None, "no per-step lines (set-up, evaluation and epoch lines only; "
       "metrics.jsonl unchanged)", kBoth},
      {"max-steps", 0, K::kInt, "0", "", AtLeast(0, "0 (off) or more"), "stop each epoch after N steps (profiling)",
       kTrain},
      {"checkpoint-every", 0, K::kInt, "0", "", AtLeast(0, "0 (off) or more"),
       "also write checkpoint.pt every N steps, mid-epoch (0: at epoch ends only)", kBoth},
      {"checkpoint-minutes", 0, K::kReal, "0", "", AtLeast(0, "0 (off) or more"),
       "also write checkpoint.pt when M minutes passed since the last (0: off)", kTrain},
      {"stop-at-step", 0, K::kInt, "0", "", AtLeast(0, "0 (off) or more"),
       "write a checkpoint and exit 0 after global step K (cut a run; --resume auto continues)", kBoth},
      {"log-samples", 0, K::kText, "", "", None, "append each step's dataset indices to FILE.rankR (debugging, "
       "checking resume)", kTrain},
      {"save-predictions", 0, K::kInt, "0", "", AtLeast(0, "0 (off) or more"),
       "after training, write the first N validation inputs, outputs and targets to OUTPUT/predictions_*.npy",
       kTrain},
  };
}

// The Loader's own keywords.
std::vector<OptionSpec> LoaderRows() {
  return {
      {"eval-resize", 0, K::kInt, "0", "", None, "transform \"eval\": the shorter edge before the centre crop (0: "
       "size / 0.875)", kLoader},
      {"pad", 0, K::kInt, "4", "", None, "transform \"pad_crop\": pixels of padding on each side", kLoader},
      {"crop-size", 0, K::kInt, "0", "", None, "the crop before the resize to size (0: none)", kLoader},
      {"channels", 0, K::kInt, "0", "", None, "0 (the dataset's), 1 or 3", kLoader},
      {"layout", 0, K::kChoice, "NCHW", "NCHW,NHWC", None, "the images' axes", kLoader},
      {"read-chunk-mb", 0, K::kReal, "4", "", None, "order \"blocks\": MB a read", kLoader},
      {"drop-last", 0, K::kSwitch, "", "", None, "drop the last batch of an epoch when it is short", kLoader},
      {"prefetch", 0, K::kInt, "2", "", None, "batches made ahead", kLoader},
      {"on-corrupt", 0, K::kChoice, "fail", "fail,skip", None, "\"fail\" (raise CorruptionError naming the record) "
       "or \"skip\" (take the next readable record; counted in stats()[\"skipped\"])", kLoader},
      {"dct-scaling", 0, K::kSwitch, "True", "", None, "decode large JPEGs at 1/2, 1/4 or 1/8 scale when "
       "the crop allows", kLoader},
      {"vflip", 0, K::kSwitch, "", "", None, "training transforms also flip vertically (probability 1/2), the same "
       "way for every spatial field of a sample", kLoader},
      {"min-box-visible", 0, K::kReal, "0", "", None, "a box whose part inside the crop is below this fraction of "
       "its area is dropped (empty ones always are)", kLoader},
      {"ca-file", 0, K::kText, "", "", None, "https:// datasets: the CA bundle to trust", kLoader},
      {"ra-num-ops", 0, K::kInt, "2", "", None, "auto_augment \"ra\": operations per image", kLoader},
      {"ra-num-magnitude-bins", 0, K::kInt, "31", "", None, "auto_augment \"ra\": magnitude bins", kLoader},
      {"augmix-width", 0, K::kInt, "3", "", None, "auto_augment \"augmix\": chains mixed", kLoader},
      {"augmix-depth", 0, K::kInt, "-1", "", None, "auto_augment \"augmix\": operations a chain (< 1: 1 to 3)",
       kLoader},
      {"augmix-alpha", 0, K::kReal, "1", "", None, "auto_augment \"augmix\": the Dirichlet and Beta parameter",
       kLoader},
      {"random-erase-value", 0, K::kText, "0,0,0", "", None, "the erased box's grey levels (1 or 3, 0..255) or "
       "\"random\"; with mean= given, the mean's levels (torchvision erases with 0 after Normalize)", kLoader},
  };
}

// Every row, in the order --help lists them.
std::vector<OptionSpec> MakeTable() {
  std::vector<OptionSpec> table;
  for (auto rows : {DataRows, ModelRows, OptimiserRows, AugmentRows, ReferenceRows, SizeRows, RunRows, LoaderRows})
    for (OptionSpec& row : rows()) table.push_back(row);
  return table;
}

std::string Num(double v) {
  std::ostringstream s;
  s.precision(12);
  s << v;
  return s.str();
}

}  // namespace

const std::vector<OptionSpec>& OptionTable() {
  static const std::vector<OptionSpec> table = MakeTable();
  return table;
}

std::string OptionKeyword(const OptionSpec& spec) {
  if (*spec.keyword) return spec.keyword;
  std::string k = spec.name;
  for (char& c : k)
    if (c == '-') c = '_';
  return k;
}

const OptionSpec* FindOption(const std::string& name) {
  for (const OptionSpec& s : OptionTable())
    if (name == s.name || ((s.surfaces & kLoaderKeyword) && name == OptionKeyword(s))) return &s;
  return nullptr;
}

std::string OptionProblem(const OptionSpec& spec, double value) {
  const OptionRange& r = spec.range;
  if (!r.says) return "";
  const bool above = r.lo_open ? value > r.lo : value >= r.lo;
  const bool below = r.hi_open ? value < r.hi : value <= r.hi;
  if (above && below) return "";  // NaN fails both
  return "--" + std::string(spec.name) + " " + Num(value) + ": must be " + r.says;
}

std::vector<std::string> OptionChoices(const OptionSpec& spec) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = spec.choices;; ++p) {
    if (*p == ',' || *p == 0) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*p == 0) break;
    } else {
      cur += *p;
    }
  }
  return out;
}

std::string OptionChoiceProblem(const OptionSpec& spec, const std::string& value) {
  const std::vector<std::string> choices = OptionChoices(spec);
  std::string said;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i] == value) return "";
    said += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  return "--" + std::string(spec.name) + " " + value + ": must be " + said;
}

}  // namespace imagepack
