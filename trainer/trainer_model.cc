// The Trainer's model, optimizer and its parameter groups, and the state
// of --resume.
#include "trainer.h"

#include <boost/algorithm/string.hpp>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "imagepack/classes.h"
#include "imagepack/files.h"
#include "imagepack/store.h"
#include "continue_command.h"
#include "models.h"
#include "nccl_backend.h"
#include "preemption.h"
#include "run_checks.h"
#include "param_groups.h"
#include "trainer_internal.h"

namespace fs = std::filesystem;

namespace imagepack::trainer {
using namespace internal;

void Trainer::SetUpModel() {
  ModelOptions mo;
  mo.arch = arch_;
  mo.num_classes = task_->outputs();
  mo.in_channels = channels_;
  mo.input_size = lo_.size;
  mo.zero_init_residual = o_.zero_init;
  mo.blurpool = o_.blurpool;
  if (o_.blurpool && arch_.rfind("resnet", 0) != 0) throw std::invalid_argument("--blurpool: for the ResNets");
  model_ = MakeModel(mo, &module_);
  run_.arch = arch_;
  run_.size = val_loader_ ? val_loader_->output_size() : lo_.size;
  module_->to(device_);
  if (o_.channels_last) {
    torch::NoGradGuard ng;
    for (auto& p : module_->parameters())
      if (p.dim() == 4) p.set_data(p.contiguous(torch::MemoryFormat::ChannelsLast));
  }
  params_ = module_->parameters();
  buffers_ = module_->buffers();
  SetUpEma(mo);
}

void Trainer::SetUpEma(const ModelOptions& mo) {
  mix_opts_.mixup_alpha = o_.mixup_alpha;
  mix_opts_.cutmix_alpha = o_.cutmix_alpha;
  if (!o_.model_ema) return;
  std::shared_ptr<torch::nn::Module> average;
  ema_model_ = MakeModel(mo, &average);
  average->to(device_);
  const double decay = AdjustedEmaDecay(o_.model_ema_decay, dist_->world_size(), o_.batch, o_.model_ema_steps,
                                        o_.epochs);
  ema_ = std::make_unique<ModelEma>(average, decay);
  ema_->Update(*module_);  // a copy (n_averaged 0) ...
  ema_->Reset();           // ... and the first step's update copies again
  Log("=> --model-ema: the average of the weights every " + std::to_string(o_.model_ema_steps) +
      " steps, decay " + std::to_string(decay) + " (--model-ema-decay " + std::to_string(o_.model_ema_decay) +
      " adjusted by world * batch * steps / epochs)");
}

void Trainer::SetUpOptimizer() {
  // SGD; groups by weight decay: --norm-weight-decay for the norm layers'
  // parameters, none on BN and bias parameters with --no-bn-wd.
  const std::vector<ParamGroup> by_decay = GroupByDecay(*module_, {o_.wd, o_.norm_wd, o_.no_bn_wd});
  const double global_batch = double(o_.batch) * dist_->world_size();
  schedule_.kind = o_.schedule;
  schedule_.base_lr = o_.lr_scale ? o_.lr * global_batch / 256.0 : o_.lr;
  schedule_.warmup_epochs = o_.warmup;
  schedule_.step_size = o_.step_size;
  schedule_.peak_epoch = o_.lr_peak_epoch;
  schedule_.lr_warmup_epochs = o_.lr_warmup_epochs;
  schedule_.lr_warmup_method = o_.lr_warmup_method;
  schedule_.lr_warmup_decay = o_.lr_warmup_decay;
  auto sgd = torch::optim::SGDOptions(schedule_.base_lr).momentum(o_.momentum).nesterov(o_.nesterov).weight_decay(o_.wd);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (const auto& g : by_decay) {
    auto options = sgd;
    options.weight_decay(g.weight_decay);
    groups.emplace_back(g.params, std::make_unique<torch::optim::SGDOptions>(options));
  }
  optimizer_ = std::make_unique<torch::optim::SGD>(groups, sgd);
  GradScaler::Options gso;
  gso.enabled = amp_ && device_.is_cuda();  // bf16 on CPU needs no scaling
  scaler_ = std::make_unique<GradScaler>(gso);
}

// A resume on another number of processes (elastic, docs/TRAINING.md) or
// with another batch per rank is allowed, but it is not the run continued
// as it ran: the global batch, the steps and the weights differ. Said in
// one line naming both, with what continues it as it ran.
void Trainer::WarnOfAnotherGlobalBatch() {
  const int64_t world = dist_->world_size(), batch = o_.batch;
  const int64_t was_world = state_.world_size, was_batch = state_.batch_size > 0 ? state_.batch_size : batch;
  if (was_world == world && was_batch == batch) return;
  auto n = [](int64_t v) { return std::to_string(v); };
  const int64_t was = was_world * was_batch, now = world * batch;
  std::string line = "=> warning: " + o_.resume_path + " was saved by " + n(was_world) + " process(es) x batch " +
                     n(was_batch) + " = global batch " + n(was) + "; this run has " + n(world) + " x " + n(batch) +
                     " = " + n(now) + ". ";
  if (was != now)
    line += "Each step now takes " + n(now) + " samples instead of " + n(was) +
            ": the steps per epoch and the learning rate per sample change" +
            (o_.lr_scale ? " (--lr-scale-batch scales the learning rate to the new global batch)" : "") +
            ", and the run ends with other weights than if continued as it ran";
  else
    line += "The same samples per step, summed over " + n(world) + " process(es) instead of " + n(was_world) +
            ": the weights differ from those of the run continued as it ran by rounding";
  if (state_.position > 0)
    line += "; the rest of epoch " + n(state_.epoch) + " goes to the " + n(world) + " process(es), every sample once";
  const std::string again = ShellWord(o_.program) + (was_batch != batch ? " --batch-size " + n(was_batch) : "") +
                            " --resume " + (o_.resume == "auto" ? "auto" : ShellWord(o_.resume_path)) +
                            " --output " + ShellWord(o_.output);
  line += ". To continue it as it ran: " +
          (was_world > 1 ? n(was_world) + " processes, e.g. scripts/launch.sh --nproc " + n(was_world) + " -- " + again
                         : "one process, " + again);
  Log(line);
}

void Trainer::Resume() {
  state_.seed = o_.seed;
  const std::string& resume = o_.resume_path;
  if (!resume.empty()) {
    // --evaluate needs the weights only.
    bool ema_loaded = false;
    state_ = LoadCheckpoint(resume, *module_, o_.evaluate ? nullptr : optimizer_.get(),
                            ema_ ? &ema_->module() : nullptr, &ema_loaded);
    if (ema_ && ema_loaded) ema_->set_n_averaged(state_.ema_n_averaged);
    if (ema_ && !ema_loaded) {  // --model-ema added on resume: the average starts from the weights
      ema_->Update(*module_);
      ema_->Reset();
    }
    CheckPinnedData(resume);
    // A mix's position is a place in the order of its sources and shares.
    if (train_loader_ && state_.position > 0) {
      LoaderState at;
      at.position = state_.position;
      at.mix = state_.mix;
      if (Status st = train_loader_->CheckState(at); !st.ok())
        throw std::runtime_error("checkpoint " + resume + " stopped in the middle of epoch " +
                                 std::to_string(state_.epoch) + " (position " + std::to_string(state_.position) +
                                 ") of another mix: " + st.message() +
                                 ". Resume with the --data and shares it was trained on, or start the new mix from "
                                 "the weights in a fresh --output");
    }
    // A position in an epoch is a position in one dataset's order.
    if (train_loader_ && state_.position > 0 && state_.dataset != 0 &&
        static_cast<uint64_t>(state_.dataset) != DatasetIdentity(train_loader_->meta()))
      throw std::runtime_error("checkpoint " + resume + " stopped in the middle of an epoch of another dataset (epoch " +
                               std::to_string(state_.epoch) + ", position " + std::to_string(state_.position) +
                               "); --data is not the dataset it was trained on: resume with that dataset, or start "
                               "the new one from the weights in a fresh --output");
    scaler_->Load(state_.scaler_scale, static_cast<int>(state_.scaler_tracker));
    module_->to(device_);
    if (ema_) ema_->module().to(device_);
    // --order auto resolves by what is cached now; the run keeps the order
    // it started with, so its epochs are those of the uninterrupted run.
    const Order saved = state_.order < 0 ? Order::kRandom : static_cast<Order>(state_.order);
    if (train_loader_ && mix_.empty() && lo_.order == Order::kAuto && lo_.shuffle && saved != train_loader_->order()) {
      lo_.order = saved;
      train_loader_ = Check(Loader::Open(lo_));
    }
    Log("=> resumed from " + resume + " (" + (saved_.arch.empty() ? "saved by an older version: options as given" : saved_.arch + ", " + saved_.task + ", " + std::to_string(saved_.size) + " px, trained on " + saved_.data) + ") at epoch " + std::to_string(state_.epoch) +
        (state_.position > 0 ? ", position " + std::to_string(state_.position) + " (saved by " +
                                   std::to_string(state_.world_size) + " process(es))"
                             : ""));
    if (!o_.evaluate) WarnOfAnotherGlobalBatch();
  }
  if (main_rank_ && !o_.output.empty()) {  // temporaries of checkpoints a killed run was writing
    RemoveStaleTempsFor(o_.output + "/checkpoint.pt");
    RemoveStaleTempsFor(o_.output + "/model_best.pt");
  }
}

}  // namespace imagepack::trainer
