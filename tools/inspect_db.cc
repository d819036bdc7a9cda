// inspect_db DB... --out DIR [--sheet] [--grid] [--summary] [--duplicates]
// Pictures of what a database holds, and the duplicates within and between
// databases; see docs/USAGE.md.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "cli.h"
#include "option_flags.h"
#include "imagepack/duplicates.h"
#include "imagepack/files.h"
#include "imagepack/inspect.h"
#include "imagepack/loader.h"

using namespace imagepack;
namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

std::string CsvCell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

int Duplicates(const DuplicateOptions& d, const std::string& out, int sheet_pairs, bool quiet) {
  const std::string prog = cli::ProgramName();
  Progress progress;
  DuplicateOptions o = d;
  o.progress = &progress;
  o.cancel = cli::InstallCancelHandler();
  cli::ProgressLine line(&progress, "signatures", quiet);
  auto r = FindDuplicates(o);
  line.Stop();
  if (!r.ok()) {
    std::cerr << prog << ": " << r.status().message() << "\n";
    return cli::kExitFatal;
  }
  if (r->cancelled) {
    std::printf("%s: interrupted; nothing written\n", prog.c_str());
    return cli::kExitInterrupted;
  }
  const std::string csv = (fs::path(out) / "duplicates.csv").string();
  std::string text = "kind,distance,similarity,detail,aligned,db_a,index_a,path_a,label_a,db_b,index_b,path_b,label_b\n";
  std::map<std::pair<int, int>, std::pair<int64_t, int64_t>> per;  // (db_a, db_b) -> exact, near
  for (const auto& p : r->pairs) {
    char num[64];
    std::snprintf(num, sizeof num, "%d,%.4f,%.4f,%s", p.distance, p.similarity, p.detail,
                  p.windowed ? "window" : "whole");
    text += std::string(p.exact ? "exact" : "near") + "," + num + "," + CsvCell(o.dbs[size_t(p.db_a)]) + "," +
            std::to_string(p.a) + "," + CsvCell(p.path_a) + "," + std::to_string(p.label_a) + "," +
            CsvCell(o.dbs[size_t(p.db_b)]) + "," + std::to_string(p.b) + "," + CsvCell(p.path_b) + "," +
            std::to_string(p.label_b) + "\n";
    auto& c = per[{p.db_a, p.db_b}];
    (p.exact ? c.first : c.second) += 1;
  }
  Status st = WriteFileAtomic(csv, text.data(), text.size());
  if (st.ok() && sheet_pairs > 0) st = WriteDuplicateSheet(o.dbs, r->pairs, sheet_pairs, (fs::path(out) / "duplicates.png").string());
  if (!st.ok()) {
    std::cerr << prog << ": " << st.message() << "\n";
    return cli::kExitFatal;
  }
  int64_t total = 0;
  for (int64_t n : r->records) total += n;
  for (const auto& [k, c] : per) {
    if (k.first == k.second)
      std::printf("  within %s: %lld exact, %lld near\n", o.dbs[size_t(k.first)].c_str(), (long long)c.first,
                  (long long)c.second);
    else
      std::printf("  between %s and %s: %lld exact, %lld near%s\n", o.dbs[size_t(k.first)].c_str(),
                  o.dbs[size_t(k.second)].c_str(), (long long)c.first, (long long)c.second,
                  c.first + c.second > 0 ? " (leak)" : "");
  }
  for (size_t i = 0; i < r->unreadable.size() && i < 20; ++i) std::printf("  unreadable: %s\n", r->unreadable[i].c_str());
  std::printf("%s: %zu duplicate pairs among %lld records (%lld candidates within %d bits) -> %s; "
              "signatures %.1f s (%.0f records/s), matching %.2f s\n",
              prog.c_str(), r->pairs.size(), (long long)total, (long long)r->candidates, o.max_distance, csv.c_str(),
              r->signature_seconds, r->signature_seconds > 0 ? total / r->signature_seconds : 0.0, r->match_seconds);
  return r->unreadable.empty() ? cli::kExitOk : cli::kExitSomeSkipped;
}

