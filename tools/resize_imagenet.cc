// resize_imagenet SRC DST (--max-size N | --max-edge N) [options]
// Mirrors an image tree, resizing every image; see docs/USAGE.md.
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "imagepack/files.h"
#include "imagepack/resize_tree.h"

using namespace imagepack;
namespace po = boost::program_options;

int main(int argc, char** argv) {
  int max_size = 0, max_edge = 0, quality = 90, threads = 0, channels = 3;
  int64_t max_pixels = 200000000;
  std::string src, dst, shard_text = "0/1", filter_name = "triangle", errors_path, dct = "accurate";
  po::options_description opts("Options");
  opts.add_options()
      ("max-size", po::value(&max_size), "cap the shorter edge at N pixels (never upscales)")
      ("max-edge", po::value(&max_edge), "cap the longer edge at N pixels instead")
      ("quality", po::value(&quality)->default_value(90), "JPEG quality of re-encoded images")
      ("filter", po::value(&filter_name)->default_value("triangle"),
       "resampling filter: box, triangle, catrom, lanczos3")
      ("channels", po::value(&channels)->default_value(3), "3 (RGB) or 1 (gray)")
      ("dct", po::value(&dct)->default_value("accurate"),
       "JPEG IDCT at full scale: accurate (Pillow's pixels) or fast")
      ("reencode", "re-encode every image (no byte-for-byte pass-through)")
      ("mask", "SRC is a tree of label or depth maps (PNG, 8 or 16 bits kept): nearest neighbour, PNG out, never a new value")
      ("max-pixels", po::value(&max_pixels)->default_value(200000000),
       "refuse sources with more pixels than this (decompression bombs)")
      ("threads", po::value(&threads)->default_value(0), "worker threads (0: all cores)")
      ("shard", po::value(&shard_text)->default_value("0/1"),
       "I/N: process only shard I of N (split one job across N machines)")
      ("overwrite", "redo outputs that already exist (default: skip them, i.e. resume)")
      ("errors", po::value(&errors_path), "write every skipped input and its reason to FILE");
  cli::AddStandardOptions(opts);
  po::options_description hidden;
  hidden.add_options()("src", po::value(&src))("dst", po::value(&dst));
  po::positional_options_description pos;
  pos.add("src", 1).add("dst", 1);
  auto vm = cli::ParseOrExit(argc, argv, "SRC DST (--max-size N | --max-edge N) [options]", opts,
                             hidden, pos);

  if (src.empty() || dst.empty()) return cli::UsageError("SRC and DST are required");
  if ((max_size > 0) == (max_edge > 0))
    return cli::UsageError("give exactly one of --max-size N or --max-edge N (N > 0)");
  if (quality < 1 || quality > 100) return cli::UsageError("--quality must be in 1..100");
  if (channels != 1 && channels != 3) return cli::UsageError("--channels must be 1 or 3");
  if (max_pixels < 1) return cli::UsageError("--max-pixels must be positive");
  if (threads < 0) return cli::UsageError("--threads must be >= 0 (0: all cores)");
  if (dct != "accurate" && dct != "fast") return cli::UsageError("--dct must be accurate or fast");
  auto shard = ParseShard(shard_text);
  if (!shard.ok()) return cli::UsageError(shard.status().message());
  auto filter = ParseResampleFilter(filter_name);
  if (!filter.ok()) return cli::UsageError(filter.status().message());
  // The errors file is written at the end: known writable before any work.
  if (std::string bad = cli::CheckOutputFile("--errors", errors_path); !bad.empty()) return cli::FatalError(bad);
  if (std::string bad = cli::CheckOutputFolder("DST", dst); !bad.empty()) return cli::FatalError(bad);

  ResizeTreeOptions o;
  o.src = src;
  o.dst = dst;
  o.prepare.quality = quality;
  o.prepare.reencode = vm.count("reencode") > 0;
  o.masks = vm.count("mask") > 0;
  o.prepare.decode.channels = channels;
  o.prepare.decode.filter = filter.value();
  o.prepare.decode.max_pixels = max_pixels;
  o.prepare.decode.fast_dct = dct == "fast";
  o.prepare.decode.limit.mode =
      max_size > 0 ? SizeLimit::Mode::kShorterEdge : SizeLimit::Mode::kLongerEdge;
  o.prepare.decode.limit.n = max_size > 0 ? max_size : max_edge;
  o.shard = shard.value();
  o.threads = threads;
  o.overwrite = vm.count("overwrite") > 0;
  o.cancel = cli::InstallCancelHandler();
  Progress progress;
  o.progress = &progress;

  cli::ProgressLine line(&progress, "resize", vm.count("quiet") > 0);
  auto result = ResizeTree(o);
  line.Stop();
  const std::string prog = cli::ProgramName();
  if (!result.ok()) {
    std::cerr << prog << ": " << result.status().message() << "\n";
    return cli::kExitFatal;
  }
  const ResizeTreeSummary& s = result.value();
  cli::ReportSkipped(s.errors, s.ignored, s.problems, errors_path);
  const int64_t processed = s.written + static_cast<int64_t>(s.errors.size());
  std::printf(
      "%s: %lld images in shard %s: %lld written (%lld copied as-is), %lld already done, "
      "%zu skipped, %zu non-image files ignored; %s in, %s out; %.1f s, %.1f images/s%s\n",
      prog.c_str(), static_cast<long long>(s.files), o.shard.ToString().c_str(),
      static_cast<long long>(s.written), static_cast<long long>(s.passed_through),
      static_cast<long long>(s.already_done), s.errors.size(), s.ignored.size(),
      cli::HumanBytes(double(s.bytes_in)).c_str(), cli::HumanBytes(double(s.bytes_out)).c_str(),
      s.seconds, s.seconds > 0 ? processed / s.seconds : 0.0,
      s.cancelled ? " (interrupted: re-run to resume)" : "");
  if (!s.destination_error.empty()) {
    std::cerr << prog << ": cannot write the destination, stopped: " << s.destination_error
              << "\n" << prog << ": outputs written so far are complete; free space or fix " << o.dst
              << " and re-run to resume\n";
    return cli::kExitFatal;
  }
  if (s.cancelled) return cli::kExitInterrupted;
  return s.errors.empty() ? cli::kExitOk : cli::kExitSomeSkipped;
}
