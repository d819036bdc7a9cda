#include "distributed.h"

#include <map>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "nccl_backend.h"
#include "slurm_env.h"

namespace imagepack::trainer {
namespace {

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

int EnvInt(const char* name, int fallback) {
  const char* v = Env(name);
  if (!v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0') throw std::runtime_error(std::string(name) + "='" + v + "' is not an integer");
  return static_cast<int>(x);
}

int UsableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace

DistEnv ReadDistEnv() {
  DistEnv e;
  int cpus_per_task = 0;
  if (Env("WORLD_SIZE")) {
    e.source = "torchrun";
    e.world_size = EnvInt("WORLD_SIZE", 1);
    e.rank = EnvInt("RANK", 0);
    e.local_rank = EnvInt("LOCAL_RANK", e.rank);
    e.local_world_size = EnvInt("LOCAL_WORLD_SIZE", e.world_size);
  } else if (Env("SLURM_NTASKS")) {
    e.source = "slurm";
    auto st = ReadSlurmStep(Env);
    if (!st.ok()) throw std::runtime_error(st.status().message());
    e.world_size = st->world_size;
    e.rank = st->rank;
    e.local_rank = st->local_rank;
    e.local_world_size = st->local_world_size;
    cpus_per_task = st->cpus_per_task;
    if (!st->master_addr.empty()) e.master_addr = st->master_addr;
    if (st->master_port > 0) e.master_port = st->master_port;
  } else if (Env("OMPI_COMM_WORLD_SIZE")) {
    e.source = "openmpi";
    e.world_size = EnvInt("OMPI_COMM_WORLD_SIZE", 1);
    e.rank = EnvInt("OMPI_COMM_WORLD_RANK", 0);
    e.local_rank = EnvInt("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    e.local_world_size = EnvInt("OMPI_COMM_WORLD_LOCAL_SIZE", e.world_size);
  }
  if (e.source != "slurm") {
    if (const char* a = Env("MASTER_ADDR")) e.master_addr = a;
    e.master_port = EnvInt("MASTER_PORT", e.master_port);
  }
  if (e.world_size < 1 || e.rank < 0 || e.rank >= e.world_size)
    throw std::runtime_error("rank " + std::to_string(e.rank) + " is not in [0, " + std::to_string(e.world_size) +
                             ") (from " + e.source + " variables)");
  if (e.world_size > 1 && e.source == "openmpi" && !Env("MASTER_ADDR"))
    throw std::runtime_error("MASTER_ADDR must be set for a " + e.source + " launch");
  e.local_world_size = std::max(1, e.local_world_size);
  e.threads = cpus_per_task > 0 ? cpus_per_task : std::max(1, UsableCpus() / e.local_world_size);
  return e;
}

ThreadSplit SplitThreads(int share, int torch_given, int loader_given, bool cuda) {
  share = std::max(1, share);
  ThreadSplit t;
  if (torch_given > 0 && loader_given > 0) {
    t.torch = torch_given;
    t.loader = loader_given;
  } else if (torch_given > 0) {
    t.torch = torch_given;
    t.loader = std::max(1, share - torch_given);
  } else if (loader_given > 0) {
    t.loader = loader_given;
    t.torch = std::max(1, share - loader_given);
  } else if (cuda) {
    t.torch = 1;
    t.loader = std::max(1, share - 1);
  } else {
    t.loader = std::max(1, share / 4);
    t.torch = std::max(1, share - t.loader);
  }
  return t;
}

std::string LocalAddressToward(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) return "";
  std::string local;
  for (addrinfo* a = found; a && local.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage me{};
    socklen_t len = sizeof(me);
    // A UDP connect only asks the kernel for the route and source address.
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len) == 0) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* bytes = me.ss_family == AF_INET6
                              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&me)->sin6_addr)
                              : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&me)->sin_addr);
      if (inet_ntop(me.ss_family, bytes, text, sizeof(text))) local = text;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return local;
}

Distributed::Distributed(const DistEnv& env, torch::Device device) : env_(env) {
  if (env_.world_size == 1) return;
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(env_.master_port);
  so.isServer = env_.rank == 0;
  so.numWorkers = static_cast<size_t>(env_.world_size);
  so.timeout = std::chrono::seconds(300);
  auto store = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, so);
  if (device.is_cuda()) {
    pg_ = MakeNcclGroup(store, env_.rank, env_.world_size);  // throws without NCCL support
    backend_ = "nccl";
    return;
  }
  auto opts = c10d::ProcessGroupGloo::Options::create();
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (ifname && *ifname) {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  } else if (env_.master_addr == "127.0.0.1" || env_.master_addr == "localhost") {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else if (const std::string local = LocalAddressToward(env_.master_addr, env_.master_port); !local.empty()) {
    // Not Gloo's default (this host name's address), which on a machine
    // with several networks, or in a network namespace, may not be the one
    // the other ranks can reach.
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(local));
  } else {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  opts->timeout = std::chrono::seconds(300);
  pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store, env_.rank, env_.world_size, opts);
  backend_ = "gloo";
}

