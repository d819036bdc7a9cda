// TFRecord files as TensorFlow writes them (tf.io.TFRecordWriter,
// tf.data, TFDS, the TF-slim / Inception ImageNet converters): records
// framed as uint64 length, masked CRC-32C of the length, data, masked
// CRC-32C of the data (little-endian), each record's data a
// tf.train.Example read from (and for export_db written in) the protobuf
// wire format by hand; and DALI's
// tfrecord2idx index files ("OFFSET SIZE" per line). Reading the bytes
// and turning records into items is the TFRecord source's (sources.h).
// Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/limits.h"
#include "imagepack/status.h"

namespace imagepack::internal {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), continuing `crc`;
// TensorFlow's mask: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
// SSE4.2's crc32 instruction where the CPU has it, else the table
// (Crc32cPortable, the same values).
uint32_t Crc32c(const uint8_t* data, size_t size, uint32_t crc = 0);
uint32_t Crc32cPortable(const uint8_t* data, size_t size, uint32_t crc = 0);
uint32_t MaskCrc(uint32_t crc);

// Where a record's data lies in its file: `size` bytes at `offset` (after
// the 12-byte header); `next` is the offset of the record after it.
struct TfRecordFrame {
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t next = 0;
};

// Reads `n` bytes at `at` of the file into `buf`.
using TfReadFn = std::function<Status(void* buf, size_t n, uint64_t at)>;

// What the header at `at` of a file of `file_size` bytes says; record
// number `record` (from 0) and `shown` name it in errors. Fails (Corruption)
// on a header cut short, a length whose CRC does not match, or a record
// that runs past the end of the file; a length over `budget` is
// InvalidArgument. `at` == file_size is no error: *end is set instead.
Result<TfRecordFrame> ReadTfRecordHeader(const TfReadFn& read, uint64_t file_size, uint64_t at, int64_t record,
                                         const std::string& shown, bool* end,
                                         uint64_t budget = limits::kTfRecordBytes);
// The data CRC check: `data` (the frame's bytes) against the 4 bytes after
// it, read from the file.
Status CheckTfRecordData(const TfReadFn& read, const TfRecordFrame& frame, const uint8_t* data, int64_t record,
                         const std::string& shown);

// Where the walk goes on after a header whose length's CRC does not match:
// the first byte at or after `from` where 12 bytes form a header whose
// length's CRC matches and whose record (length and data CRC) fits in the
// file of `file_size` bytes; file_size when there is none. Read 1 MiB at a
// time; each byte costs one CRC of 8 bytes (a header found by chance, one
// in 2^32, is a record whose data CRC then fails). IO errors are returned.
Result<uint64_t> FindTfRecordHeader(const TfReadFn& read, uint64_t file_size, uint64_t from);

// The name of record `record` of `shown` in messages: "FILE:record N".
std::string TfRecordWhere(const std::string& shown, int64_t record);

// One feature of a tf.train.Example: a BytesList (each value a range of
// the record's data, never copied), a FloatList or an Int64List, packed or
// not (a list repeated in a message is merged, as protobuf merges it).
struct TfFeature {
  enum class Kind { kNone, kBytes, kFloat, kInt64 };
  Kind kind = Kind::kNone;
  std::vector<std::pair<size_t, size_t>> bytes;  // (offset, size) in the record's data
  std::vector<float> floats;
  std::vector<int64_t> ints;
};
using TfExample = std::map<std::string, TfFeature>;

// A serialized tf.train.Example: Features (field 1) holding map<string,
// Feature> (field 1, entries of key 1 / value 2); Feature a oneof of
// BytesList 1, FloatList 2, Int64List 3, each a repeated field 1. Unknown
// fields of every message are skipped by wire type, as protobuf does (a
// group, wire types 3 and 4, is refused). Budgets: limits::kTfFeatures
// features, limits::kTfValues values in all; a key is UTF-8 of at most
// limits::kNameBytes. An error says what is wrong and at which byte.
Result<TfExample> ParseTfExample(const uint8_t* data, size_t size);

// Writing (export_db --to tfrecord): a tf.train.Example built feature by
// feature in the wire format ParseTfExample reads, the map's entries in
// the order added, each FloatList / Int64List packed as protobuf writes
// proto3's repeated scalars (an empty list: no value field at all).
class TfExampleBuilder {
 public:
  void AddBytes(const std::string& key, const std::vector<std::string_view>& values);
  void AddFloats(const std::string& key, const std::vector<float>& values);
  void AddInts(const std::string& key, const std::vector<int64_t>& values);
  // The serialized Example.
  std::vector<uint8_t> Serialize() const;

 private:
  void AddEntry(const std::string& key, uint32_t kind_field, const std::vector<uint8_t>& list);
  std::vector<uint8_t> entries_;  // the body of Features: its map entries
};

// Appends `size` bytes of `data` framed as tf.io.TFRecordWriter frames a
// record: length, masked CRC of the length, data, masked CRC of the data.
void AppendTfRecord(const uint8_t* data, size_t size, std::vector<uint8_t>* out);

// A DALI tfrecord2idx index: per line "OFFSET SIZE" of one whole record
// (header and CRCs included), in order. Read through `read` (the index is
// `size` bytes) 64 KiB at a time, never whole; `line` gets each record.
// Bounded by the data file it indexes (`data_size` bytes): records in
// order, none overlapping the one before and each inside the data file and
// at least 16 bytes (an empty record's frame), so there are at most
// data_size / 16 lines (and limits::kTfIndexLines); a line is at most
// limits::kTfIndexLineBytes, so an index of more than
// kTfIndexLineBytes x (data_size / 16 + 1) bytes is refused before any
// byte is read. An error names the line.
Status ReadTfRecordIndex(const TfReadFn& read, uint64_t size, uint64_t data_size, const std::string& shown,
                         const std::function<void(uint64_t offset, uint64_t size)>& line);
// The same of an index held in `text` (tests, the fuzz target).
Result<std::vector<std::pair<uint64_t, uint64_t>>> ParseTfRecordIndex(const std::string& text,
                                                                      const std::string& shown,
                                                                      uint64_t data_size = UINT64_MAX);

}  // namespace imagepack::internal
