// Apache Parquet files as the Hugging Face Hub, DuckDB, pyarrow and
// arrow-rs write them, read by hand: the footer (FileMetaData in the
// Thrift compact protocol: schema, row groups, column chunks, key-value
// metadata), page headers, data pages v1 and v2 and dictionary pages;
// definition levels (RLE / bit-packed hybrid) of flat columns, nullable or
// inside structs, and repetition levels of repeated columns (LIST in its
// three-level form and the legacy two-level ones, lists of lists), their
// values grouped per row; values PLAIN, PLAIN_DICTIONARY / RLE_DICTIONARY, RLE
// booleans, DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY
// and BYTE_STREAM_SPLIT; codecs uncompressed, snappy, gzip, zstd, LZ4_RAW
// and LZ4 (Hadoop's framing or a raw block); page CRCs where present.
// Encryption and other codecs are refused by name.
// Turning rows into items is the parquet source's (sources.h). Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/limits.h"
#include "imagepack/status.h"

namespace imagepack::internal {

// Physical types and codecs as parquet.thrift numbers them.
enum class PqType { kBoolean = 0, kInt32 = 1, kInt64 = 2, kInt96 = 3, kFloat = 4, kDouble = 5, kByteArray = 6,
                    kFixed = 7 };

// A schema element on a leaf's path: its repetition (0 required, 1
// optional, 2 repeated), whether it is annotated LIST (converted type or
// logical type) and its children.
struct PqNode {
  int repetition = 0;
  bool list = false;
  int children = 0;
};

// A leaf column of the schema: its path (struct fields from the root), its
// physical type and its levels (max_def counts its optional ancestors and
// itself; max_rep its repeated ones; rep_defs[k] is the definition level
// of the k-th repeated ancestor, outermost first: a value at that level or
// above holds an element of the list at depth k + 1).
struct PqLeaf {
  std::vector<std::string> path;
  std::vector<PqNode> nodes;  // one per path element
  PqType type = PqType::kByteArray;
  int type_length = 0;
  int max_def = 0;
  int max_rep = 0;
  std::vector<int> rep_defs;
  bool text = false;  // a UTF-8 string (converted type UTF8 or logical STRING)
  std::string dotted() const;
  // The path without the lists' own groups (the spec's backward
  // compatibility rules): "tags" for tags.list.element (three levels),
  // tags.array and tags.bag.array_element (two levels) and a repeated
  // leaf "tags"; "objects.bbox" for objects.bbox.list.element.list.element.
  std::vector<std::string> logical() const;
};

struct PqChunk {
  int codec = 0;
  int64_t num_values = 0;
  int64_t data_page_offset = 0;
  int64_t dictionary_page_offset = -1;
  int64_t total_compressed_size = 0;
  std::string file_path;  // a chunk in another file: refused
  bool encrypted = false;
};

struct PqRowGroup {
  int64_t num_rows = 0;
  std::vector<PqChunk> columns;  // one per leaf, in leaf order
};

struct PqFile {
  int64_t num_rows = 0;
  std::vector<PqLeaf> leaves;
  std::vector<PqRowGroup> row_groups;
  std::vector<std::pair<std::string, std::string>> key_values;
  std::string created_by;
};

// The footer's length from the file's last 8 bytes (length, "PAR1"), and
// its first 4 ("PAR1"); an encrypted footer ("PARE") is refused by name.
Result<uint32_t> ParquetFooterLength(const uint8_t head[4], const uint8_t tail[8], uint64_t file_size,
                                     const std::string& shown);
// FileMetaData (the footer's bytes) of a file of `file_size` bytes.
// Budgets: limits::kParquetSchema schema elements, kParquetRowGroups row
// groups, kParquetGroupRows rows a row group and kParquetFileRows a file;
// every container (structure, list, set, map) nested at most
// limits::kThriftDepth deep; every count and length within the bytes it is
// read from; the structures made at most kParquetFooterMemoryFactor x the
// footer + kParquetFooterMemoryFloor bytes, charged before each is made;
// the column chunks' sizes add up to at most the file's. Errors name
// `shown` and the byte.
Result<PqFile> ParseParquetFooter(const uint8_t* data, size_t size, uint64_t file_size, const std::string& shown);

// One value of a flat column: null (a definition level below the leaf's
// max), an integer (INT32, INT64, BOOLEAN), a float (FLOAT, DOUBLE) or
// bytes (BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY; valid during the call only).
struct PqValue {
  bool null = false;
  int64_t i = 0;
  double f = 0;
  const uint8_t* p = nullptr;
  size_t n = 0;
};

// Reads `n` bytes at `at` of the file into `buf`.
using PqReadFn = std::function<Status(void* buf, size_t n, uint64_t at)>;

// What one file's pages may still expand to while it is read (every
// column and row group of it): limits::kParquetExpandFloor +
// kParquetExpandFactor x the file's size. Inflated page bytes, value slots
// (limits::kParquetValueCost each) and the bytes of values made from a
// dictionary or rebuilt by DELTA_BYTE_ARRAY are charged before they are
// made, so a file of a few KB cannot make gigabytes.
class PqBudget {
 public:
  explicit PqBudget(uint64_t file_size);
  // InvalidArgument naming `what` and the budget once `bytes` exceed what
  // is left.
  Status Charge(uint64_t bytes, const char* what);
  uint64_t total() const { return total_; }

