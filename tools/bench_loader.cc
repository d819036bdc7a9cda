// bench_loader DB... [--batch B] [--threads T] [--size 224] [--in-ram] [--epochs E]
// Streams augmented batches from packed records and prints images/s, MB/s
// and where the time went; see docs/BENCHMARKS.md.
#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "imagepack/loader.h"

using namespace imagepack;
namespace po = boost::program_options;

namespace {
// A field of /proc/self/status or smaps_rollup, in kB.
long StatusKb(const char* file, const std::string& key) {
  std::ifstream f(file);
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(key.size()));
  return 0;
}

// Rss and Pss (kB) of this process's mappings of the files `paths` (their
// canonical names, or a shared in-RAM copy of one: /dev/shm).
void MappedKb(const std::vector<std::string>& paths, long* rss, long* pss) {
  std::vector<std::string> names;
  for (const auto& p : paths) {
    std::error_code ec;
    names.push_back(std::filesystem::weakly_canonical(p, ec).string());
  }
  std::ifstream f("/proc/self/smaps");
  std::string line;
  bool mine = false;
  while (std::getline(f, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < 16) {
      const auto slash = line.find('/');
      const std::string file = slash == std::string::npos ? "" : line.substr(slash);
      mine = file.rfind("/dev/shm/", 0) == 0 ||
             std::find(names.begin(), names.end(), file) != names.end();
      continue;
    }
    if (!mine) continue;
    if (line.rfind("Rss:", 0) == 0) *rss += std::stol(line.substr(4));
    if (line.rfind("Pss:", 0) == 0) *pss += std::stol(line.substr(4));
  }
}

struct Run {
  LoaderOptions o;
  int epochs = 1;
  int64_t max_batches = 0;
  std::string transform = "train";
  bool copy = false, digest = false;
  int64_t resume_at = -1;  // the first epoch restored at this position
  double linger = 0;       // seconds to wait before measuring memory (other ranks still mapped)
};

