// The Trainer's loop: epochs, steps, checkpoints and stops.
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

void Trainer::Log(const std::string& line) {
  if (main_rank_) std::cout << line << std::endl;
}

void Trainer::Emit(const nlohmann::json& record) {
  if (main_rank_) metrics_ << record.dump() << std::endl;
}

void Trainer::PrintDigest() {
  if (!main_rank_) return;
  std::printf("final weights digest %016llx\n", static_cast<unsigned long long>(WeightsDigest(*module_)));
  if (ema_)
    std::printf("final EMA weights digest %016llx\n", static_cast<unsigned long long>(WeightsDigest(ema_->module())));
  std::fflush(stdout);
}

torch::Tensor Trainer::Input(int n) {
  const int64_t s = cur_size_, C = channels_;
  auto x = torch::from_blob(host_batch_.data_ptr<uint8_t>(),
                            o_.channels_last ? torch::IntArrayRef{n, s, s, C} : torch::IntArrayRef{n, C, s, s},
                            torch::kUInt8);
  if (o_.channels_last) x = x.permute({0, 3, 1, 2});  // a channels-last view of NCHW
  x = x.to(device_, /*non_blocking=*/device_.is_cuda()).to(torch::kFloat32);
  return task_->Input(x);
}

int Trainer::NextBatch(Loader& loader, torch::Tensor* target) {
  const BatchView v = Check(loader.NextView());
  if (v.count == 0) return 0;
  cur_size_ = loader.output_size();  // the epoch's (--res-schedule), or the validation size
  const size_t sample_bytes = size_t(cur_size_) * cur_size_ * channels_;
  std::memcpy(host_batch_.data_ptr<uint8_t>(), v.images, size_t(v.count) * sample_bytes);
  std::memcpy(host_labels_.data(), v.labels, size_t(v.count) * sizeof(int64_t));
  std::memcpy(host_indices_.data(), v.indices, size_t(v.count) * sizeof(int64_t));
  *target = task_->Target(v, v.count, device_, &loader == val_loader_.get());
  return v.count;
}

int Trainer::Run() {
  if (o_.evaluate) {
    Evaluate(state_.epoch);
    return 0;
  }
  const int64_t world = dist_->world_size();
  // Steps in a whole epoch at this world size: the schedule's unit.
  steps_per_epoch_ = ((train_loader_->epoch_length() + world - 1) / world + o_.batch - 1) / o_.batch;
  global_step_ = state_.global_step > 0 ? state_.global_step : state_.epoch * steps_per_epoch_;
  last_checkpoint_ = Clock::now();
  for (int64_t epoch = state_.epoch; epoch < o_.epochs; ++epoch) {
    const EpochEnd end = TrainEpoch(epoch);
    if (end != EpochEnd::kCompleted) {
      PrintDigest();
      return end == EpochEnd::kPreempted ? kExitPreempted : end == EpochEnd::kInterrupted ? kExitInterrupted : 0;
    }
    const double acc1 = o_.no_val ? 0.0 : Evaluate(epoch);
    const bool best = acc1 > state_.best_acc1;
    state_.best_acc1 = std::max(state_.best_acc1, acc1);
    state_.order = static_cast<int64_t>(train_loader_->order());  // the next epoch's
    state_.order_world = state_.order_block_records = state_.order_window_blocks = 0;
    state_.size = 0;
    state_.mix = train_loader_->state().mix;
    Checkpoint(epoch + 1, 0);
    if (main_rank_ && best) {
      Status st = SaveCheckpoint(o_.output + "/model_best.pt", *module_, *optimizer_, state_,
                                 ema_ ? &ema_->module() : nullptr);
      if (!st.ok()) throw std::runtime_error(st.ToString());
    }
  }
  PrintDigest();
  SavePredictions();
  return 0;
}

