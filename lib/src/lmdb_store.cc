// The LMDB container (docs/FORMAT.md): one data file, MDB_NOSUBDIR, no lock
// file, keys "0000000000".. appended in order, "__meta__" written last.
#include <lmdb.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <future>

#include "imagepack/files.h"
#include "store_internal.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

Status LmdbError(const std::string& context, int rc) {
  return Status::IOError(context + ": " + mdb_strerror(rc));
}

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
  LmdbWriter(std::string path, std::string tmp) : path_(std::move(path)), tmp_(std::move(tmp)) {}
  ~LmdbWriter() override {
    if (inflight_.valid()) inflight_.wait();  // the flush thread uses env_
    if (env_) mdb_env_close(env_);
    if (!finished_) ::unlink(tmp_.c_str());
  }

  Status Open() {
    int rc = mdb_env_create(&env_);
    if (rc) return LmdbError("mdb_env_create", rc);
    mdb_env_set_mapsize(env_, map_size_);
    // We are the only user of the temporary file: no lock file, no syncs
    // until Finish() syncs once.
    rc = mdb_env_open(env_, tmp_.c_str(),
                      MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOSYNC | MDB_NOMETASYNC, 0644);
    if (rc) return LmdbError("cannot create LMDB file " + tmp_, rc);
    return Status::Ok();
  }

  using RecordWriter::Add;
  Status Add(const uint8_t* record, size_t size) override {
    return Add(std::vector<uint8_t>(record, record + size));
  }

  Status Add(std::vector<uint8_t>&& record) override {
    if (!status_.ok()) return status_;
    pending_bytes_ += record.size();
    pending_.emplace_back(RecordKey(added_++), std::move(record));
    if (pending_bytes_ >= kBatchBytes || pending_.size() >= kBatchRecords) StartFlush();
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
    std::string json = meta.ToJson();
    pending_.emplace_back(kMetaKey, std::vector<uint8_t>(json.begin(), json.end()));
    status_ = Flush(pending_, pending_bytes_ + json.size());
    if (!status_.ok()) return status_;
    int rc = mdb_env_sync(env_, 1);
    if (rc) return status_ = DiskError(tmp_, rc);
    mdb_env_close(env_);
    env_ = nullptr;
    if (::rename(tmp_.c_str(), path_.c_str()) != 0)
      return status_ = Status::FromErrno("rename " + tmp_ + " to " + path_, errno);
    finished_ = true;
    return status_ = SyncParentDir(path_);
  }

  int64_t count() const override { return added_; }
  Status status() const override { return status_; }

 private:
  using Batch = std::vector<std::pair<std::string, std::vector<uint8_t>>>;
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
    pending_ = Batch();
    pending_bytes_ = 0;
    inflight_ = std::async(std::launch::async, [this, bytes] { return Flush(flushing_, bytes); });
  }

  void WaitForFlush() {
    if (!inflight_.valid()) return;
    Status st = inflight_.get();
    flushing_.clear();
    if (status_.ok()) status_ = st;
  }

  // Writes `batch` in one transaction, growing the map as needed (the user
  // never sees MDB_MAP_FULL). Runs on one thread at a time.
  Status Flush(const Batch& batch, size_t batch_bytes) {
    if (batch.empty()) return Status::Ok();
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
      for (const auto& [key, value] : batch) {
        MDB_val k{key.size(), const_cast<char*>(key.data())};
        MDB_val v{value.size(), const_cast<uint8_t*>(value.data())};  // read only (no MDB_RESERVE)
        rc = mdb_put(txn, dbi_, &k, &v, MDB_APPEND);
        if (rc) break;
      }
      if (rc == 0) rc = mdb_txn_commit(txn);
      else mdb_txn_abort(txn);
      if (rc == 0) {
        dbi_open_ = true;
        return Status::Ok();
      }
      if (rc != MDB_MAP_FULL) return DiskError(tmp_, rc);
      map_size_ *= 2;
      rc = mdb_env_set_mapsize(env_, map_size_);
      if (rc) return LmdbError("grow LMDB map", rc);
    }
    return Status::IOError("LMDB map could not be grown enough for " + tmp_);
  }

  std::string path_, tmp_;
  MDB_env* env_ = nullptr;
  MDB_dbi dbi_ = 0;
  bool dbi_open_ = false;
  size_t map_size_ = size_t(256) << 20;
  Batch pending_;   // filled by Add
  Batch flushing_;  // owned by the flush thread while inflight_ is valid
  std::future<Status> inflight_;
  size_t pending_bytes_ = 0;
  int64_t added_ = 0;
  bool finished_ = false;
  Status status_;
};