// The command line into `r`; an empty string, or the usage error.
std::string ParseArgs(int argc, char** argv, Run& r) {
  LoaderOptions& o = r.o;
  const LoaderOptions d;  // the defaults, stated once in loader.h
  int& epochs = r.epochs;
  int64_t& max_batches = r.max_batches;
  std::string& transform = r.transform;
  std::string layout = "nchw", order, dct, auto_augment, interpolation;
  po::options_description opts("Options");
  opts.add_options()
      ("batch", po::value(&o.batch_size)->default_value(d.batch_size), "batch size")
      ("threads", po::value(&o.threads)->default_value(d.threads), "decode threads (0: all cores)")
      ("size", po::value(&o.size)->default_value(d.size), "output size")
      ("transform", po::value(&transform)->default_value("train"), TransformNames().c_str())
      ("layout", po::value(&layout)->default_value("nchw"), "nchw or nhwc")
      ("channels", po::value(&o.channels)->default_value(d.channels), "1 or 3 (0: the dataset's)")
      ("in-ram", "hold the database in RAM (one shared copy per machine)")
      ("lock-in-ram", "with --in-ram: mlock the copy")
      ("order", po::value(&order)->default_value(OrderName(d.order)), "random, blocks, sequential or auto")
      ("block-mb", po::value(&o.block_mb)->default_value(d.block_mb), "--order blocks: block size")
      ("window-blocks", po::value(&o.window_blocks)->default_value(d.window_blocks), "--order blocks: blocks per window")
      ("cache-dir", po::value(&o.cache_dir), "remote datasets (s3://, https://): keep fetched blocks in this local folder")
      ("ca-file", po::value(&o.ca_file), "https:// datasets: the CA that verifies the server (else SSL_CERT_FILE)")
      ("cache-limit", po::value(&o.cache_limit_mb)->default_value(d.cache_limit_mb), "MB kept in --cache-dir (0: 20480)")
      ("io-threads", po::value(&o.io_threads)->default_value(d.io_threads), "read-ahead threads (-1: 4 with blocks)")
      ("read-chunk-mb", po::value(&o.read_chunk_mb)->default_value(d.read_chunk_mb), "size of each read-ahead read")
      ("rank", po::value(&o.rank)->default_value(d.rank), "this process's rank (several processes, one node)")
      ("world", po::value(&o.world_size)->default_value(d.world_size), "ranks")
      ("no-dct-scaling", "always decode JPEGs at full scale")
      ("dct", po::value(&dct)->default_value(d.fast_dct ? "fast" : "accurate"), "JPEG IDCT: fast, or accurate (Pillow's pixels)")
      ("copy", "take batches with Next() (a copy into our buffer) instead of NextView()")
      ("epochs", po::value(&epochs)->default_value(1), "passes over the data")
      ("batches", po::value(&max_batches)->default_value(0), "stop after N batches per epoch (0: all)")
      ("seed", po::value(&o.seed)->default_value(d.seed), "sampling and augmentation seed")
      ("auto-augment", po::value(&auto_augment)->default_value("none"), "train: ta_wide, ra, imagenet, cifar10, svhn, augmix or none")
      ("ra-magnitude", po::value(&o.augment.ra_magnitude)->default_value(d.augment.ra_magnitude), "--auto-augment ra: magnitude bin")
      ("augmix-severity", po::value(&o.augment.augmix_severity)->default_value(d.augment.augmix_severity), "--auto-augment augmix: severity 1..10")
      ("random-erase", po::value(&o.erase.p)->default_value(d.erase.p), "train: RandomErasing's probability")
      ("interpolation", po::value(&interpolation)->default_value("bilinear"), "the crop's resampling: bilinear or bicubic")
      ("digest", "print each batch's XXH3-64 of images and of labels (to compare runs and bindings)")
      ("resume-at", po::value(&r.resume_at)->default_value(-1), "start the first epoch restored at this position (Restore), timed")
      ("linger", po::value(&r.linger)->default_value(0), "seconds to wait before measuring memory (ranks on a node: all still mapped)");
  cli::AddStandardOptions(opts);
  po::options_description hidden;
  hidden.add_options()("db", po::value(&o.paths)->multitoken());
  po::positional_options_description pos;
  pos.add("db", -1);
  auto vm = cli::ParseOrExit(argc, argv, "DB... [options]", opts, hidden, pos);
  if (o.paths.empty()) return "give at least one database";
  auto parsed_transform = ParseTransform(transform);
  if (!parsed_transform.ok()) return parsed_transform.status().message();
  o.transform = parsed_transform.value();
  if (layout != "nchw" && layout != "nhwc") return "unknown --layout '" + layout + "'";
  o.layout = layout == "nhwc" ? Layout::kNHWC : Layout::kNCHW;
  o.in_ram = vm.count("in-ram") > 0;
  o.lock_in_ram = vm.count("lock-in-ram") > 0;
  auto parsed = ParseOrder(order);
  if (!parsed.ok()) return parsed.status().message();
  o.order = parsed.value();
  o.dct_scaling = vm.count("no-dct-scaling") == 0;
  if (dct != "fast" && dct != "accurate") return "--dct must be fast or accurate";
  o.fast_dct = dct == "fast";
  if (!ParseAutoAugment(auto_augment, &o.augment.kind)) return "unknown --auto-augment '" + auto_augment + "'";
  if (interpolation != "bilinear" && interpolation != "bicubic") return "--interpolation must be bilinear or bicubic";
  o.filter = interpolation == "bicubic" ? ResampleFilter::kCatmullRom : ResampleFilter::kTriangle;
  r.copy = vm.count("copy") > 0;
  r.digest = vm.count("digest") > 0;
  return "";
}

using Clock = std::chrono::steady_clock;

struct Timing {
  Clock::time_point start, first;  // the first batch: a window order reads a whole window first
  int64_t images = 0, first_images = 0;
  double restore_s = -1;  // --resume-at: Restore()'s own time
};

// Takes the epochs' batches (NextView, or Next with --copy), printing each
// one's digest with --digest.
Status Stream(Loader& l, const Run& r, Timing* t) {
  const size_t sample = size_t(r.o.size) * r.o.size * l.channels();
  std::vector<uint8_t> images(sample * r.o.batch_size);
  std::vector<int64_t> labels(r.o.batch_size);
  t->start = t->first = Clock::now();
  for (int e = 0; e < r.epochs; ++e) {
    if (e == 0 && r.resume_at >= 0) {
      l.Restore(LoaderState{0, r.resume_at});
      t->restore_s = std::chrono::duration<double>(Clock::now() - t->start).count();
    } else {
      l.StartEpoch(e);
    }
    for (int64_t b = 0; r.max_batches == 0 || b < r.max_batches; ++b) {
      const uint8_t* px = images.data();
      const int64_t* lb = labels.data();
      int got = 0;
      if (r.copy) {
        auto n = l.Next(images.data(), labels.data());
        if (!n.ok()) return n.status();
        got = n.value();
      } else {
        auto v = l.NextView();
        if (!v.ok()) return v.status();
        got = v->count, px = v->images, lb = v->labels;
      }
      if (got == 0) break;
      if (r.digest)
        std::printf("batch %d %lld %d %016llx %016llx\n", e, static_cast<long long>(b), got,
                    static_cast<unsigned long long>(XXH3_64bits(px, sample * size_t(got))),
                    static_cast<unsigned long long>(XXH3_64bits(lb, sizeof(int64_t) * size_t(got))));
      t->images += got;
      if (e == 0 && b == 0) {
        t->first = Clock::now();
        t->first_images = t->images;
      }
    }
  }
  return Status::Ok();
}

