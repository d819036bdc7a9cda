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

// Text --help prints after the options (ParseOrExit): e.g. the formats a
// tool reads (imagepack/formats.h).
void SetHelpEpilog(const std::string& text);

// A path of this machine's file system (not an object of s3://, https://,
// ...): the storage it names says so.
bool IsLocalPath(const std::string& path);

// Prints "tool: message" and the usage hint to stderr, returns kExitUsage.
int UsageError(const std::string& message);
// Prints "tool: message" to stderr, returns kExitFatal: the environment
// (a file, a folder) does not allow the run.
int FatalError(const std::string& message);

// Checks made before any work, so that a run never ends on a file it was
// told about at the start. Each returns an empty string, or why not
// (naming the option and the path).
//
// An input file an option names (--classes FILE): a readable regular file.
// A URL (s3://, https://) is left to its reader.
std::string CheckInputFile(const std::string& option, const std::string& path);
// An output file an option names (--errors FILE): not a folder, and its
// folder (or the nearest one that exists, the rest created on writing)
// takes a new file: probed by creating and removing a temporary there.
std::string CheckOutputFile(const std::string& option, const std::string& path);

// An output folder made later (resize_imagenet's and export_db's DST): a
// folder where it exists, and the nearest folder that exists takes new
// entries (probed as above). Nothing is created.
std::string CheckOutputFolder(const std::string& option, const std::string& path);

// An output folder (inspect_db --out): created with its missing parents
// now, so that a folder that cannot be made fails before any work; Remove()
// takes back what this run created while it is still empty (a failed run
// leaves nothing behind).
class OutputFolder {
 public:
  // Empty string, or why the folder cannot be made or written.
  std::string Create(const std::string& option, const std::string& path);
  // Removes the folders Create made that are still empty, deepest first.
  void RemoveIfEmpty();

 private:
  std::vector<std::string> created_;  // outermost first
};

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

// Prints listing problems and the first skipped inputs (and the first
// parts of inputs left out) to stderr and, with a non-empty errors_path,
// writes every skipped input and part left out ("path<TAB>reason") and
// every file ignored for its name to that file (atomically).
void ReportSkipped(const std::vector<FileError>& errors, const std::vector<std::string>& ignored,
                   const std::vector<std::string>& problems, const std::string& errors_path,
                   const std::vector<FileError>& left_out = {});
std::string ProgramName();

}  // namespace imagepack::cli
