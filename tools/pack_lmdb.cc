// pack_lmdb SRC DST [options]
// pack_lmdb --manifest FILE DST | --coco FILE --images DIR DST [options]
// Packs an image tree (with paired trees), a manifest, a COCO file,
// WebDataset shards, TFRecords or parquet files (or converts a packed
// database) into one LMDB or blob file; see
// docs/USAGE.md and docs/FORMAT.md.
#include <malloc.h>

#include <cstdio>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "imagepack/formats.h"
#include "imagepack/pack.h"
#include "imagepack/storage.h"

using namespace imagepack;
namespace po = boost::program_options;

namespace {

// The command line, before it becomes PackOptions.
struct Args {
  PackOptions o;
  int max_size = 0, max_edge = 0;
  int64_t shuffle = -1;
  std::string format = "lmdb", encoding = "jpeg", shard_text = "0/1", filter_name = "triangle", errors_path;
  std::string direct_io = "auto", images_dir, dct = "accurate", mask_dtype = "uint8";
  std::vector<std::string> positional;
};

po::options_description Options(Args& a) {
  PackOptions& o = a.o;
  po::options_description opts("Options");
  opts.add_options()
      ("format", po::value(&a.format)->default_value("lmdb"), "lmdb or blob (one file to read into RAM or mmap)")
      ("encoding", po::value(&a.encoding)->default_value("jpeg"), "jpeg (bytes) or raw (decoded uint8 HWC pixels); not given: a database's or exported shards' own, else jpeg")
      ("channels", po::value(&o.prepare.decode.channels)->default_value(3), "3 (RGB) or 1 (gray); not given: a database's or exported shards' own, else 3")
      ("max-size", po::value(&a.max_size), "resize while packing: cap the shorter edge at N")
      ("max-edge", po::value(&a.max_edge), "resize while packing: cap the longer edge at N")
      ("quality", po::value(&o.prepare.quality)->default_value(90), "JPEG quality of re-encoded images; not given: a database's or exported shards' own, else 90")
      ("filter", po::value(&a.filter_name)->default_value("triangle"), "box, triangle, catrom, lanczos3")
      ("dct", po::value(&a.dct)->default_value("accurate"),
       "JPEG IDCT of what is decoded and stored (raw, resized): accurate (Pillow's pixels) or fast")
      ("reencode", "re-encode every JPEG (no byte-for-byte pass-through)")
      ("max-pixels", po::value(&o.prepare.decode.max_pixels)->default_value(200000000), "refuse larger sources")
      ("classes", po::value(&o.source.classes_file), "class order: one name per line (e.g. ImageNet's synset list)")
      ("labels", po::value(&o.source.labels_file), "flat SRC: lines 'FILENAME LABEL' (class name or index)")
      ("field", po::value(&o.source.fields)->composing(),
       "NAME[:KIND]=DIR: a paired tree matched by relative path without extension (KIND image, mask or "
       "depth; NAME mask* is a mask, depth* a depth map, any other an image); with --manifest, NAME:KIND "
       "declares a key's kind (e.g. target:image, source:text); repeatable")
      ("manifest", po::value(&o.source.manifest), "samples from a JSON Lines or CSV manifest (then only DST is given)")
      ("coco", po::value(&o.source.coco), "boxes from a COCO instances JSON; the images are in --images DIR")
      ("images", po::value(&a.images_dir), "with --coco: the folder its file_names are relative to")
      ("keep-members", po::value(&o.source.keep_members)->composing(),
       "WebDataset: keep members of extension EXT (e.g. txt) as text fields; repeatable")
      ("mask-member", po::value(&o.source.mask_members)->composing(),
       "WebDataset: KEY.NAME.png members are masks for this NAME (besides mask*); repeatable")
      ("allow-outside-paths", "manifest / COCO: allow paths outside the file's folder (absolute or ../)")
      ("no-class", "no class labels (label -1); for trees without class folders")
      ("mask-classes", po::value(&o.source.mask_classes), "masks: a classes file, or the class count N")
      ("mask-dtype", po::value(&a.mask_dtype)->default_value("uint8"),
       "masks: uint8 (up to 256 classes) or uint16 (65,536: ADE20K's full set, panoptic ids)")
      ("ignore-value", po::value(&o.source.mask_ignore),
       "masks: the value outside any class (-1: none; default the dtype's largest, 255 or 65535)")
      ("depth-scale", po::value(&o.source.depth_scale),
       "depth maps (16-bit PNGs): units per stored value, kept in the metadata (0.001: millimetres as metres)")
      ("depth-no-reading", po::value(&o.source.depth_no_reading)->default_value(0),
       "depth maps: the value meaning no reading, and the loader's padding")
      ("box-classes", po::value(&o.source.box_classes), "manifest boxes: a classes file naming their classes")
      ("shuffle", po::value(&a.shuffle), "store records in a permutation fixed by SEED")
      ("shard", po::value(&a.shard_text)->default_value("0/1"), "I/N: pack only shard I of N")
      ("records-per-value", po::value(&o.lmdb_records_per_value)->default_value(0),
       "LMDB: records stored in one value (0: 64 for jpeg, 1 for raw)")
      ("stats-sample", po::value(&o.stats_sample)->default_value(1024), "JPEG: images decoded for mean/std (0: none)")
      ("direct-io", po::value(&a.direct_io)->default_value("auto"),
       "blob: on (O_DIRECT, no page-cache copy), off, auto (on except on tmpfs)")
      ("threads", po::value(&o.threads)->default_value(0), "worker threads (0: all cores)")
      ("overwrite", "replace DST if it exists")
      ("errors", po::value(&a.errors_path), "write every skipped input and its reason to FILE")
      ("image-column", po::value(&o.source.image_column),
       "parquet: the image column (struct<bytes, path> or binary) where the metadata does not say")
      ("label-column", po::value(&o.source.label_column),
       "parquet: the label column (integers) where the metadata does not say")
      ("split", po::value(&o.source.split),
       "another tool's files (parquet, TFRecord, WebDataset): only this split's (train, validation, test, or NAME "
       "of NAME-00000-of-00004 files); needed when they hold several");
  cli::AddStandardOptions(opts);
  return opts;
}

// SRC(s) and DST from the positional arguments and --manifest / --coco /
// --images / --field; an empty string, or the usage error.
std::string ResolvePaths(Args& a) {
  PackOptions& o = a.o;
  // Several SRCs: WebDataset shards or patterns, read as one list
  // (webdataset's "::" joins them the same way).
  if (!a.positional.empty()) {
    o.dst = a.positional.back();
    a.positional.pop_back();
    for (const auto& p : a.positional) o.src += (o.src.empty() ? "" : "::") + p;
  }
  const SourceOptions& so = o.source;
  if ((!so.manifest.empty() || !so.coco.empty()) && o.dst.empty()) std::swap(o.src, o.dst);
  if (!so.coco.empty()) {
    if (a.images_dir.empty() || !o.src.empty()) return "--coco takes --images DIR and DST only";
    o.src = a.images_dir;
  } else if (!a.images_dir.empty()) {
    return "--images goes with --coco";
  }
  if (!so.manifest.empty() && (!o.src.empty() || !so.coco.empty()))
    return "--manifest takes DST only (paths are relative to the manifest)";
  if (so.manifest.empty() && (o.src.empty() || o.dst.empty())) return "SRC and DST are required";
  // A tree pairs --field NAME[:KIND]=DIR; a manifest's --field NAME:KIND
  // declares a key's kind (the library checks the rest).
  if (!so.fields.empty() && !so.coco.empty()) return "--field goes with an image tree or a manifest, not --coco";
  for (const auto& f : so.fields) {
    if (!so.manifest.empty() && f.find('=') != std::string::npos)
      return "--field " + f + ": with --manifest, NAME:KIND declares a key's kind (paths are in the manifest)";
    if (so.manifest.empty() && (f.find('=') == std::string::npos || f.front() == '=' || f.back() == '='))
      return "--field " + f + ": expected NAME=DIR or NAME:KIND=DIR (NAME:KIND alone goes with --manifest)";
  }
  return "";
}

// The rest of the command line into PackOptions; an empty string, or the
// usage error.
std::string Resolve(Args& a, const po::variables_map& vm) {
  PackOptions& o = a.o;
  if (a.mask_dtype != "uint8" && a.mask_dtype != "uint16") return "--mask-dtype must be uint8 or uint16";
  o.source.mask_bits = a.mask_dtype == "uint16" ? 16 : 8;
  const int top = (1 << o.source.mask_bits) - 1;
  if (o.source.mask_ignore != SourceOptions::kMaskIgnoreTop && (o.source.mask_ignore < -1 || o.source.mask_ignore > top))
    return "--ignore-value must be in -1.." + std::to_string(top) + " for a " + a.mask_dtype + " mask";
  if (vm.count("depth-scale") && !(o.source.depth_scale > 0)) return "--depth-scale must be positive";
  if (o.source.depth_no_reading < 0 || o.source.depth_no_reading > 65535) return "--depth-no-reading must be in 0..65535";
  o.source.no_class = vm.count("no-class") > 0;
  o.source.allow_outside = vm.count("allow-outside-paths") > 0;
  if (a.max_size > 0 && a.max_edge > 0) return "give at most one of --max-size and --max-edge";
  if (a.max_size < 0 || a.max_edge < 0) return "--max-size and --max-edge must be positive";
  if (o.prepare.quality < 1 || o.prepare.quality > 100) return "--quality must be in 1..100";
  if (vm.count("shuffle") && a.shuffle < 0) return "--shuffle takes a seed >= 0";
  if (o.stats_sample < 0) return "--stats-sample must be >= 0 (0: no statistics)";
  if (o.threads < 0) return "--threads must be >= 0 (0: all cores)";
  if (o.prepare.decode.max_pixels < 1) return "--max-pixels must be positive";
  if (!o.source.box_classes.empty() && o.source.manifest.empty())
    return "--box-classes names a manifest's box classes: it goes with --manifest";
  if (!o.source.labels_file.empty() && (!o.source.manifest.empty() || !o.source.coco.empty()))
    return "--labels labels a folder's images; a manifest or COCO file carries its own";
  if (!o.source.labels_file.empty() && o.source.no_class) return "--labels and --no-class contradict each other";
  if (o.prepare.decode.channels != 1 && o.prepare.decode.channels != 3) return "--channels must be 1 or 3";
  if (o.lmdb_records_per_value < 0 || o.lmdb_records_per_value > kMaxRecordsPerValue)
    return "--records-per-value must be in 0.." + std::to_string(kMaxRecordsPerValue);
  // Only local files hold an LMDB (it needs a memory map): the default
  // follows the destination's storage.
  if (vm["format"].defaulted()) {
    auto storage = OpenStorage(o.dst);
    if (storage.ok() && !storage.value()->local()) a.format = "blob";
  }
  auto fmt = ParseContainerFormat(a.format);
  if (!fmt.ok()) return fmt.status().message();
  auto enc = ParseEncoding(a.encoding);
  if (!enc.ok()) return enc.status().message();
  auto dio = ParseDirectIo(a.direct_io);
  if (!dio.ok()) return "--direct-io must be auto, on or off";
  o.direct_io = dio.value();
  if (o.direct_io == DirectIo::kOn && fmt.value() == ContainerFormat::kLmdb)
    return "--direct-io on applies to --format blob (liblmdb writes its own pages)";
  auto shard = ParseShard(a.shard_text);
  if (!shard.ok()) return shard.status().message();
  auto filter = ParseResampleFilter(a.filter_name);
  if (!filter.ok()) return filter.status().message();
  o.format = fmt.value();
  o.encoding = enc.value();
  o.shard = shard.value();
  o.prepare.decode.filter = filter.value();
  o.prepare.reencode = vm.count("reencode") > 0;
  if (a.dct != "accurate" && a.dct != "fast") return "--dct must be accurate or fast";
  o.prepare.decode.fast_dct = a.dct == "fast";
  if (a.max_size > 0) o.prepare.decode.limit = {SizeLimit::Mode::kShorterEdge, a.max_size};
  if (a.max_edge > 0) o.prepare.decode.limit = {SizeLimit::Mode::kLongerEdge, a.max_edge};
  o.shuffle_seed = a.shuffle;
  o.overwrite = vm.count("overwrite") > 0;
  // Not given: a database or exported shards keep their own (PackOptions::from_source).
  o.from_source.encoding = vm["encoding"].defaulted();
  o.from_source.channels = vm["channels"].defaulted();
  o.from_source.quality = vm["quality"].defaulted();
  return "";
}

// What the run will read and write, checked before any work: DST not
// already there (unless --overwrite), --errors writable, the lists the
// options name readable. An empty string, or why not (exit 1).
std::string CheckFiles(const Args& a) {
  const PackOptions& o = a.o;
  std::error_code ec;
  if (!o.overwrite && cli::IsLocalPath(o.dst) && std::filesystem::exists(o.dst, ec))
    return o.dst + " already exists (use --overwrite to replace it)";
  if (std::string bad = cli::CheckOutputFile("DST", o.dst); !bad.empty()) return bad;
  if (std::string bad = cli::CheckOutputFile("--errors", a.errors_path); !bad.empty()) return bad;
  const SourceOptions& so = o.source;
  const bool mask_count = !so.mask_classes.empty() &&
                          so.mask_classes.find_first_not_of("0123456789") == std::string::npos;
  for (const auto& [option, path] : {std::pair<std::string, std::string>{"--classes", so.classes_file},
                                     {"--labels", so.labels_file},
                                     {"--box-classes", so.box_classes},
                                     {"--mask-classes", mask_count ? "" : so.mask_classes},
                                     {"--manifest", so.manifest},
                                     {"--coco", so.coco}})
    if (std::string bad = cli::CheckInputFile(option, path); !bad.empty()) return bad;
  return "";
}

// The options as the metadata records them (paths are bytes: invalid
// UTF-8 replaced).
std::string OptionsJson(const Args& a) {
  const PackOptions& o = a.o;
  nlohmann::json oj = {{"format", a.format}, {"encoding", a.encoding}, {"channels", o.prepare.decode.channels},
                       {"max_size", a.max_size}, {"max_edge", a.max_edge}, {"quality", o.prepare.quality},
                       {"filter", a.filter_name}, {"dct", a.dct}, {"reencode", o.prepare.reencode},
                       {"shuffle", a.shuffle}, {"shard", a.shard_text},
                       {"records_per_value", o.lmdb_records_per_value}};
  if (!o.source.fields.empty()) oj["fields"] = o.source.fields;
  if (!o.source.manifest.empty()) oj["manifest"] = o.source.manifest;
  if (!o.source.coco.empty()) oj["coco"] = o.source.coco;
  if (o.source.no_class) oj["no_class"] = true;
  return oj.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// ", N things done" (", N annotations left out"), or nothing for none.
std::string Count(int64_t n, const char* noun, const char* done) {
  if (n == 0) return "";
  return ", " + std::to_string(n) + noun + (n == 1 ? "" : "s") + done;
}

// How the records were made from their sources: JPEG records copied
// as-is, resized or re-encoded; raw records decoded or resized (a raw
// database's pixels kept are copied as-is).
std::string HowStored(const PackSummary& s) {
  auto n = [](int64_t v) { return std::to_string(v); };
  if (s.meta.encoding == Encoding::kJpeg)
    return n(s.passed_through) + " copied as-is, " + n(s.resized) + " resized, " + n(s.reencoded) + " re-encoded";
  return n(s.decoded) + " decoded, " + n(s.resized) + " resized" +
         (s.passed_through > 0 ? ", " + n(s.passed_through) + " copied as-is" : "");
}

// The JPEG quality the pack used (its options, the source's where it kept
// that); 0 when unknown.
int QualityOf(const DatasetMeta& meta) {
  const auto j = nlohmann::json::parse(meta.options_json, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains("quality") && j["quality"].is_number_integer() ? j["quality"].get<int>() : 0;
}

// Lossless sources stored as JPEG lose detail: said, with the quality.
std::string Lossy(const PackSummary& s) {
  if (s.lossless_as_jpeg == 0) return "";
  const std::string q = std::to_string(QualityOf(s.meta));
  return "; " + std::to_string(s.lossless_as_jpeg) + " lossless image" + (s.lossless_as_jpeg == 1 ? "" : "s") +
         " stored as JPEG q" + q + " (lossy; --encoding raw keeps their pixels)";
}

// The summary line (or why nothing was written) and the exit code.
int Report(const Args& a, const Result<PackSummary>& result, const Progress& progress) {
  const std::string prog = cli::ProgramName();
  const PackOptions& o = a.o;
  if (!result.ok()) {
    std::cerr << prog << ": " << result.status().message() << "\n";
    return cli::kExitFatal;
  }
  const PackSummary& s = result.value();
  cli::ReportSkipped(s.errors, s.ignored, s.problems, a.errors_path, s.left_out);
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
      "%s: %lld records in %lld classes -> %s (%s, %s, shard %s%s): %s, %lld skipped%s; "
      "%s in, payload %s, file %s (%.1f%% over payload); %.1f s, %.1f images/s%s\n",
      prog.c_str(), static_cast<long long>(s.written), static_cast<long long>(s.classes), o.dst.c_str(),
      a.format.c_str(), EncodingName(s.meta.encoding), o.shard.ToString().c_str(), s.direct_io ? ", O_DIRECT" : "",
      HowStored(s).c_str(), static_cast<long long>(SkippedCount(s.errors)), Count(int64_t(s.left_out.size()), " annotation", " left out").c_str(),
      cli::HumanBytes(double(s.bytes_in)).c_str(),
      cli::HumanBytes(double(s.payload_bytes)).c_str(), cli::HumanBytes(double(s.file_bytes)).c_str(),
      s.payload_bytes > 0 ? 100.0 * (double(s.file_bytes) / double(s.payload_bytes) - 1) : 0.0, s.seconds,
      s.seconds > 0 ? (s.written + double(SkippedCount(s.errors))) / s.seconds : 0.0, Lossy(s).c_str());
  return s.errors.empty() && s.left_out.empty() ? cli::kExitOk : cli::kExitSomeSkipped;
}

}  // namespace

int main(int argc, char** argv) {
  // Every record is a fresh buffer of tens to hundreds of KB freed a moment
  // later on another thread. glibc's defaults hand freed heap tops back to
  // the kernel and fault them in again (zeroed) for the next records: raw
  // packing spent 40% of its system time there. Keep up to 256 MB of freed
  // memory for reuse; what is resident stays bounded by the pipeline's
  // records in flight (peak RSS unchanged, ~35 MB on 20,000 JPEGs).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  Args a;
  po::options_description opts = Options(a);
  po::options_description hidden;
  hidden.add_options()("paths", po::value(&a.positional)->composing());
  po::positional_options_description pos;
  pos.add("paths", -1);
  cli::SetHelpEpilog(SourceFormatsHelp());
  auto vm = cli::ParseOrExit(argc, argv, "SRC [SRC...] DST [options]", opts, hidden, pos);
  if (std::string bad = ResolvePaths(a); !bad.empty()) return cli::UsageError(bad);
  if (std::string bad = Resolve(a, vm); !bad.empty()) return cli::UsageError(bad);
  if (std::string bad = CheckFiles(a); !bad.empty()) return cli::FatalError(bad);
  PackOptions& o = a.o;
  o.tool = cli::ProgramName() + " " + IMAGEPACK_VERSION;
  o.options_json = OptionsJson(a);
  o.cancel = cli::InstallCancelHandler();
  Progress progress;
  o.progress = &progress;
  cli::ProgressLine line(&progress, "pack", vm.count("quiet") > 0);
  auto result = PackDataset(o);
  line.Stop();
  return Report(a, result, progress);
}
