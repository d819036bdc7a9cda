// Records: one image with its label, and (version 2) the sample's other
// fields, as stored in every container.
// The byte layout is specified in docs/FORMAT.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "imagepack/fields.h"
#include "imagepack/status.h"

namespace imagepack {

enum class Encoding : uint8_t { kJpeg = 0, kRaw = 1 };
const char* EncodingName(Encoding e);
Result<Encoding> ParseEncoding(const std::string& name);

constexpr size_t kRecordHeaderSize = 40;
// Version 1: image and class. Version 2 adds the field section (fields.h);
// a record without fields is still written as version 1, byte for byte as
// before.
constexpr int kRecordVersion = 1;
constexpr int kRecordVersionFields = 2;

// What a record says about its image.
struct RecordFields {
  Encoding encoding = Encoding::kJpeg;
  int channels = 3;
  int32_t label = -1;
  uint32_t height = 0;
  uint32_t width = 0;
  // Version 2: the field entries after the payload, and their total bytes.
  uint16_t field_count = 0;
  uint32_t fields_size = 0;
};

// A parsed record. `path` and `payload` point into the bytes that were
// parsed and live as long as they do.
struct RecordView {
  RecordFields fields;
  std::string_view path;
  const uint8_t* payload = nullptr;
  size_t payload_size = 0;
  // The field section (fields.size() == 0 for version 1): already checked
  // by ParseRecord to hold fields.field_count well-formed entries.
  const uint8_t* field_data = nullptr;
};

// The record's fields, in stored order. REQUIRES: `v` from ParseRecord.
std::vector<FieldView> RecordFieldViews(const RecordView& v);

// Serialises a record (header, path, payload, and fields.fields_size bytes
// of field entries from `field_data`) with its checksum. Version 2 when
// fields.field_count > 0, else version 1.
// REQUIRES: path.size() < 65536, payload_size < 4 GiB.
std::vector<uint8_t> EncodeRecord(const RecordFields& fields, std::string_view path,
                                  const uint8_t* payload, size_t payload_size,
                                  const uint8_t* field_data = nullptr);

// Fills in the header and checksum of a record whose path and payload are
// already in place: `record` is header-sized room, then `path`, then the
// payload, then fields.fields_size bytes of field entries, exactly. Lets a
// caller read a file straight into a record.
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
