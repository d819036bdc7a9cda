// Writer creation, container detection, shared in-RAM copies and
// multi-shard datasets. Memory-mapped records: memory_source.cc.
#include <fcntl.h>
#include <unistd.h>

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "imagepack/byte_source.h"
#include "imagepack/files.h"
#include "imagepack/storage.h"
#include "imagepack/store.h"
#include "fields/pixel_stats.h"
#include "storage/shared_copy.h"
#include "stores/store_internal.h"
#include "storage/fd_io.h"

namespace fs = std::filesystem;

namespace imagepack {

namespace {

std::vector<const ByteSource*> BytesOf(const RecordSource& src) {
  std::vector<const ByteSource*> bytes;
  src.ByteSources(&bytes);
  return bytes;
}

// Sums f over the source's byte sources.
template <typename F>
int64_t SumOverBytes(const RecordSource& src, F f) {
  int64_t sum = 0;
  for (const ByteSource* b : BytesOf(src)) sum += static_cast<int64_t>(f(*b));
  return sum;
}

}  // namespace

bool RecordSource::remote() const {
  const auto bytes = BytesOf(*this);
  return std::any_of(bytes.begin(), bytes.end(), [](const ByteSource* b) { return b->remote(); });
}
int64_t RecordSource::stored_bytes() const {
  return SumOverBytes(*this, [](const ByteSource& b) { return b.size(); });
}
int64_t RecordSource::cached_bytes() const {
  return SumOverBytes(*this, [](const ByteSource& b) { return b.CachedBytes(); });
}
int64_t RecordSource::remote_requests() const {
  return SumOverBytes(*this, [](const ByteSource& b) { return b.requests(); });
}
int64_t RecordSource::remote_bytes() const {
  return SumOverBytes(*this, [](const ByteSource& b) { return b.bytes_fetched(); });
}

const char* ContainerFormatName(ContainerFormat f) { return f == ContainerFormat::kBlob ? "blob" : "lmdb"; }

Result<ContainerFormat> ParseContainerFormat(const std::string& name) {
  if (name == "lmdb") return ContainerFormat::kLmdb;
  if (name == "blob") return ContainerFormat::kBlob;
  return Status::InvalidArgument("unknown format '" + name + "' (expected lmdb or blob)");
}

Result<DirectIo> ParseDirectIo(const std::string& name) {
  if (name == "auto") return DirectIo::kAuto;
  if (name == "on") return DirectIo::kOn;
  if (name == "off") return DirectIo::kOff;
  return Status::InvalidArgument("unknown direct I/O mode '" + name + "' (expected auto, on or off)");
}

Result<RecordView> RecordCursor::Read(int64_t index, bool verify_checksum) {
  const uint8_t* data = nullptr;
  size_t size = 0;
  Status st = ReadRaw(index, &data, &size);
  if (!st.ok()) return st;
  auto view = ParseRecord(data, size, verify_checksum);
  if (!view.ok()) return view.status().WithContext("record " + RecordKey(index));
  return view;
}

RecordWriter::~RecordWriter() = default;

void DropSharedMeta(DatasetMeta* meta) {
  // Moved-from temporaries: `x = {}` would keep the capacity.
  meta->classes = std::vector<std::string>();
  meta->label_counts = std::vector<int64_t>();
  meta->mean = std::vector<double>();
  meta->std = std::vector<double>();
  meta->options_json = std::string("{}");
  meta->tool = std::string();
  meta->source = std::string();
  meta->created = std::string();
}

namespace {

class MultiCursor : public RecordCursor {
 public:
  MultiCursor(const std::vector<std::unique_ptr<RecordSource>>* parts, const std::vector<int64_t>* starts)
      : parts_(parts), starts_(starts), cursors_(parts->size()) {}
  Status ReadRaw(int64_t index, const uint8_t** data, size_t* size) override {
    auto it = std::upper_bound(starts_->begin(), starts_->end(), index);
    if (index < 0 || it == starts_->begin() || it == starts_->end())
      return Status::InvalidArgument("record " + std::to_string(index) + " is out of range");
    const size_t part = static_cast<size_t>(it - starts_->begin() - 1);
    if (!cursors_[part]) cursors_[part] = (*parts_)[part]->NewCursor();
    Status st = cursors_[part]->ReadRaw(index - (*starts_)[part], data, size);
    return st.ok() ? st : st.WithContext((*parts_)[part]->Describe());
  }

