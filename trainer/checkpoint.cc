#include "checkpoint.h"

#include "preemption.h"

#include <ATen/CPUGeneratorImpl.h>
#include <xxhash.h>

#include <mutex>
#include <sstream>
#include <stdexcept>

#include "imagepack/files.h"

namespace imagepack::trainer {
namespace {

void WriteInt(torch::serialize::OutputArchive& a, const char* key, int64_t v) { a.write(key, torch::tensor(v)); }
void WriteDouble(torch::serialize::OutputArchive& a, const char* key, double v) {
  a.write(key, torch::tensor(v, torch::kFloat64));
}
// Keys written by every version are required; newer ones optional (an
// undefined tensor when absent). A fresh tensor per key: reading into one
// that already holds another key's storage fails.
torch::Tensor Read(torch::serialize::InputArchive& a, const char* key, bool required = true) {
  torch::Tensor t;
  if (required) a.read(key, t);
  else if (!a.try_read(key, t)) return {};
  return t;
}

}  // namespace

Status SaveCheckpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer& opt,
                      const TrainState& s, torch::nn::Module* ema) {
  std::ostringstream bytes;
  try {
    torch::serialize::OutputArchive a, m, o, e;
    model.save(m);
    opt.save(o);
    a.write("model", m);
    a.write("optimizer", o);
    if (ema) {
      ema->save(e);
      a.write("model_ema", e);
      WriteInt(a, "ema_n_averaged", s.ema_n_averaged);
    }
    WriteInt(a, "epoch", s.epoch);
    WriteInt(a, "position", s.position);
    WriteInt(a, "global_step", s.global_step);
    WriteDouble(a, "best_acc1", s.best_acc1);
    WriteDouble(a, "scaler_scale", s.scaler_scale);
    WriteInt(a, "scaler_tracker", s.scaler_tracker);
    WriteInt(a, "seed", s.seed);
    WriteInt(a, "world_size", s.world_size);
    WriteInt(a, "batch_size", s.batch_size);
    WriteInt(a, "order", s.order);
    WriteInt(a, "order_world", s.order_world);
    WriteInt(a, "order_block_records", s.order_block_records);
    WriteInt(a, "order_window_blocks", s.order_window_blocks);
    WriteInt(a, "dataset", s.dataset);
    WriteInt(a, "size", s.size);
    a.write("mix", c10::IValue(s.mix));
    a.write("run", c10::IValue(s.run));
    a.write("rng", at::detail::getDefaultCPUGenerator().get_state());
    a.save_to(bytes);
  } catch (const std::exception& e) {
    return Status::IOError("cannot serialise the checkpoint for " + path + ": " + e.what());
  }
  const std::string data = bytes.str();
  SavingFile saving(TempPathFor(path));  // a second stop signal removes it
  return WriteFileAtomic(path, data.data(), data.size(), /*sync=*/true);
}

TrainState LoadCheckpoint(const std::string& path, torch::nn::Module& model, torch::optim::Optimizer* opt,
                          torch::nn::Module* ema, bool* ema_loaded) {
  torch::serialize::InputArchive a, m, o, e;
  if (ema_loaded) *ema_loaded = false;
  try {
    a.load_from(path);
    a.read("model", m);
    model.load(m);
    if (opt) {
      a.read("optimizer", o);
      opt->load(o);
    }
    if (ema && a.try_read("model_ema", e)) {
      ema->load(e);
      if (ema_loaded) *ema_loaded = true;
    }
  } catch (const std::exception& e) {
    std::string msg = e.what();
    auto nl = msg.find('\n');
    throw std::runtime_error("cannot load checkpoint " + path + ": " + msg.substr(0, nl));
  }
  TrainState s;
  s.epoch = Read(a, "epoch").item<int64_t>();
  s.best_acc1 = Read(a, "best_acc1").item<double>();
  s.scaler_scale = Read(a, "scaler_scale").item<double>();
  s.scaler_tracker = Read(a, "scaler_tracker").item<int64_t>();
  s.seed = Read(a, "seed").item<int64_t>();
  if (auto t = Read(a, "position", false); t.defined()) s.position = t.item<int64_t>();
  if (auto t = Read(a, "global_step", false); t.defined()) s.global_step = t.item<int64_t>();
  if (auto t = Read(a, "world_size", false); t.defined()) s.world_size = t.item<int64_t>();
  if (auto t = Read(a, "batch_size", false); t.defined()) s.batch_size = t.item<int64_t>();
  if (auto t = Read(a, "order", false); t.defined()) s.order = t.item<int64_t>();
  if (auto t = Read(a, "order_world", false); t.defined()) s.order_world = t.item<int64_t>();
  if (auto t = Read(a, "order_block_records", false); t.defined()) s.order_block_records = t.item<int64_t>();
  if (auto t = Read(a, "order_window_blocks", false); t.defined()) s.order_window_blocks = t.item<int64_t>();
  if (auto t = Read(a, "dataset", false); t.defined()) s.dataset = t.item<int64_t>();
  if (auto t = Read(a, "size", false); t.defined()) s.size = t.item<int64_t>();
  if (auto t = Read(a, "ema_n_averaged", false); t.defined()) s.ema_n_averaged = t.item<int64_t>();
  if (c10::IValue mix; a.try_read("mix", mix) && mix.isString()) s.mix = mix.toStringRef();
  if (c10::IValue run; a.try_read("run", run) && run.isString()) s.run = run.toStringRef();
  if (auto t = Read(a, "rng", false); t.defined()) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(t);
  }
  return s;
}

std::string ReadCheckpointRun(const std::string& path) {
  torch::serialize::InputArchive a;
  try {
    a.load_from(path);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    throw std::runtime_error("cannot load checkpoint " + path + ": " + msg.substr(0, msg.find('\n')));
  }
  c10::IValue run;
  if (a.try_read("run", run) && run.isString()) return run.toStringRef();
  return "";
}

uint64_t WeightsDigest(torch::nn::Module& model) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  auto add = [&](const torch::Tensor& t) {
    torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
    XXH3_64bits_update(st, c.data_ptr(), c.numel() * c.element_size());
  };
  for (const auto& p : model.parameters()) add(p);
  for (const auto& b : model.buffers()) add(b);
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

}  // namespace imagepack::trainer
