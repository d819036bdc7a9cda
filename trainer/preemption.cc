#include "preemption.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

namespace imagepack::trainer {
namespace {

volatile sig_atomic_t g_signal = 0;
volatile sig_atomic_t g_announce = 0;
// The temporary being written, for the handler (no allocation there).
char g_saving[4096];
volatile sig_atomic_t g_saving_set = 0;

void Say(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

extern "C" void OnStopSignal(int signo) {
  if (g_signal != 0) {  // asked twice: now, leaving nothing half-written
    if (g_saving_set) unlink(g_saving);
    if (g_announce) Say("train: stopped at once; the last complete checkpoint is kept\n");
    _exit(128 + signo);
  }
  g_signal = signo;
  if (signo == SIGINT && g_announce)
    Say("train: Ctrl-C: writing a checkpoint at the next step, then stopping (Ctrl-C again stops at once)\n");
}

}  // namespace

void InstallStopHandlers(bool announce) {
  g_announce = announce;
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

int StopSignal() { return g_signal; }

SavingFile::SavingFile(const std::string& temporary) {
  if (temporary.size() >= sizeof g_saving) return;
  g_saving_set = 0;
  std::memcpy(g_saving, temporary.c_str(), temporary.size() + 1);
  g_saving_set = 1;
}

SavingFile::~SavingFile() { g_saving_set = 0; }

}  // namespace imagepack::trainer
