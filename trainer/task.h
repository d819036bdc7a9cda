// What a training run learns, as a piece the trainer composes with a model
// (models.h), a loader and an optimizer: how a loader batch becomes the
// model's input and target, the loss, and the figures per step and per
// evaluation. Classification, segmentation and restoration are one class
// each in task.cc; a new task is one more class and one name in MakeTask
// (docs/ARCHITECTURE.md).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "imagepack/loader.h"

namespace imagepack::trainer {

// One reported figure: its log label ("Error@1", "mIoU"), its metrics.jsonl
// key ("error1", "miou") and value. Figures with an empty label go to
// metrics.jsonl only.
struct Figure {
  std::string label, key;
  double value = 0;
};

struct TaskOptions {
  std::string name = "classification";  // classification | segmentation | restoration
  double label_smoothing = 0;            // classification
};

class Task {
 public:
  virtual ~Task() = default;
  virtual const char* name() const = 0;
  // The arch used when --arch is not given.
  virtual std::string default_arch() const = 0;
  // Model outputs per sample (or per pixel): classes, or image channels.
  virtual int64_t outputs() const = 0;
  // Whether the model's output has the input's height and width.
  virtual bool dense() const = 0;
  // A one-line description for the start of the log ("10 classes").
  virtual std::string Describe() const = 0;
  // Whether the input is normalised with a mean and std (else scaled).
  virtual bool normalised() const { return true; }
  // Whether the records' labels are the targets (the evaluation loader
  // then hands them out as the training data's classes).
  virtual bool labels_are_targets() const { return false; }
  // Checks that an evaluation dataset holds this task's targets as the
  // training data defines them, and prepares their mapping (a mask's
  // classes matched by name); returns a phrase for the log ("the same 10
  // classes"). Throws std::invalid_argument naming both datasets and the
  // first thing that differs.
  virtual std::string MatchEvalData(const DatasetMeta& train, const std::string& train_name, const DatasetMeta& eval,
                                    const std::string& eval_name) = 0;

  // uint8 images [n, C, S, S] already on the device, as float -> the
  // model's input (normalised with the dataset's mean/std, or scaled to
  // [-1, 1]).
  virtual torch::Tensor Input(const torch::Tensor& images) const = 0;
  // The batch's target on the device: the labels, a mask field, or a target
  // image field (scaled as the input); `eval`: a batch of the evaluation
  // data (mapped as MatchEvalData prepared). The view is valid for this call.
  virtual torch::Tensor Target(const BatchView& batch, int n, const torch::Device& device, bool eval = false) const = 0;
  virtual torch::Tensor Loss(const torch::Tensor& out, const torch::Tensor& target) const = 0;

  // Sums over a batch (float64 on the CPU) that add up over batches and
  // ranks; the figures follow from summed tallies.
  virtual std::vector<double> Tally(const torch::Tensor& out, const torch::Tensor& target,
                                    const torch::Tensor& input) const = 0;
  // Figures of one training step, from that batch's tally; shown as
  // "Label value (running mean)".
  virtual std::vector<Figure> StepFigures(const std::vector<double>& tally) const = 0;
  // Figures of an evaluation, from the tallies of the whole split.
  virtual std::vector<Figure> EvalFigures(const std::vector<double>& tally) const = 0;
  // The evaluation figure model_best.pt keeps the best of (higher is better).
  virtual double Score(const std::vector<Figure>& eval) const = 0;
};

// classification, segmentation or restoration: the names MakeTask takes.
bool KnownTask(const std::string& name);

// The task for `opts.name`, configured from the dataset's metadata (class
// count, the mask or target field) and normalisation. Throws
// std::invalid_argument naming what is missing (a segmentation dataset
// without a mask field, ...).
std::unique_ptr<Task> MakeTask(const TaskOptions& opts, const DatasetMeta& meta, int channels,
                               const torch::Device& device);

// SSIM (Wang et al., 2004) of each image of a against b, [N, C, H, W] on
// [0, 1]: Gaussian window 11 (sigma 1.5; smaller images: their size),
// valid positions only, C1 = 0.01^2, C2 = 0.03^2, averaged over positions
// and channels. Returns [N].
torch::Tensor Ssim(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace imagepack::trainer
