// folder2lmdb-style LMDBs as a source (sources.h, OpenPickledLmdbSource):
// per key a pickled (image bytes, label), read by the safe pickle subset
// (formats/pickle.h); every item a byte range of the LMDB file.
#include <lmdb.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

#include "formats/folder2lmdb.h"
#include "formats/labels.h"
#include "imagepack/meta.h"
#include "sources/registry.h"
#include "sources/sources.h"
#include "stores/store_internal.h"

namespace fs = std::filesystem;

namespace imagepack::internal {

namespace {

// A record path for key `k` (formats/folder2lmdb.h).
std::string KeyOf(const MDB_val& k) {
  return KeyText(std::string_view(static_cast<const char*>(k.mv_data), k.mv_size));
}

}  // namespace

// An LMDB (a file, or a folder's data.mdb) that is not ours: known by its
// bytes (no imagepack metadata key).
Likeness PickledLmdbLooks(const PathShape& shape) {
  std::error_code ec;
  if (shape.kind != PathShape::Kind::kFile && shape.kind != PathShape::Kind::kFolder) return Likeness::kNo;
  std::string file = shape.path;
  if (shape.kind == PathShape::Kind::kFolder) file = (fs::path(shape.path) / "data.mdb").string();
  if (!fs::is_regular_file(file, ec)) return Likeness::kNo;
  MDB_env* env = nullptr;
  if (mdb_env_create(&env) != 0) return Likeness::kNo;
  bool yes = false;
  mdb_env_set_maxreaders(env, 4);
  if (mdb_env_open(env, file.c_str(), MDB_RDONLY | MDB_NOSUBDIR | MDB_NOLOCK, 0644) == 0) {
    MDB_txn* txn = nullptr;
    MDB_dbi dbi;
    if (mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn) == 0 && mdb_dbi_open(txn, nullptr, 0, &dbi) == 0) {
      MDB_val k{std::strlen(kMetaKey), const_cast<char*>(kMetaKey)}, v;
      yes = mdb_get(txn, dbi, &k, &v) == MDB_NOTFOUND;  // an LMDB that is not ours
    }
    if (txn) mdb_txn_abort(txn);
  }
  mdb_env_close(env);
  return yes ? Likeness::kBytes : Likeness::kNo;
}

namespace {

// The record keys: __keys__ (a pickled list) in its order, else every key
// but the bookkeeping ones in LMDB's (byte) order; checked against
// __len__ when there is one.
Result<std::vector<std::string>> RecordKeys(MDB_txn* txn, MDB_dbi dbi, const std::string& path) {
  auto value_of = [&](const std::string& key, MDB_val* v) {
    MDB_val k{key.size(), const_cast<char*>(key.data())};
    return mdb_get(txn, dbi, &k, v) == 0;
  };
  std::vector<std::string> keys;
  MDB_val v;
  if (value_of("__keys__", &v)) {
    auto list = ParseKeyList(static_cast<const uint8_t*>(v.mv_data), v.mv_size);
    if (!list.ok()) return list.status().WithContext(path);
    keys = std::move(list.value());
  } else {
    MDB_cursor* cur = nullptr;
    mdb_cursor_open(txn, dbi, &cur);
    MDB_val k;
    for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
      std::string key(static_cast<const char*>(k.mv_data), k.mv_size);
      if (key != "__keys__" && key != "__len__") keys.push_back(std::move(key));
    }
    mdb_cursor_close(cur);
  }
  if (value_of("__len__", &v)) {
    const auto len = ParseLen(static_cast<const uint8_t*>(v.mv_data), v.mv_size);
    if (len && *len != static_cast<int64_t>(keys.size()))
      return Status::InvalidArgument(path + ": __len__ says " + std::to_string(*len) + " records, __keys__ lists " +
                                     std::to_string(keys.size()));
  }
  return keys;
}

