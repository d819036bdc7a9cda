// The pack pipeline (PackDataset): the source opened and checked, items
// made into records on every core (record_maker.h), written in order,
// the metadata summed up.
#include "imagepack/pack.h"
#include "imagepack/storage.h"

#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "formats/text.h"
#include "imagepack/files.h"
#include "imagepack/shard.h"
#include "base/threads.h"
#include "base/tsan_annotations.h"
#include "pack/pack_inputs.h"
#include "fields/pixel_stats.h"
#include "pack/record_maker.h"
#include "sources/sources.h"

namespace fs = std::filesystem;

namespace imagepack {
namespace {

using internal::Packed;
using internal::PixelMoments;
using internal::RecordMaker;
using internal::SourceItem;

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The source of a pack, with its listing's errors, ignored files and
// problems moved into `summary`; items whose path a record cannot hold
// become errors there too.
// Gzipped shards inflate, and items too many for memory wait, beside DST
// (its disk, not /tmp's), or in the temporary folder while DST's folder does
// not exist yet.
std::string ScratchDir(const PackOptions& o) {
  if (!o.source.scratch_dir.empty()) return o.source.scratch_dir;
  std::error_code dir_ec;
  const fs::path parent = fs::absolute(o.dst).parent_path();
  return fs::is_directory(parent, dir_ec) ? parent.string() : fs::temp_directory_path(dir_ec).string();
}

Result<internal::DatasetSource> OpenForPack(const PackOptions& o, PackSummary* summary) {
  internal::SourceOptions so = o.source;
  so.scratch_dir = ScratchDir(o);
  so.cancel = o.cancel;
  // A database converted whole is read record by record as it is packed;
  // --shard needs every record's path first.
  so.database_records = o.shard.count <= 1;
  auto source = internal::OpenSource(o.src, so);
  if (!source.ok()) return source.status();
  if (o.prepare.decode.channels != 1 && o.prepare.decode.channels != 3)
    return Status::InvalidArgument("channels must be 1 or 3");
  summary->errors = std::move(source->errors);
  if (o.shard.count > 1 && !source->labels_missing.empty()) {
    // A labels file's entry with no image is the skip of the shard its
    // path hashes to: the others (a folder resized shard by shard holds
    // only theirs) would each list every other shard's images.
    std::set<std::string> others;
    for (const auto& m : source->labels_missing)
      if (ShardOfPath(m.path, o.shard.count) != o.shard.index) others.insert(m.path);
    auto& errors = summary->errors;
    errors.erase(std::remove_if(errors.begin(), errors.end(),
                                [&](const FileError& e) { return others.count(e.path) > 0; }),
                 errors.end());
  }
  summary->left_out = std::move(source->left_out);
  summary->ignored = std::move(source->ignored);
  summary->problems = std::move(source->problems);
  for (const auto& [ext, n] : source->unpacked_members)  // a warning line each, on stderr
    summary->problems.push_back(std::to_string(n) + " ." + ext + " members not packed (--keep-members " + ext +
                                " keeps them as text fields)");
  // A record the writer accepts is one the verifier accepts: path bytes and
  // length checked before anything is written.
  std::vector<SourceItem> kept;
  for (auto& item : source->items) {
    Status ok = internal::CheckName(item.rel, "record path");
    if (ok.ok() && item.rel.size() > 65535)
      ok = Status::InvalidArgument("record path of " + std::to_string(item.rel.size()) + " bytes (at most 65535)");
    if (!ok.ok()) summary->errors.push_back({internal::Shown(item.rel.substr(0, 200)), ok.message()});
    else kept.push_back(std::move(item));
  }
  source->items = std::move(kept);
  return source;
}

// What the records written add up to, for the metadata.
struct Totals {
  std::vector<int64_t> label_counts;
  std::vector<int> map_top;  // per field slot: a map's largest value but its fill value, -1: none
  PixelMoments moments;
};

// The pipeline's last two stages: `Write`, serial in record order (errors,
// progress, totals; LMDB: the record itself; blob: its place reserved),
// and `WriteReserved` (blob: the bytes, from any thread).
class WriteStage {
 public:
  WriteStage(const PackOptions& o, RecordWriter& w, RecordMaker& maker, size_t tokens, PackSummary* summary,
             Totals* totals)
      : o_(o), w_(w), pw_(w.parallel()), maker_(maker), tokens_(tokens), summary_(summary), totals_(totals) {}

