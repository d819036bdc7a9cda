#include "imagepack/pack.h"

#include <tbb/concurrent_queue.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "imagepack/files.h"
#include "pixel_stats.h"
#include "tsan_annotations.h"
#include "threads.h"

namespace fs = std::filesystem;

namespace imagepack {
namespace {

struct SourceItem {
  std::string rel;     // path relative to src (tree) or the record's path (db)
  int32_t label = -1;
  int64_t db_index = -1;
};

// Per-channel pixel sums, for mean/std.
struct Moments {
  double n = 0;
  double sum[3] = {0, 0, 0};
  double sq[3] = {0, 0, 0};
  // Raw packing adds every image, so this runs over every pixel.
  void Add(const Image& img) { Add(img.pixels.data(), size_t(img.width) * img.height, img.channels); }
  void Add(const uint8_t* p, size_t px, int c) {
    const size_t bytes = px * c;
    uint64_t s[3] = {0, 0, 0}, q[3] = {0, 0, 0};
    internal::AddChannelSums(p, bytes, c, s, q);
    for (int k = 0; k < c; ++k) {
      sum[k] += double(s[k]);
      sq[k] += double(q[k]);
    }
    n += double(px);
  }
};

struct Packed {
  size_t pos = 0;
  std::vector<uint8_t> record;
  std::string error;
  bool passed_through = false;
  bool has_moments = false;
  Moments moments;
  int64_t bytes_in = 0;
  int64_t payload = 0;
  int32_t label = -1;
  int64_t write_at = -1;  // parallel writes: where the record goes
};

// Raw packing's usual case: a plain JPEG already within the limits is
// decoded straight into its record (no image buffer copied into it after).
// NotSupported for anything that needs more than a decode (then use
// DecodeImage, which also reports the pixel limit). `rec` may be a spent
// record's buffer: resizing it within its size initialises nothing.
Status DecodeIntoRecord(const uint8_t* data, size_t size, const SourceItem& item, const DecodeOptions& d,
                        std::vector<uint8_t> rec, Packed* p) {
  auto info = ProbeImage(data, size);
  if (!info.ok() || info->format != ImageFormat::kJpeg || int64_t(info->width) * info->height > d.max_pixels)
    return Status::NotSupported("not a plain JPEG");
  const size_t px = size_t(info->width) * info->height;  // JPEG sizes are 16-bit: no overflow
  const size_t headroom = kRecordHeaderSize + item.rel.size();
  rec.resize(headroom + px * d.channels);
  IMAGEPACK_RETURN_IF_ERROR(DecodeJpegInto(data, size, info.value(), d, rec.data() + headroom));
  p->moments.Add(rec.data() + headroom, px, d.channels);
  p->has_moments = true;
  p->payload = static_cast<int64_t>(px * d.channels);
  SealRecord(rec, {Encoding::kRaw, d.channels, item.label, uint32_t(info->height), uint32_t(info->width)}, item.rel);
  p->record = std::move(rec);
  return Status::Ok();
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Calls `fn(line, line_number)` for each non-empty line of `path` that does
// not start with '#', trimmed. Stops at the first non-Ok status fn returns.
Status ForEachDataLine(const std::string& path, const char* what,
                       const std::function<Status(const std::string&, int)>& fn) {
  std::ifstream f(path);
  if (!f) return Status::NotFound(std::string("cannot read ") + what + " file " + path);
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    ++n;
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    IMAGEPACK_RETURN_IF_ERROR(fn(line, n));
  }
  return Status::Ok();
}

Result<std::vector<std::pair<std::string, std::string>>> ReadPairs(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  Status st = ForEachDataLine(path, "labels", [&](const std::string& line, int n) {
    std::istringstream is(line);
    std::string a, b;
    if (!(is >> a >> b))
      return Status::InvalidArgument(path + ":" + std::to_string(n) + ": expected 'FILENAME LABEL'");
    out.emplace_back(a, b);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

bool IsIndex(const std::string& s) {
  return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), ::isdigit);
}

// Lists the inputs of a tree source and fixes the class list.
Status ListTreeItems(const PackOptions& o, std::vector<std::string>& classes, std::vector<SourceItem>& items,
                     PackSummary& summary) {
  auto listing = ListTree(o.src);
  if (!listing.ok()) return listing.status();
  summary.ignored = std::move(listing->ignored);
  summary.problems = std::move(listing->problems);
  if (!o.classes_file.empty()) {
    auto c = ReadClassList(o.classes_file);
    if (!c.ok()) return c.status();
    classes = std::move(c.value());
  }
  if (!o.labels_file.empty()) {
    auto pairs = ReadPairs(o.labels_file);
    if (!pairs.ok()) return pairs.status();
    // Labels are class names (mapped through --classes, or sorted unique
    // names) or indices.
    bool all_index = std::all_of(pairs->begin(), pairs->end(), [](auto& p) { return IsIndex(p.second); });
    if (classes.empty()) {
      std::set<std::string> names;
      int max_index = -1;
      for (auto& p : pairs.value()) {
        if (all_index) max_index = std::max(max_index, std::stoi(p.second));
        else names.insert(p.second);
      }
      if (all_index)
        for (int i = 0; i <= max_index; ++i) classes.push_back(std::to_string(i));
      else
        classes.assign(names.begin(), names.end());
    }
    std::map<std::string, int> index_of;
    for (size_t i = 0; i < classes.size(); ++i) index_of[classes[i]] = static_cast<int>(i);
    std::map<std::string, int32_t> label_of;
    for (auto& [file, label] : pairs.value()) {
      int32_t l;
      if (all_index) {
        l = std::stoi(label);
        if (l >= static_cast<int32_t>(classes.size()))
          return Status::InvalidArgument(o.labels_file + ": label " + label + " of " + file + " out of range [0," +
                                         std::to_string(classes.size()) + ")");
      } else {
        auto it = index_of.find(label);
        if (it == index_of.end())
          return Status::InvalidArgument(o.labels_file + ": class '" + label + "' of " + file +
                                         " is not in the class list");
        l = it->second;
      }
      label_of[file] = l;
    }
    for (auto& rel : listing->images) {
      auto it = label_of.find(rel);
      if (it == label_of.end()) it = label_of.find(fs::path(rel).filename().string());
      if (it == label_of.end()) {
        summary.errors.push_back({rel, "no label in " + o.labels_file});
        continue;
      }
      items.push_back({rel, it->second, -1});
    }
    return Status::Ok();
  }
  // ImageFolder: the first path component is the class.
  if (classes.empty()) {
    std::set<std::string> names;
    for (auto& rel : listing->images) {
      auto slash = rel.find('/');
      if (slash != std::string::npos) names.insert(rel.substr(0, slash));
    }
    classes.assign(names.begin(), names.end());
  }
  std::map<std::string, int> index_of;
  for (size_t i = 0; i < classes.size(); ++i) index_of[classes[i]] = static_cast<int>(i);
  for (auto& rel : listing->images) {
    auto slash = rel.find('/');
    if (slash == std::string::npos) {
      summary.ignored.push_back(rel + " (not inside a class folder)");
      continue;
    }
    auto it = index_of.find(rel.substr(0, slash));
    if (it == index_of.end()) {
      summary.ignored.push_back(rel + " (folder not in the class list)");
      continue;
    }
    items.push_back({rel, it->second, -1});
  }
  if (classes.empty()) return Status::InvalidArgument(o.src + " has no class folders (and no --labels file)");
  return Status::Ok();
}

Result<Image> DecodeForStats(const uint8_t* data, size_t size, int channels) {
  DecodeOptions d;
  d.channels = channels;
  d.limit = {SizeLimit::Mode::kShorterEdge, 32};  // DCT-scaled: nearly free
  return DecodeImage(data, size, d);
}

}  // namespace

Result<std::vector<std::string>> ReadClassList(const std::string& path) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  Status st = ForEachDataLine(path, "classes", [&](const std::string& line, int n) {
    std::string name = line.substr(0, line.find_first_of(" \t"));
    if (!seen.insert(name).second)
      return Status::InvalidArgument(path + ":" + std::to_string(n) + ": class '" + name + "' listed twice");
    out.push_back(name);
    return Status::Ok();
  });
  if (!st.ok()) return st;
  if (out.empty()) return Status::InvalidArgument(path + " lists no classes");
  return out;
}

Result<PackSummary> PackDataset(const PackOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  PackSummary summary;
  std::error_code ec;
  const bool from_db = fs::is_regular_file(o.src, ec);
  std::unique_ptr<RecordSource> db;
  std::vector<std::string> classes;
  std::vector<SourceItem> all;
  if (from_db) {
    auto s = OpenDatabase(o.src);
    if (!s.ok()) return s.status();
    db = std::move(s.value());
    classes = db->meta().classes;
    auto cur = db->NewCursor();
    for (int64_t i = 0; i < db->size(); ++i) {
      auto r = cur->Read(i, /*verify_checksum=*/false);
      if (!r.ok()) {
        summary.errors.push_back({RecordKey(i), r.status().message()});
        continue;
      }
      all.push_back({std::string(r->path), r->fields.label, i});
    }
  } else {
    IMAGEPACK_RETURN_IF_ERROR(ListTreeItems(o, classes, all, summary));
  }
  if (o.prepare.decode.channels != 1 && o.prepare.decode.channels != 3)
    return Status::InvalidArgument("channels must be 1 or 3");

  std::vector<SourceItem> items;
  for (auto& it : all)
    if (ShardOfPath(it.rel, o.shard.count) == o.shard.index) items.push_back(std::move(it));
  if (o.shuffle_seed >= 0) {
    auto perm = Permutation(static_cast<int64_t>(items.size()), static_cast<uint64_t>(o.shuffle_seed));
    std::vector<SourceItem> shuffled(items.size());
    for (size_t i = 0; i < items.size(); ++i) shuffled[i] = std::move(items[perm[i]]);
    items = std::move(shuffled);
  }
  summary.inputs = static_cast<int64_t>(items.size());
  summary.classes = static_cast<int64_t>(classes.size());
  if (o.progress) o.progress->total = summary.inputs;

  WriterOptions wo;
  wo.overwrite = o.overwrite;
  wo.lmdb_records_per_value = o.lmdb_records_per_value > 0 ? o.lmdb_records_per_value
                              : o.encoding == Encoding::kJpeg ? kJpegRecordsPerValue
                                                              : 1;
  wo.direct_io = o.direct_io;
  auto writer = CreateWriter(o.format, o.dst, wo);
  if (!writer.ok()) return writer.status();
  RecordWriter& w = *writer.value();
  summary.direct_io = w.direct_io();

  // Raw: exact statistics over every image (the pixels are at hand). JPEG:
  // every stride-th image, decoded at reduced scale; stats_sample 0: none.
  const int64_t stats_stride =
      o.encoding == Encoding::kRaw ? 1
      : o.stats_sample <= 0        ? INT64_MAX
                                   : std::max<int64_t>(1, (summary.inputs + o.stats_sample - 1) / o.stats_sample);
  const int channels = o.prepare.decode.channels;
  tbb::enumerable_thread_specific<std::unique_ptr<RecordCursor>> cursors;
  // Buffers of raw records already written (by the workers for a blob, or
  // handed back by the LMDB writer) come back here for the next images:
  // zero-filling a fresh 200-300 KB buffer per image was 3-4% of raw
  // packing.
  tbb::concurrent_queue<std::vector<uint8_t>> spare_records;

  auto process = [&](size_t pos) {
    Packed p;
    p.pos = pos;
    const SourceItem& item = items[pos];
    p.label = item.label;
    std::vector<uint8_t> file;
    const uint8_t* data = nullptr;
    size_t size = 0;
    RecordFields fields;
    fields.label = item.label;
    if (db) {
      auto& cur = cursors.local();
      if (!cur) cur = db->NewCursor();
      auto r = cur->Read(item.db_index);
      if (!r.ok()) {
        p.error = r.status().message();
        return p;
      }
      if (r->fields.encoding == Encoding::kRaw) {
        // Raw pixels: re-wrap as an image, then take the same path as files.
        Image img;
        img.width = static_cast<int>(r->fields.width);
        img.height = static_cast<int>(r->fields.height);
        img.channels = r->fields.channels;
        img.pixels.assign(r->payload, r->payload + r->payload_size);
        auto [tw, th] = TargetSize(img.width, img.height, o.prepare.decode.limit);
        if (tw != img.width || th != img.height) img = ResampleImage(img, tw, th, o.prepare.decode.filter);
        img = ConvertChannels(std::move(img), channels);
        p.bytes_in = static_cast<int64_t>(r->payload_size);
        if (o.encoding == Encoding::kRaw) {
          fields.encoding = Encoding::kRaw;
        } else {
          auto enc = EncodeJpeg(img, o.prepare.quality);
          if (!enc.ok()) {
            p.error = enc.status().message();
            return p;
          }
          fields = {Encoding::kJpeg, channels, item.label, uint32_t(img.height), uint32_t(img.width)};
          if (pos % stats_stride == 0) {
            p.moments.Add(img);
            p.has_moments = true;
          }
          p.payload = static_cast<int64_t>(enc->size());
          p.record = EncodeRecord(fields, item.rel, enc->data(), enc->size());
          return p;
        }
        fields = {Encoding::kRaw, channels, item.label, uint32_t(img.height), uint32_t(img.width)};
        p.moments.Add(img);
        p.has_moments = true;
        p.payload = static_cast<int64_t>(img.pixels.size());
        p.record = EncodeRecord(fields, item.rel, img.pixels.data(), img.pixels.size());
        return p;
      }
      file.assign(r->payload, r->payload + r->payload_size);
    } else {
      // Read the file straight into where a record's payload goes: a clean
      // JPEG then becomes a record with no copy at all.
      const size_t headroom = kRecordHeaderSize + item.rel.size();
      auto f = ReadFile((fs::path(o.src) / item.rel).string(), headroom);
      if (!f.ok()) {
        p.error = f.status().message();
        return p;
      }
      file = std::move(f.value());
      data = file.data() + headroom;
      size = file.size() - headroom;
      p.bytes_in = static_cast<int64_t>(size);
      if (o.encoding == Encoding::kJpeg && !o.prepare.reencode) {
        auto info = ProbeImage(data, size);
        if (info.ok() && CanPassThrough(data, size, info.value(), o.prepare)) {
          fields = {Encoding::kJpeg, info->components, item.label, uint32_t(info->height), uint32_t(info->width)};
          p.passed_through = true;
          if (pos % stats_stride == 0) {
            auto small = DecodeForStats(data, size, channels);
            if (small.ok()) {
              p.moments.Add(small.value());
              p.has_moments = true;
            }
          }
          p.payload = static_cast<int64_t>(size);
          SealRecord(file, fields, item.rel);
          p.record = std::move(file);
          return p;
        }
      }
    }
    if (db) {
      data = file.data();
      size = file.size();
      p.bytes_in = static_cast<int64_t>(size);
    }
    if (o.encoding == Encoding::kJpeg) {
      auto prepared = PrepareJpeg(data, size, o.prepare);
      if (!prepared.ok()) {
        p.error = prepared.status().message();
        return p;
      }
      fields = {Encoding::kJpeg, prepared->channels, item.label, uint32_t(prepared->height),
                uint32_t(prepared->width)};
      p.passed_through = prepared->passed_through;
      if (pos % stats_stride == 0) {
        auto small = DecodeForStats(prepared->bytes.data(), prepared->bytes.size(), channels);
        if (small.ok()) {
          p.moments.Add(small.value());
          p.has_moments = true;
        }
      }
      p.payload = static_cast<int64_t>(prepared->bytes.size());
      p.record = EncodeRecord(fields, item.rel, prepared->bytes.data(), prepared->bytes.size());
    } else {
      std::vector<uint8_t> spare;
      spare_records.try_pop(spare);
      Status direct = DecodeIntoRecord(data, size, item, o.prepare.decode, std::move(spare), &p);
      if (direct.ok()) return p;
      if (direct.code() != Status::Code::kNotSupported) {
        p.error = direct.message();
        return p;
      }
      auto img = DecodeImage(data, size, o.prepare.decode);
      if (!img.ok()) {
        p.error = img.status().message();
        return p;
      }
      fields = {Encoding::kRaw, img->channels, item.label, uint32_t(img->height), uint32_t(img->width)};
      p.moments.Add(img.value());
      p.has_moments = true;
      p.payload = static_cast<int64_t>(img->pixels.size());
      p.record = EncodeRecord(fields, item.rel, img->pixels.data(), img->pixels.size());
    }
    return p;
  };

  Moments total;
  int64_t stats_images = 0;
  std::vector<int64_t> label_counts(classes.size(), 0);
  Status write_status;                    // owned by the writer stage
  std::atomic<bool> write_failed{false};  // read by the input stage
  const int threads = internal::ResolveThreads(o.threads);
  tbb::task_arena arena(std::max(threads, 1));
  const bool parallel_writes = w.parallel_writes();
  const size_t tokens = static_cast<size_t>(std::max(threads, 1)) * 4;  // records in flight
  // Bounded by the records in flight: records made by DecodeImage (resize,
  // CMYK) take no spare, so unbounded the queue would grow with the dataset.
  auto wants_spare = [&] { return o.encoding == Encoding::kRaw && spare_records.unsafe_size() < tokens; };
  size_t next = 0;
  arena.execute([&] {
    tbb::parallel_pipeline(
        tokens,
        tbb::make_filter<void, size_t>(tbb::filter_mode::serial_in_order,
                                       [&](tbb::flow_control& fc) -> size_t {
                                         if (next >= items.size() || write_failed.load() ||
                                             (o.cancel && o.cancel->load())) {
                                           fc.stop();
                                           return 0;
                                         }
                                         return next++;
                                       }) &
            tbb::make_filter<size_t, Packed>(tbb::filter_mode::parallel, process) &
            tbb::make_filter<Packed, Packed>(tbb::filter_mode::serial_in_order, [&](Packed p) -> Packed {
              if (o.progress) {
                ++o.progress->done;
                o.progress->bytes_in += p.bytes_in;
              }
              summary.bytes_in += p.bytes_in;
              if (!p.error.empty()) {
                summary.errors.push_back({items[p.pos].rel, p.error});
                if (o.progress) ++o.progress->failed;
                p.record.clear();
                return p;
              }
              if (!write_status.ok() || write_failed.load()) {
                p.record.clear();
                return p;
              }
              const int64_t record_bytes = static_cast<int64_t>(p.record.size());
              if (parallel_writes) {
                // The record's place is fixed here, in order; its bytes are
                // written by the next stage, on any thread.
                auto at = w.Reserve(p.record.size());
                if (at.ok()) p.write_at = static_cast<int64_t>(at.value());
                else write_status = at.status();
              } else {
                write_status = w.Add(std::move(p.record));
                // LMDB hands back the buffers of committed records.
                std::vector<uint8_t> spare;
                while (wants_spare() && w.TakeSpareBuffer(&spare)) spare_records.push(std::move(spare));
                internal::TsanHappensBefore(&spare_records);
              }
              if (!write_status.ok()) {
                write_failed = true;
                p.record.clear();
                return p;
              }
              if (p.label >= 0 && static_cast<size_t>(p.label) < label_counts.size()) ++label_counts[p.label];
              summary.payload_bytes += p.payload;
              if (o.progress) o.progress->bytes_out += record_bytes;
              summary.passed_through += p.passed_through;
              if (p.has_moments) {
                ++stats_images;
                total.n += p.moments.n;
                for (int k = 0; k < 3; ++k) {
                  total.sum[k] += p.moments.sum[k];
                  total.sq[k] += p.moments.sq[k];
                }
              }
              return p;
            }) &
            tbb::make_filter<Packed, void>(tbb::filter_mode::parallel, [&](Packed p) {
              if (p.write_at < 0) return;
              // The writer keeps a failure (w.status()); stop feeding the
              // pipeline.
              if (!w.WriteReserved(static_cast<uint64_t>(p.write_at), p.record.data(), p.record.size()).ok())
                write_failed = true;
              if (wants_spare()) spare_records.push(std::move(p.record));
              internal::TsanHappensBefore(&spare_records);
            }));
  });
  // The pipeline's end orders every stage before what follows (TBB's own
  // synchronisation). Spare buffers reach this thread through it, last read
  // by the LMDB writer's flush thread; freed here when the pack fails.
  internal::TsanHappensAfter(&spare_records);
  IMAGEPACK_RETURN_IF_ERROR(write_status);
  if (write_failed) IMAGEPACK_RETURN_IF_ERROR(w.status());
  std::sort(summary.errors.begin(), summary.errors.end(),
            [](const FileError& a, const FileError& b) { return a.path < b.path; });
  if (next < items.size()) {
    summary.cancelled = true;  // the writer's destructor removes the temporary
    summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return summary;
  }

  DatasetMeta& meta = summary.meta;
  meta.count = w.count();
  meta.classes = classes;
  meta.encoding = o.encoding;
  meta.channels = channels;
  meta.shard = o.shard;
  meta.label_counts = label_counts;
  meta.payload_bytes = summary.payload_bytes;
  meta.tool = o.tool;
  meta.options_json = o.options_json;
  meta.source = fs::absolute(o.src, ec).string();
  meta.created = UtcNow();
  meta.stats_images = stats_images;
  if (total.n > 0) {
    for (int k = 0; k < channels; ++k) {
      const double mean = total.sum[k] / total.n / 255.0;
      const double var = total.sq[k] / total.n / (255.0 * 255.0) - mean * mean;
      meta.mean.push_back(mean);
      meta.std.push_back(std::sqrt(std::max(0.0, var)));
    }
  }
  IMAGEPACK_RETURN_IF_ERROR(w.Finish(meta));
  summary.written = meta.count;
  summary.file_bytes = static_cast<int64_t>(fs::file_size(o.dst, ec));
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return summary;
}

}  // namespace imagepack
