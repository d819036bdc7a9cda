// Data-parallel training over c10d: rendezvous from torchrun's (or Slurm's,
// or Open MPI's) environment, a Gloo (CPU) or NCCL (CUDA) process group,
// and DDP-style gradient averaging in ~25 MB buckets launched during
// backward as the buckets fill.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

namespace c10d {
class ProcessGroup;
class Work;
}  // namespace c10d

namespace imagepack::trainer {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;  // ranks on this machine
  int threads = 1;           // CPU threads per rank: the rank's CPUs, or this machine's shared by its ranks
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source = "none";  // which variables were used
};

// Reads, first found wins:
//  - torchrun (and scripts/launch.sh): RANK, WORLD_SIZE, LOCAL_RANK,
//    LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
//  - Slurm (a task started by srun): SLURM_PROCID, SLURM_NTASKS,
//    SLURM_LOCALID, the step's tasks on this node, SLURM_CPUS_PER_TASK;
//    MASTER_ADDR / MASTER_PORT if exported, else the step's first node and
//    a port from the job id (trainer/slurm_env.h);
//  - Open MPI: OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE,
//    with MASTER_ADDR (and MASTER_PORT) exported;
// none: a single process. threads: SLURM_CPUS_PER_TASK when set, else the
// CPUs this process may run on (its affinity mask) divided by the local
// ranks. Throws std::runtime_error on missing or inconsistent values.
DistEnv ReadDistEnv();

// A rank's threads: torch's (its OpenMP team, the model's compute) and the
// loader's (decoding), from the rank's share of the CPUs. Those given
// (--threads, --loader-threads; 0: not given) are kept. Otherwise the two
// add up to the share, so that the OpenMP team never waits on a thread the
// loader keeps busy (an OpenMP barrier stalls while any of its threads is
// off its core: one process 5x slower on a loaded machine): on the CPU the
// loader takes a quarter (at least 1) and torch the rest; on CUDA torch
// takes 1 and the loader the rest. A share of 1 gives 1 and 1.
struct ThreadSplit {
  int torch = 1, loader = 1;
};
ThreadSplit SplitThreads(int share, int torch_given, int loader_given, bool cuda);

// The address of this machine's interface that the kernel would use to
// reach `host` (resolved; no packet is sent), or "" if it has no route:
// the address Gloo binds to when the master is not on the loopback, so
// the ranks meet on the network that leads to the master.
std::string LocalAddressToward(const std::string& host, int port);

class Distributed {
 public:
  // world_size 1: no process group, every collective is a no-op.
  Distributed(const DistEnv& env, torch::Device device);
  ~Distributed();
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  bool is_main() const { return env_.rank == 0; }
  std::string backend() const { return backend_; }

  void Broadcast(std::vector<torch::Tensor> tensors);  // from rank 0, in place
  // The same in one collective per dtype (the tensors flattened into one):
  // for many small tensors each step, such as BN statistics.
  void BroadcastCoalesced(const std::vector<torch::Tensor>& tensors);
  void AllReduceSum(torch::Tensor& t);                 // in place, blocking
  c10::intrusive_ptr<c10d::Work> AllReduceSumAsync(torch::Tensor& t);
  void Barrier();

 private:
  DistEnv env_;
  std::string backend_ = "none";
  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
};

// Averages gradients across ranks the way DDP does: parameters are grouped
// into buckets of ~bucket_bytes in reverse registration order (roughly the
// order backward produces them); a hook on each parameter copies its
// gradient into its bucket, and a full bucket's all-reduce starts at once,
// overlapping communication with the rest of backward. Finalize() launches
// what is left (parameters unused this step count as zero), waits, and
// writes the averages into .grad.
class GradientReducer {
 public:
  GradientReducer(Distributed* dist, std::vector<torch::Tensor> params, size_t bucket_bytes = 25u << 20);
  void PrepareForBackward();
  void Finalize();
  size_t bucket_count() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<size_t> params;   // indices into params_
    std::vector<int64_t> offsets; // element offset of each param in flat
    torch::Tensor flat;
    int ready = 0;
    bool launched = false;
    std::vector<bool> filled;
    c10::intrusive_ptr<c10d::Work> work;
  };
  void OnGrad(size_t param, const torch::Tensor& grad);
  void Launch(Bucket& b);

  Distributed* dist_;
  std::vector<torch::Tensor> params_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> where_;  // param -> (bucket, slot)
};

}  // namespace imagepack::trainer