struct Env {
  MDB_env* env = nullptr;
  MDB_dbi dbi = 0;
  // liblmdb's read-only map of the file (found at open), for
  // ReleaseMappedPages; size 0 when it could not be found.
  const void* map = nullptr;
  size_t map_size = 0;
  ~Env() {
    if (env) mdb_env_close(env);
  }
};

class LmdbCursor : public RecordCursor {
 public:
  LmdbCursor(std::shared_ptr<Env> env, std::string path) : env_(std::move(env)), path_(std::move(path)) {}
  ~LmdbCursor() override {
    if (cursor_) mdb_cursor_close(cursor_);
    if (txn_) mdb_txn_abort(txn_);
  }

  Status ReadRaw(int64_t index, const uint8_t** data, size_t* size) override {
    if (!txn_) {
      int rc = mdb_txn_begin(env_->env, nullptr, MDB_RDONLY, &txn_);
      if (rc) return LmdbError(path_ + ": read transaction", rc);
      rc = mdb_cursor_open(txn_, env_->dbi, &cursor_);
      if (rc) return LmdbError(path_ + ": cursor", rc);
    }
    std::string key = RecordKey(index);
    MDB_val k{key.size(), key.data()}, v;
    int rc;
    if (index == last_ + 1 && last_ >= 0) {
      // Sequential: step the cursor and check it landed on the right key.
      MDB_val got;
      rc = mdb_cursor_get(cursor_, &got, &v, MDB_NEXT);
      if (rc == 0 && (got.mv_size != k.mv_size || std::memcmp(got.mv_data, k.mv_data, k.mv_size) != 0))
        rc = mdb_cursor_get(cursor_, &k, &v, MDB_SET_KEY);
    } else {
      rc = mdb_cursor_get(cursor_, &k, &v, MDB_SET_KEY);
    }
    if (rc == MDB_NOTFOUND) {
      last_ = -1;
      return Status::Corruption("record " + key + " is missing");
    }
    if (rc) {
      last_ = -1;
      return LmdbError(path_ + ": record " + key, rc);
    }
    last_ = index;
    *data = static_cast<const uint8_t*>(v.mv_data);
    *size = v.mv_size;
    return Status::Ok();
  }

 private:
  std::shared_ptr<Env> env_;
  std::string path_;
  MDB_txn* txn_ = nullptr;
  MDB_cursor* cursor_ = nullptr;
  int64_t last_ = -1;
};

class LmdbSource : public RecordSource {
 public:
  LmdbSource(std::shared_ptr<Env> env, DatasetMeta meta, std::string path)
      : env_(std::move(env)), meta_(std::move(meta)), path_(std::move(path)) {}
  const DatasetMeta& meta() const override { return meta_; }
  std::unique_ptr<RecordCursor> NewCursor() const override {
    return std::make_unique<LmdbCursor>(env_, path_);
  }
  std::string Describe() const override { return path_ + " (LMDB)"; }
  void ReleaseMappedPages() const override {
    if (env_->map_size > 0) ReleasePages(env_->map, env_->map_size);
  }

  void CheckLayout(const std::function<void(const std::string&)>& report) const override {
    MDB_txn* txn = nullptr;
    MDB_cursor* cur = nullptr;
    if (mdb_txn_begin(env_->env, nullptr, MDB_RDONLY, &txn) || mdb_cursor_open(txn, env_->dbi, &cur)) {
      report("cannot read the key list");
      if (txn) mdb_txn_abort(txn);
      return;
    }
    MDB_val k, v;
    int64_t expect = 0, reported = 0;
    bool meta_seen = false;
    for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
      std::string key(static_cast<const char*>(k.mv_data), k.mv_size);
      if (key == kMetaKey) {
        meta_seen = true;
        continue;
      }
      if (key.size() != size_t(kKeyWidth) || !std::all_of(key.begin(), key.end(), ::isdigit)) {
        if (reported++ < 100) report("unexpected key '" + key.substr(0, 40) + "'");
        continue;
      }
      const int64_t index = std::stoll(key);
      if (index >= meta_.count) {
        if (reported++ < 100) report("record " + key + " is beyond the count " + std::to_string(meta_.count));
        continue;
      }
      // Keys arrive sorted: a jump means records are missing.
      if (index > expect && reported++ < 100)
        report(index - expect == 1 ? "record " + RecordKey(expect) + " is missing"
                                   : "records " + RecordKey(expect) + ".." + RecordKey(index - 1) + " are missing");
      expect = index + 1;
    }
    if (expect < meta_.count && reported++ < 100)
      report("records " + RecordKey(expect) + ".." + RecordKey(meta_.count - 1) + " are missing");
    if (!meta_seen) report("no __meta__ key");
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
  }

 private:
  std::shared_ptr<Env> env_;
  DatasetMeta meta_;
  std::string path_;
};

}  // namespace