Trainer::StepResult Trainer::Step(int n, const torch::Tensor& y, double lr, int64_t epoch, int64_t step) {
  for (auto& g : optimizer_->param_groups()) static_cast<torch::optim::SGDOptions&>(g.options()).lr(lr);
  auto x = Input(n);
  // --mixup-alpha/--cutmix-alpha: the batch mixed with itself rolled by
  // one, soft targets; the draw is a function of (seed, epoch, step, rank).
  torch::Tensor soft;
  if (mix_opts_.enabled()) {
    const MixDraw d = DrawMix(mix_opts_, static_cast<uint64_t>(o_.seed), epoch, step, dist_->rank(), x.size(2),
                              x.size(3));
    soft = ApplyMix(d, x, y, task_->outputs());
  }
  // BN running statistics: broadcast from rank 0 before every step (what
  // torch's DDP does with broadcast_buffers=True), so all ranks train and
  // evaluate with rank 0's.
  if (dist_->world_size() > 1) dist_->BroadcastCoalesced(buffers_);
  torch::Tensor out;
  {
    AutocastScope ac(amp_, device_);
    out = model_.forward(x);
  }
  out = out.to(torch::kFloat32);
  auto loss = soft.defined() ? SoftTargetLoss(out, soft, o_.label_smoothing) : task_->Loss(out, y);
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();  // zero_grad that frees
  reducer_->PrepareForBackward();
  scaler_->Scale(loss).backward();
  reducer_->Finalize();
  // --clip-grad-norm: on the summed gradients, after unscaling (AMP).
  if (o_.clip_grad_norm > 0) {
    scaler_->Unscale(params_);
    ClipGradNorm(params_, o_.clip_grad_norm);
  }
  scaler_->Step(*optimizer_, params_);
  ++global_step_;
  return {loss, out, x};
}

// torchvision's rule: an update at every --model-ema-steps-th step of an
// epoch (counted from its first), and during the lr warm-up n_averaged
// back to 0, so that the average copies the weights until it ends.
void Trainer::UpdateEma(int64_t epoch, int64_t step) {
  if (!ema_ || step % o_.model_ema_steps != 0) return;
  ema_->Update(*module_);
  if (epoch < o_.lr_warmup_epochs) ema_->Reset();
}

// After a step: a checkpoint when one is due (every N steps or minutes, or
// before stopping); true, with *end set, when the run stops here (a signal,
// or --stop-at-step). Checkpoint and stop decisions are taken together: a
// signal may reach one rank, and the clock differs between hosts.
bool Trainer::CheckpointOrStop(Loader& tl, int64_t epoch, EpochEnd* end) {
  const double minutes = Seconds(last_checkpoint_, Clock::now()) / 60;
  const int signal = StopSignal();
  auto flags = torch::tensor({double(signal != 0 && signal != SIGINT), double(o_.stop_at_step > 0 && global_step_ >= o_.stop_at_step),
                              double((o_.checkpoint_every > 0 && global_step_ % o_.checkpoint_every == 0) ||
                                     (o_.checkpoint_minutes > 0 && minutes >= o_.checkpoint_minutes)),
                              double(signal == SIGINT)},
                             torch::kFloat64);
  dist_->AllReduceSum(flags);
  // Ctrl-C on any rank stops them all (130); else SIGTERM/SIGUSR1 (75).
  const bool interrupted = flags[3].item<double>() > 0;
  const bool preempted = interrupted || flags[0].item<double>() > 0, stop = flags[1].item<double>() > 0;
  if (!preempted && !stop && flags[2].item<double>() <= 0) return false;
  const LoaderState ls = tl.state();
  const int64_t position = ls.position;
  state_.order = static_cast<int64_t>(ls.order);
  state_.order_world = ls.world;
  state_.order_block_records = ls.block_records;
  state_.order_window_blocks = ls.window_blocks;
  state_.size = ls.size;
  state_.mix = ls.mix;
  Checkpoint(epoch, position);
  if (!preempted && !stop) return false;
  const std::string where = "checkpoint at epoch " + std::to_string(epoch) + ", position " +
                            std::to_string(position) + ", step " + std::to_string(global_step_) + " in " + o_.output +
                            "/checkpoint.pt";
  if (interrupted) {
    // The command that continues the same run: its launcher and process
    // count too (on another number of processes the global batch, and so
    // the weights, would differ).
    if (main_rank_) {
      const ContinueCommand c = ContinueRunCommand(ReadLaunchInfo(env_.source, env_.world_size, env_.local_world_size),
                                                   ShellWord(o_.program), o_.output);
      const std::string message =  // one write: other ranks' lines may share the terminal
          "train: interrupted (Ctrl-C): " + where + ". Continue the run (" + std::to_string(env_.world_size) +
          " process(es), global batch " + std::to_string(int64_t(o_.batch) * env_.world_size) +
          "; options not given are the checkpoint's run's) with:\n  " + c.command + "\n" +
          (c.note.empty() ? "" : "  (" + c.note + ")\n");
      std::cerr << message << std::flush;
    }
    *end = EpochEnd::kInterrupted;
    return true;
  }
  Log("=> " + std::string(preempted ? "stop requested by a signal" : "--stop-at-step reached") + ": " + where);
  *end = preempted ? EpochEnd::kPreempted : EpochEnd::kStopped;
  return true;
}

