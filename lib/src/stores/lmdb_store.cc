// The LMDB container's reader (docs/FORMAT.md): one data file, MDB_NOSUBDIR,
// no lock file, keys "0000000000".. then "__meta__"; records read through
// liblmdb's map or with pread. The writer: lmdb_writer.cc.
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

struct Env {
  MDB_env* env = nullptr;
  MDB_dbi dbi = 0;
  // The file, through liblmdb's descriptor (reads with pread_records,
  // StoredRanges; mdb_env_close closes it); null when liblmdb gave none.
  std::unique_ptr<ByteSource> file;
  const uint8_t* map_addr = nullptr;  // `map`: file offset 0 (null: unknown, no pread)
  // liblmdb's read-only map of the file (found at open), for
  // ReleaseMappedPages; size 0 when it could not be found.
  const void* map = nullptr;
  size_t map_size = 0;
  ~Env() {
    if (env) mdb_env_close(env);
  }
};

// The start of liblmdb's map of the file, from a value inside it: the
// value lies in a page of the map (a leaf, or the first of its overflow
// pages), whose header begins with the page's number (LMDB's page layout,
// MDB_DATA_VERSION 1), so the map begins that many pages before. Checked:
// the candidate is mapped (mincore) and holds meta page 0 (its magic).
// /proc/self/maps says the same, but reading it per shard costs time in
// proportion to the mappings: quadratic over thousands of shards. An
// empty value may point at the end of its page, which is the start of the
// next one, possibly past the end of the file (a read there is a SIGBUS):
// not used.
bool MapBase(MDB_env* env, const void* value, size_t value_size, uint64_t file_size, const void** base) {
  if (value_size == 0) return false;
  MDB_stat st;
  if (mdb_env_stat(env, &st) != 0) return false;
  const uintptr_t psize = st.ms_psize, os_page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  // Pages of the OS's size only: then the map's pages are the OS's, and the
  // value's page starts inside the map.
  if (psize != os_page || (psize & (psize - 1)) != 0) return false;
  const uintptr_t page = reinterpret_cast<uintptr_t>(value) & ~(psize - 1);
  uint64_t pgno = 0;
  std::memcpy(&pgno, reinterpret_cast<const void*>(page), 8);
  if (pgno == 0 || pgno > file_size / psize || pgno * psize > page) return false;
  const uintptr_t at = page - pgno * psize;
  unsigned char resident = 0;
  if (::mincore(reinterpret_cast<void*>(at), os_page, &resident) != 0) return false;  // not mapped
  uint32_t magic = 0;
  std::memcpy(&magic, reinterpret_cast<const void*>(at + 16), 4);  // MDB_meta.mm_magic after the page header
  if (magic != 0xBEEFC0DE) return false;
  *base = reinterpret_cast<const void*>(at);
  return true;
}

// Values holding records first..last: "records A..B" (or "record A").
std::string RecordRange(int64_t first, int64_t last) {
  return first == last ? "record " + RecordKey(first) : "records " + RecordKey(first) + ".." + RecordKey(last);
}

class LmdbCursor : public RecordCursor {
 public:
  // per_value: the metadata's records_per_value; 0 for format 1.
  // pread: values are read with pread() into this cursor's buffer (their
  // place found through the map without touching their pages).
  LmdbCursor(std::shared_ptr<Env> env, std::string path, int per_value, int64_t count, bool pread = false)
      : env_(std::move(env)), path_(std::move(path)), per_value_(per_value), count_(count),
        pread_(pread && env_->file && env_->map_addr) {}
  ~LmdbCursor() override {
    if (cursor_) mdb_cursor_close(cursor_);
    if (txn_) mdb_txn_abort(txn_);
  }