Result<std::unique_ptr<RecordWriter>> NewLmdbWriter(const std::string& path, const std::string& tmp) {
  ::unlink(tmp.c_str());
  auto w = std::make_unique<LmdbWriter>(path, tmp);
  IMAGEPACK_RETURN_IF_ERROR(w->Open());
  return std::unique_ptr<RecordWriter>(std::move(w));
}

Result<std::unique_ptr<RecordSource>> OpenLmdb(const std::string& path, const OpenOptions& opts) {
  auto env = std::make_shared<Env>();
  int rc = mdb_env_create(&env->env);
  if (rc) return LmdbError("mdb_env_create", rc);
  rc = mdb_env_open(env->env, path.c_str(), MDB_RDONLY | MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOTLS, 0644);
  if (rc)
    return Status::Corruption(path + ": neither an imagepack blob nor an LMDB file (" + mdb_strerror(rc) + ")");
  MDB_txn* txn = nullptr;
  rc = mdb_txn_begin(env->env, nullptr, MDB_RDONLY, &txn);
  if (rc) return LmdbError(path + ": read transaction", rc);
  rc = mdb_dbi_open(txn, nullptr, 0, &env->dbi);
  if (rc) {
    mdb_txn_abort(txn);
    return LmdbError(path + ": open database", rc);
  }
  std::string mk = kMetaKey;
  MDB_val k{mk.size(), mk.data()}, v;
  rc = mdb_get(txn, env->dbi, &k, &v);
  if (rc == 0) {
    // Values point into liblmdb's map of the file; the mapping that holds
    // one is the whole map (liblmdb keeps its address to itself).
    std::error_code ec;
    const auto file_size = std::filesystem::file_size(path, ec);
    if (!ec && FindMapping(v.mv_data, &env->map, &env->map_size))
      env->map_size = std::min<size_t>(env->map_size, file_size);
  }
  if (rc) {
    mdb_txn_abort(txn);
    if (rc == MDB_NOTFOUND)
      return Status::Corruption(path + ": no metadata record (__meta__): not an imagepack database, or incomplete");
    return LmdbError(path + ": metadata", rc);
  }
  auto meta = ParseMeta(static_cast<const uint8_t*>(v.mv_data), v.mv_size);
  if (!meta.ok()) {
    mdb_txn_abort(txn);
    return meta.status().WithContext(path);
  }
  if (!opts.in_ram) {
    mdb_txn_abort(txn);
    return std::unique_ptr<RecordSource>(new LmdbSource(env, std::move(meta.value()), path));
  }
  // in_ram: copy every value into one arena in index order.
  MDB_cursor* cur = nullptr;
  rc = mdb_cursor_open(txn, env->dbi, &cur);
  if (rc) {
    mdb_txn_abort(txn);
    return LmdbError(path + ": cursor", rc);
  }
  auto arena = std::make_shared<std::vector<uint8_t>>();
  MDB_stat st;
  mdb_stat(txn, env->dbi, &st);
  arena->reserve(static_cast<size_t>(meta->payload_bytes + meta->count * 128));
  std::vector<uint64_t> offsets, lengths;
  const int64_t count = meta->count;
  Status status;
  for (int64_t i = 0; i < count; ++i) {
    std::string key = RecordKey(i);
    MDB_val kk{key.size(), key.data()}, vv;
    rc = mdb_cursor_get(cur, &kk, &vv, MDB_SET_KEY);
    if (rc) {
      status = rc == MDB_NOTFOUND ? Status::Corruption(path + ": record " + key + " is missing")
                                  : LmdbError(path + ": record " + key, rc);
      break;
    }
    offsets.push_back(arena->size());
    lengths.push_back(vv.mv_size);
    const uint8_t* p = static_cast<const uint8_t*>(vv.mv_data);
    arena->insert(arena->end(), p, p + vv.mv_size);
  }
  mdb_cursor_close(cur);
  mdb_txn_abort(txn);
  if (!status.ok()) return status;
  const uint8_t* base = arena->data();
  const uint64_t base_size = arena->size();
  const int64_t resident = static_cast<int64_t>(arena->capacity());
  return NewMemorySource(std::move(meta.value()), path + " (LMDB, in RAM)", base, base_size,
                         std::move(offsets), std::move(lengths), arena, resident);
}

}  // namespace imagepack::internal
