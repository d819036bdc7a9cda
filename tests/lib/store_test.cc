// Both containers through the public API, plus corruption at known offsets.
#include "imagepack/byte_source.h"
#include "imagepack/store.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <lmdb.h>
#include <sys/file.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <thread>

#include "imagepack/files.h"
#include "testutil.h"

namespace fs = std::filesystem;

namespace imagepack {
namespace {

using namespace testing;  // testutil.h: TempDir, Slurp, Spit, Golden, Gradient, ...

std::vector<uint8_t> Payload(int i) {
  std::vector<uint8_t> p(1000 + i * 37);
  for (size_t k = 0; k < p.size(); ++k) p[k] = uint8_t(k * 31 + i);
  return p;
}

DatasetMeta Meta(int64_t n) {
  DatasetMeta m;
  m.count = n;
  m.classes = {"cat", "dog", "emu"};
  m.label_counts = {0, 0, 0};
  for (int i = 0; i < n; ++i) ++m.label_counts[i % 3];
  return m;
}

void Write(ContainerFormat f, const std::string& path, int n, int records_per_value = 1) {
  WriterOptions wo;
  wo.lmdb_records_per_value = records_per_value;
  auto w = CreateWriter(f, path, wo);
  ASSERT_OK(w);
  for (int i = 0; i < n; ++i) {
    auto p = Payload(i);
    ASSERT_OK(w.value()->Add(EncodeRecord({Encoding::kJpeg, 3, i % 3, 1, 1}, "f" + std::to_string(i), p.data(), p.size())));
  }
  ASSERT_OK(w.value()->Finish(Meta(n)));
}

// Read modes: mapped, in RAM (a shared copy), pread; LMDB records
// per value: 1, 3 (the last value holds 2), 64 (one value, not full).
class Containers : public ::testing::TestWithParam<std::tuple<ContainerFormat, int, int>> {};

TEST_P(Containers, RoundTripBytesInEqualBytesOut) {
  auto [format, mode, per_value] = GetParam();
  const bool in_ram = mode == 1;
  TempDir d;
  Write(format, d / "db", 50, per_value);
  OpenOptions oo;
  oo.in_ram = in_ram;
  oo.pread_records = mode == 2;
  auto src = OpenDatabase(d / "db", oo);
  ASSERT_OK(src);
  EXPECT_EQ(src.value()->size(), 50);
  EXPECT_EQ(src.value()->meta().classes[2], "emu");
  EXPECT_EQ(src.value()->resident_bytes() > 0, in_ram);
  auto cur = src.value()->NewCursor();
  for (int i : {0, 1, 2, 49, 7, 8, 3}) {  // sequential and random access
    auto r = cur->Read(i);
    ASSERT_OK(r);
    EXPECT_EQ(r->path, "f" + std::to_string(i));
    EXPECT_EQ(r->fields.label, i % 3);
    EXPECT_EQ(std::vector<uint8_t>(r->payload, r->payload + r->payload_size), Payload(i));
  }
  auto past = cur->Read(50);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("record 0000000050 is out of range"), std::string::npos)
      << past.status().ToString();
  EXPECT_EQ(src.value()->meta().records_per_value, format == ContainerFormat::kLmdb ? per_value : 0);
  // Nothing but the container is left beside it.
  int files = 0;
  for (auto& e : fs::directory_iterator(d.path())) { (void)e; ++files; }
  EXPECT_EQ(files, 1);
}

INSTANTIATE_TEST_SUITE_P(All, Containers,
                         ::testing::Combine(::testing::Values(ContainerFormat::kLmdb, ContainerFormat::kBlob),
                                            ::testing::Values(0, 1, 2), ::testing::Values(1, 3, 64)));

// n raw one-channel records of width x height, record i's pixels payload(i).
void WriteRaw(ContainerFormat f, const std::string& path, int n, int width, int height,
              const std::function<std::vector<uint8_t>(int)>& payload) {
  auto w = CreateWriter(f, path);
  ASSERT_OK(w);
  for (int i = 0; i < n; ++i) {
    auto p = payload(i);
    ASSERT_OK(w.value()->Add(EncodeRecord({Encoding::kRaw, 1, 0, uint32_t(height), uint32_t(width)}, "r", p.data(),
                                          p.size())));
  }
  DatasetMeta m;
  m.count = n;
  m.classes = {"a"};
  m.encoding = Encoding::kRaw;
  m.channels = 1;
  ASSERT_OK(w.value()->Finish(m));
}

int64_t ResidentBytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// Records of 256 KB: reading them maps their pages; releasing unmaps them
// (resident set shrinks) and the bytes read afterwards are the same.
TEST(Store, ReleaseMappedPagesShrinksTheResidentSetAndKeepsTheBytes) {
  for (ContainerFormat f : {ContainerFormat::kLmdb, ContainerFormat::kBlob}) {
    SCOPED_TRACE(f == ContainerFormat::kLmdb ? "lmdb" : "blob");
    TempDir d;
    const int n = 40;
    auto payload = [](int i) {
      std::vector<uint8_t> p(256 * 1024);
      for (size_t k = 0; k < p.size(); ++k) p[k] = uint8_t(k * 7 + i * 13 + (k >> 12));
      return p;
    };
    WriteRaw(f, d / "db", n, 512, 512, payload);
    auto src = OpenDatabase(d / "db");
    ASSERT_OK(src);
    auto cur = src.value()->NewCursor();
    const int64_t before = ResidentBytes();
    for (int i = 0; i < n; ++i) ASSERT_OK(cur->Read(i));  // the checksum reads every byte
    const int64_t mapped = ResidentBytes();
    EXPECT_GT(mapped - before, 6 << 20);  // 10 MB read (the kernel's counters lag a little)
    src.value()->ReleaseMappedPages();
    EXPECT_LT(ResidentBytes(), mapped - (6 << 20));
    for (int i = 0; i < n; ++i) {
      auto r = cur->Read(i);
      ASSERT_OK(r);
      ASSERT_EQ(std::vector<uint8_t>(r->payload, r->payload + r->payload_size), payload(i));
    }
  }
}

// pread mode: a file cut short after it was opened gives an error naming
// the record (no crash: nothing is read through the mapping).
TEST(Store, PreadOfARecordPastTheEndOfAShrunkenFileIsAnError) {
  TempDir d;
  Write(ContainerFormat::kBlob, d / "db", 50);
  OpenOptions oo;
  oo.pread_records = true;
  auto src = OpenDatabase(d / "db", oo);
  ASSERT_OK(src);
  auto cur = src.value()->NewCursor();
  ASSERT_OK(cur->Read(49));
  fs::resize_file(d / "db", 2000);
  // Record 0 lies within what is left, but its place is in the index, at
  // the end of the file (read where it lies, not copied at open): an
  // error naming it too, not a crash.
  auto first = cur->Read(0);
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.status().message().find(RecordKey(0)), std::string::npos) << first.status().message();
  auto r = cur->Read(49);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(RecordKey(49)), std::string::npos) << r.status().message();
}

