// verify_db DB... [--decode] [--against SRC] [--stats]
// Proves packed databases complete and intact; see docs/USAGE.md.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "imagepack/formats.h"
#include "imagepack/storage.h"
#include "imagepack/verify.h"

using namespace imagepack;
namespace po = boost::program_options;

namespace {

// --stats: the class histogram, sizes, payload percentiles and pixel statistics.
void PrintStats(const VerifyReport& r) {
  std::printf("classes: %zu\n", r.classes.size());
  for (size_t c = 0; c < r.classes.size(); ++c)
    std::printf("  %5zu %-20s %lld\n", c, r.classes[c].c_str(), static_cast<long long>(r.class_counts[c]));
  std::printf("width: min %lld, mean %.1f, max %lld; height: min %lld, mean %.1f, max %lld\n",
              static_cast<long long>(r.min_width), r.mean_width, static_cast<long long>(r.max_width),
              static_cast<long long>(r.min_height), r.mean_height, static_cast<long long>(r.max_height));
  if (r.payload_percentiles.size() == 5)
    std::printf("payload bytes: min %lld, p10 %lld, median %lld, p90 %lld, max %lld\n",
                (long long)r.payload_percentiles[0], (long long)r.payload_percentiles[1],
                (long long)r.payload_percentiles[2], (long long)r.payload_percentiles[3],
                (long long)r.payload_percentiles[4]);
  if (!r.mean.empty()) {
    std::printf("pixel mean:");
    for (double m : r.mean) std::printf(" %.4f", m);
    std::printf("  std:");
    for (double s : r.std) std::printf(" %.4f", s);
    std::printf("\n");
  } else {
    std::printf("pixel mean/std: not computed (JPEG records: add --decode)\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  VerifyOptions o;
  int max_print = 50;
  std::string dct;
  po::options_description opts("Options");
  opts.add_options()
      ("decode", "decode every JPEG completely and check its size")
      ("against", po::value(&o.against),
       "SRC tree, manifest, or parquet / TFRecord / WebDataset file or folder: every image present exactly once "
       "with its label")
      ("labels", po::value(&o.labels_file),
       "--against a folder: the labels file the pack was given ('FILENAME LABEL' lines); checks each image's label")
      ("split", po::value(&o.split), "--against another tool's files: the split the pack was given (--split)")
      ("classes", po::value(&o.classes_file),
       "--against a tree: the classes file the pack was given; images of folders it does not list are not expected")
      ("stats", "print the class histogram, sizes and pixel mean/std")
      ("dct", po::value(&dct)->default_value("accurate"), "--decode/--stats: JPEG IDCT, accurate (Pillow's) or fast")
      ("threads", po::value(&o.threads)->default_value(0), "worker threads (0: all cores)")
      ("max-print", po::value(&max_print)->default_value(50), "problems printed (all are counted)");
  cli::AddStandardOptions(opts);
  po::options_description hidden;
  hidden.add_options()("db", po::value(&o.paths)->multitoken());
  po::positional_options_description pos;
  pos.add("db", -1);
  cli::SetHelpEpilog(SourceFormatsHelp());
  auto vm = cli::ParseOrExit(argc, argv, "DB... [--decode] [--against SRC [--labels FILE] [--classes FILE]] [--stats]", opts, hidden, pos);
  if (o.paths.empty()) return cli::UsageError("give at least one database");
  o.decode = vm.count("decode") > 0;
  o.stats = vm.count("stats") > 0;
  if (dct != "accurate" && dct != "fast") return cli::UsageError("--dct must be accurate or fast");
  if (max_print < 0) return cli::UsageError("--max-print must be >= 0");
  if (o.threads < 0) return cli::UsageError("--threads must be >= 0 (0: all cores)");
  if (!o.split.empty() && o.against.empty())
    return cli::UsageError("--split says which of --against SRC's files the pack read: give --against SRC");
  if ((!o.labels_file.empty() || !o.classes_file.empty()) && o.against.empty())
    return cli::UsageError("--labels and --classes say how --against SRC was packed: give --against SRC");
  // What the options name is there before any record is read.
  std::error_code ec;
  // (A pattern or a remote object names files the source opens, each by name.)
  const bool named_files = !cli::IsLocalPath(o.against) || IsFilePattern(o.against);
  if (!o.against.empty() && !named_files && !std::filesystem::exists(o.against, ec))
    return cli::FatalError("--against " + o.against + ": no such file or folder");
  if (!o.labels_file.empty() && std::filesystem::is_regular_file(o.against, ec))
    return cli::UsageError("--labels labels a folder's images; the manifest " + o.against + " carries its own");
  for (const auto& [option, path] : {std::pair<std::string, std::string>{"--labels", o.labels_file},
                                     {"--classes", o.classes_file}})
    if (std::string bad = cli::CheckInputFile(option, path); !bad.empty()) return cli::FatalError(bad);
  o.fast_dct = dct == "fast";
  o.cancel = cli::InstallCancelHandler();
  Progress progress;
  o.progress = &progress;

  cli::ProgressLine line(&progress, "verify", vm.count("quiet") > 0);
  auto result = VerifyDatabases(o);
  line.Stop();
  const std::string prog = cli::ProgramName();
  if (!result.ok()) {
    std::cerr << prog << ": " << result.status().message() << "\n";
    return cli::kExitFatal;  // could not run (docs/USAGE.md, "Exit codes")
  }
  const VerifyReport& r = result.value();
  int printed = 0;
  for (const auto& p : r.problems) {
    if (printed++ >= max_print) break;
    std::cout << "PROBLEM " << p.where << (p.path.empty() ? "" : " (" + p.path + ")") << ": " << p.reason << "\n";
  }
  if (r.problems_total > max_print)
    std::cout << "... " << r.problems_total - max_print << " more problems not printed (--max-print)\n";
  if (o.stats) PrintStats(r);
  std::string notes;  // what was not checked, said
  for (const auto& n : r.notes) notes += "; " + n;
  std::printf("%s: %s: %lld of %lld records checked, %s checksummed, %lld problems; %.2f s (%.0f MB/s)%s%s\n",
              prog.c_str(), r.ok() ? "OK" : "FAILED", static_cast<long long>(r.checked),
              static_cast<long long>(r.records), cli::HumanBytes(double(r.bytes)).c_str(),
              static_cast<long long>(r.problems_total), r.seconds, r.seconds > 0 ? r.bytes / r.seconds / 1e6 : 0.0,
              r.cancelled ? " (interrupted)" : "", notes.c_str());
  if (r.cancelled) return cli::kExitInterrupted;
  return r.ok() ? cli::kExitOk : cli::kExitFatal;
}
