// The command that continues an interrupted run as it was started: the
// launcher and its process count included (a run resumed on another number
// of processes takes another global batch and ends with other weights).
// No torch here (tests/trainer/trainer_test.cc, "Rendezvous").
#pragma once

#include <string>

namespace imagepack::trainer {

// `word` as one shell word: as is when it needs no quoting, else in single
// quotes.
std::string ShellWord(const std::string& word);

// How this process was started (DistEnv, and the launchers' variables).
struct LaunchInfo {
  std::string source = "none";  // DistEnv::source: torchrun (RANK/WORLD_SIZE), slurm, openmpi, none
  int world_size = 1;
  int local_world_size = 1;
  // $IMAGEPACK_LAUNCH_CMD: scripts/launch.sh's own words up to and with
  // "--", shell-quoted, as it was run ("scripts/launch.sh --nproc 2 --").
  std::string launch_cmd;
  // $TORCHELASTIC_RUN_ID set: torchrun (torch.distributed.run) started it.
  bool torchrun = false;
};

// The variables above, read from this process's environment.
LaunchInfo ReadLaunchInfo(const std::string& source, int world_size, int local_world_size);

struct ContinueCommand {
  std::string command;  // one shell command line
  std::string note;     // "" or what else to do (several nodes, Slurm's allocation)
};

// The command that continues the run in `output` from its checkpoint, as
// it was started: `program` (the trainer's own words: argv[0], shell-quoted
// by the caller) with --resume auto --output OUTPUT, behind the launcher
// that started it with its process count (scripts/launch.sh's words as
// run; else torchrun --no_python, srun or mpirun with the world size and
// ranks per node). A lone process: the program alone. (The same rules in
// scripts/train_imagepack.py's continue_command.)
ContinueCommand ContinueRunCommand(const LaunchInfo& how, const std::string& program, const std::string& output);

}  // namespace imagepack::trainer
