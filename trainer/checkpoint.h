// Checkpoints: the model, the optimizer and where training is (epoch,
// position in it, step, loss scaler, RNG), written atomically and durably.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "imagepack/status.h"

namespace imagepack::trainer {

struct TrainState {
  int64_t epoch = 0;        // the epoch in progress (position > 0) or next to run
  int64_t position = 0;     // loader position in that epoch (LoaderState); 0: its start
  int64_t global_step = 0;  // optimizer steps taken
  double best_acc1 = 0;
  double scaler_scale = 65536;
  int64_t scaler_tracker = 0;
  int64_t seed = 0;
  int64_t world_size = 1;   // of the run that saved it (information: any may resume)
  int64_t batch_size = 0;   // per rank, likewise
  // The training order (imagepack::Order) of the epoch in progress and the
  // world size it was made for (LoaderState); -1: saved before orders
  // existed (random).
  int64_t order = -1;
  int64_t order_world = 0;
  int64_t order_block_records = 0, order_window_blocks = 0;  // kBlocks: the epoch's geometry
  // The training output size of the epoch in progress (LoaderState::size;
  // --res-schedule), 0: the run's --size.
  int64_t size = 0;
  // The training mix's sources and shares (LoaderState::mix); "": one dataset.
  std::string mix;
  // DatasetIdentity of the training data (its bits); 0: saved before
  // identities were kept.
  int64_t dataset = 0;
  // --model-ema: the updates averaged so far (AveragedModel's n_averaged);
  // the average itself is the checkpoint's "model_ema".
  int64_t ema_n_averaged = 0;
  // What the checkpoint holds, as JSON (RunInfo, run_info.h): the model
  // (arch, task, input size, channels), what it was trained on (the
  // training data's metadata: classes, fields, statistics; the
  // normalisation used) and the options of the run. "": saved before
  // checkpoints described themselves.
  std::string run;
};

// Serialises everything in memory, then writes it with the library's
// WriteFileAtomic (a temporary beside `path`, fsync, rename, fsync of the
// folder): `path` holds the previous checkpoint or this one, never a part,
// also after a crash or SIGKILL. torch's CPU RNG state goes with it.
// `ema`: the --model-ema average, saved beside the model when given.
Status SaveCheckpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer& opt,
                      const TrainState& state, torch::nn::Module* ema = nullptr);

// Loads weights (and the optimizer's state when `opt` is given) and returns
// the state; restores torch's CPU RNG. Checkpoints from before mid-epoch
// positions existed load with position 0. Throws c10::Error or
// std::runtime_error on a damaged file, naming it.
// `ema`, when given, gets the checkpoint's average; *ema_loaded says
// whether it held one (else `ema` is left as it was).
TrainState LoadCheckpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer* opt,
                          torch::nn::Module* ema = nullptr, bool* ema_loaded = nullptr);

// The `run` description of the checkpoint at `path` ("" for one saved
// before checkpoints described themselves), without touching any model.
// Throws std::runtime_error naming the file when it cannot be read.
std::string ReadCheckpointRun(const std::string& path);

// XXH3-64 over the bytes of every parameter and buffer, in registration
// order: equal digests, bit-identical weights.
uint64_t WeightsDigest(torch::nn::Module& model);

}  // namespace imagepack::trainer