TEST(Writer, UnfinishedWriterLeavesNothing) {
  for (auto f : {ContainerFormat::kLmdb, ContainerFormat::kBlob}) {
    TempDir d;
    {
      auto w = CreateWriter(f, d / "db");
      ASSERT_OK(w);
      auto p = Payload(1);
      ASSERT_OK(w.value()->Add(EncodeRecord({}, "x", p.data(), p.size())));
    }  // destroyed without Finish: an interrupted pack
    EXPECT_TRUE(fs::is_empty(d.path()));
  }
}

TEST(Writer, RefusesExistingDestinationAndASecondWriter) {
  TempDir d;
  Write(ContainerFormat::kLmdb, d / "db", 3);
  auto again = CreateWriter(ContainerFormat::kLmdb, d / "db");
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already exists"), std::string::npos);
  auto first = CreateWriter(ContainerFormat::kBlob, d / "other");
  ASSERT_OK(first);
  auto second = CreateWriter(ContainerFormat::kBlob, d / "other");
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("another process is writing"), std::string::npos)
      << second.status().ToString();
}

TEST(Writer, OverwriteReplacesAtomically) {
  TempDir d;
  Write(ContainerFormat::kBlob, d / "db", 3);
  auto w = CreateWriter(ContainerFormat::kBlob, d / "db", WriterOptions{true});
  ASSERT_OK(w);
  EXPECT_EQ(OpenDatabase(d / "db").value()->size(), 3);  // old one readable meanwhile
  ASSERT_OK(w.value()->Finish(Meta(0)));
  EXPECT_EQ(OpenDatabase(d / "db").value()->size(), 0);
}

// Blob records whose place is reserved in order and whose bytes are written
// later from other threads, in any order, mixed with plain Add()s: the
// container reads back as if every record had been added in order. Written
// with O_DIRECT (through several 8 MB staging chunks) and through the page
// cache, the two files are the same bytes.
std::vector<uint8_t> WriteReservedFromThreads(const std::string& path, DirectIo direct_io, bool* skip) {
  WriterOptions wo;
  wo.direct_io = direct_io;
  auto w = CreateWriter(ContainerFormat::kBlob, path, wo);
  if (!w.ok() && direct_io == DirectIo::kOn && w.status().code() == Status::Code::kNotSupported) {
    *skip = true;
    return {};
  }
  EXPECT_OK(w);
  if (!w.ok()) return {};
  ParallelRecordWriter* pw = w.value()->parallel();
  EXPECT_TRUE(pw != nullptr);
  if (!pw) return {};
  EXPECT_EQ(pw->direct_io(), direct_io == DirectIo::kOn);
  const int n = 150;
  std::vector<std::vector<uint8_t>> recs;
  for (int i = 0; i < n; ++i) {
    auto p = Payload(i * 50);  // 1 KB to 276 KB, 20 MB in all
    recs.push_back(EncodeRecord({Encoding::kJpeg, 3, i % 3, 1, 1}, "f" + std::to_string(i), p.data(), p.size()));
  }
  std::vector<uint64_t> at(n);
  for (int i = 0; i < n; ++i) {
    if (i % 7 == 3) {
      EXPECT_OK(w.value()->Add(recs[i]));  // a plain add between reservations
      at[i] = UINT64_MAX;
      continue;
    }
    auto r = pw->Reserve(recs[i].size());
    EXPECT_OK(r);
    at[i] = r.ok() ? r.value() : UINT64_MAX;
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int i = n - 1 - t; i >= 0; i -= 3)  // backwards, interleaved
        if (at[i] != UINT64_MAX) EXPECT_OK(pw->WriteReserved(at[i], recs[i].data(), recs[i].size()));
    });
  for (auto& th : threads) th.join();
  EXPECT_OK(w.value()->Finish(Meta(n)));
  auto src = OpenDatabase(path);
  EXPECT_OK(src);
  if (!src.ok()) return {};
  auto cur = src.value()->NewCursor();
  for (int i = 0; i < n; ++i) {
    const uint8_t* data;
    size_t size;
    EXPECT_OK(cur->ReadRaw(i, &data, &size));
    EXPECT_EQ(std::vector<uint8_t>(data, data + size), recs[i]) << i;
  }
  return Slurp(path);
}

