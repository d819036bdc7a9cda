#include "imagepack/fields.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "imagepack/meta.h"
#include "imagepack/record.h"
#include "testutil.h"

namespace imagepack {
namespace {

void RepairChecksum(std::vector<uint8_t>& rec) {
  const uint64_t sum = XXH3_64bits(rec.data() + 8, rec.size() - 8);
  std::memcpy(rec.data(), &sum, 8);
}

// A record with a mask, boxes and text after a 2x2 raw image.
std::vector<uint8_t> MakeRecord() {
  std::vector<uint8_t> image(2 * 2 * 3, 9), mask = {0, 1, 255, 2}, boxes, section;
  WriteBoxes({{0.5f, 0, 2, 1.5f, 3}}, &boxes);
  const std::string text = "caf\xc3\xa9";
  AppendField(section, {0, FieldKind::kMask, 1, 1, 2, 2, 0, mask.data(), mask.size()});
  AppendField(section, {1, FieldKind::kBoxes, 0, 0, 0, 0, 0, boxes.data(), boxes.size()});
  AppendField(section, {2, FieldKind::kText, 0, 0, 0, 0, 0, reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  RecordFields f{Encoding::kRaw, 3, 1, 2, 2};
  f.field_count = 3;
  f.fields_size = static_cast<uint32_t>(section.size());
  return EncodeRecord(f, "a/b.png", image.data(), image.size(), section.data());
}

TEST(Fields, RecordRoundTripsEveryField) {
  auto rec = MakeRecord();
  auto v = ParseRecord(rec.data(), rec.size());
  ASSERT_OK(v);
  EXPECT_EQ(rec[12], 2);  // version 2
  auto fields = RecordFieldViews(v.value());
  ASSERT_EQ(fields.size(), 3u);
  EXPECT_EQ(fields[0].kind, FieldKind::kMask);
  EXPECT_EQ(std::vector<uint8_t>(fields[0].data, fields[0].data + 4), (std::vector<uint8_t>{0, 1, 255, 2}));
  auto boxes = ReadBoxes(fields[1]);
  ASSERT_EQ(boxes.size(), 1u);
  EXPECT_EQ(boxes[0].x0, 0.5f);
  EXPECT_EQ(boxes[0].y1, 1.5f);
  EXPECT_EQ(boxes[0].label, 3);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(fields[2].data), fields[2].size), "caf\xc3\xa9");
}

TEST(Fields, RecordsWithoutFieldsStayVersionOne) {
  std::vector<uint8_t> px(3, 1);
  auto rec = EncodeRecord({Encoding::kRaw, 3, 0, 1, 1}, "x", px.data(), px.size());
  EXPECT_EQ(rec[12], 1);
  auto v = ParseRecord(rec.data(), rec.size());
  ASSERT_OK(v);
  EXPECT_TRUE(RecordFieldViews(v.value()).empty());
}

// Corruptions of the field section, at known offsets, with their words.
// Offsets count from the section's start (after the 40-byte header, the
// 7-byte path and 12 payload bytes); the checksum is recomputed so the
// structural check behind it is reached.
TEST(Fields, DamagedSectionsAreNamed) {
  const auto good = MakeRecord();
  const size_t at = kRecordHeaderSize + 7 + 12;
  struct Case { size_t offset; uint8_t value; const char* words; };
  for (const Case& c : {Case{at + 1, 9, "unknown kind 9"}, Case{at + 2, 0, "mask must be raw"},
                        Case{at + 4, 3, "raw data is 4 bytes, not 3x2x1"}, Case{at + 12, 200, "past the record's end"},
                        Case{at + 20 + 4, 2, "2 elements but 20 bytes"}, Case{30, 4, "field 3 runs past"}, Case{30, 2, "its 2 fields fill 56"}}) {
    SCOPED_TRACE(c.words);
    auto bad = good;
    bad[c.offset] = c.value;
    RepairChecksum(bad);
    auto v = ParseRecord(bad.data(), bad.size());
    ASSERT_FALSE(v.ok());
    EXPECT_NE(v.status().message().find(c.words), std::string::npos) << v.status().message();
  }
}

TEST(Fields, ContentChecksNameWhatIsWrong) {
  FieldSpec mask{"mask", FieldKind::kMask, {"a", "b", "c"}, 255};
  std::vector<uint8_t> m = {0, 1, 255, 7};
  FieldView f{0, FieldKind::kMask, 1, 1, 2, 2, 0, m.data(), m.size()};
  auto st = CheckFieldContent(f, mask, 2, 2);
  EXPECT_NE(st.message().find("value 7 at (1, 1)"), std::string::npos) << st.message();
  m[3] = 2;
  EXPECT_OK(CheckFieldContent(f, mask, 2, 2));
  EXPECT_NE(CheckFieldContent(f, mask, 3, 2).message().find("is 2x2, the image is 3x2"), std::string::npos);

  FieldSpec boxes{"boxes", FieldKind::kBoxes, {"x"}, -1};
  std::vector<uint8_t> b;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto [box, words] : {std::pair<Box, const char*>{{0, 0, nan, 1, 0}, "not finite"},
                            {{0, 0, 11, 1, 0}, "not inside the 10x10 image"},
                            {{5, 0, 4, 1, 0}, "not inside"},
                            {{0, 0, 1, 1, 1}, "class 1 out of range [0,1)"}}) {
    WriteBoxes({box}, &b);
    FieldView fb{1, FieldKind::kBoxes, 0, 0, 0, 0, 1, b.data(), b.size()};
    EXPECT_NE(CheckFieldContent(fb, boxes, 10, 10).message().find(words), std::string::npos) << words;
  }
  const std::string bad_utf8 = "ab\xc0\xaf";
  FieldView t{2, FieldKind::kText, 0, 0, 0, 0, 4, reinterpret_cast<const uint8_t*>(bad_utf8.data()), 4};
  EXPECT_NE(CheckFieldContent(t, {"t", FieldKind::kText, {}, -1}, 1, 1).message().find("UTF-8"), std::string::npos);
}

// 16-bit maps: the entry's encoding byte says the sample width, its size
// must agree, and the metadata's dtype must match; mask values past the
// classes (but the ignore value) are named, depth values are not checked.
TEST(Fields, SixteenBitMapsAreCheckedByLayoutAndDtype) {
  std::vector<uint8_t> m(2 * 2 * 2);
  const uint16_t values[4] = {0, 60000, 65535, 2};
  std::memcpy(m.data(), values, sizeof values);
  FieldView f{0, FieldKind::kMask, 2, 1, 2, 2, 0, m.data(), m.size()};
  EXPECT_OK(CheckFieldLayout(f));
  FieldView shorter = f;
  shorter.size = 6;
  EXPECT_NE(CheckFieldLayout(shorter).message().find("raw data is 6 bytes, not 2x2x2"), std::string::npos);
  FieldView three = f;
  three.encoding = 3;
  EXPECT_NE(CheckFieldLayout(three).message().find("mask must be raw"), std::string::npos);

  FieldSpec wide{"seg", FieldKind::kMask, {}, 65535};
  wide.bits = 16;
  for (int i = 0; i <= 60000; ++i) wide.classes.push_back(std::to_string(i));
  EXPECT_OK(CheckFieldContent(f, wide, 2, 2));
  wide.classes.resize(50000);
  EXPECT_NE(CheckFieldContent(f, wide, 2, 2).message().find("value 60000 at (1, 0)"), std::string::npos);
  FieldSpec narrow{"seg", FieldKind::kMask, {}, 255};
  EXPECT_NE(CheckFieldContent(f, narrow, 2, 2).message().find("16-bit samples, metadata says 8"), std::string::npos);

  FieldSpec depth{"depth", FieldKind::kDepth, {}, 0};
  depth.bits = 16;
  FieldView d = f;
  d.kind = FieldKind::kDepth;
  EXPECT_OK(CheckFieldContent(d, depth, 2, 2));
  FieldView d8 = d;
  d8.encoding = 1;
  d8.size = 4;
  EXPECT_FALSE(CheckFieldContent(d8, depth, 2, 2).ok());
  EXPECT_EQ(InfoOf(FieldKind::kDepth).layout, FieldLayout::kMap);
  EXPECT_EQ(KindOfFileField("depth_left"), FieldKind::kDepth);
  EXPECT_EQ(KindOfFileField("mask2"), FieldKind::kMask);
  EXPECT_EQ(KindOfFileField("target"), FieldKind::kImage);
  EXPECT_EQ(BatchKeysOf(depth), std::vector<std::string>{"depth"});
}

// The format version a dataset is written in comes from the kind table:
// each kind's first format (4 at least, the checksummed metadata; 16-bit
// samples 5); metadata of an older version holding a kind is corruption.
TEST(Fields, TheFormatVersionComesFromTheKindTable) {
  int newest = 0;
  for (const KindInfo& k : AllKinds()) {
    SCOPED_TRACE(k.name);
    DatasetMeta m;
    FieldSpec f;
    f.name = "f";
    f.kind = k.kind;
    f.bits = k.fixed_bits > 0 ? k.fixed_bits : 8;
    f.ignore = k.default_fill;
    m.fields = {f};
    const std::string json = m.ToJson();
    auto back = ParseMeta(reinterpret_cast<const uint8_t*>(json.data()), json.size());
    ASSERT_OK(back);
    EXPECT_EQ(back->format_version, std::max(kFormatVersionChecked, k.first_format));
    EXPECT_EQ(FirstFormatOf(f), k.first_format);
    newest = std::max(newest, k.first_format);
  }
  EXPECT_EQ(NewestFormatVersion(), std::max(newest, kFormatVersionWide));
  // A 16-bit mask needs format 5 whatever its kind's first format.
  FieldSpec wide;
  wide.name = "m";
  wide.kind = FieldKind::kMask;
  wide.bits = 16;
  EXPECT_EQ(FirstFormatOf(wide), kFormatVersionWide);
  // Depth (format 5) in format 4 metadata: refused, not misread.
  const std::string old = R"({"format":"imagepack","format_version":4,"count":0,"classes":[],"encoding":"jpeg",)"
                          R"("channels":3,"fields":[{"name":"d","kind":"depth"}]})";
  auto refused = ParseMeta(reinterpret_cast<const uint8_t*>(old.data()), old.size());
  EXPECT_FALSE(refused.ok());
}

// Text fields are checked by the one UTF-8 validator (formats/text.h,
// tested in formats/text_test.cc) at pack and at verify alike.
TEST(Fields, TextThatIsNotUtf8IsCorruption) {
  FieldSpec caption;
  caption.name = "caption";
  caption.kind = FieldKind::kText;
  for (const char* bad : {"\x80", "\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82"}) {
    FieldView f;
    f.kind = FieldKind::kText;
    f.data = reinterpret_cast<const uint8_t*>(bad);
    f.size = f.count = static_cast<uint32_t>(std::strlen(bad));
    Status st = CheckFieldContent(f, caption, 4, 4);
    EXPECT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.message().find("UTF-8"), std::string::npos) << st.ToString();
  }
  const char* good = "caf\xc3\xa9 \xf0\x9f\x98\x80";
  FieldView f;
  f.kind = FieldKind::kText;
  f.data = reinterpret_cast<const uint8_t*>(good);
  f.size = f.count = static_cast<uint32_t>(std::strlen(good));
  EXPECT_TRUE(CheckFieldContent(f, caption, 4, 4).ok());
}

}  // namespace
}  // namespace imagepack
