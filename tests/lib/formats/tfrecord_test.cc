// formats/tfrecord: CRC-32C and TensorFlow's mask, the record framing
// (a damaged length, damaged data, a file cut short, a length over its
// budget), tf.train.Example from the protobuf wire format (packed and
// unpacked lists, unknown fields, a map key given twice, hostile bytes),
// and DALI's .idx lines. The bytes are built here by the wire format's
// rules; tests/python/test_tfrecord.py reads files protobuf's own runtime
// wrote.
#include "formats/tfrecord.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace imagepack::internal {
namespace {

using Bytes = std::vector<uint8_t>;

void Varint(Bytes& b, uint64_t v) {
  while (v >= 0x80) {
    b.push_back(uint8_t(v | 0x80));
    v >>= 7;
  }
  b.push_back(uint8_t(v));
}
void Tag(Bytes& b, uint32_t field, uint32_t type) { Varint(b, uint64_t(field) << 3 | type); }
void Delimited(Bytes& b, uint32_t field, const Bytes& body) {
  Tag(b, field, 2);
  Varint(b, body.size());
  b.insert(b.end(), body.begin(), body.end());
}
Bytes Str(const std::string& s) { return Bytes(s.begin(), s.end()); }

// Feature{bytes_list{value: ...}} and the like.
Bytes BytesFeature(const std::vector<std::string>& values) {
  Bytes list, f;
  for (const auto& v : values) Delimited(list, 1, Str(v));
  Delimited(f, 1, list);
  return f;
}
Bytes FloatFeature(const std::vector<float>& values, bool packed) {
  Bytes list, f;
  if (packed) {
    Bytes body(values.size() * 4);
    std::memcpy(body.data(), values.data(), body.size());
    Delimited(list, 1, body);
  } else {
    for (float x : values) {
      Tag(list, 1, 5);
      uint8_t b[4];
      std::memcpy(b, &x, 4);
      list.insert(list.end(), b, b + 4);
    }
  }
  Delimited(f, 2, list);
  return f;
}
Bytes IntFeature(const std::vector<int64_t>& values, bool packed) {
  Bytes list, f;
  if (packed) {
    Bytes body;
    for (int64_t v : values) Varint(body, uint64_t(v));
    Delimited(list, 1, body);
  } else {
    for (int64_t v : values) {
      Tag(list, 1, 0);
      Varint(list, uint64_t(v));
    }
  }
  Delimited(f, 3, list);
  return f;
}
Bytes Entry(const std::string& key, const Bytes& feature) {
  Bytes e;
  Delimited(e, 1, Str(key));
  Delimited(e, 2, feature);
  return e;
}
Bytes ExampleOf(const std::vector<Bytes>& entries) {
  Bytes features, ex;
  for (const auto& e : entries) Delimited(features, 1, e);
  Delimited(ex, 1, features);
  return ex;
}

Bytes Framed(const Bytes& data) {
  Bytes out(12);
  const uint64_t n = data.size();
  std::memcpy(out.data(), &n, 8);
  const uint32_t lc = MaskCrc(Crc32c(out.data(), 8));
  std::memcpy(out.data() + 8, &lc, 4);
  out.insert(out.end(), data.begin(), data.end());
  const uint32_t dc = MaskCrc(Crc32c(data.data(), data.size()));
  uint8_t c[4];
  std::memcpy(c, &dc, 4);
  out.insert(out.end(), c, c + 4);
  return out;
}

TfReadFn ReaderOf(const Bytes& file) {
  return [&file](void* buf, size_t n, uint64_t at) -> Status {
    if (at > file.size() || n > file.size() - at) return Status::IOError("short read");
    std::memcpy(buf, file.data() + at, n);
    return Status::Ok();
  };
}

TEST(TfRecord, Crc32cAndTheMask) {
  const std::string s = "123456789";
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  EXPECT_EQ(Crc32c(p, s.size()), 0xE3069283u);  // the CRC-32C check value
  EXPECT_EQ(Crc32c(p + 4, 5, Crc32c(p, 4)), 0xE3069283u);
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);
  Bytes zeros(32, 0);
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);  // RFC 3720 B.4
  EXPECT_EQ(MaskCrc(0), 0xa282ead8u);
  // the instruction and the table agree on every length and alignment
  Bytes noise(300);
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = uint8_t(i * 151 + 7);
  for (size_t at = 0; at < 9; ++at)
    for (size_t n = 0; n + at <= noise.size(); n += 7)
      ASSERT_EQ(Crc32c(noise.data() + at, n, 0x1234u), Crc32cPortable(noise.data() + at, n, 0x1234u)) << at << " " << n;
  EXPECT_EQ(Crc32cPortable(p, s.size()), 0xE3069283u);
}

