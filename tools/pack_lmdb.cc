// pack_lmdb SRC DST [options]
// pack_lmdb --manifest FILE DST | --coco FILE --images DIR DST [options]
// Packs an image tree (with paired trees), a manifest or a COCO file (or
// converts a packed database) into one LMDB or blob file; see
// docs/USAGE.md and docs/FORMAT.md.
#include <malloc.h>

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "imagepack/pack.h"
#include "imagepack/byte_source.h"

using namespace imagepack;
namespace po = boost::program_options;

int main(int argc, char** argv) {
  // Every record is a fresh buffer of tens to hundreds of KB freed a moment
  // later on another thread. glibc's defaults hand freed heap tops back to
  // the kernel and fault them in again (zeroed) for the next records: raw
  // packing spent 40% of its system time there. Keep up to 256 MB of freed
  // memory for reuse; what is resident stays bounded by the pipeline's
  // records in flight (peak RSS unchanged, ~35 MB on 20,000 JPEGs).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  PackOptions o;
  int max_size = 0, max_edge = 0;
  int64_t shuffle = -1;
  std::string format = "lmdb", encoding = "jpeg", shard_text = "0/1", filter_name = "triangle", errors_path;
  std::string direct_io = "auto", images_dir, dct = "accurate";
  po::options_description opts("Options");
  opts.add_options()
      ("format", po::value(&format)->default_value("lmdb"), "lmdb or blob (one file to read into RAM or mmap)")
      ("encoding", po::value(&encoding)->default_value("jpeg"), "jpeg (bytes) or raw (decoded uint8 HWC pixels)")
      ("channels", po::value(&o.prepare.decode.channels)->default_value(3), "3 (RGB) or 1 (gray)")
      ("max-size", po::value(&max_size), "resize while packing: cap the shorter edge at N")
      ("max-edge", po::value(&max_edge), "resize while packing: cap the longer edge at N")
      ("quality", po::value(&o.prepare.quality)->default_value(90), "JPEG quality of re-encoded images")
      ("filter", po::value(&filter_name)->default_value("triangle"), "box, triangle, catrom, lanczos3")
      ("dct", po::value(&dct)->default_value("accurate"),
       "JPEG IDCT of what is decoded and stored (raw, resized): accurate (Pillow's pixels) or fast")
      ("reencode", "re-encode every JPEG (no byte-for-byte pass-through)")
      ("max-pixels", po::value(&o.prepare.decode.max_pixels)->default_value(200000000), "refuse larger sources")
      ("classes", po::value(&o.source.classes_file), "class order: one name per line (e.g. ImageNet's synset list)")
      ("labels", po::value(&o.source.labels_file), "flat SRC: lines 'FILENAME LABEL' (class name or index)")
      ("field", po::value(&o.source.fields)->composing(),
       "NAME[:KIND]=DIR: a paired tree matched by relative path without extension (KIND image or mask; "
       "NAME mask* is a mask); repeatable")
      ("manifest", po::value(&o.source.manifest), "samples from a JSON Lines or CSV manifest (then only DST is given)")
      ("coco", po::value(&o.source.coco), "boxes from a COCO instances JSON; the images are in --images DIR")
      ("images", po::value(&images_dir), "with --coco: the folder its file_names are relative to")
      ("keep-members", po::value(&o.source.keep_members)->composing(),
       "WebDataset: keep members of extension EXT (e.g. txt) as text fields; repeatable")
      ("mask-member", po::value(&o.source.mask_members)->composing(),
       "WebDataset: KEY.NAME.png members are masks for this NAME (besides mask*); repeatable")
      ("allow-outside-paths", "manifest / COCO: allow paths outside the file's folder (absolute or ../)")
      ("no-class", "no class labels (label -1); for trees without class folders")
      ("mask-classes", po::value(&o.source.mask_classes), "masks: a classes file, or the class count N")
      ("ignore-value", po::value(&o.source.mask_ignore)->default_value(o.source.mask_ignore), "masks: the value outside any class (-1: none)")
      ("box-classes", po::value(&o.source.box_classes), "manifest boxes: a classes file naming their classes")
      ("shuffle", po::value(&shuffle), "store records in a permutation fixed by SEED")
      ("shard", po::value(&shard_text)->default_value("0/1"), "I/N: pack only shard I of N")
      ("records-per-value", po::value(&o.lmdb_records_per_value)->default_value(0),
       "LMDB: records stored in one value (0: 64 for jpeg, 1 for raw)")
      ("stats-sample", po::value(&o.stats_sample)->default_value(1024), "JPEG: images decoded for mean/std (0: none)")
      ("direct-io", po::value(&direct_io)->default_value("auto"),
       "blob: on (O_DIRECT, no page-cache copy), off, auto (on except on tmpfs)")
      ("threads", po::value(&o.threads)->default_value(0), "worker threads (0: all cores)")
      ("overwrite", "replace DST if it exists")
      ("errors", po::value(&errors_path), "write every skipped input and its reason to FILE")
      ("quiet,q", "no progress line")
      ("help,h", "show this help and exit")
      ("version", "show the version and exit");
  po::options_description hidden;
  std::vector<std::string> positional;
  hidden.add_options()("paths", po::value(&positional)->composing());
  po::positional_options_description pos;
  pos.add("paths", -1);
  auto vm = cli::ParseOrExit(argc, argv, "SRC [SRC...] DST [options]", opts, hidden, pos);
  // Several SRCs: WebDataset shards or patterns, read as one list
  // (webdataset's "::" joins them the same way).
  if (!positional.empty()) {
    o.dst = positional.back();
    positional.pop_back();
    for (const auto& p : positional) o.src += (o.src.empty() ? "" : "::") + p;
  }

  if ((!o.source.manifest.empty() || !o.source.coco.empty()) && o.dst.empty()) std::swap(o.src, o.dst);
  if (!o.source.coco.empty()) {
    if (images_dir.empty() || !o.src.empty()) return cli::UsageError("--coco takes --images DIR and DST only");
    o.src = images_dir;
  } else if (!images_dir.empty()) {
    return cli::UsageError("--images goes with --coco");
  }
  if (!o.source.manifest.empty() && (!o.src.empty() || !o.source.coco.empty()))
    return cli::UsageError("--manifest takes DST only (paths are relative to the manifest)");
  if (o.source.manifest.empty() && (o.src.empty() || o.dst.empty())) return cli::UsageError("SRC and DST are required");
  for (const auto& f : o.source.fields)
    if (f.find('=') == std::string::npos || f.front() == '=' || f.back() == '=')
      return cli::UsageError("--field " + f + ": expected NAME=DIR or NAME:KIND=DIR");
  if (!o.source.fields.empty() && (!o.source.manifest.empty() || !o.source.coco.empty()))
    return cli::UsageError("--field pairs image trees; with --manifest or --coco, name the partner files there");
  if (o.source.mask_ignore < -1 || o.source.mask_ignore > 255) return cli::UsageError("--ignore-value must be in -1..255");
  o.source.no_class = vm.count("no-class") > 0;
  o.source.allow_outside = vm.count("allow-outside-paths") > 0;
  if (max_size > 0 && max_edge > 0) return cli::UsageError("give at most one of --max-size and --max-edge");
  if (max_size < 0 || max_edge < 0) return cli::UsageError("--max-size and --max-edge must be positive");
  if (o.prepare.quality < 1 || o.prepare.quality > 100) return cli::UsageError("--quality must be in 1..100");
  if (o.prepare.decode.channels != 1 && o.prepare.decode.channels != 3)
    return cli::UsageError("--channels must be 1 or 3");
  if (o.lmdb_records_per_value < 0 || o.lmdb_records_per_value > kMaxRecordsPerValue)
    return cli::UsageError("--records-per-value must be in 0.." + std::to_string(kMaxRecordsPerValue));
  // Object storage holds blobs only: the default follows the destination.
  if (vm["format"].defaulted() && IsObjectUrl(o.dst)) format = "blob";
  auto fmt = ParseContainerFormat(format);
  if (!fmt.ok()) return cli::UsageError(fmt.status().message());
  auto enc = ParseEncoding(encoding);
  if (!enc.ok()) return cli::UsageError(enc.status().message());
  auto dio = ParseDirectIo(direct_io);
  if (!dio.ok()) return cli::UsageError("--direct-io must be auto, on or off");
  o.direct_io = dio.value();
  if (o.direct_io == DirectIo::kOn && fmt.value() == ContainerFormat::kLmdb)
    return cli::UsageError("--direct-io on applies to --format blob (liblmdb writes its own pages)");
  auto shard = ParseShard(shard_text);
  if (!shard.ok()) return cli::UsageError(shard.status().message());
  auto filter = ParseResampleFilter(filter_name);
  if (!filter.ok()) return cli::UsageError(filter.status().message());
  o.format = fmt.value();
  o.encoding = enc.value();
  o.shard = shard.value();
  o.prepare.decode.filter = filter.value();
  o.prepare.reencode = vm.count("reencode") > 0;
  if (dct != "accurate" && dct != "fast") return cli::UsageError("--dct must be accurate or fast");
  o.prepare.decode.fast_dct = dct == "fast";
  if (max_size > 0) o.prepare.decode.limit = {SizeLimit::Mode::kShorterEdge, max_size};
  if (max_edge > 0) o.prepare.decode.limit = {SizeLimit::Mode::kLongerEdge, max_edge};
  o.shuffle_seed = shuffle;
  o.overwrite = vm.count("overwrite") > 0;
  o.tool = cli::ProgramName() + " " + IMAGEPACK_VERSION;
  nlohmann::json oj = {{"format", format}, {"encoding", encoding}, {"channels", o.prepare.decode.channels},
                       {"max_size", max_size}, {"max_edge", max_edge}, {"quality", o.prepare.quality},
                       {"filter", filter_name}, {"dct", dct}, {"reencode", o.prepare.reencode}, {"shuffle", shuffle},
                       {"shard", shard_text}, {"records_per_value", o.lmdb_records_per_value}};
  if (!o.source.fields.empty()) oj["fields"] = o.source.fields;
  if (!o.source.manifest.empty()) oj["manifest"] = o.source.manifest;
  if (!o.source.coco.empty()) oj["coco"] = o.source.coco;
  if (o.source.no_class) oj["no_class"] = true;
  o.options_json = oj.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // paths are bytes
  o.cancel = cli::InstallCancelHandler();
  Progress progress;
  o.progress = &progress;

  cli::ProgressLine line(&progress, "pack", vm.count("quiet") > 0);
  auto result = PackDataset(o);
  line.Stop();
  const std::string prog = cli::ProgramName();
  if (!result.ok()) {
    std::cerr << prog << ": " << result.status().message() << "\n";
    return cli::kExitFatal;
  }
  const PackSummary& s = result.value();
  cli::ReportSkipped(s.errors, s.ignored, s.problems, errors_path);
  if (s.all_skipped) {
    std::cerr << prog << ": every input was skipped; nothing written to " << o.dst << " (first: "
              << s.errors.front().path << ": " << s.errors.front().reason << ")\n";
    return cli::kExitFatal;
  }
  if (s.cancelled) {
    std::printf("%s: interrupted after %lld of %lld inputs; nothing written to %s (re-run to pack)\n", prog.c_str(),
                static_cast<long long>(progress.done.load()), static_cast<long long>(s.inputs), o.dst.c_str());
    return cli::kExitInterrupted;
  }
  std::printf(
      "%s: %lld records in %lld classes -> %s (%s, %s, shard %s%s): %lld copied as-is, %zu skipped; "
      "%s in, payload %s, file %s (%.1f%% over payload); %.1f s, %.1f images/s\n",
      prog.c_str(), static_cast<long long>(s.written), static_cast<long long>(s.classes), o.dst.c_str(),
      format.c_str(), encoding.c_str(), o.shard.ToString().c_str(), s.direct_io ? ", O_DIRECT" : "",
      static_cast<long long>(s.passed_through),
      s.errors.size(), cli::HumanBytes(double(s.bytes_in)).c_str(), cli::HumanBytes(double(s.payload_bytes)).c_str(),
      cli::HumanBytes(double(s.file_bytes)).c_str(),
      s.payload_bytes > 0 ? 100.0 * (double(s.file_bytes) / double(s.payload_bytes) - 1) : 0.0, s.seconds,
      s.seconds > 0 ? (s.written + double(s.errors.size())) / s.seconds : 0.0);
  return s.errors.empty() ? cli::kExitOk : cli::kExitSomeSkipped;
}
