// What a checkpoint holds, so that --resume, --resume auto and --evaluate
// need nothing repeated: the model (arch, task, input size, channels), the
// normalisation it was trained with, the training data's metadata (its
// classes, fields and statistics) and the options of the run. Saved as
// JSON in every checkpoint (TrainState::run). No torch here.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace imagepack::trainer {

// Command-line options as given: (name without dashes, values); a flag has
// no value.
using GivenOptions = std::vector<std::pair<std::string, std::vector<std::string>>>;

struct RunInfo {
  std::string arch, task;
  int size = 0, channels = 0;
  // The normalisation of the model's input, per channel on [0, 1], and
  // where it came from ("the training data's statistics", "none in the
  // training data: 0.5 / 0.25"); empty for a task that scales instead.
  std::vector<double> mean, std;
  std::string normalisation;
  std::string data;        // --data of the run that trained it
  // Its sources that name a revision (hf://), as read: at their commit
  // (imagepack::PinnedUrl); a resume that reads other commits is refused
  // unless --resume-other-commit.
  std::vector<std::string> pinned;
  std::string train_meta;  // the training data's metadata JSON (DatasetMeta::ToJson)
  GivenOptions options;    // the run's options (GivenOptions), resume-specific ones left out

  std::string ToJson() const;
  // Throws std::runtime_error naming `where` when `text` is not a run
  // description.
  static RunInfo FromJson(const std::string& text, const std::string& where);
};

// Options that belong to one invocation, never taken from a checkpoint.
bool OptionIsPerInvocation(const std::string& name);

// The options of a resumed run: every option `given` now, then each option
// of the checkpoint's run (`saved`) not given now. An option given with
// another value than the checkpoint's is kept and noted in *notes
// ("--lr 0.05 (the checkpoint's run: 0.1)"), except --arch and --task,
// which define the saved model: a different value throws
// std::runtime_error naming the option, both values and `checkpoint`.
GivenOptions MergeWithCheckpoint(const GivenOptions& given, const GivenOptions& saved, const std::string& checkpoint,
                                 std::vector<std::string>* notes);

// `opts` as command-line words ("--name", values...), after `program`.
std::vector<std::string> ToArgs(const std::string& program, const GivenOptions& opts);

}  // namespace imagepack::trainer
