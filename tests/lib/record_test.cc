#include "imagepack/record.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <xxhash.h>

#include <cstring>

#include "imagepack/meta.h"
#include "testutil.h"

namespace imagepack {
namespace {

TEST(Record, RoundTripsEveryField) {
  std::vector<uint8_t> payload = {1, 2, 3, 4, 5, 6};
  RecordFields f{Encoding::kRaw, 3, 917, 1, 2};
  auto rec = EncodeRecord(f, "n0144/x.JPEG", payload.data(), payload.size());
  ASSERT_EQ(rec.size(), kRecordHeaderSize + 12 + 6);
  auto v = ParseRecord(rec.data(), rec.size());
  ASSERT_OK(v);
  EXPECT_EQ(v->fields.encoding, Encoding::kRaw);
  EXPECT_EQ(v->fields.channels, 3);
  EXPECT_EQ(v->fields.label, 917);
  EXPECT_EQ(v->fields.height, 1u);
  EXPECT_EQ(v->fields.width, 2u);
  EXPECT_EQ(v->path, "n0144/x.JPEG");
  EXPECT_EQ(std::vector<uint8_t>(v->payload, v->payload + v->payload_size), payload);
}

TEST(Record, EveryCorruptionIsNamed) {
  std::vector<uint8_t> payload(300, 7);
  auto good = EncodeRecord({Encoding::kJpeg, 3, 1, 10, 10}, "a.jpg", payload.data(), payload.size());
  struct Case { size_t offset; uint8_t value; const char* words; };
  for (const Case& c : {Case{100, 0x55, "checksum mismatch"}, Case{8, 'X', "bad record magic"},
                        Case{12, 9, "record version 9"}, Case{14, 7, "bad encoding byte 7"},
                        Case{15, 2, "bad channel count 2"}, Case{33, 0x10, "record length mismatch"},
                        Case{16, 2, "checksum mismatch"}}) {
    SCOPED_TRACE(c.offset);
    auto bad = good;
    bad[c.offset] = c.value;
    auto v = ParseRecord(bad.data(), bad.size());
    ASSERT_FALSE(v.ok());
    EXPECT_NE(v.status().message().find(c.words), std::string::npos) << v.status().ToString();
  }
  // A flipped label is caught by the checksum, not silently accepted.
  auto v = ParseRecord(good.data(), good.size() - 1);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("length mismatch"), std::string::npos);
  EXPECT_FALSE(ParseRecord(good.data(), 39).ok());
}

TEST(Record, RawPayloadMustMatchDimensions) {
  std::vector<uint8_t> payload(11, 0);
  auto rec = EncodeRecord({Encoding::kRaw, 3, 0, 2, 2}, "", payload.data(), payload.size());
  auto v = ParseRecord(rec.data(), rec.size());
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("not 2x2x3"), std::string::npos) << v.status().ToString();
}

// Found by fuzz_record: fields the format fixes must hold even under a
// valid checksum (a record that parses re-encodes to the same bytes).
TEST(Record, ChecksummedButMalformedFieldsAreRejected) {
  std::vector<uint8_t> payload(20, 7);
  auto good = EncodeRecord({Encoding::kJpeg, 3, 1, 10, 10}, "ab/c.jpg", payload.data(), payload.size());
  struct Case { size_t offset; uint8_t value; const char* words; };
  for (const Case& c : {Case{30, 1, "reserved header bytes"}, Case{38, 0x40, "reserved header bytes"},
                        Case{19, 0x80, "bad label"}, Case{42, 0, "NUL"}}) {
    SCOPED_TRACE(c.offset);
    auto bad = good;
    bad[c.offset] = c.value;
    const uint64_t sum = XXH3_64bits(bad.data() + 8, bad.size() - 8);  // a valid checksum
    std::memcpy(bad.data(), &sum, 8);
    auto v = ParseRecord(bad.data(), bad.size());
    ASSERT_FALSE(v.ok());
    EXPECT_NE(v.status().message().find(c.words), std::string::npos) << v.status().ToString();
  }
}

TEST(Record, KeysAreTenDigitsAndSortInIndexOrder) {
  EXPECT_EQ(RecordKey(0), "0000000000");
  EXPECT_EQ(RecordKey(1281166), "0001281166");
  EXPECT_LT(RecordKey(9), RecordKey(10));
  EXPECT_LT(RecordKey(9999999999), std::string(kMetaKey));
}

