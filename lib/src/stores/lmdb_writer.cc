// The LMDB container's writer (docs/FORMAT.md): one data file, MDB_NOSUBDIR,
// no lock file, keys "0000000000".. appended in order, "__meta__" written
// last, into the destination storage's staging file.
#include <fcntl.h>
#include <lmdb.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <future>
#include <mutex>

#include "imagepack/files.h"
#include "storage/descriptor_source.h"
#include "storage/fd_io.h"
#include "stores/store_internal.h"

#include "stores/lmdb_format.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

// liblmdb turns a short write (the usual sign of a full disk) into EIO:
// say how much room the destination has so the user can tell.
Status DiskError(const std::string& path, int rc) {
  Status st = LmdbError("write " + path, rc);
  if (rc != EIO && rc != ENOSPC && rc != EDQUOT) return st;
  struct statvfs fs_info;
  const std::string dir = fs::path(path).parent_path().string();
  if (::statvfs(dir.empty() ? "." : dir.c_str(), &fs_info) != 0) return st;
  const double free_bytes = double(fs_info.f_bavail) * fs_info.f_frsize;
  const double total = double(fs_info.f_blocks) * fs_info.f_frsize;
  if (free_bytes < 0.01 * total + 16 * 1024 * 1024)
    return Status::IOError(st.message() + " (No space left on device: " + std::to_string(int64_t(free_bytes)) +
                           " bytes free in " + (dir.empty() ? "." : dir) + ")");
  return st;
}

class LmdbWriter : public RecordWriter {
 public:
  LmdbWriter(std::unique_ptr<WritableFile> out, int per_value)
      : out_(std::move(out)), tmp_(out_->staging_path()), tmp_fd_(out_->fd()),
        per_value_(static_cast<size_t>(per_value)) {}
  ~LmdbWriter() override {
    if (inflight_.valid()) inflight_.wait();  // the flush thread uses env_
    if (env_) mdb_env_close(env_);
    out_.reset();  // unfinished: the staging file is removed, nothing published
  }

  Status Open() {
    int rc = mdb_env_create(&env_);
    if (rc) return LmdbError("mdb_env_create", rc);
    mdb_env_set_mapsize(env_, map_size_);
    // We are the only user of the temporary file: no lock file, no syncs
    // until Finish() syncs once.
    // Through our own fd of the file we created (CreateTempFor), never by
    // its name: a name in a shared folder may be swapped for a link.
    const std::string by_fd = "/proc/self/fd/" + std::to_string(tmp_fd_);
    rc = mdb_env_open(env_, by_fd.c_str(), MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOSYNC | MDB_NOMETASYNC, 0644);
    if (rc) return LmdbError("cannot create LMDB file " + tmp_, rc);
    return Status::Ok();
  }

  Status Add(std::vector<uint8_t>&& record) override {
    if (!status_.ok()) return status_;
    pending_bytes_ += record.size();
    pending_.push_back(std::move(record));
    ++added_;
    // Batches end on a value boundary: a value is written in one piece.
    if ((pending_bytes_ >= kBatchBytes || pending_.size() >= kBatchRecords) && pending_.size() % per_value_ == 0)
      StartFlush();
    return status_;
  }

  Status Finish(const DatasetMeta& meta) override {
    WaitForFlush();
    if (!status_.ok()) return status_;
    if (meta.count != added_) {
      status_ = Status::InvalidArgument("metadata count " + std::to_string(meta.count) + " but " +
                                        std::to_string(added_) + " records were added");
      return status_;
    }
    DatasetMeta stored = meta;
    stored.records_per_value = static_cast<int>(per_value_);
    const std::string json = stored.ToJson();
    status_ = Flush(pending_, added_ - static_cast<int64_t>(pending_.size()), pending_bytes_, &json);
    if (!status_.ok()) return status_;
    int rc = mdb_env_sync(env_, 1);
    if (rc) return status_ = DiskError(tmp_, rc);
    mdb_env_close(env_);
    env_ = nullptr;
    return status_ = out_->Commit();
  }

