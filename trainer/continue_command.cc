#include "continue_command.h"

#include <cctype>
#include <cstdlib>

namespace imagepack::trainer {

std::string ShellWord(const std::string& word) {
  bool plain = !word.empty();
  for (char c : word)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || std::string("_@%+=:,./-").find(c) != std::string::npos))
      plain = false;
  if (plain) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

LaunchInfo ReadLaunchInfo(const std::string& source, int world_size, int local_world_size) {
  LaunchInfo l;
  l.source = source;
  l.world_size = world_size;
  l.local_world_size = local_world_size;
  if (const char* v = std::getenv("IMAGEPACK_LAUNCH_CMD"); v && *v) l.launch_cmd = v;
  if (const char* v = std::getenv("TORCHELASTIC_RUN_ID"); v && *v) l.torchrun = true;
  return l;
}

ContinueCommand ContinueRunCommand(const LaunchInfo& how, const std::string& program, const std::string& output) {
  const std::string resume = " --resume auto --output " + ShellWord(output);
  const int world = how.world_size, local = how.local_world_size > 0 ? how.local_world_size : world;
  const int nodes = world % local == 0 ? world / local : 0;  // 0: ranks per node differ
  const std::string w = std::to_string(world), l = std::to_string(local), n = std::to_string(nodes);
  ContinueCommand c;
  if (!how.launch_cmd.empty()) {
    c.command = how.launch_cmd + " " + program + resume;
    if (nodes != 1) c.note = "on each of the " + (nodes > 1 ? n + " " : "") + "nodes, with its own --node-rank";
  } else if (how.source == "torchrun" && how.torchrun) {
    c.command = "torchrun" + (nodes > 1 ? " --nnodes=" + n : "") + " --nproc_per_node=" + l + " --no_python " +
                program + resume;
    if (nodes != 1) c.note = "on each node, with its --node_rank and the rendezvous options it was started with";
  } else if (how.source == "slurm") {
    c.command = "srun" + (nodes > 1 ? " --nodes=" + n : "") + " --ntasks=" + w + " " + program + resume;
    c.note = "in an allocation of " + w + " task(s), as the run had (scripts/slurm_train.sh requeues its job by itself)";
  } else if (how.source == "openmpi") {
    c.command = "mpirun -np " + w + " " + program + resume;
    c.note = "with MASTER_ADDR (and MASTER_PORT) exported as before";
  } else {
    c.command = program + resume;
    if (world > 1)
      c.note = "in each of the " + w + " processes, started as before (RANK, WORLD_SIZE, LOCAL_RANK, "
               "LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT set as for the interrupted run)";
  }
  return c;
}

}  // namespace imagepack::trainer
