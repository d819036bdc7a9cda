// What every imagepack tool does the same way: option parsing conventions,
// exit codes, Ctrl-C handling, the progress line, the summary.
#pragma once

#include <boost/program_options.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "imagepack/progress.h"
#include "imagepack/resize_tree.h"
#include "imagepack/status.h"

namespace imagepack::cli {

// Documented in docs/USAGE.md.
enum ExitCode {
  kExitOk = 0,           // all inputs done
  kExitFatal = 1,        // could not run or finish (nothing under the final name)
  kExitUsage = 2,        // bad command line
  kExitSomeSkipped = 3,  // finished, but some inputs were skipped (see --errors)
  kExitInterrupted = 130 // stopped by SIGINT/SIGTERM; re-run to resume
};

namespace po = boost::program_options;

// The options every tool takes, appended to `opts`: -q/--quiet (no
// progress line on stderr), -h/--help and --version (docs/USAGE.md).
void AddStandardOptions(po::options_description& opts);

// Parses argv. Prints --help to stdout and exits 0; --version likewise; a bad
// option prints the message and the usage to stderr and exits 2.
po::variables_map ParseOrExit(int argc, char** argv, const std::string& synopsis,
                              const po::options_description& visible,
                              const po::options_description& hidden,
                              const po::positional_options_description& positional);

// Prints "tool: message" and the usage hint to stderr, returns kExitUsage.
int UsageError(const std::string& message);

// The first SIGINT/SIGTERM sets the returned flag; a second one kills.
CancelFlag* InstallCancelHandler();

// Draws "label [####....] done/total  pct  N/s  ETA" on stderr a few times a
// second on a terminal (every 10 s otherwise) until Stop().
class ProgressLine {
 public:
  ProgressLine(const Progress* progress, std::string label, bool quiet);
  ~ProgressLine();
  void Stop();

 private:
  void Run();
  void Draw(bool final_line);
  const Progress* progress_;
  std::string label_;
  bool quiet_;
  bool tty_;
  std::atomic<bool> stop_{false};
  std::chrono::steady_clock::time_point start_;
  std::thread thread_;
};

std::string HumanBytes(double bytes);

// Prints listing problems and the first skipped inputs to stderr and, with
// a non-empty errors_path, writes every skipped input ("path<TAB>reason")
// and ignored file to that file (atomically).
void ReportSkipped(const std::vector<FileError>& errors, const std::vector<std::string>& ignored,
                   const std::vector<std::string>& problems, const std::string& errors_path);
std::string ProgramName();

}  // namespace imagepack::cli