TEST(Writer, BlobReservedRecordsWrittenOutOfOrderFromThreads) {
  TempDir d;
  bool skip = false;
  const auto buffered = WriteReservedFromThreads(d / "buffered", DirectIo::kOff, &skip);
  const auto direct = WriteReservedFromThreads(d / "direct", DirectIo::kOn, &skip);
  if (skip) GTEST_SKIP() << "no O_DIRECT on " << d.path();
  EXPECT_GT(buffered.size(), 16u << 20);  // two whole staging chunks and a partial one
  EXPECT_TRUE(buffered == direct) << "sizes " << buffered.size() << " and " << direct.size();
  auto lmdb = CreateWriter(ContainerFormat::kLmdb, d / "l");
  ASSERT_OK(lmdb);
  EXPECT_TRUE(lmdb.value()->parallel() == nullptr);  // one writer: no reservations, no O_DIRECT
}

TEST(Writer, CountMismatchIsRefused) {
  TempDir d;
  auto w = CreateWriter(ContainerFormat::kLmdb, d / "db");
  ASSERT_OK(w);
  Status st = w.value()->Finish(Meta(5));
  ASSERT_FALSE(st.ok());
  EXPECT_FALSE(fs::exists(d / "db"));
}

// The LMDB writer hands back buffers of records only once they are
// committed: scribbling over every buffer it returns leaves the database
// intact.
TEST(Writer, LmdbSpareBuffersAreThoseOfCommittedRecords) {
  TempDir d;
  WriterOptions wo;
  wo.lmdb_records_per_value = 3;
  auto w = CreateWriter(ContainerFormat::kLmdb, d / "db", wo);
  ASSERT_OK(w);
  const int n = 3000;  // batches end every 1024 records
  int spares = 0;
  for (int i = 0; i < n; ++i) {
    auto p = Payload(i % 50);
    ASSERT_OK(w.value()->Add(EncodeRecord({Encoding::kJpeg, 3, i % 3, 1, 1}, "f" + std::to_string(i), p.data(), p.size())));
    std::vector<uint8_t> spare;
    while (w.value()->TakeSpareBuffer(&spare)) {
      ++spares;
      std::fill(spare.begin(), spare.end(), 0xEE);
    }
  }
  ASSERT_OK(w.value()->Finish(Meta(n)));
  EXPECT_GT(spares, 0);
  auto src = OpenDatabase(d / "db");
  ASSERT_OK(src);
  auto cur = src.value()->NewCursor();
  for (int i = 0; i < n; ++i) {
    auto r = cur->Read(i);
    ASSERT_OK(r);
    ASSERT_EQ(std::vector<uint8_t>(r->payload, r->payload + r->payload_size), Payload(i % 50)) << i;
  }
}

TEST(Writer, LmdbMapGrowsWithoutMapFull) {
  // 300 records of 1 MiB exceed the initial 256 MiB map several times over.
  TempDir d;
  auto w = CreateWriter(ContainerFormat::kLmdb, d / "db");
  ASSERT_OK(w);
  std::vector<uint8_t> big(1 << 20, 3);
  for (int i = 0; i < 300; ++i) ASSERT_OK(w.value()->Add(EncodeRecord({}, "", big.data(), big.size())));
  DatasetMeta m;
  m.count = 300;
  ASSERT_OK(w.value()->Finish(m));
  auto src = OpenDatabase(d / "db");
  ASSERT_OK(src);
  auto r = src.value()->NewCursor()->Read(299);
  ASSERT_OK(r);
  EXPECT_EQ(r->payload_size, big.size());
}

// Finds `needle` in a file; the offset of its first byte.
size_t Find(const std::vector<uint8_t>& hay, const std::vector<uint8_t>& needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end());
  EXPECT_NE(it, hay.end());
  return static_cast<size_t>(it - hay.begin());
}

