// export_db DB... DST [--to webdataset|imagefolder|tfrecord] [options]
// Writes a database out as WebDataset tar shards, an ImageFolder tree or
// TFRecord files; see docs/USAGE.md.
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "imagepack/export.h"
#include "imagepack/store.h"

using namespace imagepack;
namespace po = boost::program_options;

int main(int argc, char** argv) {
  ExportOptions o;
  std::string layout = "webdataset";
  po::options_description opts("Options");
  opts.add_options()
      ("to", po::value(&layout)->default_value("webdataset"),
       "webdataset (tar shards), imagefolder (CLASS/FILE tree) or tfrecord (tf.train.Example files, TF-slim layout)")
      ("records-per-shard", po::value(&o.records_per_shard)->default_value(0),
       "webdataset, tfrecord: records per file (0: as many as make --shard-mb)")
      ("shard-mb", po::value(&o.shard_mb)->default_value(512), "webdataset, tfrecord: file size aimed at, MB")
      ("gzip", "webdataset: gzipped shards (.tar.gz); tfrecord: gzipped files (TFRecordWriter's GZIP), names unchanged")
      ("prefix", po::value(&o.prefix)->default_value("shard"),
       "webdataset: shard names PREFIX-000000.tar; tfrecord: PREFIX-00000-of-00004 (default train)")
      ("first", po::value(&o.first)->default_value(0), "first record exported")
      ("last", po::value(&o.last)->default_value(-1), "export records before this one (-1: to the end)")
      ("threads", po::value(&o.threads)->default_value(0), "worker threads (0: all cores)");
  cli::AddStandardOptions(opts);
  po::options_description hidden;
  std::vector<std::string> args;
  hidden.add_options()("args", po::value(&args)->multitoken());
  po::positional_options_description pos;
  pos.add("args", -1);
  auto vm = cli::ParseOrExit(argc, argv, "DB... DST [--to webdataset|imagefolder|tfrecord]", opts, hidden, pos);
  if (args.size() < 2) return cli::UsageError("a database (or its shards) and DST are required");
  o.dst = args.back();
  o.dbs.assign(args.begin(), args.end() - 1);
  auto l = ParseExportLayout(layout);
  if (!l.ok()) return cli::UsageError(l.status().message());
  o.layout = l.value();
  if (o.shard_mb < 1) return cli::UsageError("--shard-mb must be positive");
  if (o.records_per_shard < 0) return cli::UsageError("--records-per-shard must be >= 0");
  o.gzip = vm.count("gzip") > 0;
  if (o.layout == ExportLayout::kImageFolder)
    for (const char* opt : {"gzip", "prefix", "records-per-shard", "shard-mb"})
      if (vm.count(opt) && !vm[opt].defaulted())
        return cli::UsageError(std::string("--") + opt + " applies to --to webdataset and tfrecord");
  if (o.layout == ExportLayout::kTfRecord && vm["prefix"].defaulted()) o.prefix = "train";  // TF-slim's train-00000-of-00004
  if (o.prefix.empty() || o.prefix.find('/') != std::string::npos || o.prefix.front() == '.')
    return cli::UsageError("--prefix names the shards in DST: not empty, no '/', not starting with '.'");
  if (o.threads < 0) return cli::UsageError("--threads must be >= 0 (0: all cores)");
  if (o.first < 0) return cli::UsageError("--first must be >= 0");
  if (o.last < -1 || (o.last >= 0 && o.last <= o.first))
    return cli::UsageError("--last must be above --first (-1: to the end)");
  if (std::string bad = cli::CheckOutputFolder("DST", o.dst); !bad.empty()) return cli::FatalError(bad);
  // A range past the records exports nothing: said before any work (the
  // metadata's count only).
  if (o.first > 0 || o.last >= 0) {
    auto db = OpenDatabases(o.dbs);
    if (!db.ok()) return cli::FatalError(db.status().message());
    const int64_t n = db.value()->size();
    if (o.first >= n || o.last > n)
      return cli::UsageError("--first " + std::to_string(o.first) + (o.last >= 0 ? " --last " + std::to_string(o.last) : "") +
                             " is past the " + std::to_string(n) + " records of " + o.dbs[0] +
                             (o.dbs.size() > 1 ? " and its shards" : ""));
  }
  o.cancel = cli::InstallCancelHandler();
  Progress progress;
  o.progress = &progress;
  cli::ProgressLine line(&progress, "export", vm.count("quiet") > 0);
  auto result = ExportDatabase(o);
  line.Stop();
  const std::string prog = cli::ProgramName();
  if (!result.ok()) {
    std::cerr << prog << ": " << result.status().message() << "\n";
    return cli::kExitFatal;
  }
  const ExportSummary& s = result.value();
  if (s.cancelled) {
    std::printf("%s: interrupted: %lld records in complete files under %s; re-run to finish\n", prog.c_str(),
                static_cast<long long>(s.records + s.kept), o.dst.c_str());
    return cli::kExitInterrupted;
  }
  std::printf("%s: %lld records -> %s (%s): %lld files, %s written, %lld already there; %.1f s, %.0f records/s\n",
              prog.c_str(), static_cast<long long>(s.records + s.kept), o.dst.c_str(), layout.c_str(),
              static_cast<long long>(s.files), cli::HumanBytes(double(s.bytes)).c_str(), static_cast<long long>(s.kept),
              s.seconds, s.seconds > 0 ? s.records / s.seconds : 0.0);
  return cli::kExitOk;
}