void Trainer::LogStep(const StepLog& at, const std::vector<Figure>& now, const EpochMeters& m) {
  char buf[320];
  std::snprintf(buf, sizeof buf, "Epoch: [%lld][%lld/%lld]  Time %.3f (%.3f)  Data %.1f (%.1f)  Loss %.4f (%.4f)",
                static_cast<long long>(at.epoch), static_cast<long long>(at.step),
                static_cast<long long>(steps_per_epoch_), m.batch_time.val, m.batch_time.avg(), m.data_rate.val,
                m.data_rate.avg(), m.losses.val, m.losses.avg());
  std::string line = buf;
  nlohmann::json record = {{"type", "train"}, {"epoch", at.epoch}, {"step", at.step}, {"global_step", global_step_},
                           {"loss", m.losses.val}, {"loss_avg", m.losses.avg()}, {"lr", at.lr},
                           {"images_per_s", m.data_rate.val}, {"step_seconds", m.batch_time.val}};
  for (size_t f = 0; f < now.size(); ++f) {
    std::snprintf(buf, sizeof buf, "  %s %.3f (%.3f)", now[f].label.c_str(), m.figures[f].val, m.figures[f].avg());
    if (!now[f].label.empty()) line += buf;
    record[now[f].key] = m.figures[f].val;
  }
  std::snprintf(buf, sizeof buf, "  LR %.5f", at.lr);
  if (!o_.quiet) Log(line + buf);
  Emit(record);
}

