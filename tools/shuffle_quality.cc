// shuffle_quality DB... [--batch B] [--world W] [--epoch E] [--block-mb M...] [--window-blocks K...]
// How well each epoch order mixes the dataset's labels, and how often the
// same records meet in a batch again the next epoch, against a full
// permutation: the table that picks --order, --block-mb and
// --window-blocks for a dataset (docs/LOADER.md, "Order").
#include <cstdio>
#include <iostream>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "cli.h"
#include "imagepack/loader.h"
#include "imagepack/order.h"
#include "imagepack/store.h"

using namespace imagepack;
namespace po = boost::program_options;

namespace {

// The databases' bytes on disk (what a block size in MB divides).
int64_t FileBytes(const std::vector<std::string>& paths) {
  int64_t bytes = 0;
  for (const auto& p : paths) {
    struct stat st;
    if (::stat(p.c_str(), &st) == 0) bytes += st.st_size;
  }
  return bytes;
}

// A block as large as the data measures nothing about blocks: said, naming
// the block sizes (in MB) at which the n records are one block.
void NoteWholeBlocks(const std::vector<std::string>& whole, int64_t n) {
  if (whole.empty()) return;
  std::string sizes;
  for (const auto& m : whole) sizes += (sizes.empty() ? "" : ", ") + m;
  std::printf("note: at --block-mb %s the %lld records are one block: those rows cannot show how block order "
              "mixes this data (give a smaller --block-mb, or measure a larger database)\n",
              sizes.c_str(), static_cast<long long>(n));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> paths;
  int batch = 256, world = 1;
  int64_t epoch = 0;
  uint64_t seed = 0;
  std::vector<double> block_mb;
  std::vector<int> windows;
  po::options_description opts("Options");
  opts.add_options()
      ("batch", po::value(&batch)->default_value(256), "batch size per rank")
      ("world", po::value(&world)->default_value(1), "ranks (the order of rank 0 is measured)")
      ("epoch", po::value(&epoch)->default_value(0), "epoch")
      ("seed", po::value(&seed)->default_value(0), "seed")
      ("block-mb", po::value(&block_mb)->multitoken(), "block sizes to try (default 1 4 16)")
      ("window-blocks", po::value(&windows)->multitoken(), "windows to try (default 4 16 64)");
  cli::AddStandardOptions(opts);
  po::options_description hidden;
  hidden.add_options()("db", po::value(&paths)->multitoken());
  po::positional_options_description pos;
  pos.add("db", -1);
  cli::ParseOrExit(argc, argv, "DB... [options]", opts, hidden, pos);
  if (paths.empty()) return cli::UsageError("give at least one database");
  if (batch < 1 || world < 1) return cli::UsageError("--batch and --world must be positive");
  if (epoch < 0) return cli::UsageError("--epoch must be >= 0");
  for (double mb : block_mb)
    if (!(mb > 0 && mb <= 1 << 20)) return cli::UsageError("--block-mb takes sizes in MB above 0 (at most 1 TB)");
  for (int w : windows)
    if (w < 1) return cli::UsageError("--window-blocks takes windows of at least 1 block");
  if (block_mb.empty()) block_mb = {1, 4, 16};
  if (windows.empty()) windows = {4, 16, 64};
  auto labels = ReadLabels(paths);
  if (!labels.ok()) {
    std::cerr << cli::ProgramName() << ": " << labels.status().message() << "\n";
    return cli::kExitFatal;
  }
  auto src = OpenDatabases(paths);
  if (!src.ok()) {
    std::cerr << cli::ProgramName() << ": " << src.status().message() << "\n";
    return cli::kExitFatal;
  }
  const int64_t bytes = FileBytes(paths);
  const int64_t n = static_cast<int64_t>(labels->size());
  OrderSpec spec;
  spec.seed = seed;
  spec.world = world;
  spec.kind = Order::kRandom;
  auto measure = [&](const OrderSpec& spec) {
    const auto mine = DealPositions(EpochOrder(n, spec, epoch), 0, world, false);
    const auto next = DealPositions(EpochOrder(n, spec, epoch + 1), 0, world, false);
    return MeasureShuffle(labels.value(), mine, batch, next);
  };
  // A full permutation measured first: its spread says how far from 1 a
  // score may lie by chance. No full batch: nothing to measure, said.
  const ShuffleQuality random = measure(spec);
  if (random.batches == 0)
    return cli::UsageError("--batch " + std::to_string(batch) + " is more than the records rank 0 reads (" +
                           std::to_string(n) + " records, world " + std::to_string(world) +
                           "): no full batch to measure");
  std::printf("%lld records, %.1f MB, batch %d, world %d; score = distinct labels per batch / a full "
              "permutation's expectation: a full permutation scores 1 on average, +-%.3f (1 s.e.) over the %lld "
              "batches of one epoch; above 1 by chance, or when an order spreads labels more evenly than chance\n",
              static_cast<long long>(n), double(bytes) / 1e6, batch, world, random.score_se(),
              static_cast<long long>(random.batches));
  std::printf("%-10s %8s %7s %13s %15s %7s %15s %17s\n", "order", "block_MB", "window", "records/block",
              "labels/batch", "score", "same_next", "repeat_pairs");
  auto row = [&](const OrderSpec& spec, const std::string& bmb, const std::string& win) {
    const ShuffleQuality q = spec.kind == Order::kRandom ? random : measure(spec);
    std::printf("%-10s %8s %7s %13s %7.1f/%-7.1f %7.3f %6.4f/%-8.4f %7.4f/%-8.4f\n", OrderName(spec.kind),
                bmb.c_str(), win.c_str(),
                spec.kind == Order::kBlocks ? std::to_string(spec.block_records).c_str() : "-", q.classes_per_batch,
                q.classes_per_batch_ref, q.score(), q.same_label_pairs, q.same_label_pairs_ref, q.repeat_pairs,
                q.repeat_pairs_ref);
  };
  row(spec, "-", "-");
  spec.kind = Order::kSequential;
  row(spec, "-", "-");
  spec.kind = Order::kBlocks;
  std::vector<std::string> whole;  // block sizes at which the database is one block
  for (double mb : block_mb)
    for (int w : windows) {
      spec.block_records =
          BlockRecords(n, bytes, static_cast<int64_t>(mb * (1 << 20)), src.value()->meta().records_per_value);
      if (spec.block_records >= n && w == windows.front()) {
        char m[32];
        std::snprintf(m, sizeof m, "%g", mb);
        whole.push_back(m);
      }
      spec.window_blocks = w;
      char b[32];
      std::snprintf(b, sizeof b, "%g", mb);
      row(spec, b, std::to_string(w));
    }
  NoteWholeBlocks(whole, n);
  return 0;
}