 private:
  uint64_t total_;
  uint64_t left_;
};

// Every value of column chunk `chunk` of leaf `leaf` (a flat column: no
// repeated ancestor), in row order, passed to `fn` with its row within the
// row group; `rows` is the row group's row count, which the values must
// make. Pages are read one at a time, each within limits::kParquetPageBytes
// compressed and uncompressed, at most limits::kParquetChunkPages of them,
// their expansion charged to `budget`. `where` (FILE: row group N, column C) starts
// every error.
Status ReadParquetColumn(const PqReadFn& read, uint64_t file_size, PqBudget& budget, const PqLeaf& leaf,
                         const PqChunk& chunk, int64_t rows, const std::string& where,
                         const std::function<Status(int64_t row, const PqValue& v)>& fn);

// The rows of a repeated column (max_rep R >= 1) as nested lists: lists[d]
// holds the lists at depth d + 1 in order (lists[0] the row's one list),
// each its elements as [begin, end) of lists[d + 1], or of values at depth
// R. A list is null (`null`: it, or a struct above it, is null) or
// present, empty or not; values holds the elements, null ones null. The
// definition levels tell these apart by rep_defs (an empty list one below
// its repeated group's level, a null one lower still).
struct PqList {
  bool null = false;
  uint32_t begin = 0, end = 0;
};
struct PqRow {
  std::vector<std::vector<PqList>> lists;
  std::vector<PqValue> values;  // bytes valid during the call only
};

// Every row of column chunk `chunk` of a repeated leaf, in order, passed to
// `fn` with its row within the row group; `rows` rows, as the repetition
// levels start them (a row may span pages). Budgets: a page's levels as
// ReadParquetColumn's values, limits::kParquetRowValues levels a row.
Status ReadParquetRows(const PqReadFn& read, uint64_t file_size, PqBudget& budget, const PqLeaf& leaf,
                       const PqChunk& chunk, int64_t rows, const std::string& where,
                       const std::function<Status(int64_t row, const PqRow& r)>& fn);

// The pieces, for the unit test and the fuzz target: a page header (its
// size in *used), the RLE / bit-packed hybrid (n values of `bit_width`
// bits), DELTA_BINARY_PACKED (n values, *used bytes), and a page's values
// decoded after its levels.
struct PqPageHeader {
  int type = -1;  // 0 data v1, 2 dictionary, 3 data v2
  int32_t uncompressed_size = 0;
  int32_t compressed_size = 0;
  bool has_crc = false;
  uint32_t crc = 0;
  int32_t num_values = 0;
  int encoding = 0;
  int def_encoding = 3;
  int rep_encoding = 3;
  int32_t num_nulls = 0;
  int32_t num_rows = 0;
  int32_t def_length = 0;
  int32_t rep_length = 0;
  bool v2_compressed = true;
};
Result<PqPageHeader> ParseParquetPageHeader(const uint8_t* data, size_t size, size_t* used);
Status DecodeRleHybrid(const uint8_t* data, size_t size, int bit_width, size_t n, std::vector<uint32_t>* out);
Status DecodeDeltaBinaryPacked(const uint8_t* data, size_t size, size_t n, std::vector<int64_t>* out, size_t* used);
// Decompresses `in` by parquet codec number into exactly `out_size` bytes.
// `out` grows with the bytes produced (a header that states a gigabyte
// over a few bytes makes no gigabyte buffer), each step charged to
// `budget` where one is given.
Status ParquetDecompress(int codec, const uint8_t* in, size_t in_size, size_t out_size, std::vector<uint8_t>* out,
                         PqBudget* budget = nullptr);

}  // namespace imagepack::internal
