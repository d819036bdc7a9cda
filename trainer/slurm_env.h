// What Slurm tells a task of a job step (srun) about its place in the step,
// read from the environment: rank, world and local sizes, and where rank 0
// lives, so the trainer's rendezvous needs nothing exported by the job
// script. No torch here: the parsers are tested on their own
// (tests/trainer/slurm_env_test.cc).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "imagepack/status.h"

namespace imagepack::trainer {

// Budgets for a node list: its length in bytes and how many names it may
// expand to. A list past either is refused, not truncated.
inline constexpr size_t kMaxNodeListBytes = 1 << 16;
inline constexpr size_t kMaxNodeListHosts = 1 << 20;

// Expands a Slurm host list into its names, in Slurm's order:
//   "a,b" -> a b;  "n[1,3-5]" -> n1 n3 n4 n5;  "gpu-01" -> gpu-01;
//   "rack1-n[01-04]" -> rack1-n01 .. rack1-n04 (a range's numbers are
//   zero-padded to the width of its first bound, as Slurm writes them);
//   "r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2.
// Errors (InvalidArgument) quote the list and name the byte offset; a list
// naming more than `max_hosts` hosts is refused (the fuzz target passes a
// smaller budget than Slurm's own: the same logic, cheaper inputs).
Result<std::vector<std::string>> ExpandNodeList(std::string_view list, size_t max_hosts = kMaxNodeListHosts);

// The first name of a host list, after checking the whole list's syntax;
// the rest is not expanded.
Result<std::string> FirstNode(std::string_view list);

// How many tasks run on node `node` (0-based, Slurm's SLURM_NODEID) from a
// tasks-per-node string as in SLURM_STEP_TASKS_PER_NODE: "2(x3),1" means
// 2 tasks on each of the first 3 nodes, then 1.
Result<int> TasksOnNode(std::string_view tasks_per_node, int node);

// The rendezvous port a Slurm job uses when its script exports no
// MASTER_PORT: one per job id, so jobs sharing a first node do not meet.
inline int PortForSlurmJob(long long job_id) { return 20000 + static_cast<int>(job_id % 20000); }

struct SlurmStep {
  int rank = 0;              // SLURM_PROCID
  int world_size = 1;        // SLURM_NTASKS
  int local_rank = 0;        // SLURM_LOCALID
  int local_world_size = 1;  // tasks of this step on this node
  int cpus_per_task = 0;     // SLURM_CPUS_PER_TASK; 0: not given
  std::string master_addr;   // MASTER_ADDR, else the step's first node
  int master_port = 0;       // MASTER_PORT, else PortForSlurmJob(SLURM_JOB_ID)
};

// Returns the variable's value, or nullptr when it is not set.
using EnvLookup = std::function<const char*(const char*)>;

// Reads a task's place from Slurm's variables (`env` is std::getenv in the
// trainer, a map in tests):
//   rank, world, local rank: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID;
//   local world: SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE) at
//     SLURM_NODEID, else SLURM_NTASKS_PER_NODE, else the world;
//   address: MASTER_ADDR, else the first node of SLURM_STEP_NODELIST (else
//     SLURM_JOB_NODELIST, SLURM_NODELIST): rank 0 runs there;
//   port: MASTER_PORT, else PortForSlurmJob(SLURM_JOB_ID).
// REQUIRES: SLURM_NTASKS is set. A process that is not a task of a step
// (the batch script itself: no SLURM_STEP_ID) with SLURM_NTASKS > 1 is an
// error that says to start it with srun. Errors name the variable.
Result<SlurmStep> ReadSlurmStep(const EnvLookup& env);

}  // namespace imagepack::trainer
