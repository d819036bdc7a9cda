#include "cli.h"

#include "imagepack/storage.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <sstream>

#include "imagepack/files.h"

#ifndef IMAGEPACK_VERSION
#define IMAGEPACK_VERSION "unknown"
#endif

namespace imagepack::cli {

namespace fs = std::filesystem;

namespace {

std::string g_program = "imagepack";
CancelFlag g_cancel{false};

extern "C" void OnSignal(int sig) {
  if (g_cancel.load()) {
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  g_cancel.store(true);
}

std::string Duration(double s) {
  if (s < 0 || s > 360000) return "--:--";
  int t = static_cast<int>(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%d:%02d", t / 60, t % 60);
  return buf;
}

}  // namespace

std::string ProgramName() { return g_program; }

void AddStandardOptions(po::options_description& opts) {
  opts.add_options()
      ("quiet,q", "no progress line on stderr")
      ("help,h", "show this help and exit")
      ("version", "show the version and exit");
}

namespace {
std::string g_epilog;
}  // namespace

void SetHelpEpilog(const std::string& text) { g_epilog = text; }

po::variables_map ParseOrExit(int argc, char** argv, const std::string& synopsis,
                              const po::options_description& visible,
                              const po::options_description& hidden,
                              const po::positional_options_description& positional) {
  if (argc > 0) {
    std::string a0 = argv[0];
    auto slash = a0.rfind('/');
    g_program = slash == std::string::npos ? a0 : a0.substr(slash + 1);
  }
  // The library never prints: its warnings come here.
  SetWarningHandler([](const std::string& message) {
    std::fprintf(stderr, "%s: warning: %s\n", g_program.c_str(), message.c_str());
    std::fflush(stderr);
  });
  po::options_description all;
  all.add(visible).add(hidden);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << "Usage: " << g_program << " " << synopsis << "\n\n" << visible << "\n";
      if (!g_epilog.empty()) std::cout << g_epilog << "\n";
      std::exit(kExitOk);
    }
    if (vm.count("version")) {
      std::cout << g_program << " (imagepack) " << IMAGEPACK_VERSION << "\n";
      std::exit(kExitOk);
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << g_program << ": " << e.what() << "\nUsage: " << g_program << " " << synopsis
              << "\nTry '" << g_program << " --help' for more information.\n";
    std::exit(kExitUsage);
  }
  return vm;
}

int UsageError(const std::string& message) {
  std::cerr << g_program << ": " << message << "\nTry '" << g_program
            << " --help' for more information.\n";
  return kExitUsage;
}

int FatalError(const std::string& message) {
  std::cerr << g_program << ": " << message << "\n";
  return kExitFatal;
}

bool IsLocalPath(const std::string& path) {
  auto storage = OpenStorage(path);  // the storage says; an unknown scheme is the library's to name
  return storage.ok() && storage.value()->local();
}

namespace {

bool IsUrl(const std::string& path) { return !IsLocalPath(path); }

// Whether a new file can be made in the folder `dir`: one is made there and
// removed. Its name is short, random and in the temporaries' scheme (one a
// killed run leaves is a dead run's temporary to RemoveStaleTemps), never
// the name a writer will use: a file planted under a name known in advance
// makes the probe pick another, not fail.
std::string ProbeFolder(const fs::path& dir) {
  std::random_device random;
  int err = EEXIST;
  for (int attempt = 0; attempt < 8 && err == EEXIST; ++attempt) {
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, "%08x%08x", random(), random());
    const std::string probe = TempPathFor((dir / (std::string("probe-") + suffix)).string());
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
      ::close(fd);
      ::unlink(probe.c_str());
      return "";
    }
    err = errno;
  }
  return dir.string() + ": cannot write there: " + std::strerror(err);
}

// The nearest folder of `path`'s parents that exists (path itself excluded).
fs::path NearestExisting(const fs::path& path, std::string* why) {
  std::error_code ec;
  fs::path dir = fs::absolute(path, ec).parent_path();
  while (!dir.empty() && !fs::exists(dir, ec)) {
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  if (!fs::is_directory(dir, ec)) *why = dir.string() + " is not a folder";
  return dir;
}

}  // namespace

std::string CheckInputFile(const std::string& option, const std::string& path) {
  if (path.empty() || IsUrl(path)) return "";
  // O_NONBLOCK: a FIFO named here is refused, not waited on.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return option + " " + path + ": " + std::strerror(errno);
  struct stat st;
  const int got = ::fstat(fd, &st);
  ::close(fd);
  if (got != 0) return option + " " + path + ": " + std::strerror(errno);
  if (S_ISREG(st.st_mode)) return "";
  const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a FIFO"
                     : S_ISCHR(st.st_mode)  ? "a character device"
                     : S_ISBLK(st.st_mode)  ? "a block device"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                                            : "not a regular file";
  return option + " " + path + ": is " + what + ", not a regular file; refusing to read it";
}

std::string CheckOutputFile(const std::string& option, const std::string& path) {
  if (path.empty() || IsUrl(path)) return "";
  std::error_code ec;
  if (fs::is_directory(path, ec)) return option + " " + path + ": is a folder, not a file";
  std::string why;
  const fs::path dir = NearestExisting(path, &why);
  if (why.empty()) why = ProbeFolder(dir);
  return why.empty() ? "" : option + " " + path + ": " + why;
}

std::string CheckOutputFolder(const std::string& option, const std::string& path) {
  if (path.empty() || IsUrl(path)) return "";
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_directory(path, ec)) return option + " " + path + ": exists and is not a folder";
  std::string why;
  const fs::path dir = fs::is_directory(path, ec) ? fs::absolute(path, ec) : NearestExisting(path, &why);
  if (why.empty()) why = ProbeFolder(dir);
  return why.empty() ? "" : option + " " + path + ": " + why;
}