  Packed Write(Packed p) {
    if (o_.progress) {
      ++o_.progress->done;
      o_.progress->bytes_in += p.bytes_in;
    }
    summary_->bytes_in += p.bytes_in;
    if (!p.error.empty()) {
      summary_->errors.push_back({std::move(p.rel), p.error});
      if (o_.progress) ++o_.progress->failed;
      p.record.clear();
      return p;
    }
    if (!status_.ok() || failed_.load()) {
      p.record.clear();
      return p;
    }
    const int64_t record_bytes = static_cast<int64_t>(p.record.size());
    if (pw_) {
      auto at = pw_->Reserve(p.record.size());
      if (at.ok()) p.write_at = static_cast<int64_t>(at.value());
      else status_ = at.status();
    } else {
      status_ = w_.Add(std::move(p.record));
      // LMDB hands back the buffers of committed records.
      std::vector<uint8_t> spare;
      while (maker_.WantsSpare(tokens_) && w_.TakeSpareBuffer(&spare)) maker_.GiveSpare(std::move(spare));
      internal::TsanHappensBefore(maker_.spares_id());
    }
    if (!status_.ok()) {
      failed_ = true;
      p.record.clear();
      return p;
    }
    if (p.label >= 0 && static_cast<size_t>(p.label) < totals_->label_counts.size()) ++totals_->label_counts[p.label];
    summary_->payload_bytes += p.payload;
    if (o_.progress) o_.progress->bytes_out += record_bytes;
    switch (p.stored) {
      case internal::Stored::kAsIs: ++summary_->passed_through; break;
      case internal::Stored::kResized: ++summary_->resized; break;
      case internal::Stored::kReencoded: ++summary_->reencoded; break;
      case internal::Stored::kDecoded: ++summary_->decoded; break;
    }
    summary_->lossless_as_jpeg += p.lossless_as_jpeg;
    totals_->moments.Merge(p.moments);
    for (size_t f = 0; f < p.map_top.size(); ++f) totals_->map_top[f] = std::max(totals_->map_top[f], p.map_top[f]);
    return p;
  }

  void WriteReserved(Packed p) {
    if (p.write_at < 0) return;
    // The writer keeps a failure (w.status()); stop feeding the pipeline.
    if (!pw_->WriteReserved(static_cast<uint64_t>(p.write_at), p.record.data(), p.record.size()).ok())
      failed_ = true;
    if (maker_.WantsSpare(tokens_)) maker_.GiveSpare(std::move(p.record));
    internal::TsanHappensBefore(maker_.spares_id());
  }

  bool failed() const { return failed_.load(); }  // read by the input stage
  // After the pipeline: the first failure of either stage.
  Status status() const { return !status_.ok() ? status_ : failed_ ? w_.status() : Status::Ok(); }