// liblmdb maps the whole file from offset 0 (found from any value's
// address): a value's file offset is its address minus the map's. Null
// when the database holds no value (`needed` false).
Result<const uint8_t*> MapBase(MDB_txn* txn, MDB_dbi dbi, const std::string& path, bool needed) {
  if (!needed) return static_cast<const uint8_t*>(nullptr);
  const uint8_t* map = nullptr;
  MDB_cursor* cur = nullptr;
  MDB_val k, v;
  const void* begin = nullptr;
  size_t size = 0;
  if (mdb_cursor_open(txn, dbi, &cur) == 0) {  // any value will do: the first in the file's order
    if (mdb_cursor_get(cur, &k, &v, MDB_FIRST) == 0 && FindMapping(v.mv_data, &begin, &size))
      map = static_cast<const uint8_t*>(begin);
    mdb_cursor_close(cur);
  }
  if (!map) return Status::IOError(path + ": cannot find liblmdb's map of the file");
  return map;
}

}  // namespace

Result<DatasetSource> OpenPickledLmdbSource(const std::string& path, const SourceOptions& opts) {
  std::error_code ec;
  const std::string file = fs::is_directory(path, ec) ? (fs::path(path) / "data.mdb").string() : path;
  MDB_env* env = nullptr;
  if (mdb_env_create(&env) != 0) return Status::IOError("mdb_env_create failed");
  std::unique_ptr<MDB_env, void (*)(MDB_env*)> env_guard(env, mdb_env_close);
  int rc = mdb_env_open(env, file.c_str(), MDB_RDONLY | MDB_NOSUBDIR | MDB_NOLOCK, 0644);
  if (rc != 0) return Status::IOError("cannot open LMDB " + path + ": " + mdb_strerror(rc));
  MDB_txn* txn = nullptr;
  MDB_dbi dbi;
  if ((rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn)) != 0 || (rc = mdb_dbi_open(txn, nullptr, 0, &dbi)) != 0)
    return Status::IOError("cannot read LMDB " + path + ": " + mdb_strerror(rc));
  std::unique_ptr<MDB_txn, void (*)(MDB_txn*)> txn_guard(txn, mdb_txn_abort);
  auto keys = RecordKeys(txn, dbi, path);
  if (!keys.ok()) return keys.status();
  auto map = MapBase(txn, dbi, path, !keys->empty());
  if (!map.ok()) return map.status();
  MDB_val v;
  DatasetSource s;
  s.root = path;
  s.archives.push_back(file);
  std::vector<RawLabel> raw;
  std::vector<std::string> raw_where;
  std::set<std::string> seen;
  for (const std::string& key : keys.value()) {
    MDB_val k{key.size(), const_cast<char*>(key.data())};
    const std::string shown = path + ":" + KeyOf(k);
    if (!seen.insert(key).second) {
      s.errors.push_back({shown, "listed twice in __keys__"});
      continue;
    }
    if (mdb_get(txn, dbi, &k, &v) != 0) {
      s.errors.push_back({shown, "listed in __keys__ but not in the database"});
      continue;
    }
    const auto* data = static_cast<const uint8_t*>(v.mv_data);
    auto val = ParseRecordValue(data, v.mv_size);
    if (!val.ok()) {
      s.errors.push_back({shown, val.status().message()});
      continue;
    }
    const RawLabel label = val->label;
    SourceItem item;
    item.rel = KeyOf(k);
    item.archive = 0;
    item.offset = static_cast<uint64_t>(data - map.value()) + val->image_offset;
    item.size = val->image_size;
    s.items.push_back(std::move(item));
    raw.push_back(label);
    raw_where.push_back(shown);
  }
  std::vector<std::string> fixed;
  IMAGEPACK_RETURN_IF_ERROR(FixedClasses(opts, &fixed));
  std::vector<int32_t> labels;
  std::vector<std::string> why;
  const bool none_labelled = std::none_of(raw.begin(), raw.end(), [](const RawLabel& l) { return l.present; });
  IMAGEPACK_RETURN_IF_ERROR(
      ResolveLabelsUnless(opts.no_class || none_labelled, raw, raw_where, fixed, &s.classes, &labels, &why));
  std::vector<SourceItem> kept;
  for (size_t i = 0; i < s.items.size(); ++i) {
    if (!why[i].empty()) {
      s.errors.push_back({path + ":" + s.items[i].rel, why[i]});
      continue;
    }
    s.items[i].label = labels[i];
    kept.push_back(std::move(s.items[i]));
  }
  s.items = std::move(kept);  // in __keys__ order: the order the user packed
  IMAGEPACK_RETURN_IF_ERROR(OpenArchives(&s));
  return s;
}

}  // namespace imagepack::internal
