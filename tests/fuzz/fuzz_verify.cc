// libFuzzer target: a whole database, as verify_db and the loader see it.
//
// Input byte 0 picks the container and options; the rest is
//   blob mode: the bytes of a blob file;
//   LMDB mode: chunks [kind u8][len u16 LE][value] (a bare record or a
//     format 2 group of records), each put into a real
//     LMDB under a key the kind chooses (next record key, a chosen record
//     key, "__meta__", or a stray key). LMDB's own B-tree pages are not
//     mutated: liblmdb trusts them (docs/RELIABILITY.md).
// With the repair bit, stored checksums (record, blob index, blob header)
// are rewritten to match, so mutations reach the checks behind them.
// Then VerifyDatabases (optionally --decode and --stats) and one epoch of the
// Loader with the skip policy must finish without crashing, and their
// verdicts must agree: a database verify_db passes loads with no skips.
#include <lmdb.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "imagepack/loader.h"
#include "imagepack/record.h"
#include "imagepack/verify.h"

using namespace imagepack;

namespace {

void RepairBlob(std::vector<uint8_t>& b) {
  if (b.size() < 64 || std::memcmp(b.data(), "IPKBLOB1", 8) != 0) return;
  const uint64_t count = fuzz::Get64(&b[16]);
  const uint64_t index_offset = fuzz::Get64(&b[24]);
  if (index_offset <= b.size() && count <= (b.size() - index_offset) / 16) {
    for (uint64_t i = 0; i < count; ++i) {
      const uint64_t off = fuzz::Get64(&b[index_offset + i * 16]);
      const uint64_t len = fuzz::Get64(&b[index_offset + i * 16 + 8]);
      if (off <= b.size() && len <= b.size() - off) fuzz::RepairRecordChecksum(&b[off], len);
    }
    fuzz::Put64(&b[48], XXH3_64bits(&b[index_offset], count * 16));
  }
  fuzz::Put64(&b[56], XXH3_64bits(b.data(), 56));
}

// An LMDB value: one bare record (format 1) or "IPKG", n, offsets[n + 1],
// records (format 2): repairs each record the offset table locates.
void RepairValue(std::vector<uint8_t>& v) {
  if (v.size() < 8 || std::memcmp(v.data(), "IPKG", 4) != 0) {
    fuzz::RepairRecordChecksum(v.data(), v.size());
    return;
  }
  uint32_t n;
  std::memcpy(&n, &v[4], 4);
  if (v.size() < 16 || n > (v.size() - 16) / 8) return;  // the table, 16 + 8n bytes, must fit
  for (uint32_t j = 0; j < n; ++j) {
    const uint64_t begin = fuzz::Get64(&v[8 + 8 * size_t(j)]), end = fuzz::Get64(&v[16 + 8 * size_t(j)]);
    if (begin <= end && end <= v.size()) fuzz::RepairRecordChecksum(&v[begin], end - begin);
  }
}

bool WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(f);
}

bool WriteLmdb(const std::string& path, const uint8_t* data, size_t size, bool repair) {
  std::filesystem::remove(path);
  MDB_env* env = nullptr;
  if (mdb_env_create(&env)) return false;
  mdb_env_set_mapsize(env, size_t{64} << 20);
  bool ok = mdb_env_open(env, path.c_str(), MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOSYNC, 0644) == 0;
  MDB_txn* txn = nullptr;
  MDB_dbi dbi;
  ok = ok && mdb_txn_begin(env, nullptr, 0, &txn) == 0;
  ok = ok && mdb_dbi_open(txn, nullptr, 0, &dbi) == 0;
  int64_t next = 0;
  size_t pos = 0;
  while (ok && pos + 3 <= size) {
    const uint8_t kind = data[pos];
    const size_t len = std::min<size_t>(data[pos + 1] | (data[pos + 2] << 8), size - pos - 3);
    std::vector<uint8_t> value(data + pos + 3, data + pos + 3 + len);
    pos += 3 + len;
    std::string key;
    switch (kind % 4) {
      case 0: key = RecordKey(next++); break;
      case 1: key = RecordKey(kind >> 2); break;
      case 2: key = kMetaKey; break;
      case 3: key = "stray" + std::to_string(kind >> 2); break;
    }
    if (repair && key != kMetaKey) RepairValue(value);
    MDB_val k{key.size(), key.data()}, v{value.size(), value.data()};
    ok = mdb_put(txn, dbi, &k, &v, 0) == 0;
  }
  if (txn) ok = (ok ? mdb_txn_commit(txn) : (mdb_txn_abort(txn), 1)) == 0 && ok;
  mdb_env_close(env);
  return ok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const bool lmdb = mode & 1, repair = mode & 2;
  const std::string path = fuzz::ScratchDir() + (lmdb ? "/db.lmdb" : "/db.blob");
  if (lmdb) {
    if (!WriteLmdb(path, data + 1, size - 1, repair)) return 0;
  } else {
    std::vector<uint8_t> blob(data + 1, data + size);
    if (repair) RepairBlob(blob);
    if (!WriteFile(path, blob)) return 0;
  }

  VerifyOptions v;
  v.paths = {path};
  v.decode = mode & 4;
  v.stats = mode & 8;
  v.threads = 1;
  auto report = VerifyDatabases(v);
  FUZZ_CHECK(report.ok());  // only bad options give a non-Ok status
  FUZZ_CHECK(report->checked <= report->records || report->problems_total > 0);
  FUZZ_CHECK(report->problems_total >= static_cast<int64_t>(report->problems.size()));

  LoaderOptions lo;
  lo.paths = {path};
  lo.in_ram = mode & 16;
  lo.batch_size = 4;
  lo.size = 16;
  lo.threads = 1;
  lo.prefetch = 1;
  lo.transform = (mode & 32) ? TransformKind::kEval : TransformKind::kTrain;
  lo.on_corrupt = CorruptPolicy::kSkip;
  auto loader = Loader::Open(lo);
  if (!loader.ok()) {
    // Whatever the loader refuses to open, verify_db must also reject.
    FUZZ_CHECK(!report->ok());
    return 0;
  }
  if ((*loader)->dataset_size() > 4096) return 0;  // keep each input fast
  std::vector<uint8_t> images(size_t(lo.batch_size) * 3 * lo.size * lo.size);
  std::vector<int64_t> labels(lo.batch_size);
  (*loader)->StartEpoch(0);
  for (;;) {
    auto got = (*loader)->Next(images.data(), labels.data());
    if (!got.ok() || *got == 0) {
      // Skip policy: an error only when many records in a row are bad,
      // which verify_db --decode must have seen (without --decode it cannot
      // know that JPEG payloads do not decode).
      if (!got.ok() && v.decode) FUZZ_CHECK(!report->ok());
      break;
    }
    const int classes = static_cast<int>((*loader)->meta().classes.size());
    for (int i = 0; i < *got; ++i) FUZZ_CHECK(labels[i] >= -1 && (classes == 0 || labels[i] < classes));
  }
  if (report->ok() && v.decode && (*loader)->stats().skipped != 0) {
    // Say which record the loader refused before failing.
    lo.on_corrupt = CorruptPolicy::kFail;
    auto strict = Loader::Open(lo);
    (*strict)->StartEpoch(0);
    for (;;) {
      auto got = (*strict)->Next(images.data(), labels.data());
      if (!got.ok()) std::fprintf(stderr, "loader: %s\n", got.status().ToString().c_str());
      if (!got.ok() || *got == 0) break;
    }
    FUZZ_CHECK(!"verify_db --decode passed a database the loader had to skip records of");
  }
  return 0;
}