 private:
  const PackOptions& o_;
  RecordWriter& w_;
  ParallelRecordWriter* const pw_;  // blob: null for LMDB
  RecordMaker& maker_;
  const size_t tokens_;
  PackSummary* summary_;
  Totals* totals_;
  Status status_;                   // owned by Write
  std::atomic<bool> failed_{false};
};

// An item on its way through the pipeline, with its place in the pack.
struct Input {
  size_t pos = 0;
  SourceItem item;
};

// Reads, makes and writes every item through a TBB pipeline of `threads`;
// returns how many items the input stage handed out (fewer than all when
// cancelled or failed; *read_error: a scratch file could not be read).
size_t RunPipeline(const PackOptions& o, internal::PackInputs& inputs, RecordMaker& maker, WriteStage& ws,
                   int threads, size_t tokens, Status* read_error) {
  tbb::task_arena arena(std::max(threads, 1));
  size_t next = 0;
  arena.execute([&] {
    tbb::parallel_pipeline(
        tokens,
        tbb::make_filter<void, Input>(tbb::filter_mode::serial_in_order,
                                      [&](tbb::flow_control& fc) -> Input {
                                        Input in;
                                        if (ws.failed() || (o.cancel && o.cancel->load())) {
                                          fc.stop();
                                          return in;
                                        }
                                        auto more = inputs.Next(&in.item);
                                        if (!more.ok() || !more.value()) {
                                          if (!more.ok()) *read_error = more.status();
                                          fc.stop();
                                          return in;
                                        }
                                        in.pos = next++;
                                        return in;
                                      }) &
            tbb::make_filter<Input, Packed>(tbb::filter_mode::parallel,
                                            [&](Input in) { return maker.Make(in.pos, std::move(in.item)); }) &
            tbb::make_filter<Packed, Packed>(tbb::filter_mode::serial_in_order,
                                             [&](Packed p) { return ws.Write(std::move(p)); }) &
            tbb::make_filter<Packed, void>(tbb::filter_mode::parallel,
                                           [&](Packed p) { ws.WriteReserved(std::move(p)); }));
  });
  // The pipeline's end orders every stage before what follows (TBB's own
  // synchronisation). Spare buffers reach this thread through it, last read
  // by the LMDB writer's flush thread; freed here when the pack fails.
  internal::TsanHappensAfter(maker.spares_id());
  return next;
}

// `o` with the settings it left open (PackOptions::from_source) taken from
// a source that says how its records were packed, and its options JSON
// saying what was used.
PackOptions Resolved(const PackOptions& o, const internal::DatasetSource& source) {
  PackOptions r = o;
  if (!source.packed_as) return r;
  using nlohmann::json;
  const DatasetMeta& m = *source.packed_as;
  const json theirs = json::parse(m.options_json, nullptr, /*allow_exceptions=*/false);
  if (o.from_source.encoding) r.encoding = m.encoding;
  if (o.from_source.channels) r.prepare.decode.channels = m.channels;
  if (o.from_source.quality && theirs.is_object() && theirs.contains("quality") &&
      theirs["quality"].is_number_integer()) {
    const int64_t q = theirs["quality"].get<int64_t>();
    if (q >= 1 && q <= 100) r.prepare.quality = static_cast<int>(q);
  }
  if (r.lmdb_records_per_value == 0 && r.encoding == m.encoding && m.records_per_value > 0)
    r.lmdb_records_per_value = m.records_per_value;
  json mine = json::parse(o.options_json, nullptr, /*allow_exceptions=*/false);
  if (!mine.is_object()) return r;
  auto set = [&](const char* key, const json& v) {
    if (mine.contains(key)) mine[key] = v;
  };
  set("encoding", EncodingName(r.encoding));
  set("channels", r.prepare.decode.channels);
  set("quality", r.prepare.quality);
  // Records kept in a shuffled source's order are stored shuffled
  // (StoredShuffled: the loader's auto order reads it).
  if (o.shuffle_seed < 0 && source.stored_order && StoredShuffled(m)) set("shuffle", theirs["shuffle"]);
  r.options_json = mine.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

// The metadata of the finished pack.
DatasetMeta PackMeta(const PackOptions& o, const internal::DatasetSource& source, const Totals& t, int64_t count,
                     int64_t payload_bytes, const std::string& created) {
  DatasetMeta meta;
  std::error_code ec;
  meta.count = count;
  meta.classes = source.classes;
  meta.encoding = o.encoding;
  meta.channels = o.prepare.decode.channels;
  meta.shard = o.shard;
  meta.label_counts = t.label_counts;
  meta.payload_bytes = payload_bytes;
  meta.tool = o.tool;
  meta.options_json = o.options_json;
  meta.source = fs::absolute(o.source.manifest.empty() ? o.src : o.source.manifest, ec).string();
  meta.fields = source.fields;
  // Maps whose values are classes, declared none: classes 0 .. the largest
  // value found (the ignore value aside), so verify and the trainer know
  // the count.
  for (size_t f = 0; f < meta.fields.size(); ++f) {
    FieldSpec& spec = meta.fields[f];
    const KindInfo& info = InfoOf(spec.kind);
    if (info.layout != FieldLayout::kMap || !info.classes || !spec.classes.empty()) continue;
    for (int v = 0; v <= t.map_top[f]; ++v) spec.classes.push_back(std::to_string(v));
  }
  meta.created = created;
  meta.stats_images = t.moments.images;
  t.moments.MeanStd(meta.channels, &meta.mean, &meta.std);
  return meta;
}

}  // namespace

Result<PackSummary> PackDataset(const PackOptions& given) {
  const auto t0 = std::chrono::steady_clock::now();
  auto created = CreationTime();  // a malformed SOURCE_DATE_EPOCH stops the pack before any work
  if (!created.ok()) return created.status();
  PackSummary summary;
  auto source = OpenForPack(given, &summary);
  if (!source.ok()) return source.status();
  // Nothing to pack is a failure, not an empty database (a shard that
  // gets none of a source's items is still written: the others hold them).
  const bool none = source->items.empty() && !source->spilled && !(source->db_records && source->db->size() > 0);
  if (none && summary.errors.empty()) {
    const std::string what = given.source.manifest.empty() ? given.src : given.source.manifest;
    return Status::NotFound(what + (source->db ? " holds no records" : " holds no images") +
                            (summary.ignored.empty() ? std::string()
                                                     : " (" + std::to_string(summary.ignored.size()) +
                                                           " files ignored for their names)") +
                            "; nothing written to " + given.dst);
  }
  const PackOptions o = Resolved(given, source.value());
  if (none && !summary.errors.empty()) {
    summary.all_skipped = true;  // nothing is created under dst
    summary.seconds = SecondsSince(t0);
    return summary;
  }
  auto inputs = internal::PackInputs::Open(&source.value(), o.shard, o.shuffle_seed, ScratchDir(o));
  if (!inputs.ok()) return inputs.status();
  const int64_t count = inputs.value()->size();
  summary.inputs = count;
  summary.classes = static_cast<int64_t>(source->classes.size());
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
  // Blob: the writer stage only reserves each record's place, in order; the
  // bytes are written by the last stage, on any thread.
  summary.direct_io = w.parallel() && w.parallel()->direct_io();

  RecordMaker maker(o, count, source.value());
  Totals totals;
  totals.label_counts.assign(source->classes.size(), 0);
  totals.map_top.assign(source->fields.size(), -1);
  const int threads = internal::ResolveThreads(o.threads);
  const size_t tokens = static_cast<size_t>(std::max(threads, 1)) * 4;  // records in flight
  WriteStage ws(o, w, maker, tokens, &summary, &totals);
  Status read_error;
  const int64_t handed =
      static_cast<int64_t>(RunPipeline(o, *inputs.value(), maker, ws, threads, tokens, &read_error));
  IMAGEPACK_RETURN_IF_ERROR(read_error);
  IMAGEPACK_RETURN_IF_ERROR(ws.status());
  std::sort(summary.errors.begin(), summary.errors.end(),
            [](const FileError& a, const FileError& b) { return a.path < b.path; });
  if (handed >= count && w.count() == 0 && !summary.errors.empty()) {
    summary.all_skipped = true;  // the writer's destructor removes the temporary
    summary.seconds = SecondsSince(t0);
    return summary;
  }
  if (handed < count) {
    summary.cancelled = true;  // the writer's destructor removes the temporary
    summary.seconds = SecondsSince(t0);
    return summary;
  }
  summary.meta = PackMeta(o, source.value(), totals, w.count(), summary.payload_bytes, created.value());
  IMAGEPACK_RETURN_IF_ERROR(w.Finish(summary.meta));
  summary.written = summary.meta.count;
  if (auto storage = OpenStorage(o.dst); storage.ok())
    if (auto info = storage.value()->Stat(o.dst); info.ok()) summary.file_bytes = static_cast<int64_t>(info->size);
  summary.seconds = SecondsSince(t0);
  return summary;
}

}  // namespace imagepack