  Status ReadRaw(int64_t index, const uint8_t** data, size_t* size) override {
    if (index < 0 || index >= count_) return Status::InvalidArgument("record " + RecordKey(index) + " is out of range");
    if (per_value_ == 0) {
      MDB_val v;
      IMAGEPACK_RETURN_IF_ERROR(Fetch(index, index, &v));
      *data = static_cast<const uint8_t*>(v.mv_data);
      *size = v.mv_size;
      if (pread_) IMAGEPACK_RETURN_IF_ERROR(PreadMapped(*data, *size, index, &buf_, data));
      return Status::Ok();
    }
    const int64_t value = index / per_value_;
    if (value != value_) {
      value_ = -1;
      MDB_val v;
      IMAGEPACK_RETURN_IF_ERROR(Fetch(value, index, &v));
      const int64_t first = value * per_value_;
      const int64_t n = std::min<int64_t>(per_value_, count_ - first);
      group_map_ = static_cast<const uint8_t*>(v.mv_data);
      const uint8_t* header = group_map_;
      // pread: the value's offset table alone; each record is read on its own.
      if (pread_)
        IMAGEPACK_RETURN_IF_ERROR(
            PreadMapped(group_map_, std::min<size_t>(v.mv_size, GroupHeaderSize(size_t(n))), index, &header_, &header));
      Status st = CheckGroup(header, v.mv_size, n);
      if (!st.ok())
        return Status::Corruption("record " + RecordKey(index) + ": value " + RecordKey(value) + " (" +
                                  RecordRange(first, first + n - 1) + "): " + st.message());
      value_ = value;
      group_ = header;
    }
    // CheckGroup has checked the whole offset table.
    const size_t j = static_cast<size_t>(index - value_ * per_value_);
    const uint64_t begin = Load64(group_ + 8 + 8 * j), end = Load64(group_ + 16 + 8 * j);
    *data = group_map_ + begin;
    *size = static_cast<size_t>(end - begin);
    if (pread_) IMAGEPACK_RETURN_IF_ERROR(PreadMapped(*data, *size, index, &buf_, data));
    return Status::Ok();
  }

 private:
  // A value's header: magic, n == expect, offsets ascending from the
  // header's end to the value's end.
  static Status CheckGroup(const uint8_t* p, size_t size, int64_t expect) {
    if (size < 8 || std::memcmp(p, kGroupMagic, 4) != 0) return Status::Corruption("bad value header (magic)");
    uint32_t n;
    std::memcpy(&n, p + 4, 4);
    if (static_cast<int64_t>(n) != expect)
      return Status::Corruption("value holds " + std::to_string(n) + " records, expected " + std::to_string(expect));
    const size_t header = GroupHeaderSize(n);
    if (header > size) return Status::Corruption("value is shorter than its offset table");
    uint64_t prev = header;
    for (uint32_t j = 0; j <= n; ++j) {
      const uint64_t at = Load64(p + 8 + 8 * size_t(j));
      if ((j == 0 && at != header) || at < prev || at > size || (j == n && at != size))
        return Status::Corruption("offset table entry " + std::to_string(j) + " (" + std::to_string(at) +
                                  ") is out of order or outside the value's " + std::to_string(size) + " bytes");
      prev = at;
    }
    return Status::Ok();
  }

  // The value under key `key` (for record `index`, named in errors).
  Status Fetch(int64_t key, int64_t index, MDB_val* v) {
    if (!txn_) {
      int rc = mdb_txn_begin(env_->env, nullptr, MDB_RDONLY, &txn_);
      if (rc) return LmdbError(path_ + ": read transaction", rc);
      rc = mdb_cursor_open(txn_, env_->dbi, &cursor_);
      if (rc) return LmdbError(path_ + ": cursor", rc);
    }
    std::string name = RecordKey(key);
    MDB_val k{name.size(), name.data()};
    int rc;
    if (key == last_ + 1 && last_ >= 0) {
      // Sequential: step the cursor and check it landed on the right key.
      MDB_val got;
      rc = mdb_cursor_get(cursor_, &got, v, MDB_NEXT);
      if (rc == 0 && (got.mv_size != k.mv_size || std::memcmp(got.mv_data, k.mv_data, k.mv_size) != 0))
        rc = mdb_cursor_get(cursor_, &k, v, MDB_SET_KEY);
    } else {
      rc = mdb_cursor_get(cursor_, &k, v, MDB_SET_KEY);
    }
    const std::string which = per_value_ > 1 ? " (value " + name + ")" : "";
    if (rc == MDB_NOTFOUND) {
      last_ = -1;
      return Status::Corruption("record " + RecordKey(index) + " is missing" + which);
    }
    if (rc) {
      last_ = -1;
      return LmdbError(path_ + ": record " + RecordKey(index) + which, rc);
    }
    last_ = key;
    return Status::Ok();
  }