// Edits an LMDB file under its keys (liblmdb's own pages stay valid).
// An empty `value` deletes the key.
void EditLmdb(const fs::path& path, const std::string& key, const std::vector<uint8_t>& value) {
  MDB_env* env;
  MDB_txn* txn;
  MDB_dbi dbi;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_open(env, path.c_str(), MDB_NOSUBDIR | MDB_NOLOCK, 0644), 0);
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  ASSERT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
  MDB_val k{key.size(), const_cast<char*>(key.data())};
  MDB_val v{value.size(), const_cast<uint8_t*>(value.data())};
  ASSERT_EQ(value.empty() ? mdb_del(txn, dbi, &k, nullptr) : mdb_put(txn, dbi, &k, &v, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

std::vector<uint8_t> LmdbValue(const fs::path& path, const std::string& key) {
  MDB_env* env;
  MDB_txn* txn;
  MDB_dbi dbi;
  std::vector<uint8_t> out;
  EXPECT_EQ(mdb_env_create(&env), 0);
  EXPECT_EQ(mdb_env_open(env, path.c_str(), MDB_NOSUBDIR | MDB_NOLOCK | MDB_RDONLY, 0644), 0);
  EXPECT_EQ(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn), 0);
  EXPECT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
  MDB_val k{key.size(), const_cast<char*>(key.data())}, v;
  if (mdb_get(txn, dbi, &k, &v) == 0) out.assign(static_cast<uint8_t*>(v.mv_data), static_cast<uint8_t*>(v.mv_data) + v.mv_size);
  mdb_txn_abort(txn);
  mdb_env_close(env);
  return out;
}

std::string ReadError(RecordSource& src, int64_t index) {
  auto r = src.NewCursor()->Read(index);
  EXPECT_FALSE(r.ok()) << "record " << index << " read fine";
  return r.ok() ? "" : r.status().message();
}

std::vector<std::string> LayoutProblems(const RecordSource& src) {
  std::vector<std::string> out;
  src.CheckLayout([&](const std::string& m) { out.push_back(m); });
  return out;
}

TEST(Corruption, LmdbPayloadByteIsAChecksumMismatchOnThatKey) {
  TempDir d;
  Write(ContainerFormat::kLmdb, d / "db", 10);
  auto bytes = Slurp(d / "db");
  // LMDB is copy-on-write: stale copies of a page may remain in the file, so
  // damage every copy of the payload.
  const auto needle = Payload(6);
  int copies = 0;
  for (auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end()); it != bytes.end();
       it = std::search(it + 1, bytes.end(), needle.begin(), needle.end())) {
    *(it + 500) ^= 0xFF;
    ++copies;
  }
  ASSERT_GE(copies, 1);
  Spit(d / "db", bytes);
  auto src = OpenDatabase(d / "db");
  ASSERT_OK(src);
  auto cur = src.value()->NewCursor();
  EXPECT_OK(cur->Read(5));
  auto r = cur->Read(6);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("record 0000000006: checksum mismatch"), std::string::npos)
      << r.status().ToString();
}

TEST(Corruption, LmdbMissingRecordAndMetadata) {
  TempDir d;
  Write(ContainerFormat::kLmdb, d / "db", 10);
  EditLmdb(d / "db", RecordKey(3), {});
  auto src = OpenDatabase(d / "db");
  ASSERT_OK(src);
  EXPECT_NE(ReadError(*src.value(), 3).find("record 0000000003 is missing"), std::string::npos);
  EXPECT_EQ(LayoutProblems(*src.value()), std::vector<std::string>{"record 0000000003 is missing"});
  // Now damage the metadata.
  const std::string junk = "{\"format\": \"imagepack\", \"count\": ";
  EditLmdb(d / "db", kMetaKey, std::vector<uint8_t>(junk.begin(), junk.end()));
  auto bad = OpenDatabase(d / "db");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("metadata is not a JSON object"), std::string::npos)
      << bad.status().ToString();
  EXPECT_NE(bad.status().message().find(d / "db"), std::string::npos);
}

// Format 2, three records per value: 10 records are values 0..3 (the last
// holds record 9 alone). The value layout is checked, and problems name the
// records they cost as well as the value.
TEST(Corruption, LmdbGroupedValues) {
  TempDir d;
  Write(ContainerFormat::kLmdb, d / "db", 10, 3);
  const auto value1 = LmdbValue(d / "db", RecordKey(1));
  // "IPKG", n = 3, offsets 40, 40 + |record 3|, ..., then records 3, 4, 5.
  ASSERT_EQ(value1.size(), 40 + 3 * 40 + 3 * 2 + Payload(3).size() + Payload(4).size() + Payload(5).size());
  EXPECT_EQ(std::string(value1.begin(), value1.begin() + 4), "IPKG");
  {
    auto src = OpenDatabase(d / "db");
    ASSERT_OK(src);
    EXPECT_TRUE(LayoutProblems(*src.value()).empty());
  }
  struct Case { const char* what; size_t offset; uint8_t value; const char* words; };
  for (const Case& c : {Case{"magic", 0, 'X', "bad value header (magic)"},
                        Case{"count", 4, 2, "value holds 2 records, expected 3"},
                        Case{"first offset", 8, 41, "offset table entry 0 (41)"},
                        Case{"middle offset", 16 + 1, 0xFF, "offset table entry 1"},
                        Case{"last offset", 32, 0, "offset table entry 3"}}) {
    SCOPED_TRACE(c.what);
    auto bad = value1;
    bad[c.offset] = c.value;
    EditLmdb(d / "db", RecordKey(1), bad);
    auto src = OpenDatabase(d / "db");
    ASSERT_OK(src);
    EXPECT_OK(src.value()->NewCursor()->Read(2));
    EXPECT_OK(src.value()->NewCursor()->Read(6));
    const std::string msg = ReadError(*src.value(), 4);
    EXPECT_NE(msg.find("record 0000000004: value 0000000001 (records 0000000003..0000000005): "), std::string::npos)
        << msg;
    EXPECT_NE(msg.find(c.words), std::string::npos) << msg;
  }
  // A damaged record inside an intact value: that record's checksum.
  auto damaged = value1;
  damaged[40 + (42 + Payload(3).size()) + 42 + 500] ^= 0x10;  // record 4's payload
  EditLmdb(d / "db", RecordKey(1), damaged);
  {
    auto src = OpenDatabase(d / "db");
    ASSERT_OK(src);
    EXPECT_OK(src.value()->NewCursor()->Read(3));
    EXPECT_NE(ReadError(*src.value(), 4).find("record 0000000004: checksum mismatch"), std::string::npos);
    EXPECT_OK(src.value()->NewCursor()->Read(5));
  }
  // Missing values: the records they held.
  EditLmdb(d / "db", RecordKey(1), {});
  EditLmdb(d / "db", RecordKey(3), {});
  auto src = OpenDatabase(d / "db");
  ASSERT_OK(src);
  EXPECT_NE(ReadError(*src.value(), 5).find("record 0000000005 is missing (value 0000000001)"), std::string::npos);
  EXPECT_EQ(LayoutProblems(*src.value()),
            (std::vector<std::string>{"records 0000000003..0000000005 are missing (value 0000000001)",
                                      "record 0000000009 is missing (value 0000000003)"}));
  // In RAM (a shared copy of the file), the same records are missing, by
  // the same names.
  OpenOptions ram;
  ram.in_ram = true;
  ram.shm_dir = d.path();
  auto in_ram = OpenDatabase(d / "db", ram);
  ASSERT_OK(in_ram);
  EXPECT_NE(ReadError(*in_ram.value(), 3).find("record 0000000003 is missing (value 0000000001)"), std::string::npos);
  EXPECT_EQ(LayoutProblems(*in_ram.value()), LayoutProblems(*src.value()));
}