Distributed::~Distributed() = default;

void Distributed::Broadcast(std::vector<torch::Tensor> tensors) {
  if (!pg_) return;
  for (auto& t : tensors) {
    std::vector<torch::Tensor> one{t};
    pg_->broadcast(one, c10d::BroadcastOptions{0})->wait();
  }
}

void Distributed::BroadcastCoalesced(const std::vector<torch::Tensor>& tensors) {
  if (!pg_) return;
  std::map<c10::ScalarType, std::vector<torch::Tensor>> by_type;
  for (const auto& t : tensors) by_type[t.scalar_type()].push_back(t);
  for (auto& [type, group] : by_type) {
    std::vector<torch::Tensor> flat_parts;
    for (const auto& t : group) flat_parts.push_back(t.detach().reshape({-1}));
    std::vector<torch::Tensor> one{torch::cat(flat_parts)};
    pg_->broadcast(one, c10d::BroadcastOptions{0})->wait();
    int64_t at = 0;
    torch::NoGradGuard ng;
    for (auto& t : group) {
      t.detach().view({-1}).copy_(one[0].narrow(0, at, t.numel()));
      at += t.numel();
    }
  }
}

void Distributed::AllReduceSum(torch::Tensor& t) {
  if (!pg_) return;
  AllReduceSumAsync(t)->wait();
}

c10::intrusive_ptr<c10d::Work> Distributed::AllReduceSumAsync(torch::Tensor& t) {
  std::vector<torch::Tensor> one{t};
  return pg_->allreduce(one);
}

void Distributed::Barrier() {
  if (pg_) pg_->barrier()->wait();
}

GradientReducer::GradientReducer(Distributed* dist, std::vector<torch::Tensor> params, size_t bucket_bytes)
    : dist_(dist), params_(std::move(params)) {
  if (dist_->world_size() == 1) return;
  where_.resize(params_.size());
  size_t bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const auto& p = params_[k];
    if (!p.requires_grad()) continue;
    const size_t pbytes = static_cast<size_t>(p.numel()) * p.element_size();
    if (buckets_.empty() || (bytes + pbytes > bucket_bytes && !buckets_.back().params.empty())) {
      buckets_.emplace_back();
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    const int64_t off = b.offsets.empty() ? 0 : b.offsets.back() + params_[b.params.back()].numel();
    where_[k] = {buckets_.size() - 1, b.params.size()};
    b.params.push_back(k);
    b.offsets.push_back(off);
    bytes += pbytes;
  }
  for (auto& b : buckets_) {
    const auto& last = params_[b.params.back()];
    b.flat = torch::zeros({b.offsets.back() + last.numel()}, last.options().requires_grad(false));
    b.filled.assign(b.params.size(), false);
  }
  for (size_t k = 0; k < params_.size(); ++k) {
    if (!params_[k].requires_grad()) continue;
    params_[k].register_hook([this, k](torch::Tensor grad) {
      OnGrad(k, grad);
      return grad;
    });
  }
}

void GradientReducer::PrepareForBackward() {
  for (auto& b : buckets_) {
    b.ready = 0;
    b.launched = false;
    b.work.reset();
    std::fill(b.filled.begin(), b.filled.end(), false);
  }
}

void GradientReducer::OnGrad(size_t k, const torch::Tensor& grad) {
  auto [bi, slot] = where_[k];
  Bucket& b = buckets_[bi];
  if (b.launched || b.filled[slot]) return;
  torch::NoGradGuard ng;
  b.flat.narrow(0, b.offsets[slot], grad.numel()).copy_(grad.reshape({-1}));
  b.filled[slot] = true;
  if (++b.ready == static_cast<int>(b.params.size())) Launch(b);
}

void GradientReducer::Launch(Bucket& b) {
  torch::NoGradGuard ng;
  for (size_t s = 0; s < b.params.size(); ++s)
    if (!b.filled[s]) b.flat.narrow(0, b.offsets[s], params_[b.params[s]].numel()).zero_();
  b.launched = true;
  b.work = dist_->AllReduceSumAsync(b.flat);
}

void GradientReducer::Finalize() {
  if (dist_->world_size() == 1) return;
  torch::NoGradGuard ng;
  for (auto& b : buckets_)
    if (!b.launched) Launch(b);
  const double inv = 1.0 / dist_->world_size();
  for (auto& b : buckets_) {
    b.work->wait();
    b.flat.mul_(inv);
    for (size_t s = 0; s < b.params.size(); ++s) {
      auto& p = params_[b.params[s]];
      auto avg = b.flat.narrow(0, b.offsets[s], p.numel()).view_as(p);
      if (p.grad().defined()) p.mutable_grad().copy_(avg);
      else p.mutable_grad() = avg.clone();
    }
  }
}

}  // namespace imagepack::trainer