TEST(Meta, RoundTripsAndRejectsBadJson) {
  DatasetMeta m;
  m.count = 3;
  m.classes = {"a", "b"};
  m.encoding = Encoding::kRaw;
  m.channels = 1;
  m.shard = {1, 4};
  m.label_counts = {1, 2};
  m.mean = {0.5};
  m.std = {0.25};
  m.options_json = R"({"quality":90})";
  std::string j = m.ToJson();
  auto back = ParseMeta(reinterpret_cast<const uint8_t*>(j.data()), j.size());
  ASSERT_OK(back);
  EXPECT_EQ(back->count, 3);
  EXPECT_EQ(back->classes, m.classes);
  EXPECT_EQ(back->encoding, Encoding::kRaw);
  EXPECT_EQ(back->shard.index, 1);
  EXPECT_EQ(back->shard.count, 4);
  EXPECT_EQ(back->label_counts, m.label_counts);
  EXPECT_DOUBLE_EQ(back->mean[0], 0.5);
  EXPECT_EQ(back->options_json, R"({"quality":90})");
  for (std::string bad : {std::string("{"), std::string("[]"), std::string(R"({"format":"x"})"),
                          std::string(R"({"format":"imagepack","format_version":1,"count":"3"})"),
                          std::string(R"({"format":"imagepack","format_version":1,"count":1,"classes":["a"],)"
                                      R"("encoding":"jpeg","channels":3,"label_counts":[5]})"),
                          std::string(R"({"format":"imagepack","format_version":1,"count":1,"classes":["a"],)"
                                      R"("encoding":"jpeg","channels":3,"shard":{"index":"x","count":2}})"),
                          // Found by fuzz_meta: floats and wrapping integers where integers belong.
                          std::string(R"({"format":"imagepack","format_version":1,"count":6,"classes":["a"],)"
                                      R"("encoding":"jpeg","channels":3,"label_counts":[5.5e70]})"),
                          std::string(R"({"format":"imagepack","format_version":1,"count":1.5,"classes":[],)"
                                      R"("encoding":"jpeg","channels":3})"),
                          std::string(R"({"format":"imagepack","format_version":1,"count":1,"classes":[],)"
                                      R"("encoding":"jpeg","channels":3,"shard":{"index":0,"count":1e99}})"),
                          std::string(R"({"format":"imagepack","format_version":1,"count":1,"classes":[],)"
                                      R"("encoding":"jpeg","channels":4294967299})")}) {
    auto r = ParseMeta(reinterpret_cast<const uint8_t*>(bad.data()), bad.size());
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Status::Code::kCorruption) << r.status().ToString();
  }
}

// Format 5: written only for a dataset with a 16-bit field; a mask's dtype,
// fill value and class count (not 60,001 names) and a depth map's scale
// and no-reading value round-trip; a format-4 text claiming a 16-bit field
// is refused.
TEST(Meta, SixteenBitFieldsAreFormatFiveAndRoundTrip) {
  DatasetMeta m;
  m.count = 1;
  m.classes = {"a"};
  m.label_counts = {1};
  FieldSpec seg{"seg", FieldKind::kMask, {}, 65535};
  seg.bits = 16;
  for (int i = 0; i <= 60000; ++i) seg.classes.push_back(std::to_string(i));
  FieldSpec depth{"depth", FieldKind::kDepth, {}, 0};
  depth.bits = 16;
  depth.scale = 0.001;
  m.fields = {seg, depth};
  std::string j = m.ToJson();
  EXPECT_NE(j.find("\"format_version\": 5"), std::string::npos);
  EXPECT_NE(j.find("\"classes\": 60001"), std::string::npos);
  EXPECT_LT(j.size(), 2000u);
  auto back = ParseMeta(reinterpret_cast<const uint8_t*>(j.data()), j.size());
  ASSERT_OK(back);
  ASSERT_EQ(back->fields.size(), 2u);
  EXPECT_EQ(back->fields[0], seg);
  EXPECT_EQ(back->fields[1], depth);
  EXPECT_EQ(back->format_version, 5);

  m.fields = {{"seg", FieldKind::kMask, {"0", "1"}, 255}};
  j = m.ToJson();
  EXPECT_NE(j.find("\"format_version\": 4"), std::string::npos);
  EXPECT_NE(j.find("\"classes\": [\n"), std::string::npos);  // 8 bits: the names, as format 4 has them
  // A format-4 text with a uint16 mask (checksum fixed up): refused by name.
  FieldSpec named{"seg", FieldKind::kMask, {"road", "car"}, 65535};
  named.bits = 16;
  m.fields = {named};
  j = m.ToJson();
  const size_t v = j.find("\"format_version\": 5");
  ASSERT_NE(v, std::string::npos);
  j[v + 18] = '4';
  uint64_t sum = 0, stored = 0;
  ASSERT_TRUE(MetaChecksum(reinterpret_cast<const uint8_t*>(j.data()), j.size(), &sum, &stored));
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(sum));
  j.replace(j.find("\"meta_checksum\": \"") + 18, 16, hex);
  auto old = ParseMeta(reinterpret_cast<const uint8_t*>(j.data()), j.size());
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("16-bit in format 4"), std::string::npos) << old.status().ToString();
}

}  // namespace
}  // namespace imagepack
