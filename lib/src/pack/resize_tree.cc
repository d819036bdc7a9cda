#include "imagepack/resize_tree.h"

#include <tbb/global_control.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "imagepack/files.h"
#include "imagepack/mask.h"
#include "base/threads.h"

namespace fs = std::filesystem;

namespace imagepack {
namespace {

// kDestinationFailed: the output could not be written (disk full, read-only,
// quota): not the input's fault, and every later file would fail the same
// way, so the run stops with one error.
enum class Outcome { kWritten, kPassedThrough, kAlreadyDone, kFailed, kDestinationFailed };

struct Item {
  size_t index = 0;
  Outcome outcome = Outcome::kFailed;
  std::string reason;
  int64_t bytes_in = 0;
  int64_t bytes_out = 0;
};

// A label or depth map resized by nearest neighbour, as PNG bytes of its
// own sample width (a 16-bit PNG stays 16-bit: ids over 255, depth in mm);
// `same` when it needed no resize (its bytes are then kept).
Result<std::vector<uint8_t>> ResizeMask(const std::vector<uint8_t>& data, const SizeLimit& limit, bool* same) {
  // IHDR's bit depth, byte 24 of a PNG (DecodeMask refuses anything else).
  const int bits = data.size() > 24 && data[24] == 16 ? 16 : 8;
  auto mask = DecodeMask(data.data(), data.size(), bits);
  if (!mask.ok()) return mask.status();
  auto [tw, th] = TargetSize(mask->width, mask->height, limit);
  *same = tw == mask->width && th == mask->height;
  if (*same) return data;
  return EncodeMaskPng(ResizeMaskNearest(mask->pixels.data(), mask->width, mask->height, tw, th, mask->channels));
}

Item ProcessOne(const ResizeTreeOptions& opts, const std::string& rel, size_t index) {
  Item item;
  item.index = index;
  const std::string in_path = (fs::path(opts.src) / rel).string();
  const std::string out_path =
      (fs::path(opts.dst) / (opts.masks ? fs::path(rel).replace_extension(".png") : fs::path(rel))).string();
  std::error_code ec;
  if (!opts.overwrite && fs::exists(out_path, ec)) {
    item.outcome = Outcome::kAlreadyDone;
    return item;
  }
  auto data = ReadFile(in_path);
  if (!data.ok()) {
    item.reason = data.status().message();
    return item;
  }
  item.bytes_in = static_cast<int64_t>(data->size());
  if (opts.masks) {
    bool same = false;
    auto png = ResizeMask(data.value(), opts.prepare.decode.limit, &same);
    if (!png.ok()) {
      item.reason = png.status().message();
      return item;
    }
    Status st = WriteFileAtomic(out_path, png->data(), png->size());
    if (!st.ok()) {
      item.reason = st.message();
      item.outcome = Outcome::kDestinationFailed;
      return item;
    }
    item.bytes_out = static_cast<int64_t>(png->size());
    item.outcome = same ? Outcome::kPassedThrough : Outcome::kWritten;
    return item;
  }
  auto prepared = PrepareJpeg(data->data(), data->size(), opts.prepare);
  if (!prepared.ok()) {
    item.reason = prepared.status().message();
    return item;
  }
  Status st = WriteFileAtomic(out_path, prepared->bytes.data(), prepared->bytes.size());
  if (!st.ok()) {
    item.reason = st.message();
    item.outcome = Outcome::kDestinationFailed;
    return item;
  }
  item.bytes_out = static_cast<int64_t>(prepared->bytes.size());
  item.outcome = prepared->passed_through ? Outcome::kPassedThrough : Outcome::kWritten;
  return item;
}

}  // namespace

Result<ResizeTreeSummary> ResizeTree(const ResizeTreeOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  if (opts.src.empty() || opts.dst.empty()) return Status::InvalidArgument("src and dst are required");
  std::error_code ec;
  // A destination inside the source would be listed as input by a re-run.
  const fs::path src_abs = fs::weakly_canonical(opts.src, ec);
  const fs::path dst_abs = fs::weakly_canonical(opts.dst, ec);
  if (std::mismatch(src_abs.begin(), src_abs.end(), dst_abs.begin(), dst_abs.end()).first == src_abs.end())
    return Status::InvalidArgument("destination " + opts.dst + " is the source directory or inside it");
  auto listing = ListTree(opts.src);
  if (!listing.ok()) return listing.status();
  // Nothing to do is a failure, said before DST is made.
  if (listing->images.empty())
    return Status::NotFound(opts.src + " holds no images" +
                            (listing->ignored.empty()
                                 ? std::string()
                                 : " (" + std::to_string(listing->ignored.size()) +
                                       " files ignored for their names; images are named jpg jpeg jpe png gif bmp "
                                       "tif tiff webp ppm pgm pbm pnm)"));
  fs::create_directories(opts.dst, ec);
  if (ec) return Status::IOError("cannot create destination " + opts.dst + ": " + ec.message());

  ResizeTreeSummary summary;
  summary.ignored = std::move(listing->ignored);
  summary.problems = std::move(listing->problems);
  summary.stale_temps_removed = RemoveStaleTemps(opts.dst);

  std::vector<std::string> files;
  for (auto& rel : listing->images)
    if (ShardOfPath(rel, opts.shard.count) == opts.shard.index) files.push_back(std::move(rel));
  summary.files = static_cast<int64_t>(files.size());
  if (opts.progress) opts.progress->total = summary.files;

  const int threads = internal::ResolveThreads(opts.threads);
  tbb::task_arena arena(std::max(threads, 1));
  size_t next = 0;
  std::atomic<bool> stop_on_destination{false};
  arena.execute([&] {
    tbb::parallel_pipeline(
        static_cast<size_t>(std::max(threads, 1)) * 2,
        tbb::make_filter<void, size_t>(
            tbb::filter_mode::serial_in_order,
            [&](tbb::flow_control& fc) -> size_t {
              if (next >= files.size() || (opts.cancel && opts.cancel->load()) || stop_on_destination.load()) {
                fc.stop();
                return 0;
              }
              return next++;
            }) &
            tbb::make_filter<size_t, Item>(
                tbb::filter_mode::parallel,
                [&](size_t i) { return ProcessOne(opts, files[i], i); }) &
            tbb::make_filter<Item, void>(tbb::filter_mode::serial_out_of_order, [&](Item item) {
              switch (item.outcome) {
                case Outcome::kWritten: ++summary.written; break;
                case Outcome::kPassedThrough: ++summary.written; ++summary.passed_through; break;
                case Outcome::kAlreadyDone: ++summary.already_done; break;
                case Outcome::kFailed:
                  summary.errors.push_back({files[item.index], item.reason});
                  if (opts.progress) ++opts.progress->failed;
                  break;
                case Outcome::kDestinationFailed:
                  if (summary.destination_error.empty()) summary.destination_error = item.reason;
                  stop_on_destination = true;
                  return;  // not counted as done: a re-run writes it
              }
              summary.bytes_in += item.bytes_in;
              summary.bytes_out += item.bytes_out;
              if (opts.progress) {
                opts.progress->bytes_in += item.bytes_in;
                opts.progress->bytes_out += item.bytes_out;
                ++opts.progress->done;
              }
            }));
  });
  summary.cancelled = next < files.size() && summary.destination_error.empty();
  std::sort(summary.errors.begin(), summary.errors.end(),
            [](const FileError& a, const FileError& b) { return a.path < b.path; });
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return summary;
}

}  // namespace imagepack