Trainer::EpochEnd Trainer::TrainEpoch(int64_t epoch) {
  module_->train();
  Loader& tl = *train_loader_;
  const int64_t world = dist_->world_size();
  const bool resumed = epoch == state_.epoch && state_.position > 0;
  const int64_t start = resumed ? state_.position : 0;
  // The epoch's size (--res-schedule); a restored epoch keeps its own.
  const int planned = has_res_ ? res_.At(epoch) : lo_.size;
  Check(tl.SetOutputSize(planned));
  LoaderState from{epoch, start};
  if (resumed && state_.order >= 0) {
    from.order = static_cast<Order>(state_.order);
    from.world = static_cast<int>(state_.order_world);
    from.block_records = state_.order_block_records;
    from.window_blocks = state_.order_window_blocks;
  }
  if (resumed) {
    from.size = static_cast<int>(state_.size);
    from.mix = state_.mix;
  }
  tl.Restore(from);
  if (has_res_ && (epoch == state_.epoch || res_.At(epoch - 1) != tl.output_size()))
    Log("=> epoch " + std::to_string(epoch) + ": training at " + std::to_string(tl.output_size()) + " px");
  // Exact when the world and batch sizes are those that saved the state;
  // otherwise the nearest step (the schedule only needs progress).
  const int64_t first_step = start / (int64_t(o_.batch) * world);
  const int64_t steps = tl.batches_per_epoch();
  if (start > 0)
    Log("=> epoch " + std::to_string(epoch) + " continues at position " + std::to_string(start) + " of " +
        std::to_string(tl.dataset_size()) + ": " + std::to_string(steps) + " step(s) left");
  EpochMeters m;
  double wait_s = 0, compute_s = 0;
  auto t_end = Clock::now();
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t step = first_step + i;
    if (o_.max_steps > 0 && i >= o_.max_steps) break;
    const auto t0 = Clock::now();
    torch::Tensor y;
    const int n = NextBatch(tl, &y);
    if (n == 0) break;
    const auto t1 = Clock::now();
    const double lr = LearningRate(schedule_, epoch + double(step) / steps_per_epoch_, o_.epochs);
    auto [loss, out, x] = Step(n, y, lr, epoch, step);
    UpdateEma(epoch, step);
    if (sample_log_.is_open()) {
      sample_log_ << epoch << ' ' << step;
      for (int k = 0; k < n; ++k) sample_log_ << ' ' << host_indices_[size_t(k)];
      sample_log_ << '\n' << std::flush;
    }
    if (EpochEnd end; CheckpointOrStop(tl, epoch, &end)) return end;
    const auto t2 = Clock::now();
    wait_s += Seconds(t0, t1);
    compute_s += Seconds(t1, t2);
    const std::vector<Figure> now = task_->StepFigures(task_->Tally(out.detach(), y, x.detach()));
    m.figures.resize(now.size());
    for (size_t f = 0; f < now.size(); ++f) m.figures[f].Add(now[f].value, n);
    m.losses.Add(loss.item<double>(), n);
    const double step_s = Seconds(t_end, t2);
    m.batch_time.Add(step_s);
    m.data_rate.Add(n * world / std::max(step_s, 1e-9));
    t_end = t2;
    if (step % o_.print_freq == 0 || i + 1 == steps) LogStep({epoch, step, steps, lr}, now, m);
  }
  const double frac = wait_s / std::max(1e-9, wait_s + compute_s);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "Epoch %lld: %d px, waited for data %.1f s, computed %.1f s: %s (%.0f%% of step time waiting)",
                static_cast<long long>(epoch), tl.output_size(), wait_s, compute_s,
                frac > 0.1 ? "INPUT-BOUND" : "compute-bound", 100 * frac);
  // Each source's samples in the epoch (a mix's exact counts).
  nlohmann::json sources = nlohmann::json::object();
  std::string shares;
  for (const auto& s : tl.sources()) {
    sources[s.name] = s.samples;
    shares += (shares.empty() ? "; samples: " : ", ") + s.name + " " + std::to_string(s.samples);
  }
  Log(buf + (mix_.empty() ? std::string() : shares));
  Emit({{"type", "epoch"}, {"epoch", epoch}, {"wait_seconds", wait_s}, {"compute_seconds", compute_s},
        {"images_per_s", m.data_rate.avg()}, {"skipped_steps", scaler_->skipped_steps()}, {"res", tl.output_size()},
        {"sources", sources}});
  return EpochEnd::kCompleted;
}

void Trainer::Checkpoint(int64_t epoch, int64_t position) {
  state_.epoch = epoch;
  state_.position = position;
  state_.global_step = global_step_;
  state_.scaler_scale = scaler_->scale();
  state_.scaler_tracker = scaler_->growth_tracker();
  state_.world_size = dist_->world_size();
  state_.batch_size = o_.batch;
  state_.dataset = static_cast<int64_t>(DatasetIdentity(train_loader_->meta()));
  state_.run = run_.ToJson();
  state_.ema_n_averaged = ema_ ? ema_->n_averaged() : 0;
  if (main_rank_) {
    const std::string path = o_.output + "/checkpoint.pt";
    const auto t0 = Clock::now();
    Status st = SaveCheckpoint(path, *module_, *optimizer_, state_, ema_ ? &ema_->module() : nullptr);
    if (!st.ok()) throw std::runtime_error(st.ToString());
    Emit({{"type", "checkpoint"}, {"epoch", epoch}, {"position", position}, {"global_step", global_step_},
          {"seconds", Seconds(t0, Clock::now())}, {"bytes", static_cast<int64_t>(fs::file_size(path))}});
  }
  dist_->Barrier();
  last_checkpoint_ = Clock::now();
}

}  // namespace imagepack::trainer
