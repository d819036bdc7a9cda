// The Trainer's evaluation and --save-predictions.
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
#include "models.h"
#include "nccl_backend.h"
#include "preemption.h"
#include "run_checks.h"
#include "trainer_internal.h"

namespace fs = std::filesystem;

namespace imagepack::trainer {
using namespace internal;

namespace {

// A uint8 array as a .npy file (format 1.0), written atomically.
void WriteNpy(const std::string& path, const torch::Tensor& t) {
  auto a = t.to(torch::kCPU).to(torch::kUInt8).contiguous();
  std::string shape;
  for (auto d : a.sizes()) shape += std::to_string(d) + ", ";
  std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + shape + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += char(header.size() & 0xff);
  bytes += char(header.size() >> 8);
  bytes += header;
  bytes.append(reinterpret_cast<const char*>(a.data_ptr<uint8_t>()), size_t(a.numel()));
  Status st = WriteFileAtomic(path, bytes.data(), bytes.size());
  if (!st.ok()) throw std::runtime_error(st.ToString());
}

}  // namespace

void Trainer::SavePredictions() {
  if (o_.save_predictions <= 0 || !main_rank_ || !val_loader_) return;
  module_->eval();
  torch::NoGradGuard ng;
  Loader& vl = *val_loader_;
  vl.StartEpoch(0);
  torch::Tensor y;
  const int n = std::min(NextBatch(vl, &y), o_.save_predictions);
  if (n == 0) return;
  auto images = torch::from_blob(host_batch_.data_ptr<uint8_t>(), {n, channels_, cur_size_, cur_size_}, torch::kUInt8);
  auto out = model_.forward(Input(n)).to(torch::kFloat32);
  const bool image_out = out.dim() == 4 && out.size(1) == channels_ && y.dim() == 4;
  auto to_u8 = [](const torch::Tensor& t) { return t.clamp(-1, 1).add(1).mul(127.5).round(); };
  WriteNpy(o_.output + "/predictions_input.npy", images);
  WriteNpy(o_.output + "/predictions_output.npy", image_out ? to_u8(out) : out.argmax(1));
  WriteNpy(o_.output + "/predictions_target.npy", image_out ? to_u8(y.narrow(0, 0, n)) : y.narrow(0, 0, n));
  Log("=> " + std::to_string(n) + " validation predictions in " + o_.output + "/predictions_*.npy");
}

double Trainer::Evaluate(int64_t epoch) {
  const double score = EvaluateModel(epoch, model_, *module_, false);
  if (ema_) {
    // Each rank's average holds its own BN statistics: rank 0's for all.
    std::vector<torch::Tensor> tensors = ema_->Tensors();
    torch::NoGradGuard ng;
    if (dist_->world_size() > 1) dist_->Broadcast(tensors);
    EvaluateModel(epoch, ema_model_, ema_->module(), true);
  }
  return score;
}

double Trainer::EvaluateModel(int64_t epoch, torch::nn::AnyModule& model, torch::nn::Module& module, bool ema) {
  module.eval();
  torch::NoGradGuard ng;
  Loader& vl = *val_loader_;
  vl.StartEpoch(0);
  double loss_sum = 0, total = 0;
  std::vector<double> tally;
  while (true) {
    torch::Tensor y;
    const int n = NextBatch(vl, &y);
    if (n == 0) break;
    torch::Tensor out, x;
    {
      AutocastScope ac(amp_, device_);
      x = Input(n);
      out = model.forward(x);
      // Test-time flip: the mean of the outputs for the image and its
      // mirror (a dense output is mirrored back first).
      if (o_.tta_flip) {
        auto mirrored = model.forward(x.flip({3}));
        out = (out + (task_->dense() ? mirrored.flip({3}) : mirrored)) / 2;
      }
    }
    out = out.to(torch::kFloat32);
    loss_sum += task_->Loss(out, y).item<double>() * n;
    total += n;
    const std::vector<double> t = task_->Tally(out, y, x);
    tally.resize(t.size(), 0.0);
    for (size_t k = 0; k < t.size(); ++k) tally[k] += t[k];
  }
  // Every validation sample is counted exactly once across ranks.
  tally.push_back(loss_sum);
  tally.push_back(total);
  auto t = torch::tensor(tally, torch::kFloat64);
  dist_->AllReduceSum(t);
  const double* sums = t.data_ptr<double>();
  tally.assign(sums, sums + t.numel());
  const double n = tally.back(), loss = tally[tally.size() - 2] / n;
  tally.resize(tally.size() - 2);
  const std::vector<Figure> figures = task_->EvalFigures(tally);
  std::string line = o_.evaluate ? " * " + o_.val + " (the checkpoint of epoch " + std::to_string(epoch) + ")"
                                 : " * Epoch " + std::to_string(epoch);
  if (ema) line += " EMA";
  nlohmann::json record = {{"type", ema ? "eval_ema" : "eval"}, {"epoch", epoch}, {"val", o_.val}};
  if (o_.evaluate) {
    record["checkpoint"] = o_.resume_path;
    record["global_step"] = state_.global_step;
  }
  char buf[160];
  for (const auto& f : figures) {
    std::snprintf(buf, sizeof buf, "  %s %.3f", f.label.c_str(), f.value);
    if (!f.label.empty()) line += buf;
    record[f.key] = f.value;
  }
  std::snprintf(buf, sizeof buf, "  Loss %.4f  (%lld samples)", loss, static_cast<long long>(n));
  Log(line + buf);
  record["loss"] = loss;
  record["samples"] = int64_t(n);
  Emit(record);
  return task_->Score(figures);
}

}  // namespace imagepack::trainer