  int64_t count() const override { return added_; }
  Status status() const override { return status_; }
  bool TakeSpareBuffer(std::vector<uint8_t>* buffer) override {
    if (spares_.empty()) return false;
    *buffer = std::move(spares_.back());
    spares_.pop_back();
    spare_bytes_ -= buffer->capacity();
    return true;
  }

 private:
  using Batch = std::vector<std::vector<uint8_t>>;
  // One transaction per batch. 16 MB: the writer's memory (the batch being
  // filled, the one being flushed, liblmdb's dirty pages) is first touched
  // page by page, so it costs page faults in proportion to its size; 64 MB
  // batches took 3x the faults (47,000 vs 15,000 on 20,000 JPEGs) and
  // 210 vs 80 MB peak RSS for no gain in speed.
  static constexpr size_t kBatchBytes = 16 << 20;
  static constexpr size_t kBatchRecords = 1024;

  // Hands the pending batch to a flush thread, so the pipeline fills the
  // next batch while LMDB copies and writes this one. At most one batch is
  // in flight; its status is collected before the next one starts.
  void StartFlush() {
    WaitForFlush();
    if (!status_.ok()) return;
    flushing_ = std::move(pending_);
    const size_t bytes = pending_bytes_;
    const int64_t first = added_ - static_cast<int64_t>(flushing_.size());
    pending_ = Batch();
    pending_bytes_ = 0;
    inflight_ = std::async(std::launch::async, [this, first, bytes] { return Flush(flushing_, first, bytes); });
  }

  void WaitForFlush() {
    if (!inflight_.valid()) return;
    Status st = inflight_.get();
    // Keep up to a batch's worth of the written records' buffers for
    // TakeSpareBuffer().
    for (auto& record : flushing_) {
      if (spare_bytes_ + record.capacity() > kBatchBytes) break;
      spare_bytes_ += record.capacity();
      spares_.push_back(std::move(record));
    }
    flushing_.clear();
    if (status_.ok()) status_ = st;
  }

  // Writes records first.. (`batch`, starting on a value boundary) as values
  // of per_value_ records, then `meta_json` if given, in one transaction,
  // growing the map as needed (the user never sees MDB_MAP_FULL). Runs on
  // one thread at a time.
  Status Flush(const Batch& batch, int64_t first, size_t batch_bytes, const std::string* meta_json = nullptr) {
    if (batch.empty() && !meta_json) return Status::Ok();
    batch_bytes += GroupHeaderSize(per_value_) * (batch.size() / per_value_ + 1);
    if (meta_json) batch_bytes += meta_json->size();
    // Leaf, branch and overflow pages cost more than the values; grow ahead.
    while (true) {
      MDB_envinfo info;
      MDB_stat st;
      mdb_env_info(env_, &info);
      mdb_env_stat(env_, &st);
      const size_t used = (info.me_last_pgno + 1) * size_t(st.ms_psize);
      if (used + batch_bytes * 2 + (16 << 20) <= map_size_) break;
      map_size_ *= 2;
      int rc = mdb_env_set_mapsize(env_, map_size_);
      if (rc) return LmdbError("grow LMDB map to " + std::to_string(map_size_) + " bytes", rc);
    }
    for (int attempt = 0; attempt < 8; ++attempt) {
      MDB_txn* txn = nullptr;
      int rc = mdb_txn_begin(env_, nullptr, 0, &txn);
      if (rc) return LmdbError("mdb_txn_begin", rc);
      if (!dbi_open_) {
        rc = mdb_dbi_open(txn, nullptr, 0, &dbi_);
        if (rc) { mdb_txn_abort(txn); return LmdbError("mdb_dbi_open", rc); }
      }
      for (size_t g = 0; g < batch.size() && rc == 0; g += per_value_) {
        const size_t n = std::min(per_value_, batch.size() - g);
        size_t total = GroupHeaderSize(n);
        for (size_t j = 0; j < n; ++j) total += batch[g + j].size();
        const std::string key = RecordKey((first + static_cast<int64_t>(g)) / static_cast<int64_t>(per_value_));
        MDB_val k{key.size(), const_cast<char*>(key.data())};
        MDB_val v{total, nullptr};
        // MDB_RESERVE: liblmdb gives the value's place in its page; the
        // records are copied there once.
        rc = mdb_put(txn, dbi_, &k, &v, MDB_APPEND | MDB_RESERVE);
        if (rc) break;
        uint8_t* out = static_cast<uint8_t*>(v.mv_data);
        std::memcpy(out, kGroupMagic, 4);
        const uint32_t n32 = static_cast<uint32_t>(n);
        std::memcpy(out + 4, &n32, 4);
        uint64_t at = GroupHeaderSize(n);
        for (size_t j = 0; j <= n; ++j) {
          std::memcpy(out + 8 + 8 * j, &at, 8);
          if (j == n) break;
          std::memcpy(out + at, batch[g + j].data(), batch[g + j].size());
          at += batch[g + j].size();
        }
      }
      if (rc == 0 && meta_json) {
        MDB_val k{std::strlen(kMetaKey), const_cast<char*>(kMetaKey)};
        MDB_val v{meta_json->size(), const_cast<char*>(meta_json->data())};
        rc = mdb_put(txn, dbi_, &k, &v, MDB_APPEND);
      }
      if (rc == 0) rc = mdb_txn_commit(txn);
      else mdb_txn_abort(txn);
      if (rc == 0) {
        dbi_open_ = true;
        return DropMappedPages(batch_bytes);
      }
      if (rc != MDB_MAP_FULL) return DiskError(tmp_, rc);
      map_size_ *= 2;
      rc = mdb_env_set_mapsize(env_, map_size_);
      if (rc) return LmdbError("grow LMDB map", rc);
    }
    return Status::IOError("LMDB map could not be grown enough for " + tmp_);
  }

