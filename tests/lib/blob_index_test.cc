// Blob layout 2 (docs/FORMAT.md): the index read where it lies, checked a
// chunk at a time, written in bounded memory.
#include "stores/blob_index.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>

#include "imagepack/store.h"
#include "testutil.h"

namespace imagepack {
namespace {

using testing::Slurp;
using testing::Spit;
using testing::TempDir;

std::vector<uint8_t> Payload(int i) { return std::vector<uint8_t>(10 + i % 7, uint8_t(i)); }

DatasetMeta Meta(int64_t n) {
  DatasetMeta m;
  m.count = n;
  m.classes = {"a", "b"};
  m.label_counts = {0, 0};
  for (int i = 0; i < n; ++i) ++m.label_counts[i % 2];
  return m;
}

// n records, 2^shift entries per chunk (0: the default), at most
// `memory` bytes of index in memory while writing.
void Write(const std::string& path, int n, int shift, size_t memory = size_t(16) << 20) {
  WriterOptions wo;
  wo.blob_index_chunk_shift = shift;
  wo.blob_index_memory = memory;
  auto w = CreateWriter(ContainerFormat::kBlob, path, wo);
  ASSERT_OK(w);
  for (int i = 0; i < n; ++i) {
    auto p = Payload(i);
    ASSERT_OK(w.value()->Add(EncodeRecord({Encoding::kJpeg, 3, i % 2, 1, 1}, "r" + std::to_string(i), p.data(), p.size())));
  }
  ASSERT_OK(w.value()->Finish(Meta(n)));
}

uint32_t Layout(const std::vector<uint8_t>& blob, uint32_t* shift) {
  uint32_t v;
  std::memcpy(&v, &blob[8], 4);
  std::memcpy(shift, &blob[12], 4);
  return v;
}

void ExpectRecords(const std::string& path, int n) {
  for (bool pread : {false, true}) {
    OpenOptions oo;
    oo.pread_records = pread;
    auto src = OpenDatabase(path, oo);
    ASSERT_OK(src);
    ASSERT_EQ(src.value()->size(), n);
    auto cur = src.value()->NewCursor();
    for (int i = 0; i < n; ++i) {
      auto r = cur->Read(i);
      ASSERT_OK(r);
      EXPECT_EQ(std::string(r->path), "r" + std::to_string(i));
      EXPECT_EQ(std::vector<uint8_t>(r->payload, r->payload + r->payload_size), Payload(i));
    }
    std::vector<std::string> problems;
    src.value()->CheckLayout([&](const std::string& m) { problems.push_back(m); });
    EXPECT_TRUE(problems.empty()) << problems[0];
  }
}

// Small packs stay layout 1 (readable by every earlier build); layout 2
// round-trips for every count against its chunk size, with the index
// spilled to a scratch file or not.
TEST(BlobIndex, LayoutTwoRoundTripsAndSmallPacksStayLayoutOne) {
  TempDir d;
  Write(d / "v1", 9, 0);
  uint32_t shift = 99;
  EXPECT_EQ(Layout(Slurp(d / "v1"), &shift), 1u);
  EXPECT_EQ(shift, 0u);
  ExpectRecords(d / "v1", 9);
  for (int n : {0, 1, 3, 4, 5, 17}) {
    for (size_t memory : {size_t(16) << 20, size_t(48)}) {
      SCOPED_TRACE("n " + std::to_string(n) + " memory " + std::to_string(memory));
      const std::string path = d / ("v2-" + std::to_string(n) + "-" + std::to_string(memory));
      Write(path, n, 2, memory);
      EXPECT_EQ(Layout(Slurp(path), &shift), 2u);
      EXPECT_EQ(shift, 2u);
      ExpectRecords(path, n);
    }
  }
  // The spilled index is the same file byte for byte.
  Write(d / "a", 17, 2);
  Write(d / "b", 17, 2, 48);
  Write(d / "c", 17, 0, 48);
  Write(d / "e", 17, 0);
  EXPECT_EQ(Slurp(d / "a"), Slurp(d / "b"));
  EXPECT_EQ(Slurp(d / "c"), Slurp(d / "e"));
}

// A damaged chunk fails the reads of its own records only, naming them; the
// open, and every other record, are unaffected; CheckLayout reports it. A
// damaged checksum table fails the open.
TEST(BlobIndex, ADamagedChunkFailsItsOwnRecordsOnly) {
  TempDir d;
  Write(d / "db", 13, 2);  // chunks: 0-3, 4-7, 8-11, 12
  auto good = Slurp(d / "db");
  uint64_t index_offset;
  std::memcpy(&index_offset, &good[24], 8);
  auto bad = good;
  bad[index_offset + 16 * 5 + 8] ^= 1;  // record 5's length
  Spit(d / "bad", bad);
  for (bool pread : {false, true}) {
    OpenOptions oo;
    oo.pread_records = pread;
    auto src = OpenDatabase(d / "bad", oo);
    ASSERT_OK(src);
    auto cur = src.value()->NewCursor();
    for (int i = 0; i < 13; ++i) {
      auto r = cur->Read(i);
      if (i >= 4 && i < 8) {
        ASSERT_FALSE(r.ok()) << i;
        EXPECT_NE(r.status().message().find("blob index checksum mismatch in chunk 1 (records 0000000004..0000000007"),
                  std::string::npos)
            << r.status().ToString();
      } else {
        EXPECT_OK(r);
      }
    }
    std::vector<std::string> problems;
    src.value()->CheckLayout([&](const std::string& m) { problems.push_back(m); });
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_NE(problems[0].find("chunk 1"), std::string::npos) << problems[0];
  }
  bad = good;
  bad[index_offset + 16 * 13 + 8] ^= 1;  // chunk 1's checksum in the table
  Spit(d / "table", bad);
  auto src = OpenDatabase(d / "table");
  ASSERT_FALSE(src.ok());
  EXPECT_NE(src.status().message().find("blob index checksum table mismatch"), std::string::npos)
      << src.status().ToString();
  // An entry that points outside the record area, with the checksums made
  // to match: the chunk's check names the record.
  bad = good;
  const uint64_t far = index_offset + 100;
  std::memcpy(&bad[index_offset + 16 * 9], &far, 8);
  const size_t table = index_offset + 16 * 13;
  auto put = [&](size_t at, uint64_t v) { std::memcpy(&bad[at], &v, 8); };
  put(table + 8 * 2, XXH3_64bits(&bad[index_offset + 16 * 8], 16 * 4));
  put(48, XXH3_64bits(&bad[table], 8 * 4));
  put(56, XXH3_64bits(&bad[0], 56));
  Spit(d / "outside", bad);
  auto opened = OpenDatabase(d / "outside");
  ASSERT_OK(opened);
  auto cur = opened.value()->NewCursor();
  EXPECT_OK(cur->Read(3));
  auto r = cur->Read(10);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("record 0000000009 at offset " + std::to_string(far)), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("lies outside the record area"), std::string::npos) << r.status().ToString();
}

// tests/data/layout2/tiny.blob: layout 2 as this build first wrote it
// (chunks of 2 entries, 5 raw 2x3 records): it must keep opening and
// reading the same bytes.
TEST(BlobIndex, TheLayoutTwoGoldenFileKeepsLoading) {
  for (bool pread : {false, true}) {
    OpenOptions oo;
    oo.pread_records = pread;
    auto src = OpenDatabase(std::string(IMAGEPACK_TEST_DATA_DIR) + "/layout2/tiny.blob", oo);
    ASSERT_OK(src);
    EXPECT_EQ(src.value()->meta().classes, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(src.value()->meta().created, "2025-11-27T00:00:00Z");
    auto cur = src.value()->NewCursor();
    for (int i = 0; i < 5; ++i) {
      auto r = cur->Read(i);
      ASSERT_OK(r);
      EXPECT_EQ(std::string(r->path), "r" + std::to_string(i));
      EXPECT_EQ(r->fields.label, i % 2);
      EXPECT_EQ(r->fields.width, 2u);
      EXPECT_EQ(std::vector<uint8_t>(r->payload, r->payload + r->payload_size), std::vector<uint8_t>(18, uint8_t(40 * i)));
    }
    std::vector<std::string> problems;
    src.value()->CheckLayout([&](const std::string& m) { problems.push_back(m); });
    EXPECT_TRUE(problems.empty());
  }
}

TEST(BlobIndex, BadChunkSizesAreRefused) {
  TempDir d;
  WriterOptions wo;
  wo.blob_index_chunk_shift = 41;
  auto w = CreateWriter(ContainerFormat::kBlob, d / "x", wo);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("blob index chunks of 2^41"), std::string::npos) << w.status().ToString();
}

}  // namespace
}  // namespace imagepack