std::string OutputFolder::Create(const std::string& option, const std::string& path) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  std::vector<fs::path> missing;
  for (fs::path p = abs; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  if (missing.empty() && !fs::is_directory(abs, ec)) return option + " " + path + ": exists and is not a folder";
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (!fs::create_directory(*it, ec) && ec) {
      RemoveIfEmpty();
      return option + " " + path + ": cannot create " + it->string() + ": " + ec.message();
    }
    created_.push_back(it->string());
  }
  if (std::string why = ProbeFolder(abs); !why.empty()) {
    RemoveIfEmpty();
    return option + " " + path + ": " + why;
  }
  return "";
}

void OutputFolder::RemoveIfEmpty() {
  std::error_code ec;
  for (auto it = created_.rbegin(); it != created_.rend(); ++it)
    if (fs::is_empty(*it, ec)) fs::remove(*it, ec);
  created_.clear();
}

CancelFlag* InstallCancelHandler() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return &g_cancel;
}

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) { b /= 1000; ++u; }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

void ReportSkipped(const std::vector<FileError>& errors, const std::vector<std::string>& ignored,
                   const std::vector<std::string>& problems, const std::string& errors_path,
                   const std::vector<FileError>& left_out) {
  for (const auto& p : problems) std::cerr << g_program << ": warning: " << p << "\n";
  for (const auto* list : {&errors, &left_out}) {
    const char* what = list == &errors ? "skipped " : "left out ";
    const size_t shown = std::min<size_t>(list->size(), 10);
    for (size_t i = 0; i < shown; ++i)
      std::cerr << g_program << ": " << what << (*list)[i].path << ": " << (*list)[i].reason << "\n";
    if (list->size() > shown)
      std::cerr << g_program << ": ... and " << list->size() - shown << " more"
                << (errors_path.empty() ? " (list them all with --errors FILE)" : "") << "\n";
  }
  if (errors_path.empty()) return;
  std::ostringstream os;
  for (const auto& e : errors) os << e.path << "\t" << e.reason << "\n";
  for (const auto& e : left_out) os << e.path << "\t" << e.reason << "\n";
  for (const auto& p : ignored) os << p << "\tignored: not an image file name\n";
  const std::string text = os.str();
  Status st = WriteFileAtomic(errors_path, text.data(), text.size());
  if (!st.ok()) std::cerr << g_program << ": cannot write errors file: " << st.message() << "\n";
}

ProgressLine::ProgressLine(const Progress* progress, std::string label, bool quiet)
    : progress_(progress), label_(std::move(label)), quiet_(quiet),
      tty_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {
  if (!quiet_) thread_ = std::thread([this] { Run(); });
}

ProgressLine::~ProgressLine() { Stop(); }

void ProgressLine::Stop() {
  if (stop_.exchange(true)) return;
  if (thread_.joinable()) thread_.join();
  if (!quiet_ && tty_) Draw(true);
}

void ProgressLine::Run() {
  // A terminal gets ~5 redraws a second; a log file one line every 10 s.
  const auto period = std::chrono::milliseconds(tty_ ? 200 : 10000);
  auto next = std::chrono::steady_clock::now() + period;
  while (!stop_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (std::chrono::steady_clock::now() >= next) {
      Draw(false);
      next += period;
    }
  }
}

void ProgressLine::Draw(bool final_line) {
  const int64_t total = progress_->total.load(), done = progress_->done.load();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = secs > 0 ? done / secs : 0;
  const double frac = total > 0 ? double(done) / total : 0;
  const int width = 24;
  std::string bar(width, '.');
  for (int i = 0; i < static_cast<int>(frac * width); ++i) bar[i] = '#';
  char line[256];
  std::snprintf(line, sizeof line, "%s [%s] %lld/%lld %5.1f%%  %.0f/s  ETA %s  failed %lld",
                label_.c_str(), bar.c_str(), static_cast<long long>(done),
                static_cast<long long>(total), frac * 100, rate,
                Duration(rate > 0 ? (total - done) / rate : -1).c_str(),
                static_cast<long long>(progress_->failed.load()));
  if (tty_) std::fprintf(stderr, "\r%s\033[K%s", line, final_line ? "\n" : "");
  else std::fprintf(stderr, "%s\n", line);
  std::fflush(stderr);
}

}  // namespace imagepack::cli