  // Reads `n` bytes of the file from where `at` points in the map into
  // `buf`, without touching the map's pages; *out = the buffer.
  Status PreadMapped(const uint8_t* at, size_t n, int64_t index, std::vector<uint8_t>* buf, const uint8_t** out) {
    if (buf->size() < n) buf->resize(n);
    Status st = env_->file->ReadAt(static_cast<uint64_t>(at - env_->map_addr), n, buf->data());
    if (!st.ok()) return st.WithContext("record " + RecordKey(index));
    *out = buf->data();
    return Status::Ok();
  }

 public:
  // Where value `key` lies in the file: its offset and size, found without
  // reading its pages (a value on overflow pages is only pointed at).
  Status Locate(int64_t key, uint64_t* offset, uint64_t* size) {
    MDB_val v;
    Status st = Fetch(key, key, &v);
    value_ = -1;  // the cursor moved
    if (!st.ok()) return st;
    *offset = static_cast<uint64_t>(static_cast<const uint8_t*>(v.mv_data) - env_->map_addr);
    *size = v.mv_size;
    return Status::Ok();
  }

 private:
  std::shared_ptr<Env> env_;
  std::string path_;
  const int per_value_;
  const int64_t count_;
  MDB_txn* txn_ = nullptr;
  MDB_cursor* cursor_ = nullptr;
  int64_t last_ = -1;   // key the cursor is on
  int64_t value_ = -1;  // value (group) last checked, at group_
  const uint8_t* group_ = nullptr;      // its offset table (in the map, or header_)
  const uint8_t* group_map_ = nullptr;  // the value in the map
  bool pread_;
  std::vector<uint8_t> buf_;     // pread: the last record read
  std::vector<uint8_t> header_;  // pread: the last value's offset table
};

class LmdbSource : public RecordSource {
 public:
  LmdbSource(std::shared_ptr<Env> env, DatasetMeta meta, std::string path, bool pread)
      : env_(std::move(env)), meta_(std::move(meta)), path_(std::move(path)), pread_(pread) {}
  const DatasetMeta& meta() const override { return meta_; }
  std::unique_ptr<RecordCursor> NewCursor() const override {
    return std::make_unique<LmdbCursor>(env_, path_, meta_.records_per_value, meta_.count, pread_);
  }
  void StoredRanges(int64_t first, int64_t last, std::vector<StoredRange>* out) const override {
    if (!env_->file || !env_->map_addr) return;
    first = std::max<int64_t>(first, 0);
    last = std::min<int64_t>(last, meta_.count - 1);
    if (first > last) return;
    const int64_t per = std::max(meta_.records_per_value, 1);
    std::lock_guard<std::mutex> g(locate_mu_);
    if (!locator_) locator_ = std::make_unique<LmdbCursor>(env_, path_, meta_.records_per_value, meta_.count);
    for (int64_t key = first / per; key <= last / per; ++key) {
      uint64_t at = 0, size = 0;
      if (!locator_->Locate(key, &at, &size).ok()) return;  // the reader reports it
      AppendRange(env_->file.get(), at, size, out);
    }
  }
  std::string Describe() const override { return path_ + " (LMDB)"; }
  void ByteSources(std::vector<const ByteSource*>* out) const override {
    if (env_->file) out->push_back(env_->file.get());
  }
  void ReleaseMappedPages() const override {
    if (env_->map_size > 0) ReleasePages(env_->map, env_->map_size);
  }
  void DropSharedMeta() override { imagepack::DropSharedMeta(&meta_); }

