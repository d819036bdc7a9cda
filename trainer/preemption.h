// Clean stops. SIGTERM (what schedulers send before a kill) and SIGUSR1
// (Slurm's --signal=USR1@SECONDS) ask the trainer to finish its step, write
// a checkpoint and exit with kExitPreempted; SIGINT (Ctrl-C) does the same
// and exits with kExitInterrupted, saying where the checkpoint is. A second
// such signal exits at once with 128 + its number, after removing the
// temporary of a checkpoint being written (SavingFile), so that nothing
// half-written is left beside it.
#pragma once

#include <string>

namespace imagepack::trainer {

// sysexits' EX_TEMPFAIL: stopped on request, resume to continue.
constexpr int kExitPreempted = 75;
// 128 + SIGINT, as every tool exits on Ctrl-C.
constexpr int kExitInterrupted = 130;

// `announce`: the first SIGINT prints one line on stderr saying that a
// checkpoint comes at the next step (the main rank's; others stay quiet).
void InstallStopHandlers(bool announce);

// The signal that asked for a stop (SIGTERM, SIGUSR1 or SIGINT), 0 if none.
int StopSignal();

// While one lives, `temporary` (the file a checkpoint is being written to,
// TempPathFor of its final name) is removed by a second signal before the
// process exits.
class SavingFile {
 public:
  explicit SavingFile(const std::string& temporary);
  ~SavingFile();
  SavingFile(const SavingFile&) = delete;
  SavingFile& operator=(const SavingFile&) = delete;
};

}  // namespace imagepack::trainer