// Format 1 (one bare record per value, no records_per_value) stays readable;
// format 2 metadata without records_per_value is refused.
TEST(Store, ReadsFormatOneLmdb) {
  TempDir d;
  Write(ContainerFormat::kLmdb, d / "db", 5, 1);
  for (int i = 0; i < 5; ++i) {
    const auto v = LmdbValue(d / "db", RecordKey(i));
    ASSERT_GT(v.size(), 24u);
    EditLmdb(d / "db", RecordKey(i), std::vector<uint8_t>(v.begin() + 24, v.end()));  // strip the 1-record header
  }
  DatasetMeta m = Meta(5);
  m.format_version = 1;
  const std::string v1 = m.ToJson();
  EXPECT_EQ(v1.find("records_per_value"), std::string::npos);
  EditLmdb(d / "db", kMetaKey, std::vector<uint8_t>(v1.begin(), v1.end()));
  for (bool in_ram : {false, true}) {
    OpenOptions oo;
    oo.in_ram = in_ram;
    auto src = OpenDatabase(d / "db", oo);
    ASSERT_OK(src);
    EXPECT_EQ(src.value()->meta().format_version, 1);
    EXPECT_EQ(src.value()->meta().records_per_value, 0);
    EXPECT_TRUE(LayoutProblems(*src.value()).empty());
    auto cur = src.value()->NewCursor();
    for (int i : {0, 1, 4, 2}) {
      auto r = cur->Read(i);
      ASSERT_OK(r);
      EXPECT_EQ(std::vector<uint8_t>(r->payload, r->payload + r->payload_size), Payload(i));
    }
  }
  m.format_version = 2;
  const std::string v2 = m.ToJson();
  EditLmdb(d / "db", kMetaKey, std::vector<uint8_t>(v2.begin(), v2.end()));
  auto bad = OpenDatabase(d / "db");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("metadata lacks records_per_value"), std::string::npos)
      << bad.status().ToString();
}

TEST(Corruption, BlobEveryRegionIsChecked) {
  TempDir d;
  Write(ContainerFormat::kBlob, d / "db", 10);
  const auto good = Slurp(d / "db");
  uint64_t index_offset;
  std::memcpy(&index_offset, &good[24], 8);
  struct Case { const char* what; size_t offset; const char* words; };
  const size_t payload6 = Find(good, Payload(6));
  for (const Case& c : {Case{"header", 20, "header checksum mismatch"},
                        Case{"magic", 0, "neither an imagepack blob nor an LMDB file"},
                        Case{"index", size_t(index_offset) + 16 * 4, "index checksum mismatch"}}) {
    SCOPED_TRACE(c.what);
    auto bytes = good;
    bytes[c.offset] ^= 0x5A;
    Spit(d / "db", bytes);
    auto src = OpenDatabase(d / "db");
    ASSERT_FALSE(src.ok());
    EXPECT_NE(src.status().message().find(c.words), std::string::npos) << src.status().ToString();
  }
  auto bytes = good;
  bytes[payload6 + 10] ^= 1;
  Spit(d / "db", bytes);
  auto src = OpenDatabase(d / "db");
  ASSERT_OK(src);
  auto r = src.value()->NewCursor()->Read(6);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("record 0000000006: checksum mismatch"), std::string::npos);
  for (size_t cut : {good.size() / 2, size_t(40), size_t(0)}) {
    std::vector<uint8_t> truncated(good.begin(), good.begin() + cut);
    Spit(d / "db", truncated);
    auto t = OpenDatabase(d / "db");
    ASSERT_FALSE(t.ok()) << cut;
    EXPECT_EQ(t.status().code(), Status::Code::kCorruption) << t.status().ToString();
  }
}

