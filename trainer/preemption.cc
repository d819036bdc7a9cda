#include "preemption.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>

namespace imagepack::trainer {
namespace {

volatile sig_atomic_t g_signal = 0;

extern "C" void OnStopSignal(int signo) {
  if (g_signal != 0) _exit(128 + signo);  // asked twice: now
  g_signal = signo;
}

}  // namespace

void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
}

int StopSignal() { return g_signal; }

}  // namespace imagepack::trainer