 private:
  const std::vector<std::unique_ptr<RecordSource>>* parts_;
  const std::vector<int64_t>* starts_;
  std::vector<std::unique_ptr<RecordCursor>> cursors_;
};

class MultiSource : public RecordSource {
 public:
  MultiSource(std::vector<std::unique_ptr<RecordSource>> parts, DatasetMeta meta, std::string parts_are = "shards")
      : parts_(std::move(parts)), meta_(std::move(meta)), parts_are_(std::move(parts_are)) {
    int64_t at = 0;
    for (const auto& p : parts_) {
      starts_.push_back(at);
      at += p->size();
    }
    starts_.push_back(at);
  }
  const DatasetMeta& meta() const override { return meta_; }
  std::unique_ptr<RecordCursor> NewCursor() const override {
    return std::make_unique<MultiCursor>(&parts_, &starts_);
  }
  std::string Describe() const override {
    std::string d = std::to_string(parts_.size()) + " " + parts_are_ + ": ";
    for (size_t i = 0; i < parts_.size(); ++i) d += (i ? ", " : "") + parts_[i]->Describe();
    return d;
  }
  int64_t resident_bytes() const override {
    int64_t r = 0;
    for (const auto& p : parts_) r += p->resident_bytes();
    return r;
  }
  void ReleaseMappedPages() const override {
    for (const auto& p : parts_) p->ReleaseMappedPages();
  }
  void StoredRanges(int64_t first, int64_t last, std::vector<StoredRange>* out) const override {
    for (size_t i = 0; i + 1 < starts_.size(); ++i) {
      const int64_t lo = std::max(first, starts_[i]), hi = std::min(last, starts_[i + 1] - 1);
      if (lo <= hi) parts_[i]->StoredRanges(lo - starts_[i], hi - starts_[i], out);
    }
  }
  void ByteSources(std::vector<const ByteSource*>* out) const override {
    for (const auto& p : parts_) p->ByteSources(out);
  }

 private:
  std::vector<std::unique_ptr<RecordSource>> parts_;
  std::vector<int64_t> starts_;
  DatasetMeta meta_;
  std::string parts_are_;  // "shards", or "datasets" (a mix)
};

// A database held in RAM as a shared copy (OpenOptions::in_ram): the
// source opened on the copy, which it keeps.
class SharedSource : public RecordSource {
 public:
  SharedSource(std::unique_ptr<RecordSource> inner, std::unique_ptr<internal::SharedCopy> copy, std::string path)
      : inner_(std::move(inner)), copy_(std::move(copy)), path_(std::move(path)) {}
  ~SharedSource() override { inner_.reset(); }  // unmapped before the copy may go
  const DatasetMeta& meta() const override { return inner_->meta(); }
  std::unique_ptr<RecordCursor> NewCursor() const override { return inner_->NewCursor(); }
  std::string Describe() const override { return path_ + " (in RAM: " + copy_->path() + ")"; }
  int64_t resident_bytes() const override { return static_cast<int64_t>(copy_->size()); }
  void CheckLayout(const std::function<void(const std::string&)>& report) const override {
    inner_->CheckLayout(report);
  }
  void ReleaseMappedPages() const override { inner_->ReleaseMappedPages(); }
  void DropSharedMeta() override { inner_->DropSharedMeta(); }
  // The copy's file in shared memory: its pages are the copy.
  void ByteSources(std::vector<const ByteSource*>* out) const override { inner_->ByteSources(out); }

