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
// declared fields (masks, boxes, ...: `fields`); a dataset without them is
// still written as format 2, so readers of format 2 keep reading it.
constexpr int kFormatVersion = 2;
constexpr int kFormatVersionFields = 3;
constexpr int kMaxRecordsPerValue = 65536;

struct DatasetMeta {
  int format_version = kFormatVersion;
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

  std::string ToJson() const;
};

// Whether the records were stored in a random order (pack_lmdb --shuffle:
// options.shuffle is a seed >= 0), so that runs of consecutive records
// mix classes like the whole dataset does.
bool StoredShuffled(const DatasetMeta& meta);

// Parses and validates metadata JSON: required keys present with the right
// types, count >= 0, channels 1 or 3, label_counts (if present) sized like
// classes, each >= 0, summing to at most count (unlabelled records, label
// -1, are not counted), fields (format 3) with names, known kinds and
// unique names. Never throws.
Result<DatasetMeta> ParseMeta(const uint8_t* data, size_t size);

// Current UTC time as "2026-11-21T22:51:16Z".
std::string UtcNow();

}  // namespace imagepack