TEST(TfRecord, FramesAreReadAndEachDamageIsNamed) {
  const Bytes a = ExampleOf({Entry("label", IntFeature({3}, true))});
  Bytes file = Framed(a);
  const Bytes b = Framed(Str("second"));
  file.insert(file.end(), b.begin(), b.end());
  auto read = ReaderOf(file);
  bool end = false;
  auto f = ReadTfRecordHeader(read, file.size(), 0, 0, "f", &end);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_FALSE(end);
  EXPECT_EQ(f->offset, 12u);
  EXPECT_EQ(f->size, a.size());
  EXPECT_TRUE(CheckTfRecordData(read, *f, file.data() + 12, 0, "f").ok());
  auto g = ReadTfRecordHeader(read, file.size(), f->next, 1, "f", &end);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->size, 6u);
  ReadTfRecordHeader(read, file.size(), g->next, 2, "f", &end);
  EXPECT_TRUE(end);

  Bytes data_flip = file;
  data_flip[14] ^= 1;
  auto read2 = ReaderOf(data_flip);
  auto f2 = ReadTfRecordHeader(read2, data_flip.size(), 0, 0, "f", &end);
  ASSERT_TRUE(f2.ok());
  Status crc = CheckTfRecordData(read2, *f2, data_flip.data() + 12, 0, "f");
  EXPECT_EQ(crc.code(), Status::Code::kCorruption);
  EXPECT_NE(crc.message().find("f:record 0: the data's CRC does not match"), std::string::npos) << crc.message();

  Bytes len_flip = file;
  len_flip[f->next] ^= 0x10;  // the second record's length
  auto read3 = ReaderOf(len_flip);
  auto f3 = ReadTfRecordHeader(read3, len_flip.size(), f->next, 1, "f", &end);
  ASSERT_FALSE(f3.ok());
  EXPECT_NE(f3.status().message().find("f:record 1: the length's CRC does not match"), std::string::npos)
      << f3.status().message();

  for (size_t cut : {size_t(5), size_t(12), file.size() - 1}) {
    Bytes shortened(file.begin(), file.begin() + long(cut));
    auto read4 = ReaderOf(shortened);
    uint64_t at = 0;
    int64_t rec = 0;
    Result<TfRecordFrame> r = TfRecordFrame{};
    while ((r = ReadTfRecordHeader(read4, shortened.size(), at, rec, "f", &end)).ok() && !end) {
      at = r->next;
      ++rec;
    }
    ASSERT_FALSE(r.ok()) << cut;
    EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
  }
  auto big = ReadTfRecordHeader(read, file.size(), 0, 0, "f", &end, /*budget=*/4);
  EXPECT_EQ(big.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(big.status().message().find("budget 4"), std::string::npos);
}

TEST(TfRecord, ExamplesPackedAndUnpacked) {
  const Bytes ex = ExampleOf({
      Entry("image/encoded", BytesFeature({"\xff\xd8jpeg"})),
      Entry("image/class/label", IntFeature({7}, false)),
      Entry("ints", IntFeature({-1, 0, 300, INT64_MAX}, true)),
      Entry("xs", FloatFeature({0.25f, 1.5f}, true)),
      Entry("ys", FloatFeature({-2.f, 3.f, 4.f}, false)),
      Entry("texts", BytesFeature({"a", "", "ccc"})),
      Entry("empty", Bytes{}),
  });
  auto parsed = ParseTfExample(ex.data(), ex.size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const TfExample& e = parsed.value();
  ASSERT_EQ(e.size(), 7u);
  const TfFeature& img = e.at("image/encoded");
  ASSERT_EQ(img.kind, TfFeature::Kind::kBytes);
  ASSERT_EQ(img.bytes.size(), 1u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(ex.data()) + img.bytes[0].first, img.bytes[0].second),
            "\xff\xd8jpeg");
  EXPECT_EQ(e.at("image/class/label").ints, std::vector<int64_t>({7}));
  EXPECT_EQ(e.at("ints").ints, std::vector<int64_t>({-1, 0, 300, INT64_MAX}));
  EXPECT_EQ(e.at("xs").floats, std::vector<float>({0.25f, 1.5f}));
  EXPECT_EQ(e.at("ys").floats, std::vector<float>({-2.f, 3.f, 4.f}));
  EXPECT_EQ(e.at("texts").bytes.size(), 3u);
  EXPECT_EQ(e.at("empty").kind, TfFeature::Kind::kNone);
}

