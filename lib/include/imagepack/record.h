// Records: one image with its label, as stored in every container.
// The byte layout is specified in docs/FORMAT.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "imagepack/status.h"

namespace imagepack {

enum class Encoding : uint8_t { kJpeg = 0, kRaw = 1 };
const char* EncodingName(Encoding e);
Result<Encoding> ParseEncoding(const std::string& name);

constexpr size_t kRecordHeaderSize = 40;
constexpr int kRecordVersion = 1;

// What a record says about its image.
struct RecordFields {
  Encoding encoding = Encoding::kJpeg;
  int channels = 3;
  int32_t label = -1;
  uint32_t height = 0;
  uint32_t width = 0;
};

// A parsed record. `path` and `payload` point into the bytes that were
// parsed and live as long as they do.
struct RecordView {
  RecordFields fields;
  std::string_view path;
  const uint8_t* payload = nullptr;
  size_t payload_size = 0;
};

// Serialises a record (header, path, payload) with its checksum.
// REQUIRES: path.size() < 65536, payload_size < 4 GiB.
std::vector<uint8_t> EncodeRecord(const RecordFields& fields, std::string_view path,
                                  const uint8_t* payload, size_t payload_size);

// Fills in the header and checksum of a record whose path and payload are
// already in place: `record` is header-sized room, then `path`, then the
// payload, exactly. Lets a caller read a file straight into a record.
// REQUIRES: record.size() >= kRecordHeaderSize + path.size().
void SealRecord(std::vector<uint8_t>& record, const RecordFields& fields, std::string_view path);

// Parses and validates a record: length fields against `size`, magic,
// version, encoding, channels, raw payload size against the dimensions, and
// (with verify_checksum) the XXH3-64. Errors say what is wrong, with the
// offending values; callers add the record key.
Result<RecordView> ParseRecord(const uint8_t* data, size_t size, bool verify_checksum = true);

// The LMDB key of record `index`: 10 zero-padded decimal digits.
std::string RecordKey(int64_t index);
constexpr int kKeyWidth = 10;
constexpr const char* kMetaKey = "__meta__";

}  // namespace imagepack