  // liblmdb reads the rightmost pages through its map as records are
  // appended, and each fault maps the neighbouring pages already written
  // (the kernel's fault-around): the file's pages piled up in this
  // process's RSS (2.1 GB peak writing 10^8 records, 30 MB of it its own).
  // A remap at the same size, between transactions, lets them go: every
  // kRemapBytes written.
  Status DropMappedPages(size_t written) {
    constexpr size_t kRemapBytes = size_t(128) << 20;
    written_since_remap_ += written;
    if (written_since_remap_ < kRemapBytes) return Status::Ok();
    written_since_remap_ = 0;
    const int rc = mdb_env_set_mapsize(env_, map_size_);
    return rc ? LmdbError("remap LMDB map", rc) : Status::Ok();
  }

  std::unique_ptr<WritableFile> out_;
  const std::string tmp_;
  const int tmp_fd_;  // the staging file as created; LMDB opens it through /proc/self/fd
  const size_t per_value_;
  MDB_env* env_ = nullptr;
  MDB_dbi dbi_ = 0;
  bool dbi_open_ = false;
  size_t map_size_ = size_t(256) << 20;
  size_t written_since_remap_ = 0;  // DropMappedPages
  Batch pending_;   // filled by Add
  Batch flushing_;  // owned by the flush thread while inflight_ is valid
  Batch spares_;    // written records' buffers, for TakeSpareBuffer()
  size_t spare_bytes_ = 0;
  std::future<Status> inflight_;
  size_t pending_bytes_ = 0;
  int64_t added_ = 0;
  Status status_;
};

}  // namespace

Result<std::unique_ptr<RecordWriter>> NewLmdbWriter(std::unique_ptr<WritableFile> out, int records_per_value) {
  auto w = std::make_unique<LmdbWriter>(std::move(out), records_per_value);  // removes the file on failure
  if (records_per_value < 1 || records_per_value > kMaxRecordsPerValue)
    return Status::InvalidArgument("records per LMDB value must be in [1, " + std::to_string(kMaxRecordsPerValue) +
                                   "], not " + std::to_string(records_per_value));
  IMAGEPACK_RETURN_IF_ERROR(w->Open());
  return std::unique_ptr<RecordWriter>(std::move(w));
}

}  // namespace imagepack::internal