TEST(TfRecord, ProtobufMergeRules) {
  // Unknown fields at every level are skipped; a key given twice keeps the
  // last entry; a list given twice in one Feature is merged.
  Bytes list;
  Tag(list, 1, 0);
  Varint(list, 1);
  Tag(list, 9, 1);  // unknown fixed64
  list.insert(list.end(), 8, 0);
  Tag(list, 1, 0);
  Varint(list, 2);
  Bytes feature;
  Delimited(feature, 3, list);
  Delimited(feature, 3, list);
  Tag(feature, 15, 5);  // unknown fixed32
  feature.insert(feature.end(), 4, 0);
  Bytes ex = ExampleOf({Entry("k", IntFeature({9}, true)), Entry("k", feature), Entry("z", BytesFeature({"x"}))});
  Tag(ex, 2, 2);  // an unknown field of Example
  Varint(ex, 0);
  auto e = ParseTfExample(ex.data(), ex.size());
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->at("k").ints, std::vector<int64_t>({1, 2, 1, 2}));
  EXPECT_EQ(e->size(), 2u);
  // a oneof set twice: the last case wins
  Bytes both = IntFeature({1}, true);
  const Bytes f2 = FloatFeature({2.f}, true);
  both.insert(both.end(), f2.begin(), f2.end());
  const Bytes ex2 = ExampleOf({Entry("o", both)});
  auto o = ParseTfExample(ex2.data(), ex2.size());
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->at("o").kind, TfFeature::Kind::kFloat);
  EXPECT_TRUE(o->at("o").ints.empty());
  EXPECT_TRUE(ParseTfExample(nullptr, 0).ok());
}

TEST(TfRecord, HostileExamplesAreErrorsNamingTheByte) {
  auto fails = [](const Bytes& b, const std::string& what) {
    auto e = ParseTfExample(b.data(), b.size());
    ASSERT_FALSE(e.ok()) << what;
    EXPECT_NE(e.status().message().find(what), std::string::npos) << e.status().message();
    EXPECT_NE(e.status().message().find("at byte"), std::string::npos) << e.status().message();
  };
  fails(Bytes{0x0a}, "varint cut short");
  fails(Bytes{0x0a, 0x05, 0x0a}, "past its message's end");
  fails(Bytes{0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, "over 64 bits");
  fails(Bytes{0x0b}, "wire type 3");
  fails(Bytes{0x00}, "field number 0");
  {
    Bytes list = {0x0a, 0x03, 0, 0, 0};  // a packed float list of 3 bytes
    Bytes f;
    Delimited(f, 2, list);
    fails(ExampleOf({Entry("f", f)}), "packed FloatList of 3 bytes");
  }
  fails(ExampleOf({Entry(std::string("\xff\xfe"), BytesFeature({"x"}))}), "not UTF-8");
  fails(ExampleOf({Entry(std::string(5000, 'k'), BytesFeature({"x"}))}), "budget");
  {
    Bytes list = {0x08, 0x01};  // a BytesList value of wire type 0
    Bytes f;
    Delimited(f, 1, list);
    fails(ExampleOf({Entry("b", f)}), "BytesList value of wire type 0");
  }
  // More features than the budget: each a distinct key of an empty Feature.
  std::vector<Bytes> many;
  for (size_t i = 0; i <= limits::kTfFeatures; ++i) many.push_back(Entry(std::to_string(i), Bytes{}));
  fails(ExampleOf(many), "more than 100000 features");
}

TEST(TfRecord, BuiltExamplesAreTheWireFormatAndParseBack) {
  // The builder's bytes against the wire format's rules as built above
  // (proto3 packs repeated scalars; an empty list writes no value).
  const std::string jpeg("\xff\xd8\x00jpeg\xff\xd9", 9);
  TfExampleBuilder b;
  b.AddBytes("image/encoded", {jpeg});
  b.AddBytes("image/format", {"JPEG"});
  b.AddInts("image/class/label", {3});
  b.AddInts("ints", {-1, 0, 300, INT64_MAX});
  b.AddFloats("image/object/bbox/xmin", {0.25f, 1.f, 1e-7f});
  b.AddFloats("none", {});
  b.AddBytes("texts", {"a", "", "ccc"});
  const Bytes built = b.Serialize();
  const Bytes expected = ExampleOf({
      Entry("image/encoded", BytesFeature({jpeg})), Entry("image/format", BytesFeature({"JPEG"})),
      Entry("image/class/label", IntFeature({3}, true)), Entry("ints", IntFeature({-1, 0, 300, INT64_MAX}, true)),
      Entry("image/object/bbox/xmin", FloatFeature({0.25f, 1.f, 1e-7f}, true)),
      Entry("none", [] { Bytes f; Delimited(f, 2, Bytes{}); return f; }()),
      Entry("texts", BytesFeature({"a", "", "ccc"}))});
  EXPECT_EQ(built, expected);
  auto e = ParseTfExample(built.data(), built.size());
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_EQ(e->size(), 7u);
  const auto& img = e->at("image/encoded");
  ASSERT_EQ(img.bytes.size(), 1u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(built.data()) + img.bytes[0].first, img.bytes[0].second), jpeg);
  EXPECT_EQ(e->at("image/class/label").ints, std::vector<int64_t>({3}));
  EXPECT_EQ(e->at("ints").ints, std::vector<int64_t>({-1, 0, 300, INT64_MAX}));
  EXPECT_EQ(e->at("image/object/bbox/xmin").floats, std::vector<float>({0.25f, 1.f, 1e-7f}));
  EXPECT_EQ(e->at("none").kind, TfFeature::Kind::kFloat);
  EXPECT_TRUE(e->at("none").floats.empty());
  EXPECT_EQ(e->at("texts").bytes.size(), 3u);
  EXPECT_EQ(e->at("texts").bytes[1].second, 0u);
  EXPECT_EQ(TfExampleBuilder().Serialize(), Bytes({0x0a, 0x00}));

  // Framing: as the test's own framer, and read back record by record.
  Bytes file;
  AppendTfRecord(built.data(), built.size(), &file);
  EXPECT_EQ(file, Framed(built));
  AppendTfRecord(nullptr, 0, &file);
  auto read = ReaderOf(file);
  bool end = false;
  auto f = ReadTfRecordHeader(read, file.size(), 0, 0, "f", &end);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_TRUE(CheckTfRecordData(read, *f, file.data() + f->offset, 0, "f").ok());
  auto g = ReadTfRecordHeader(read, file.size(), f->next, 1, "f", &end);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->size, 0u);
  EXPECT_TRUE(CheckTfRecordData(read, *g, file.data() + g->offset, 1, "f").ok());
  EXPECT_EQ(g->next, file.size());
}

