// What `train` checks before it does any work or writes anything: every
// option's value (a usage error, exit 2, names the option), and the rule
// that a run already in --output is never overwritten without being asked
// (docs/USAGE.md, "Nothing lost in silence"). No torch here but the CUDA
// question, which the caller answers.
#pragma once

#include <string>
#include <vector>

#include "trainer.h"

namespace imagepack::trainer {

// A comma-separated list as its parts ("a,,b": "a", "", "b").
std::vector<std::string> SplitCommas(const std::string& text);

// A --weights/--repeat/--choose list: one number per --data. Throws
// std::invalid_argument naming the option and the value when a part is not
// a number or the count is not `sources`.
std::vector<double> Shares(const std::string& option, const std::string& text, size_t sources);

// The first problem with the options as given, "" if none, after each
// value was checked against its row of the option table
// (OptionFlags::Problem): an unknown --arch, lists of the wrong length
// (--weights, --res-schedule),
// combinations that cannot work (--blurpool without a ResNet, --overwrite
// with --resume auto), --device cuda where `cuda_available` is false.
std::string UsageProblem(const TrainOptions& o, bool cuda_available);

// The files of a run in `output` (checkpoint.pt, model_best.pt,
// metrics.jsonl, evaluations.jsonl), by name; empty when it holds none (or
// does not exist).
std::vector<std::string> RunFilesIn(const std::string& output);

// The files a run writes in `output` that --overwrite removes before the
// new run starts: the run files and predictions_*.npy.
// Returns a message naming the first that could not be removed, "" if all
// went.
std::string RemoveRun(const std::string& output);

// The file --evaluate appends its rows to: OUTPUT/evaluations.jsonl, or,
// without --output, evaluations.jsonl beside the checkpoint evaluated.
std::string EvaluationsPath(const TrainOptions& o);

}  // namespace imagepack::trainer