  void CheckLayout(const std::function<void(const std::string&)>& report) const override {
    MDB_txn* txn = nullptr;
    MDB_cursor* cur = nullptr;
    if (mdb_txn_begin(env_->env, nullptr, MDB_RDONLY, &txn) || mdb_cursor_open(txn, env_->dbi, &cur)) {
      report("cannot read the key list");
      if (txn) mdb_txn_abort(txn);
      return;
    }
    // Keys are values 0..values-1; format 2 values hold per records each.
    const int64_t per = std::max(meta_.records_per_value, 1);
    const int64_t values = (meta_.count + per - 1) / per;
    auto missing = [&](int64_t first_value, int64_t last_value) {
      const int64_t first = first_value * per, last = std::min(last_value * per + per, meta_.count) - 1;
      std::string r = RecordRange(first, last) + (first == last ? " is missing" : " are missing");
      if (per > 1)
        r += first_value == last_value ? " (value " + RecordKey(first_value) + ")"
                                       : " (values " + RecordKey(first_value) + ".." + RecordKey(last_value) + ")";
      return r;
    };
    MDB_val k, v;
    int64_t expect = 0, reported = 0;
    bool meta_seen = false;
    int64_t seen = 0;
    for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
      // The walk reads every leaf page through the map: unmapped as it
      // goes (a 10^7-record LMDB kept its whole 1.5 GB mapped).
      if (++seen % 16384 == 0) ReleaseMappedPages();
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
      if (index >= values) {
        if (reported++ < 100)
          report((per > 1 ? "value " : "record ") + key + " is beyond the count " + std::to_string(meta_.count));
        continue;
      }
      // Keys arrive sorted: a jump means records are missing.
      if (index > expect && reported++ < 100) report(missing(expect, index - 1));
      expect = index + 1;
    }
    if (expect < values && reported++ < 100) report(missing(expect, values - 1));
    if (!meta_seen) report("no __meta__ key");
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
  }

 private:
  std::shared_ptr<Env> env_;
  DatasetMeta meta_;
  std::string path_;
  const bool pread_;
  mutable std::mutex locate_mu_;
  mutable std::unique_ptr<LmdbCursor> locator_;  // StoredRanges' own cursor
};

}  // namespace

Result<std::unique_ptr<RecordSource>> OpenLmdb(const std::string& path, const OpenOptions& opts) {
  auto env = std::make_shared<Env>();
  int rc = mdb_env_create(&env->env);
  if (rc) return LmdbError("mdb_env_create", rc);
  rc = mdb_env_open(env->env, path.c_str(), MDB_RDONLY | MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOTLS, 0644);
  if (rc)
    return Status::Corruption(path + ": neither an imagepack blob nor an LMDB file (" + mdb_strerror(rc) + ")");
  // liblmdb's own descriptor, borrowed: one per shard, not two (thousands
  // of shards would run into the limit on open files).
  if (int fd = -1; mdb_env_get_fd(env->env, &fd) == 0 && fd >= 0) {
    struct stat st;
    if (::fstat(fd, &st) != 0) return Status::FromErrno(path, errno);
    env->file = std::make_unique<DescriptorSource>(fd, path, st);  // liblmdb closes the descriptor
  }
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
    const void* base = nullptr;
    if (env->file && MapBase(env->env, v.mv_data, v.mv_size, env->file->size(), &base)) {
      env->map = base;
      env->map_size = env->file->size();
      env->map_addr = static_cast<const uint8_t*>(base);
    } else if (env->file && FindMapping(v.mv_data, &env->map, &env->map_size)) {
      env->map_size = std::min<size_t>(env->map_size, env->file->size());
      env->map_addr = static_cast<const uint8_t*>(env->map);  // file offset 0
    }
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
  mdb_txn_abort(txn);
  if (meta->format_version >= 2 && meta->records_per_value == 0)
    return Status::Corruption(path + ": metadata lacks records_per_value (required in format 2)");
  // in_ram is OpenDatabase's (a shared copy, read here like any file).
  return std::unique_ptr<RecordSource>(new LmdbSource(env, std::move(meta.value()), path, opts.pread_records));
}

}  // namespace imagepack::internal