// The numbers of the command line within what they mean, and the
// pictures within 100 megapixels each (a bad_alloc is no answer); an empty
// string, or the usage error.
std::string CheckOptions(const InspectOptions& io, const DuplicateOptions& d, int sheet_pairs) {
  if (LoaderOptions lo; !GridAugmentations(io, &lo).ok()) return "--augment: " + GridAugmentations(io, &lo).message();
  if (io.per_class < 1 || io.max_classes < 1) return "--per-class and --max-classes must be positive";
  if (io.tile < 8 || io.tile > 1024) return "--tile must be in 8..1024";
  if (io.batch < 1) return "--batch must be positive";
  if (io.crop < 0 || io.crop > 1024) return "--crop must be in 0..1024 (0: the tile size)";
  if (io.epoch < 0) return "--epoch must be >= 0";
  if (d.threads < 0) return "--threads must be >= 0 (0: all cores)";
  if (d.max_distance < 0 || d.max_distance > 11)
    return "--max-distance must be in 0..11 (the band probes find pairs within 11 bits)";
  if (!(d.min_similarity >= -1 && d.min_similarity <= 1)) return "--min-similarity is a correlation: -1..1";
  if (!(d.min_detail >= -1 && d.min_detail <= 1)) return "--min-detail is a correlation: -1..1";
  if (sheet_pairs < 0) return "--sheet-pairs must be >= 0";
  constexpr double kMostPixels = 100e6;
  const double pitch = io.tile + 4.0;
  if ((170 + pitch * io.per_class + 4) * (34 + pitch * io.max_classes + 4) > kMostPixels)
    return "--per-class x --max-classes x --tile make a sheet of over 100 megapixels";
  const double s = io.crop > 0 ? io.crop : io.tile, z = s * std::max(1.0, std::floor(64 / s));
  if ((z + 6) * 8 * (30 + (z + 22) * std::ceil(io.batch / 8.0)) > kMostPixels)
    return "--batch x --crop (or --tile) make a grid of over 100 megapixels";
  if (1100.0 * (34 + 104.0 * sheet_pairs) > kMostPixels) return "--sheet-pairs makes a sheet of over 100 megapixels";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> dbs;
  std::string out;
  InspectOptions io;
  DuplicateOptions d;
  int sheet_pairs = 48;
  po::options_description opts("Options");
  opts.add_options()
      ("out", po::value(&out), "folder the pictures (and duplicates.csv) go to")
      ("sheet", "contact sheet: N random records per class with labels (sheet.png)")
      ("grid", "what the loader hands the model for --seed and --epoch, masks and boxes drawn (grid.png)")
      ("summary", "one-page chart: class histogram, image sizes, bytes per record (summary.png)")
      ("duplicates", "exact and near duplicates within and between the DBs (duplicates.csv, duplicates.png)")
      ("per-class", po::value(&io.per_class)->default_value(8), "sheet: records per class")
      ("max-classes", po::value(&io.max_classes)->default_value(20), "sheet: classes shown (the first N)")
      ("tile", po::value(&io.tile)->default_value(96), "sheet, grid: tile size in pixels")
      ("seed", po::value(&io.seed)->default_value(0), "sheet: which records; grid: the loader's seed")
      ("epoch", po::value(&io.epoch)->default_value(0), "grid: the loader's epoch")
      ("batch", po::value(&io.batch)->default_value(32), "grid: samples shown")
      ("crop", po::value(&io.crop)->default_value(0), "grid: crop size (0: the tile size)")
      ("augment", po::value(&io.augment)->default_value("train"),
       ("grid: the loader's transform, " + TransformNames() + ", or a policy's name (ta_wide, ra, imagenet, "
        "cifar10, svhn, augmix: train with it, as the recipe trains)").c_str())
      ("max-distance", po::value(&d.max_distance)->default_value(d.max_distance), "duplicates: hash bits (0..11)")
      ("min-similarity", po::value(&d.min_similarity)->default_value(d.min_similarity),
       "duplicates: thumbnail correlation")
      ("min-detail", po::value(&d.min_detail)->default_value(d.min_detail), "duplicates: fine-detail correlation")
      ("sheet-pairs", po::value(&sheet_pairs)->default_value(48), "duplicates: pairs shown in duplicates.png")
      ("threads", po::value(&d.threads)->default_value(0), "worker threads (0: all cores)")
      ("overwrite", "replace pictures (and duplicates.csv) already in DIR");
  // The training Loader's augmentations, from the option table: what the
  // trainers' flags of those names set, the grid shows.
  cli::OptionFlags flags(&opts, kInspectFlag);
  flags.Bind("auto-augment", &io.auto_augment);
  flags.Bind("ra-magnitude", &io.ra_magnitude);
  flags.Bind("augmix-severity", &io.augmix_severity);
  flags.Bind("random-erase", &io.random_erase);
  flags.Bind("interpolation", &io.interpolation);
  flags.Bind("hflip", &io.hflip);
  flags.CheckAllBound();
  cli::AddStandardOptions(opts);
  po::options_description hidden;
  hidden.add_options()("db", po::value(&dbs)->multitoken());
  po::positional_options_description pos;
  pos.add("db", -1);
  auto vm = cli::ParseOrExit(argc, argv, "DB... --out DIR [--sheet] [--grid] [--summary] [--duplicates]", opts,
                             hidden, pos);
  if (dbs.empty() || out.empty()) return cli::UsageError("give a database and --out DIR");
  if (std::string bad = flags.Problem(vm, {}); !bad.empty()) return cli::UsageError(bad);
  if (std::string bad = CheckOptions(io, d, sheet_pairs); !bad.empty()) return cli::UsageError(bad);
  const bool dup = vm.count("duplicates") > 0;
  bool sheet = vm.count("sheet") > 0, grid = vm.count("grid") > 0, summary = vm.count("summary") > 0;
  if (!dup && !sheet && !grid && !summary) sheet = grid = summary = true;
  if ((sheet || grid || summary) && dbs.size() != 1)
    return cli::UsageError("--sheet, --grid and --summary take one database (--duplicates takes several)");
  // The folder first, before any work: made now (with its parents) or
  // refused; what this run made is taken back if the run fails.
  cli::OutputFolder folder;
  if (std::string bad = folder.Create("--out", out); !bad.empty()) return cli::FatalError(bad);
  // What an earlier run wrote there is kept unless --overwrite.
  std::vector<const char*> files;
  if (sheet) files.insert(files.end(), {"sheet.png", "sheet.json"});
  if (grid) files.insert(files.end(), {"grid.png", "grid.json"});
  if (summary) files.insert(files.end(), {"summary.png", "summary.json"});
  if (dup) files.insert(files.end(), {"duplicates.csv", "duplicates.png"});
  std::error_code ec;
  for (const char* name : files)
    if (vm.count("overwrite") == 0 && fs::exists(fs::path(out) / name, ec))
      return cli::FatalError((fs::path(out) / name).string() + " exists (use --overwrite to replace it)");
  const std::string prog = cli::ProgramName();
  // Temporaries of the pictures a killed run was writing, as every tool
  // removes its own (only this host's dead processes', only ours).
  for (const char* name : {"sheet.png", "grid.png", "summary.png", "duplicates.csv", "duplicates.png"})
    RemoveStaleTempsFor((fs::path(out) / name).string());
  int rc = cli::kExitOk;
  io.db = dbs[0];
  io.threads = d.threads;
  auto picture = [&](const char* name, Result<std::string> (*fn)(const InspectOptions&, const std::string&)) {
    auto r = fn(io, (fs::path(out) / name).string());
    if (!r.ok()) {
      std::cerr << prog << ": " << r.status().message() << "\n";
      rc = cli::kExitFatal;
      return;
    }
    std::printf("%s: %s\n", prog.c_str(), r->c_str());
  };
  if (sheet) picture("sheet.png", WriteContactSheet);
  if (grid && rc == cli::kExitOk) picture("grid.png", WriteAugmentedGrid);
  if (summary && rc == cli::kExitOk) picture("summary.png", WriteSummaryChart);
  if (dup && rc == cli::kExitOk) {
    d.dbs = dbs;
    rc = Duplicates(d, out, sheet_pairs, vm.count("quiet") > 0);
  }
  if (rc == cli::kExitFatal || rc == cli::kExitInterrupted) folder.RemoveIfEmpty();
  return rc;
}
