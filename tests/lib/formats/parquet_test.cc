// formats/parquet: the files of apache/parquet-testing (many writers:
// parquet-mr, Impala, Spark, pyarrow, arrow-rs), read with their expected
// values where the repository gives them (the delta encodings' _expect.csv
// files, alltypes_plain, datapage_v2, the checksum files), and every other
// file and every bad_data file either read or refused with a message,
// never a crash. Codecs and the RLE / bit-packed hybrid by their rules.
// tests/python/test_parquet.py imports DuckDB's files end to end.
#include "formats/parquet.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace imagepack::internal {
namespace {

namespace fs = std::filesystem;

// apache/parquet-testing's clone: IMAGEPACK_PARQUET_TESTING (ctest sets it
// to ../shared/fixtures/parquet-testing beside the repository), else that
// folder found from the repository's tests/data. No machine path.
fs::path Fixtures() {
  if (const char* env = std::getenv("IMAGEPACK_PARQUET_TESTING"); env && *env) return fs::path(env);
  return fs::path(IMAGEPACK_TEST_DATA_DIR) / "../../../shared/fixtures/parquet-testing";
}

std::vector<uint8_t> Slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

using Column = std::vector<std::optional<std::string>>;

std::string Text(const PqLeaf& leaf, const PqValue& v) {
  if (v.null) return "null";
  if (leaf.type == PqType::kByteArray || leaf.type == PqType::kFixed)
    return std::string(reinterpret_cast<const char*>(v.p), v.n);
  if (leaf.type == PqType::kFloat || leaf.type == PqType::kDouble) {
    char t[32];
    std::snprintf(t, sizeof t, "%.9g", v.f);
    return t;
  }
  return std::to_string(v.i);
}

// A row of a repeated column as text, DuckDB's way: [1, 2], [[1, 2], []],
// null lists and elements "null"; a null row nullopt.
std::optional<std::string> Render(const PqLeaf& leaf, const PqRow& row, size_t depth, const PqList& l) {
  if (l.null) return depth == 0 ? std::nullopt : std::optional<std::string>("null");
  std::string out = "[";
  for (uint32_t i = l.begin; i < l.end; ++i) {
    if (i > l.begin) out += ", ";
    out += depth + 1 == row.lists.size() ? Text(leaf, row.values[i]) : *Render(leaf, row, depth + 1, row.lists[depth + 1][i]);
  }
  return out + "]";
}

struct Read {
  PqFile file;
  std::vector<Column> columns;     // per leaf: values as text (integers in decimal), nullopt for null
  std::vector<Status> status;      // per leaf: the first error reading it
};

Result<Read> ReadAll(const std::vector<uint8_t>& bytes, const std::string& shown) {
  if (bytes.size() < 12) return Status::Corruption(shown + ": too short");
  auto n = ParquetFooterLength(bytes.data(), bytes.data() + bytes.size() - 8, bytes.size(), shown);
  if (!n.ok()) return n.status();
  auto f = ParseParquetFooter(bytes.data() + bytes.size() - 8 - *n, *n, bytes.size(), shown);
  if (!f.ok()) return f.status();
  Read r;
  r.file = std::move(f.value());
  r.columns.resize(r.file.leaves.size());
  r.status.resize(r.file.leaves.size());
  auto read = [&](void* buf, size_t k, uint64_t at) -> Status {
    if (at > bytes.size() || k > bytes.size() - at) return Status::IOError("short read");
    if (k) std::memcpy(buf, bytes.data() + at, k);  // an empty read may name no buffer
    return Status::Ok();
  };
  PqBudget budget(bytes.size());
  for (size_t c = 0; c < r.file.leaves.size(); ++c) {
    const PqLeaf& leaf = r.file.leaves[c];
    for (size_t g = 0; g < r.file.row_groups.size() && r.status[c].ok(); ++g) {
      const PqChunk& chunk = r.file.row_groups[g].columns[c];
      const int64_t rows = r.file.row_groups[g].num_rows;
      if (leaf.max_rep > 0) {
        r.status[c] = ReadParquetRows(read, bytes.size(), budget, leaf, chunk, rows, shown, [&](int64_t, const PqRow& row) {
          r.columns[c].push_back(Render(leaf, row, 0, row.lists[0][0]));
          return Status::Ok();
        });
        continue;
      }
      r.status[c] = ReadParquetColumn(read, bytes.size(), budget, leaf, chunk, rows, shown, [&](int64_t, const PqValue& v) {
        if (v.null) r.columns[c].push_back(std::nullopt);
        else r.columns[c].push_back(Text(leaf, v));
        return Status::Ok();
      });
    }
  }
  return r;
}

int LeafNamed(const Read& r, const std::string& name) {
  for (size_t i = 0; i < r.file.leaves.size(); ++i)
    if (r.file.leaves[i].dotted() == name) return int(i);
  return -1;
}

// A CSV of the repository's _expect files: quoted cells are strings,
// an empty unquoted cell is null.
std::vector<std::vector<std::optional<std::string>>> Csv(const fs::path& p) {
  std::ifstream f(p);
  std::vector<std::vector<std::optional<std::string>>> rows;
  std::string line;
  while (std::getline(f, line)) {
    std::vector<std::optional<std::string>> row;
    size_t i = 0;
    for (;;) {
      if (i < line.size() && line[i] == '"') {
        std::string cell;
        for (++i; i < line.size(); ++i) {
          if (line[i] == '"' && i + 1 < line.size() && line[i + 1] == '"') cell += '"', ++i;
          else if (line[i] == '"') break;
          else cell += line[i];
        }
        ++i;
        row.push_back(cell);
      } else {
        const size_t comma = line.find(',', i);
        const std::string cell = line.substr(i, comma == std::string::npos ? std::string::npos : comma - i);
        row.push_back(cell.empty() ? std::nullopt : std::optional<std::string>(cell));
        i = comma == std::string::npos ? line.size() : comma;
      }
      if (i >= line.size() || line[i] != ',') break;
      ++i;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

TEST(Parquet, DeltaEncodingsReadTheirExpectedValues) {
  for (const char* name : {"delta_binary_packed", "delta_byte_array", "delta_encoding_optional_column",
                           "delta_encoding_required_column"}) {
    const fs::path dir = Fixtures() / "data";
    if (!fs::exists(dir / (std::string(name) + ".parquet"))) GTEST_SKIP() << "no parquet-testing in " << dir;
    auto r = ReadAll(Slurp(dir / (std::string(name) + ".parquet")), name);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const auto csv = Csv(dir / (std::string(name) + "_expect.csv"));
    ASSERT_GT(csv.size(), 1u);
    for (size_t c = 0; c < csv[0].size(); ++c) {
      const std::string col = *csv[0][c];
      int leaf = LeafNamed(*r, col);
      // the CSV's header writes " c_customer_id", the schema "c_customer_sk:" (parquet-mr's own names)
      const std::string trimmed = col.substr(col.find_first_not_of(' '));
      if (leaf < 0) leaf = LeafNamed(*r, trimmed);
      if (leaf < 0) leaf = LeafNamed(*r, trimmed + ":");
      ASSERT_GE(leaf, 0) << name << ": " << col;
      ASSERT_TRUE(r->status[size_t(leaf)].ok()) << r->status[size_t(leaf)].message();
      const Column& got = r->columns[size_t(leaf)];
      ASSERT_EQ(got.size(), csv.size() - 1) << name << ": " << col;
      for (size_t row = 1; row < csv.size(); ++row) {
        auto want = csv[row][c];
        // an unquoted empty cell is null; "" an empty string
        EXPECT_EQ(got[row - 1], want) << name << ": " << col << " row " << row - 1;
      }
    }
  }
}

TEST(Parquet, PlainDictionaryV2AndChecksums) {
  const fs::path dir = Fixtures() / "data";
  if (!fs::exists(dir / "alltypes_plain.parquet")) GTEST_SKIP() << "no parquet-testing in " << dir;
  auto plain = ReadAll(Slurp(dir / "alltypes_plain.parquet"), "alltypes_plain");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  Column ids = plain->columns[size_t(LeafNamed(*plain, "id"))];
  EXPECT_EQ(ids, Column({"4", "5", "6", "7", "2", "3", "0", "1"}));
  EXPECT_EQ(plain->columns[size_t(LeafNamed(*plain, "string_col"))],
            Column({"0", "1", "0", "1", "0", "1", "0", "1"}));
  auto snappy = ReadAll(Slurp(dir / "alltypes_plain.snappy.parquet"), "snappy");
  ASSERT_TRUE(snappy.ok());
  EXPECT_EQ(snappy->columns[size_t(LeafNamed(*snappy, "id"))], Column({"6", "7"}));
  auto dict = ReadAll(Slurp(dir / "alltypes_dictionary.parquet"), "dictionary");
  ASSERT_TRUE(dict.ok());
  EXPECT_EQ(dict->columns[size_t(LeafNamed(*dict, "id"))], Column({"0", "1"}));
  auto v2 = ReadAll(Slurp(dir / "datapage_v2.snappy.parquet"), "datapage_v2");
  ASSERT_TRUE(v2.ok()) << v2.status().message();
  EXPECT_EQ(v2->columns[size_t(LeafNamed(*v2, "a"))], Column({"abc", "abc", "abc", std::nullopt, "abc"}));
  EXPECT_EQ(v2->columns[size_t(LeafNamed(*v2, "b"))], Column({"1", "2", "3", "4", "5"}));
  EXPECT_EQ(v2->columns[size_t(LeafNamed(*v2, "d"))], Column({"1", "1", "1", "0", "1"}));  // RLE booleans
  auto bss = ReadAll(Slurp(dir / "byte_stream_split.zstd.parquet"), "byte_stream_split");
  ASSERT_TRUE(bss.ok()) << bss.status().message();
  const Column& f32 = bss->columns[size_t(LeafNamed(*bss, "f32"))];
  const Column& f64 = bss->columns[size_t(LeafNamed(*bss, "f64"))];
  ASSERT_GE(f32.size(), 3u);
  // DuckDB reads 1.764052391052246, 0.40015721321105957; -1.3065268517353166, 1.658130679618188
  EXPECT_EQ(f32[0], "1.76405239");
  EXPECT_EQ(f32[1], "0.400157213");
  EXPECT_EQ(f64[0], "-1.30652685");
  EXPECT_EQ(f64[1], "1.65813068");
  auto rle = ReadAll(Slurp(dir / "rle_boolean_encoding.parquet"), "rle_boolean");
  ASSERT_TRUE(rle.ok());
  EXPECT_EQ(Column(rle->columns[0].begin(), rle->columns[0].begin() + 5), Column({"1", "0", std::nullopt, "1", "1"}));
  EXPECT_EQ(rle->columns[0].size(), 68u);
  // LZ4: Hadoop's framing, a raw block (non-Hadoop writers), LZ4_RAW; the same four rows
  for (const char* lz4 : {"hadoop_lz4_compressed.parquet", "non_hadoop_lz4_compressed.parquet",
                          "lz4_raw_compressed.parquet"}) {
    auto r = ReadAll(Slurp(dir / lz4), lz4);
    ASSERT_TRUE(r.ok()) << lz4 << ": " << r.status().message();
    for (const Status& st : r->status) ASSERT_TRUE(st.ok()) << lz4 << ": " << st.message();
    EXPECT_EQ(r->columns[size_t(LeafNamed(*r, "c0"))],
              Column({"1593604800", "1593604800", "1593604801", "1593604801"})) << lz4;
    EXPECT_EQ(r->columns[size_t(LeafNamed(*r, "c1"))], Column({"abc", "def", "abc", "def"})) << lz4;
    EXPECT_EQ(r->columns[size_t(LeafNamed(*r, "v11"))], Column({"42", "7.7", "42.125", "7.7"})) << lz4;  // DuckDB: 42, 7.7
  }
  // the list column (written as "[1, 2, 3]" by parquet-mr: datapage_v2.snappy.parquet's e)
  const int e = LeafNamed(*v2, "e.list.element");
  ASSERT_GE(e, 0);
  ASSERT_TRUE(v2->status[size_t(e)].ok()) << v2->status[size_t(e)].message();
  for (const char* ok : {"datapage_v1-snappy-compressed-checksum.parquet", "datapage_v1-uncompressed-checksum.parquet",
                         "plain-dict-uncompressed-checksum.parquet", "rle-dict-snappy-checksum.parquet"}) {
    auto r = ReadAll(Slurp(dir / ok), ok);
    ASSERT_TRUE(r.ok()) << ok;
    for (const Status& st : r->status) EXPECT_TRUE(st.ok()) << ok << ": " << st.message();
  }
  for (const char* bad : {"datapage_v1-corrupt-checksum.parquet", "rle-dict-uncompressed-corrupt-checksum.parquet"}) {
    auto r = ReadAll(Slurp(dir / bad), bad);
    ASSERT_TRUE(r.ok()) << bad;
    bool caught = false;
    for (const Status& st : r->status) caught = caught || st.message().find("page's CRC does not match") != std::string::npos;
    EXPECT_TRUE(caught) << bad;
  }
}

TEST(Parquet, EveryFileReadsOrIsRefusedByName) {
  int read = 0, refused = 0;
  for (const char* sub : {"data", "bad_data"}) {
    const fs::path dir = Fixtures() / sub;
    if (!fs::is_directory(dir)) GTEST_SKIP() << "no parquet-testing in " << Fixtures();
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (name.find(".parquet") == std::string::npos) continue;
      auto r = ReadAll(Slurp(e.path()), name);
      if (!r.ok()) {
        EXPECT_NE(r.status().message().find(name), std::string::npos) << r.status().message();
        ++refused;
        continue;
      }
      bool all = true;
      for (const Status& st : r->status) {
        if (!st.ok()) EXPECT_FALSE(st.message().empty()) << name;
        all = all && st.ok();
      }
      (all ? read : refused) += 1;
    }
  }
  std::printf("parquet-testing: %d files read whole, %d refused in part or whole\n", read, refused);
  EXPECT_GE(read, 61);
}

// Lists as DuckDB 1.5.6 reads them (SELECT col::VARCHAR; its NULL
// written null here): the three-level LIST of pyarrow, parquet-mr and
// Impala, lists of lists, the legacy two-level forms (parquet-mr's avro
// "array", a repeated field without LIST), null and empty lists and null
// elements told apart.
TEST(Parquet, ListsReadAsDuckDbReadsThem) {
  const fs::path dir = Fixtures() / "data";
  if (!fs::exists(dir / "list_columns.parquet")) GTEST_SKIP() << "no parquet-testing in " << dir;
  struct Want {
    const char* file;
    const char* leaf;
    std::vector<std::string> logical;
    Column rows;
  };
  const std::optional<std::string> null;
  const std::vector<Want> wants = {
      {"list_columns.parquet", "int64_list.list.item", {"int64_list"}, {"[1, 2, 3]", "[null, 1]", "[4]"}},
      {"list_columns.parquet", "utf8_list.list.item", {"utf8_list"}, {"[abc, efg, hij]", null, "[efg, null, hij, xyz]"}},
      {"nested_lists.snappy.parquet", "a.list.element.list.element.list.element", {"a"},
       {"[[[a, b], [c]], [null, [d]]]", "[[[a, b], [c, d]], [null, [e]]]", "[[[a, b], [c, d], [e]], [null, [f]]]"}},
      {"null_list.parquet", "emptylist.list.item", {"emptylist"}, {"[]"}},
      {"old_list_structure.parquet", "a.array.array", {"a"}, {"[[1, 2], [3, 4]]"}},
      {"repeated_primitive_no_list.parquet", "Int32_list", {"Int32_list"}, {"[0, 1, 2, 3]", "[]", "[4]", "[5, 6, 7, 8]"}},
      {"repeated_primitive_no_list.parquet", "group_of_lists.String_list_in_group",
       {"group_of_lists", "String_list_in_group"},
       {"[foo, zero, one, two]", "[three]", "[four]", "[five, six, seven, eight]"}},
      {"repeated_no_annotation.parquet", "phoneNumbers.phone.number", {"phoneNumbers", "phone", "number"},
       {null, null, "[]", "[5555555555]", "[1111111111]", "[1111111111, 2222222222, 3333333333]"}},
      {"repeated_no_annotation.parquet", "phoneNumbers.phone.kind", {"phoneNumbers", "phone", "kind"},
       {null, null, "[]", "[null]", "[home]", "[home, null, mobile]"}},
      {"nonnullable.impala.parquet", "int_array_array.list.element.list.element", {"int_array_array"},
       {"[[-1, -2], []]"}},
      {"nullable.impala.parquet", "int_array.list.element", {"int_array"},
       {"[1, 2, 3]", "[null, 1, 2, null, 3, null]", "[]", null, null, null, null}},
      {"nullable.impala.parquet", "int_array_Array.list.element.list.element", {"int_array_Array"},
       {"[[1, 2], [3, 4]]", "[[null, 1, 2, null], [3, null, 4], [], null]", "[null]", "[]", null, null,
        "[null, [5, 6]]"}},
      {"nullable.impala.parquet", "nested_struct.b.list.element", {"nested_struct", "b"},
       {"[1]", "[null]", null, null, null, null, "[2, 3, null]"}},
      {"datapage_v2.snappy.parquet", "e.list.element", {"e"}, {"[1, 2, 3]", null, null, "[1, 2, 3]", "[1, 2]"}},
  };
  for (const Want& w : wants) {
    auto r = ReadAll(Slurp(dir / w.file), w.file);
    ASSERT_TRUE(r.ok()) << w.file << ": " << r.status().message();
    const int leaf = LeafNamed(*r, w.leaf);
    ASSERT_GE(leaf, 0) << w.file << ": " << w.leaf;
    EXPECT_EQ(r->file.leaves[size_t(leaf)].logical(), w.logical) << w.file << ": " << w.leaf;
    ASSERT_TRUE(r->status[size_t(leaf)].ok()) << w.file << ": " << r->status[size_t(leaf)].message();
    EXPECT_EQ(r->columns[size_t(leaf)], w.rows) << w.file << ": " << w.leaf;
  }
}

// Levels built by hand (the spec's three-level LIST, optional list of
// optional int32: max_def 3, rep_defs {2}): a repetition level that
// continues an empty list, or starts a page inside no row, is an error;
// flat reading of a list is refused.
std::vector<uint8_t> Hybrid(const std::vector<uint32_t>& levels, int width) {  // one bit-packed run, length first
  std::vector<uint8_t> run = {uint8_t(((levels.size() + 7) / 8) << 1 | 1)};
  std::vector<uint8_t> bits(((levels.size() + 7) / 8) * size_t(width), 0);
  for (size_t i = 0; i < levels.size(); ++i)
    for (int b = 0; b < width; ++b)
      if (levels[i] >> b & 1) bits[(i * size_t(width) + size_t(b)) / 8] |= uint8_t(1 << ((i * size_t(width) + size_t(b)) % 8));
  run.insert(run.end(), bits.begin(), bits.end());
  std::vector<uint8_t> out = {uint8_t(run.size()), 0, 0, 0};
  out.insert(out.end(), run.begin(), run.end());
  return out;
}

Status ReadHandMade(const std::vector<uint32_t>& reps, const std::vector<uint32_t>& defs,
                    const std::vector<int32_t>& values, int64_t rows, Column* got) {
  std::vector<uint8_t> body = Hybrid(reps, 1), d = Hybrid(defs, 2);
  body.insert(body.end(), d.begin(), d.end());
  for (int32_t v : values)
    for (int b = 0; b < 4; ++b) body.push_back(uint8_t(uint32_t(v) >> (8 * b)));
  const uint8_t zz = uint8_t(body.size() * 2);  // zigzag, one byte for these sizes
  std::vector<uint8_t> file = {'P', 'A', 'R', '1', 0x15, 0x00, 0x15, zz, 0x15, zz, 0x2c, 0x15, uint8_t(reps.size() * 2),
                               0x15, 0x00, 0x15, 0x06, 0x15, 0x06, 0x00, 0x00};
  for (uint8_t b : body) file.push_back(b);  // (insert() draws a false -Wstringop-overread from GCC 12)
  PqLeaf leaf;
  leaf.path = {"tags", "list", "element"};
  leaf.nodes = {{1, true, 1}, {2, false, 1}, {1, false, 0}};
  leaf.type = PqType::kInt32;
  leaf.max_def = 3;
  leaf.max_rep = 1;
  leaf.rep_defs = {2};
  PqChunk chunk;
  chunk.data_page_offset = 4;
  chunk.total_compressed_size = int64_t(file.size() - 4);
  auto read = [&](void* buf, size_t k, uint64_t at) -> Status {
    if (at > file.size() || k > file.size() - at) return Status::IOError("short read");
    if (k) std::memcpy(buf, file.data() + at, k);
    return Status::Ok();
  };
  PqBudget budget(file.size());
  if (ReadParquetColumn(read, file.size(), budget, leaf, chunk, rows, "t", [](int64_t, const PqValue&) { return Status::Ok(); })
          .code() != Status::Code::kNotSupported)
    return Status::InvalidArgument("a list read flat");
  return ReadParquetRows(read, file.size(), budget, leaf, chunk, rows, "t", [&](int64_t, const PqRow& row) {
    got->push_back(Render(leaf, row, 0, row.lists[0][0]));
    return Status::Ok();
  });
}

TEST(Parquet, LevelsBuiltByHand) {
  Column got;
  // [1, null], [], null, [7]
  ASSERT_TRUE(ReadHandMade({0, 1, 0, 0, 0}, {3, 2, 1, 0, 3}, {1, 7}, 4, &got).ok());
  EXPECT_EQ(got, Column({"[1, null]", "[]", std::nullopt, "[7]"}));
  got.clear();
  Status st = ReadHandMade({0, 1}, {1, 3}, {1}, 1, &got);  // an element added to an empty list
  EXPECT_NE(st.message().find("a repetition level of 1 adds to a list that is empty or null (definition levels 1, 3)"),
            std::string::npos) << st.message();
  st = ReadHandMade({1, 0}, {3, 3}, {1, 2}, 1, &got);  // the page starts inside no row
  EXPECT_NE(st.message().find("t, page 0: a repetition level of 1 before any row starts"), std::string::npos)
      << st.message();
  st = ReadHandMade({0, 0, 0}, {3, 3, 3}, {1, 2, 3}, 2, &got);  // rows beyond the row group's
  EXPECT_NE(st.message().find("more rows than the row group's 2"), std::string::npos) << st.message();
  st = ReadHandMade({0, 1}, {3, 3}, {1, 2}, 2, &got);
  EXPECT_NE(st.message().find("t: 1 rows for the row group's 2"), std::string::npos) << st.message();
  st = ReadHandMade({0}, {3}, {}, 1, &got);  // a level says a value the page lacks
  EXPECT_FALSE(st.ok());
}

TEST(Parquet, CodecsAndTheHybrid) {
  std::vector<uint8_t> out;
  const uint8_t raw[] = {1, 2, 3};
  ASSERT_TRUE(ParquetDecompress(0, raw, 3, 3, &out).ok());
  EXPECT_EQ(out, std::vector<uint8_t>({1, 2, 3}));
  EXPECT_FALSE(ParquetDecompress(0, raw, 3, 4, &out).ok());
  EXPECT_EQ(ParquetDecompress(3, raw, 3, 3, &out).code(), Status::Code::kNotSupported);  // LZO
  EXPECT_NE(ParquetDecompress(4, raw, 3, 3, &out).message().find("BROTLI"), std::string::npos);
  EXPECT_EQ(ParquetDecompress(6, raw, 3, size_t(2) << 30, &out).code(), Status::Code::kInvalidArgument);
  // RLE run of 5 x 3 (bit width 2), then one bit-packed group of 8
  const uint8_t rle[] = {0x0a, 0x03, 0x03, 0b11100100, 0b00011011};
  std::vector<uint32_t> v;
  ASSERT_TRUE(DecodeRleHybrid(rle, sizeof rle, 2, 13, &v).ok());
  EXPECT_EQ(v, std::vector<uint32_t>({3, 3, 3, 3, 3, 0, 1, 2, 3, 3, 2, 1, 0}));
  EXPECT_FALSE(DecodeRleHybrid(rle, 2, 2, 13, &v).ok());
  EXPECT_FALSE(DecodeRleHybrid(rle, sizeof rle, 33, 1, &v).ok());
  // a huge run from two bytes is cut at the values asked for
  const uint8_t big[] = {0xfe, 0xff, 0xff, 0xff, 0x0f, 0x01};
  ASSERT_TRUE(DecodeRleHybrid(big, sizeof big, 1, 10, &v).ok());
  EXPECT_EQ(v.size(), 10u);
}

}  // namespace
}  // namespace imagepack::internal
