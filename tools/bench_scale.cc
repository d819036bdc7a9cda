// bench_scale OUT --records N [--format blob|lmdb] [--shards S] [--tree]
// Makes big datasets quickly for the scale benchmark (docs/BENCHMARKS.md,
// "Scale"): tiny raw records written straight into the container (no
// pack pipeline), in one file or S shards; or, with --tree, an image tree
// of N hard links to a few tiny JPEGs (class folders), for pack_lmdb.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "imagepack/image.h"
#include "imagepack/store.h"

using namespace imagepack;
namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

struct Options {
  std::string out;
  int64_t records = 0;
  std::string format = "blob";
  int shards = 1;
  int classes = 1000;
  int size = 4;
  bool tree = false;
};

std::string Name(const char* fmt, int64_t a, int64_t b = 0) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, static_cast<long long>(a), static_cast<long long>(b));
  return buf;
}

// Record i: size x size RGB pixels from i, label i % classes, path
// "cCCCC/IIIIIIIIII".
Status MakeShard(const Options& o, const std::string& path, int64_t first, int64_t count, Shard shard) {
  auto format = ParseContainerFormat(o.format);
  if (!format.ok()) return format.status();
  WriterOptions wo;
  wo.overwrite = true;
  auto w = CreateWriter(format.value(), path, wo);
  if (!w.ok()) return w.status();
  DatasetMeta meta;
  meta.count = count;
  meta.encoding = Encoding::kRaw;
  meta.channels = 3;
  meta.shard = shard;
  meta.tool = "bench_scale";
  meta.options_json = "{\"shuffle\": 0}";  // labels cycle: every run of records mixes the classes
  for (int c = 0; c < o.classes; ++c) meta.classes.push_back(Name("c%04lld", c));
  meta.label_counts.assign(static_cast<size_t>(o.classes), 0);
  std::vector<uint8_t> px(size_t(o.size) * o.size * 3);
  for (int64_t i = first; i < first + count; ++i) {
    for (size_t k = 0; k < px.size(); ++k) px[k] = static_cast<uint8_t>(i * 31 + k * 7);
    const int32_t label = static_cast<int32_t>(i % o.classes);
    ++meta.label_counts[static_cast<size_t>(label)];
    meta.payload_bytes += static_cast<int64_t>(px.size());
    IMAGEPACK_RETURN_IF_ERROR(w.value()->Add(EncodeRecord(
        {Encoding::kRaw, 3, label, uint32_t(o.size), uint32_t(o.size)}, Name("c%04lld/%010lld", label, i), px.data(),
        px.size())));
  }
  meta.created = UtcNow();
  return w.value()->Finish(meta);
}

// N hard links in class folders (cCCCC/IIIIIIIIII.jpg) to tiny JPEGs, one
// per class and 50,000 links (ext4 allows 65,000 links to a file).
Status MakeTree(const Options& o) {
  const fs::path root(o.out), sources = fs::path(o.out + ".sources");
  std::error_code ec;
  fs::create_directories(root, ec);
  fs::create_directories(sources, ec);
  if (ec) return Status::IOError("cannot create " + o.out + ": " + ec.message());
  constexpr int64_t kLinks = 50000;
  std::vector<std::string> made;
  for (int64_t i = 0; i < o.records; ++i) {
    const int64_t label = i % o.classes;
    const int64_t source = label + int64_t(o.classes) * (i / (int64_t(o.classes) * kLinks));
    const std::string src = (sources / Name("%lld.jpg", source)).string();
    if (static_cast<size_t>(source) >= made.size()) {
      Image img;
      img.width = img.height = o.size < 8 ? 8 : o.size;
      img.channels = 3;
      img.pixels.resize(img.stride() * img.height);
      for (size_t k = 0; k < img.pixels.size(); ++k) img.pixels[k] = static_cast<uint8_t>(source * 13 + k * 5);
      auto jpeg = EncodeJpeg(img, 75);
      if (!jpeg.ok()) return jpeg.status();
      IMAGEPACK_RETURN_IF_ERROR(WriteFileAtomic(src, jpeg->data(), jpeg->size()));
      made.push_back(src);
    }
    const fs::path dir = root / Name("c%04lld", label);
    if (i < o.classes) fs::create_directories(dir, ec);
    const std::string dst = (dir / Name("%010lld.jpg", i)).string();
    if (::link(made[static_cast<size_t>(source)].c_str(), dst.c_str()) != 0 && errno != EEXIST)
      return Status::FromErrno("link " + dst, errno);
  }
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  po::options_description opts("Options");
  opts.add_options()
      ("records", po::value(&o.records), "records (or files with --tree) in all")
      ("format", po::value(&o.format)->default_value(o.format), "lmdb or blob")
      ("shards", po::value(&o.shards)->default_value(o.shards), "files OUT-00000 .. (one file: OUT itself)")
      ("classes", po::value(&o.classes)->default_value(o.classes), "labels cycle through this many classes")
      ("size", po::value(&o.size)->default_value(o.size), "records: size x size RGB pixels")
      ("tree", "make an image tree of hard links at OUT instead (tiny JPEGs in OUT.sources)");
  cli::AddStandardOptions(opts);
  po::options_description hidden;
  hidden.add_options()("out", po::value(&o.out));
  po::positional_options_description pos;
  pos.add("out", 1);
  auto vm = cli::ParseOrExit(argc, argv, "OUT --records N [options]", opts, hidden, pos);
  o.tree = vm.count("tree") > 0;
  if (o.out.empty() || o.records < 0 || o.shards < 1 || o.classes < 1 || o.size < 1 || o.size > 64)
    return cli::UsageError("give OUT, --records >= 0, --shards >= 1, --classes >= 1 and --size in 1..64");
  const auto t0 = std::chrono::steady_clock::now();
  Status st;
  if (o.tree) {
    st = MakeTree(o);
  } else {
    for (int s = 0; s < o.shards && st.ok(); ++s) {
      const ShardRange r = RangeOf(o.records, s, o.shards);
      const std::string path = o.shards == 1 ? o.out : o.out + Name("-%05lld", s);
      st = MakeShard(o, path, r.begin, r.end - r.begin, {s, o.shards});
    }
  }
  if (!st.ok()) {
    std::cerr << cli::ProgramName() << ": " << st.message() << "\n";
    return cli::kExitFatal;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("bench_scale: %lld %s in %.1f s (%.0f per second)\n", static_cast<long long>(o.records),
              o.tree ? "files linked" : "records written", secs, o.records / std::max(secs, 1e-9));
  return 0;
}