void Print(const Loader& l, const Run& r, const Timing& t, double open_s) {
  const LoaderOptions& o = r.o;
  const double secs = std::chrono::duration<double>(Clock::now() - t.start).count();
  const int64_t n = t.images;
  LoaderStats s = l.stats();
  const double work = s.read_seconds + s.decode_seconds;
  std::printf("bench_loader: %lld images (%s, batch %d, %dx%d, %s, %s, order %s) in %.2f s: %.1f images/s, "
              "%.1f MB/s read\n",
              static_cast<long long>(n), r.transform.c_str(), o.batch_size, o.size, o.size,
              o.in_ram ? "in RAM" : "from storage", r.copy ? "Next" : "NextView", OrderName(l.order()), secs,
              n / secs, s.bytes_read / secs / 1e6);
  std::printf("  time in workers: read %.1f%%, decode+crop+resize %.1f%%; consumer waited %.2f s; open %.2f s; "
              "peak RSS %ld MiB\n",
              work > 0 ? 100 * s.read_seconds / work : 0.0, work > 0 ? 100 * s.decode_seconds / work : 0.0,
              s.wait_seconds, open_s, StatusKb("/proc/self/status", "VmHWM:") / 1024);
  const double after_first = std::chrono::duration<double>(Clock::now() - t.first).count();
  if (l.order() == Order::kBlocks)
    std::printf("  blocks of %lld records, %d per window; first batch after %.2f s, then %.1f images/s\n",
                static_cast<long long>(l.block_records()), o.window_blocks,
                std::chrono::duration<double>(t.first - t.start).count(),
                after_first > 0 ? (n - t.first_images) / after_first : 0.0);
  if (s.read_ahead_bytes > 0)
    std::printf("  read ahead %.1f MB; batches waited %.2f s for it\n", s.read_ahead_bytes / 1e6,
                s.read_ahead_wait_seconds);
  if (s.remote_requests > 0)
    std::printf("  object storage: %lld requests, from the network %.3f MB (%.1f MB/s)\n",
                static_cast<long long>(s.remote_requests), s.remote_bytes / 1e6, s.remote_bytes / secs / 1e6);
  if (t.restore_s >= 0)
    std::printf("  restored at position %lld in %.2f ms; first batch after %.2f ms\n",
                static_cast<long long>(r.resume_at), 1e3 * t.restore_s,
                1e3 * std::chrono::duration<double>(t.first - t.start).count());
  if (r.linger > 0) std::this_thread::sleep_for(std::chrono::duration<double>(r.linger));
  // Memory at the end: private (anonymous), shared memory mapped, and the
  // proportional share (Pss) of everything mapped; the databases' own
  // mappings (a blob's index, LMDB's tree: pages every rank shares).
  long db_rss = 0, db_pss = 0;
  MappedKb(r.o.paths, &db_rss, &db_pss);
  std::printf("  memory: RssAnon %ld MiB, RssShmem %ld MiB, Pss %ld MiB; database mappings Rss %.1f MiB, "
              "Pss %.1f MiB\n",
              StatusKb("/proc/self/status", "RssAnon:") / 1024, StatusKb("/proc/self/status", "RssShmem:") / 1024,
              StatusKb("/proc/self/smaps_rollup", "Pss:") / 1024, db_rss / 1024.0, db_pss / 1024.0);
}

}  // namespace

int main(int argc, char** argv) {
  Run r;
  if (std::string bad = ParseArgs(argc, argv, r); !bad.empty()) return cli::UsageError(bad);
  const auto t_open = Clock::now();
  auto loader = Loader::Open(r.o);
  if (!loader.ok()) {
    std::cerr << cli::ProgramName() << ": " << loader.status().message() << "\n";
    return cli::kExitFatal;
  }
  const double open_s = std::chrono::duration<double>(Clock::now() - t_open).count();
  Timing t;
  if (Status st = Stream(*loader.value(), r, &t); !st.ok()) {
    std::cerr << cli::ProgramName() << ": " << st.message() << "\n";
    return cli::kExitFatal;
  }
  Print(*loader.value(), r, t, open_s);
  return 0;
}
