// Clean preemption: SIGTERM (what schedulers send before a kill) and
// SIGUSR1 (Slurm's --signal=USR1@SECONDS) ask the trainer to finish its
// step, write a checkpoint and exit with kExitPreempted; a second such
// signal exits at once with 128 + its number.
#pragma once

namespace imagepack::trainer {

// sysexits' EX_TEMPFAIL: stopped on request, resume to continue.
constexpr int kExitPreempted = 75;

void InstallStopHandlers();

// The signal that asked for a stop (SIGTERM or SIGUSR1), 0 if none.
int StopSignal();

}  // namespace imagepack::trainer