 private:
  std::unique_ptr<RecordSource> inner_;
  std::unique_ptr<internal::SharedCopy> copy_;
  std::string path_;
};

}  // namespace

Result<std::unique_ptr<RecordWriter>> CreateWriter(ContainerFormat format, const std::string& path,
                                                   const WriterOptions& opts) {
  auto storage = OpenStorage(path);
  if (!storage.ok()) return storage.status();
  Storage& st = *storage.value();
  if (format != ContainerFormat::kBlob && !st.local())
    return Status::InvalidArgument(path + ": only blobs are written to " + st.name() +
                                   " storage (an LMDB needs a local memory map): use --format blob");
  auto lock = st.Lock(path);
  if (!lock.ok()) return lock.status();
  Storage::CreateOptions co;
  co.overwrite = opts.overwrite;
  auto out = st.Create(path, co);
  if (!out.ok()) return out.status();
  auto inner = format == ContainerFormat::kBlob
                   ? internal::NewBlobWriter(std::move(out.value()), opts.direct_io, opts.blob_index_chunk_shift,
                                             opts.blob_index_memory)
                   : internal::NewLmdbWriter(std::move(out.value()), opts.lmdb_records_per_value);
  if (!inner.ok()) return inner.status();
  inner.value()->lock_ = std::move(lock.value());
  return inner;
}

Result<StorageSettings> internal::SettingsFor(const OpenOptions& opts) {
  auto s = StorageSettings::ForProcess();
  if (!s.ok()) return s.status();
  if (!opts.cache_dir.empty()) s->cache_dir = opts.cache_dir;
  if (opts.cache_limit_mb > 0) s->cache_limit_mb = opts.cache_limit_mb;
  if (opts.fetch_block_mb > 0) s->fetch_block_mb = opts.fetch_block_mb;
  if (opts.ram_cache_mb > 0) s->ram_cache_mb = opts.ram_cache_mb;
  if (!opts.ca_file.empty()) s->ca_file = opts.ca_file;
  if (!opts.shm_dir.empty()) s->shm_dir = opts.shm_dir;
  return s;
}

namespace {

// OpenOptions::in_ram: the database's one shared copy on this machine,
// made from its storage (a file with parallel preads, an object with
// ranged GETs) and opened as a local file.
Result<std::unique_ptr<RecordSource>> OpenInRam(const std::string& path, Storage& storage, const OpenOptions& opts) {
  // The file's own metadata (checksummed, format 4): a copy holding any
  // other is not this file's and is never served.
  std::string want;
  {
    OpenOptions plain = opts;
    plain.in_ram = false;
    auto direct = internal::OpenContainer(path, plain);
    if (!direct.ok()) return direct.status();
    want = direct.value()->meta().ToJson();
  }
  Storage::ReadOptions raw;
  raw.cached = false;  // one large sequential copy: no block cache
  auto bytes = storage.Open(path, raw);
  if (!bytes.ok()) return bytes.status();
  for (int attempt = 0;; ++attempt) {
    auto copy = internal::SharedCopy::Acquire(*bytes.value(), storage.settings().shm_dir);
    if (!copy.ok()) return copy.status();
    // Through the copy's mapping (no copy per process), or with pread
    // from the copy (pread_records: no page faults, no mapped pages to
    // release after each batch).
    OpenOptions inner;
    inner.pread_records = opts.pread_records;
    auto src = internal::OpenContainer(copy.value()->path(), inner);
    // The file opened and the copy does not, or holds other metadata:
    // not this file's copy (or the file changed while being copied).
    std::string wrong;
    if (!src.ok()) {  // named by the user's path, not the copy's
      std::string msg = src.status().message();
      for (size_t at; (at = msg.find(copy.value()->path())) != std::string::npos;)
        msg.replace(at, copy.value()->path().size(), path);
      if (attempt > 0) return src.status().WithMessage(msg);
      wrong = "it does not open (" + msg + ")";
    } else if (src.value()->meta().ToJson() != want) {
      if (attempt > 0)
        return Status::Corruption(path + " changed while being copied into RAM (its metadata differs from the copy's)");
      src.value().reset();
      wrong = "its metadata differs from " + path + "'s";
    }
    if (!wrong.empty()) {
      copy.value()->Discard(wrong);
      continue;
    }
    if (opts.lock_in_ram) IMAGEPACK_RETURN_IF_ERROR(copy.value()->Lock());
    return std::unique_ptr<RecordSource>(new SharedSource(std::move(src.value()), std::move(copy.value()), path));
  }
}

}  // namespace

namespace internal {

Result<std::unique_ptr<RecordSource>> OpenContainer(const std::string& path, const OpenOptions& opts) {
  auto settings = SettingsFor(opts);
  if (!settings.ok()) return settings.status();
  auto storage = OpenStorage(path, settings.value());
  if (!storage.ok()) return storage.status();
  if (opts.in_ram) return OpenInRam(path, *storage.value(), opts);
  // A FIFO, device or socket is refused before anything reads (or blocks
  // on) it.
  auto opened = storage.value()->Open(path);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<const ByteSource> bytes = std::move(opened.value());
  // Bytes that cannot be mapped (remote): read through their block cache.
  if (!storage.value()->local()) return internal::OpenUnmappedBlob(std::move(bytes));
  uint8_t magic[8] = {0};
  if (bytes->size() < sizeof magic || !bytes->ReadAt(0, sizeof magic, magic).ok())
    return Status::Corruption(path + ": file is too short to be a database");
  if (std::memcmp(magic, internal::kBlobMagic, 8) == 0) return internal::OpenBlob(std::move(bytes), opts);
  bytes.reset();  // liblmdb opens the file itself
  return internal::OpenLmdb(path, opts);
}

Result<std::unique_ptr<RecordSource>> OpenShards(const std::vector<std::string>& paths, const OpenOptions& opts,
                                                 DatabaseOpener open_one) {
  if (paths.empty()) return Status::InvalidArgument("no database given");
  if (paths.size() == 1) return open_one(paths[0], opts);
  std::vector<std::unique_ptr<RecordSource>> parts(paths.size());
  {
    auto s = open_one(paths[0], opts);
    if (!s.ok()) return s.status();
    parts[0] = std::move(s.value());
  }
  const DatasetMeta first = parts[0]->meta();
  // What each shard adds to the dataset's metadata, taken as it opens; the
  // shard then drops what every shard repeats (DropSharedMeta), so that
  // thousands of class lists are never held at once.
  struct Part {
    Status status;
    int64_t count = 0, payload_bytes = 0, stats_images = 0;
    std::vector<double> mean, std;
  };
  std::vector<Part> got(paths.size());
  tbb::enumerable_thread_specific<std::vector<int64_t>> label_sums(first.label_counts.size(), 0);
  auto take = [&](size_t i) {
    const DatasetMeta& m = parts[i]->meta();
    Part& p = got[i];
    if (m.classes != first.classes)
      p.status = Status::InvalidArgument(paths[i] + " has a different class list from " + paths[0] +
                                         ": shards of one dataset must share it");
    else if (m.encoding != first.encoding || m.channels != first.channels)
      p.status = Status::InvalidArgument(paths[i] + " differs from " + paths[0] + " in encoding or channels");
    else if (m.fields != first.fields)
      p.status = Status::InvalidArgument(paths[i] + " differs from " + paths[0] + " in its fields");
    p.count = m.count;
    p.payload_bytes = m.payload_bytes;
    p.stats_images = m.stats_images;
    p.mean = m.mean;
    p.std = m.std;
    auto& sums = label_sums.local();
    for (size_t c = 0; c < m.label_counts.size() && c < sums.size(); ++c) sums[c] += m.label_counts[c];
    parts[i]->DropSharedMeta();
  };
  take(0);
  // The other shards open in parallel (thousands of them: a file, its
  // header and metadata each); the first failure in path order is the one
  // reported.
  tbb::parallel_for(tbb::blocked_range<size_t>(1, paths.size(), 16), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t i = r.begin(); i != r.end(); ++i) {
      auto s = open_one(paths[i], opts);
      if (!s.ok()) {
        got[i].status = s.status();
        continue;
      }
      parts[i] = std::move(s.value());
      take(i);
    }
  });
  for (const Part& p : got)
    if (!p.status.ok()) return p.status;
  DatasetMeta meta = first;
  meta.count = 0;
  meta.payload_bytes = 0;
  meta.shard = {0, 1};
  std::fill(meta.label_counts.begin(), meta.label_counts.end(), 0);
  for (const auto& sums : label_sums)
    for (size_t c = 0; c < sums.size(); ++c) meta.label_counts[c] += sums[c];
  // Pool the per-shard statistics in shard order (the same metadata, and
  // so the same DatasetIdentity, every time), weighted by the images
  // behind them; a shard without statistics (--stats-sample 0) leaves the
  // dataset without any, rather than with another part's.
  internal::PixelMoments pooled;
  bool all_have_stats = true;
  for (const Part& p : got) {
    meta.count += p.count;
    meta.payload_bytes += p.payload_bytes;
    if (p.mean.size() == first.mean.size() && p.std.size() == first.mean.size() && !p.mean.empty())
      pooled.Merge(internal::PixelMoments::FromMeanStd(p.mean, p.std, p.stats_images));
    else
      all_have_stats = false;
  }
  meta.stats_images = all_have_stats ? pooled.images : 0;
  meta.mean.clear();
  meta.std.clear();
  if (all_have_stats && pooled.images > 0) pooled.MeanStd(static_cast<int>(first.mean.size()), &meta.mean, &meta.std);
  return std::unique_ptr<RecordSource>(new MultiSource(std::move(parts), std::move(meta)));
}

std::unique_ptr<RecordSource> JoinSources(std::vector<std::unique_ptr<RecordSource>> parts, DatasetMeta meta,
                                          const std::string& parts_are) {
  return std::unique_ptr<RecordSource>(new MultiSource(std::move(parts), std::move(meta), parts_are));
}

}  // namespace internal

}  // namespace imagepack