TEST(TfRecord, DaliIndexLines) {
  auto idx = ParseTfRecordIndex("0 120\n120 77\n\n197 16\n", "f.idx", 213);
  ASSERT_TRUE(idx.ok()) << idx.status().message();
  ASSERT_EQ(idx->size(), 3u);
  EXPECT_EQ((*idx)[1], std::make_pair(uint64_t(120), uint64_t(77)));
  for (const char* bad : {"0\n", "a b\n", "1 2 3\n", "1 -2\n", "99999999999999999999999 1\n"}) {
    auto r = ParseTfRecordIndex(bad, "f.idx");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("f.idx:1"), std::string::npos) << r.status().message();
  }
}

// An index is bounded by the data file it indexes: no more lines than
// records of 16 bytes fit, each inside the file and after the one before,
// and no more bytes than such lines take; refused before being read whole.
TEST(TfRecord, DaliIndexIsBoundedByItsDataFile) {
  auto check = [](const std::string& text, uint64_t data_size, const std::string& says) {
    auto r = ParseTfRecordIndex(text, "f.idx", data_size);
    ASSERT_FALSE(r.ok()) << text.substr(0, 40);
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  };
  check("0 16\n16 16\n32 16\n", 40, "f.idx:3: more than 2 records");
  check("0 16\n8 16\n", 100, "f.idx:2: the record at byte 8 overlaps");
  check("0 200\n", 100, "f.idx:1: a record of 200 bytes at byte 0 is not inside");
  check("0 5\n", 100, "f.idx:1: a record of 5 bytes");
  check("18446744073709551600 16\n", 100, "is not inside");
  check(std::string(200, ' ') + "\n", 1 << 20, "f.idx:1: a line of more than 128 bytes");
  // millions of lines for a small file: refused by its size, nothing parsed
  check(std::string(4 << 20, '\n'), 1600, "an index of 4194304 bytes for a data file of 1600 bytes");
  // blank lines are no records
  auto blank = ParseTfRecordIndex("\n\n0 16\n\n", "f.idx", 16);
  ASSERT_TRUE(blank.ok()) << blank.status().message();
  EXPECT_EQ(blank->size(), 1u);
}

}  // namespace
}  // namespace imagepack::internal
