// Dataset metadata, stored as JSON in every container (docs/FORMAT.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "imagepack/fields.h"
#include "imagepack/record.h"
#include "imagepack/shard.h"
#include "imagepack/status.h"

namespace imagepack {

// Format 2 groups LMDB records into values (records_per_value); format 1
// (one bare record per LMDB value) is still read. Format 3 is format 2 with
// declared fields (masks, boxes, ...: `fields`). Format 4, what pack
// writes, is format 3 (fields optional) whose metadata carries its own
// checksum, `meta_checksum` (docs/FORMAT.md); every open checks it.
// Format 5 is format 4 with 16-bit fields (a mask of dtype uint16, a depth
// map); pack writes it only for such a dataset, so a build that reads 4
// refuses the file by its version instead of misreading the samples.
constexpr int kFormatVersion = 2;
constexpr int kFormatVersionFields = 3;
constexpr int kFormatVersionChecked = 4;
constexpr int kFormatVersionWide = 5;
constexpr int kMaxRecordsPerValue = 65536;

struct DatasetMeta {
  // What ToJson writes: 4 (checksummed; 5 when a field is 16-bit), or an
  // older version as parsed (formats 2 and 3 parse as 2; ToJson writes 3
  // when there are fields).
  int format_version = kFormatVersionChecked;
  int64_t count = 0;
  std::vector<std::string> classes;
  Encoding encoding = Encoding::kJpeg;
  int channels = 3;
  Shard shard;
  std::vector<int64_t> label_counts;
  std::vector<double> mean;  // per channel, pixel values scaled to [0, 1]
  std::vector<double> std;
  int64_t stats_images = 0;
  int64_t payload_bytes = 0;
  // LMDB, format 2: records per value (docs/FORMAT.md); the LMDB writer sets
  // it. 0: format 1's one bare record per value; blobs leave it 0.
  int records_per_value = 0;
  // The fields every record holds besides its image and class, in slot
  // order (at most 255). Empty: an (image, class) dataset.
  std::vector<FieldSpec> fields;
  std::string tool;
  std::string options_json = "{}";  // a JSON object, kept verbatim
  std::string source;
  std::string created;  // UTC, ISO 8601

  // The metadata JSON; format 4 with its `meta_checksum`.
  std::string ToJson() const;
};

// The XXH3-64 of metadata JSON `data` as `meta_checksum` defines it (the
// text without trailing whitespace, with the 16 hex digits of its
// `"meta_checksum": "..."` value read as zeros). False when the text holds
// no such entry, or more than one.
bool MetaChecksum(const uint8_t* data, size_t size, uint64_t* checksum, uint64_t* stored);

// Whether the records were stored in a random order (pack_lmdb --shuffle:
// options.shuffle is a seed >= 0), so that runs of consecutive records
// mix classes like the whole dataset does.
bool StoredShuffled(const DatasetMeta& meta);

// Parses and validates metadata JSON: required keys present with the right
// types, count >= 0, channels 1 or 3, label_counts (if present) sized like
// classes, each >= 0, summing to at most count (unlabelled records, label
// -1, are not counted), fields (format 3) with names, known kinds and
// unique names. Format 4 (and any metadata holding `meta_checksum`): the
// checksum matches, or Corruption saying the metadata was changed.
// Never throws.
Result<DatasetMeta> ParseMeta(const uint8_t* data, size_t size);

// The dataset's identity: XXH3-64 of its metadata JSON (ToJson), which
// names its classes, counts, statistics, fields and when it was packed.
// Saved with a loader's position (state_dict, checkpoints) so that a
// position is never applied to another dataset.
uint64_t DatasetIdentity(const DatasetMeta& meta);

// Current UTC time as "2026-11-21T22:51:16Z".
std::string UtcNow();

// The creation time a writer records (`created`), as UtcNow formats it:
// the time SOURCE_DATE_EPOCH names (seconds since 1970-01-01 UTC, the
// reproducible-builds convention) when that is set, so that packing the
// same input twice gives identical files; else now. A SOURCE_DATE_EPOCH
// that is not a plain decimal count of seconds is an error naming it.
Result<std::string> CreationTime();

}  // namespace imagepack
