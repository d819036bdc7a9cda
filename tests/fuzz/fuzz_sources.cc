// libFuzzer target: whole sources of other tools' files, through the same
// entry points pack_lmdb uses (lib/src/sources.cc, archive_sources.cc):
// the first input byte picks the format, the rest is the file.
//   0: a WebDataset .tar shard     1: a gzipped .tar.gz shard
//   2: a JSON Lines manifest       3: a CSV manifest
//   4: a COCO instances file       5: a folder2lmdb LMDB (values split at
//      "\n--\n": __keys__ first, then the values of keys "a", "b", ...)
//   6: the bytes as a .tar.gz file itself (damaged gzip streams)
//   7: TFRecord files                 8: a parquet file
// Whatever opens lists items whose archive ranges lie inside their files,
// and no read reaches outside the scratch folder.
#include <lmdb.h>
#include <zlib.h>

#include <fstream>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "sources/sources.h"

using namespace imagepack;
using namespace imagepack::internal;

namespace {

void Write(const std::string& path, const uint8_t* p, size_t n) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n));
}

void WriteLmdb(const std::string& path, const uint8_t* p, size_t n) {
  std::filesystem::remove(path);
  MDB_env* env = nullptr;
  mdb_env_create(&env);
  mdb_env_set_mapsize(env, 64 << 20);
  if (mdb_env_open(env, path.c_str(), MDB_NOSUBDIR | MDB_NOLOCK, 0600) != 0) {
    mdb_env_close(env);
    return;
  }
  MDB_txn* txn = nullptr;
  MDB_dbi dbi;
  mdb_txn_begin(env, nullptr, 0, &txn);
  mdb_dbi_open(txn, nullptr, 0, &dbi);
  const std::string text(reinterpret_cast<const char*>(p), n), sep = "\n--\n";
  std::string key = "__keys__";
  for (size_t at = 0, i = 0; at <= text.size(); ++i) {
    size_t end = text.find(sep, at);
    if (end == std::string::npos) end = text.size();
    std::string value = text.substr(at, end - at);
    MDB_val k{key.size(), key.data()}, v{value.size(), value.data()};
    if (mdb_put(txn, dbi, &k, &v, 0) != 0) break;
    key = std::string(1, static_cast<char>('a' + i % 26)) + std::to_string(i / 26);
    if (i == 0) key = "a0";
    at = end + sep.size();
  }
  mdb_txn_commit(txn);
  mdb_env_close(env);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int format = data[0] % 9;
  ++data, --size;
  const std::string dir = fuzz::ScratchDir();
  SourceOptions opts;
  opts.scratch_dir = dir;
  opts.keep_members = {"txt"};
  Result<DatasetSource> s = Status::NotFound("");
  std::string file;
  switch (format) {
    case 0:
      file = dir + "/shard.tar";
      Write(file, data, size);
      s = OpenWebDatasetSource(file, opts);
      break;
    case 1: {
      file = dir + "/shard.tar.gz";
      gzFile g = gzopen(file.c_str(), "wb1");
      if (size) gzwrite(g, data, static_cast<unsigned>(size));
      gzclose(g);
      s = OpenWebDatasetSource(file, opts);
      break;
    }
    case 2: case 3:
      file = dir + (format == 2 ? "/m.jsonl" : "/m.csv");
      Write(file, data, size);
      s = OpenManifestSource(file, opts);
      break;
    case 4:
      file = dir + "/coco.json";
      Write(file, data, size);
      s = OpenCocoSource(file, dir, opts);
      break;
    case 6:
      file = dir + "/raw.tar.gz";
      Write(file, data, size);
      s = OpenWebDatasetSource(file, opts);
      break;
    case 7:
      file = dir + "/train-00000-of-00001";
      Write(file, data, size);
      s = OpenTfRecordSource(file, opts);
      break;
    case 8:
      file = dir + "/train.parquet";
      Write(file, data, size);
      s = OpenParquetSource(file, opts);
      break;
    case 5:
      file = dir + "/f2l.lmdb";
      WriteLmdb(file, data, size);
      s = OpenPickledLmdbSource(file, opts);
      break;
  }
  if (!s.ok()) {
    FUZZ_CHECK(!s.status().message().empty());
    return 0;
  }
  for (const auto& item : s->items) {
    FUZZ_CHECK(!item.rel.empty() || format >= 2);
    if (item.archive >= 0) {
      auto bytes = ReadArchiveItem(s.value(), item, 0);
      FUZZ_CHECK(bytes.ok());
      FUZZ_CHECK(bytes->size() == item.size);
    }
    for (const auto& f : item.fields) {
      if (!f.file.empty() && f.archive < 0) {
        // A manifest's or COCO's file paths stay inside its folder.
        const auto rel = std::filesystem::path(f.file).lexically_relative(dir).lexically_normal();
        FUZZ_CHECK(!rel.empty() && *rel.begin() != "..");
      }
    }
  }
  return 0;
}