TEST(Shards, SeveralContainersReadAsOne) {
  TempDir d;
  Write(ContainerFormat::kLmdb, d / "a", 4);
  Write(ContainerFormat::kBlob, d / "b", 6);
  auto src = OpenDatabases({d / "a", d / "b"});
  ASSERT_OK(src);
  EXPECT_EQ(src.value()->size(), 10);
  EXPECT_EQ(src.value()->meta().label_counts, (std::vector<int64_t>{4, 3, 3}));
  auto cur = src.value()->NewCursor();
  auto r = cur->Read(5);  // record 1 of the second shard
  ASSERT_OK(r);
  EXPECT_EQ(r->path, "f1");
  EXPECT_EQ(std::vector<uint8_t>(r->payload, r->payload + r->payload_size), Payload(1));
  EXPECT_FALSE(cur->Read(10).ok());
}

}  // namespace
}  // namespace imagepack

namespace imagepack {
namespace {

int CountFiles(const std::string& dir, const std::string& ext) {
  int n = 0;
  for (auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ext;
  return n;
}

// in_ram: every opener of one file maps one copy in the shared-memory
// folder, named by the file's identity; the last to close removes it.
TEST(SharedCopy, OneCopyPerMachineRemovedByTheLastHolder) {
  for (ContainerFormat f : {ContainerFormat::kLmdb, ContainerFormat::kBlob}) {
    TempDir d, shm;
    Write(f, d / "db", 30, 4);
    OpenOptions oo;
    oo.in_ram = true;
    oo.shm_dir = shm.path();
    const std::string mine = shm / ("imagepack-" + std::to_string(::geteuid()));  // this user's folder
    auto a = OpenDatabase(d / "db", oo);
    ASSERT_OK(a);
    EXPECT_EQ(CountFiles(mine, ".db"), 1);
    EXPECT_EQ(fs::status(mine).permissions(), fs::perms::owner_all);  // 0700: nobody else enters
    EXPECT_EQ(a.value()->resident_bytes(), int64_t(fs::file_size(d / "db")));
    EXPECT_NE(a.value()->Describe().find(shm.path()), std::string::npos) << a.value()->Describe();
    {
      auto b = OpenDatabase(d / "db", oo);  // maps the same copy
      ASSERT_OK(b);
      EXPECT_EQ(CountFiles(mine, ".db"), 1);
      auto cur = b.value()->NewCursor();
      auto r = cur->Read(29);
      ASSERT_OK(r);
      EXPECT_EQ(std::vector<uint8_t>(r->payload, r->payload + r->payload_size), Payload(29));
    }
    EXPECT_EQ(CountFiles(mine, ".db"), 1);  // a still holds it
    auto cur = a.value()->NewCursor();
    ASSERT_OK(cur->Read(3));
    cur.reset();
    a.value().reset();
    EXPECT_EQ(CountFiles(mine, ".db"), 0);
    EXPECT_EQ(CountFiles(mine, ".lock"), 1);  // the folder's, whatever the number of copies
    // A changed file is another copy; one nobody holds is removed as an
    // orphan when the next copy is made.
    Spit(mine + "/imagepack-copy-1-2-3-4.000000000.db", std::vector<uint8_t>(100, 1));  // left by a crash
    auto c = OpenDatabase(d / "db", oo);
    ASSERT_OK(c);
    EXPECT_FALSE(fs::exists(mine + "/imagepack-copy-1-2-3-4.000000000.db"));
    EXPECT_EQ(CountFiles(mine, ".db"), 1);
  }
}

// A copy under the expected name that is not the file's (planted, or
// damaged) is never served: it is made again, with a warning.
TEST(SharedCopy, ACopyThatIsNotTheFilesIsMadeAgain) {
  for (ContainerFormat f : {ContainerFormat::kLmdb, ContainerFormat::kBlob}) {
    TempDir d, shm;
    Write(f, d / "db", 12, 3);
    OpenOptions oo;
    oo.in_ram = true;
    oo.shm_dir = shm.path();
    const std::string mine = shm / ("imagepack-" + std::to_string(::geteuid()));
    std::string name;
    {
      auto a = OpenDatabase(d / "db", oo);
      ASSERT_OK(a);
      for (auto& e : fs::directory_iterator(mine))
        if (e.path().extension() == ".db") name = e.path();
    }
    ASSERT_FALSE(name.empty());
    ASSERT_FALSE(fs::exists(name));  // the last holder removed it
    // The file's bytes with one class name changed: same size, same
    // identity, other metadata (its checksum no longer matches).
    std::vector<uint8_t> planted = Slurp(d / "db");
    const std::string cls = "\"dog\"";
    auto at = std::search(planted.begin(), planted.end(), cls.begin(), cls.end());
    ASSERT_NE(at, planted.end());
    at[3] = 'x';
    Spit(name, planted);
    auto b = OpenDatabase(d / "db", oo);
    ASSERT_OK(b);
    EXPECT_EQ(b.value()->meta().classes[1], "dog");
    EXPECT_EQ(Slurp(name), Slurp(d / "db"));  // made again from the file
  }
}

// Everything written to file descriptor `fd` (stdout, stderr) while it lives.
class CaptureFd {
 public:
  explicit CaptureFd(int fd) : fd_(fd), saved_(::dup(fd)) {
    std::FILE* f = std::tmpfile();
    tmp_ = ::dup(::fileno(f));
    std::fclose(f);
    std::fflush(nullptr);
    ::dup2(tmp_, fd_);
  }
  ~CaptureFd() { Stop(); }
  std::string Stop() {
    if (saved_ >= 0) {
      std::fflush(nullptr);
      ::dup2(saved_, fd_);
      ::close(saved_);
      saved_ = -1;
      char buf[4096];
      for (off_t at = 0;;) {
        const ssize_t n = ::pread(tmp_, buf, sizeof buf, at);
        if (n <= 0) break;
        text_.append(buf, static_cast<size_t>(n));
        at += n;
      }
      ::close(tmp_);
    }
    return text_;
  }

 private:
  int fd_, saved_, tmp_ = -1;
  std::string text_;
};

// A folder at this user's name that is not private (another user's, or
// opened to others) is not used: copies go to another folder of ours. The
// warning that says so reaches the warning handler; the library itself
// writes nothing to stdout or stderr.
TEST(SharedCopy, AFolderThatIsNotPrivateIsNotUsed) {
  TempDir d, shm;
  Write(ContainerFormat::kBlob, d / "db", 12, 3);
  const std::string usual = shm / ("imagepack-" + std::to_string(::geteuid()));
  fs::create_directory(usual);
  fs::permissions(usual, fs::perms::all);  // 0777: anyone could plant a copy in it
  OpenOptions oo;
  oo.in_ram = true;
  oo.shm_dir = shm.path();
  std::vector<std::string> warnings;
  SetWarningHandler([&](const std::string& m) { warnings.push_back(m); });
  CaptureFd out(1), err(2);
  auto a = OpenDatabase(d / "db", oo);
  const std::string printed = out.Stop() + err.Stop();
  SetWarningHandler(nullptr);
  EXPECT_EQ(printed, "");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(usual + " ("), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("not this user's private folder"), std::string::npos) << warnings[0];
  ASSERT_OK(a);
  EXPECT_EQ(CountFiles(usual, ".db"), 0);
  EXPECT_EQ(a.value()->Describe().find(usual + "/"), std::string::npos) << a.value()->Describe();
  EXPECT_NE(a.value()->Describe().find(usual + "-"), std::string::npos) << a.value()->Describe();
  auto b = OpenDatabase(d / "db", oo);  // the same other folder, the same copy
  ASSERT_OK(b);
  EXPECT_EQ(a.value()->Describe(), b.value()->Describe());
  oo.shm_dir = d / "missing";  // no such root: an error naming it
  auto c = OpenDatabase(d / "db", oo);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("shared-memory folder " + d / "missing"), std::string::npos)
      << c.status().ToString();
}

// Destroying the last holder of a copy removes it at once, even while
// another process holds the folder's lock (making a copy of another file,
// possibly from a bucket): no destructor waits on another process.
TEST(SharedCopy, ItsDestructorWaitsForNoOne) {
  TempDir d, shm;
  Write(ContainerFormat::kBlob, d / "db", 12, 3);
  OpenOptions oo;
  oo.in_ram = true;
  oo.shm_dir = shm.path();
  const std::string mine = shm / ("imagepack-" + std::to_string(::geteuid()));
  auto a = OpenDatabase(d / "db", oo);
  ASSERT_OK(a);
  auto b = OpenDatabase(d / "db", oo);
  ASSERT_OK(b);
  // Another open file description: its flock conflicts with ours as another
  // process's would.
  const int held = ::open((mine + "/imagepack-copy-folder.lock").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
  for (auto* holder : {&a, &b}) {
    auto gone = std::async(std::launch::async, [&] { holder->value().reset(); });
    const bool waited = gone.wait_for(std::chrono::seconds(5)) != std::future_status::ready;
    if (waited) ::close(held);  // let it finish, then fail
    gone.wait();
    ASSERT_FALSE(waited) << "a destructor waited for the folder lock";
    EXPECT_EQ(CountFiles(mine, ".db"), holder == &a ? 1 : 0);  // the last holder removed it
  }
  ::close(held);
}

// A damaged file held in RAM is reported under its own name, not the
// copy's; the copy goes with the failed open.
TEST(SharedCopy, ErrorsNameTheFileNotTheCopy) {
  TempDir d, shm;
  Write(ContainerFormat::kBlob, d / "db", 20);
  std::vector<uint8_t> bytes = Slurp(d / "db");
  bytes[60] ^= 1;  // the header's checksum
  Spit(d / "db", bytes);
  OpenOptions oo;
  oo.in_ram = true;
  oo.shm_dir = shm.path();
  auto src = OpenDatabase(d / "db", oo);
  ASSERT_FALSE(src.ok());
  const std::string msg = src.status().message();
  EXPECT_NE(msg.find(d / "db" + ": blob header checksum mismatch"), std::string::npos) << msg;
  EXPECT_EQ(msg.find(shm.path()), std::string::npos) << msg;
  EXPECT_EQ(CountFiles(shm.path(), ".db"), 0);
}

TEST(SharedCopy, LockedInMemoryAndRefusedWhenItDoesNotFit) {
  TempDir d, shm;
  Write(ContainerFormat::kBlob, d / "db", 200);
  OpenOptions oo;
  oo.in_ram = true;
  oo.lock_in_ram = true;
  oo.shm_dir = shm.path();
  auto locked = OpenDatabase(d / "db", oo);
  if (::geteuid() == 0) ASSERT_OK(locked);  // root may lock any amount
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  // A 64 KB tmpfs cannot hold the 230 KB blob: refused, naming the sizes.
  const std::string small = (shm / "small");
  fs::create_directory(small);
  ASSERT_EQ(std::system(("mount -t tmpfs -o size=64k tmpfs " + small).c_str()), 0);
  oo.lock_in_ram = false;
  oo.shm_dir = small;
  auto refused = OpenDatabase(d / "db", oo);
  EXPECT_EQ(std::system(("umount " + small).c_str()), 0);
  ASSERT_FALSE(refused.ok());
  const std::string msg = refused.status().message();
  EXPECT_NE(msg.find("more than this machine can hold in RAM"), std::string::npos) << msg;
  EXPECT_NE(msg.find("free in " + small), std::string::npos) << msg;
}

// StoredRanges: the bytes of the file at the ranges of records a..b hold
// those records (a blob's exactly; LMDB's values, with their headers), and
// the ranges' byte source reads the file's own bytes there.
TEST(Store, StoredRangesHoldTheRecords) {
  for (ContainerFormat f : {ContainerFormat::kLmdb, ContainerFormat::kBlob}) {
    SCOPED_TRACE(f == ContainerFormat::kLmdb ? "lmdb" : "blob");
    TempDir d;
    Write(f, d / "db", 40, 3);
    auto src = OpenDatabase(d / "db");
    ASSERT_OK(src);
    const std::vector<uint8_t> bytes = Slurp(d / "db");
    const std::string file(bytes.begin(), bytes.end());
    std::vector<StoredRange> ranges;
    src.value()->StoredRanges(10, 20, &ranges);
    ASSERT_FALSE(ranges.empty());
    std::string held;
    uint64_t total = 0;
    for (const auto& r : ranges) {
      ASSERT_LE(r.offset + r.size, file.size());
      ASSERT_NE(r.source, nullptr);
      EXPECT_EQ(r.source->Describe(), d / "db");
      EXPECT_EQ(r.source->size(), file.size());
      std::string read(r.size, '\0');
      ASSERT_OK(r.source->ReadAt(r.offset, r.size, reinterpret_cast<uint8_t*>(read.data())));
      EXPECT_EQ(read, file.substr(r.offset, r.size));
      held += read;
      total += r.size;
    }
    auto cur = src.value()->NewCursor();
    for (int i = 9; i <= 21; ++i) {
      const uint8_t* p = nullptr;
      size_t n = 0;
      ASSERT_OK(cur->ReadRaw(i, &p, &n));
      const bool inside = held.find(std::string(reinterpret_cast<const char*>(p), n)) != std::string::npos;
      // Records 9 and 21 are outside unless they share a value (LMDB, 3 per value).
      const bool expect = (i >= 10 && i <= 20) || (f == ContainerFormat::kLmdb && (i / 3 == 10 / 3 || i / 3 == 20 / 3));
      EXPECT_EQ(inside, expect) << "record " << i;
    }
    EXPECT_LT(total, 11 * 3000u);  // the records and little else
    EXPECT_EQ(src.value()->stored_bytes(), static_cast<int64_t>(file.size()));
    std::vector<StoredRange> none;
    OpenOptions ram;
    ram.in_ram = true;
    auto in_ram = OpenDatabase(d / "db", ram);
    ASSERT_OK(in_ram);
    in_ram.value()->StoredRanges(0, 39, &none);
    EXPECT_TRUE(none.empty());
  }
}

// pread_records: LMDB values are read into the cursor's buffer: the
// resident set does not grow with the bytes read (through the map it grows
// by all of them).
TEST(Store, LmdbPreadKeepsTheResidentSetFlat) {
  TempDir d;
  const int n = 48;
  WriteRaw(ContainerFormat::kLmdb, d / "db", n, 1024, 512, [](int i) {
    std::vector<uint8_t> p(512 * 1024);
    for (size_t k = 0; k < p.size(); ++k) p[k] = uint8_t(k * 5 + i);
    return p;
  });
  for (bool pread : {true, false}) {
    OpenOptions oo;
    oo.pread_records = pread;
    auto src = OpenDatabase(d / "db", oo);
    ASSERT_OK(src);
    auto cur = src.value()->NewCursor();
    const int64_t before = ResidentBytes();
    for (int i = 0; i < n; ++i) {
      auto r = cur->Read(i);
      ASSERT_OK(r);
      ASSERT_EQ(r->payload[7], uint8_t(35 + i));
    }
    const int64_t grew = ResidentBytes() - before;
    if (pread) EXPECT_LT(grew, 4 << 20) << "pread";
    else EXPECT_GT(grew, 16 << 20) << "mapped";
  }
}

}  // namespace
}  // namespace imagepack
