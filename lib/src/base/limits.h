// The budgets of every parser of outside input (and of what storage/
// reads from a server: the Hub's listings), in one place
// (docs/RELIABILITY.md, "Hostile input", lists them with what exceeding
// each one says). A budget exceeded is an error naming the file and the
// byte or line, never an abort, a hang or an allocation the input sized.
#pragma once

#include <cstddef>
#include <cstdint>

namespace imagepack::internal::limits {

// tar: a GNU long-name ('L') or pax ('x') header body; a member name.
inline constexpr uint64_t kTarHeaderBody = 1 << 20;
inline constexpr size_t kNameBytes = 4096;
// tar: members of one shard.
inline constexpr size_t kTarMembers = 10'000'000;
// A small member read whole: .cls, .json, .txt and other value members.
inline constexpr uint64_t kValueMember = 16 << 20;

// TFRecord: one record's data (read whole to parse its Example); the
// features of one tf.train.Example and its list values in all; lines of a
// DALI .idx file (also at most its data file's bytes / 16, the smallest
// record) and the bytes of one line; records of one file; error entries
// of one file (past them, one more entry counts the rest).
inline constexpr uint64_t kTfRecordBytes = uint64_t(1) << 30;
inline constexpr size_t kTfFeatures = 100'000;
inline constexpr size_t kTfValues = 64'000'000;
inline constexpr size_t kTfIndexLines = 100'000'000;
inline constexpr size_t kTfIndexLineBytes = 128;
inline constexpr int64_t kTfFileRecords = 10'000'000;
inline constexpr size_t kTfFileErrors = 1000;

// Parquet: the footer; schema elements; row groups of one file; nesting
// of Thrift structures and lists; one page, compressed and uncompressed,
// and its values.
inline constexpr uint64_t kParquetFooterBytes = 256 << 20;
inline constexpr size_t kParquetSchema = 100'000;
inline constexpr size_t kParquetRowGroups = 1'000'000;
inline constexpr int kThriftDepth = 64;
inline constexpr uint64_t kParquetPageBytes = uint64_t(1) << 30;
inline constexpr uint64_t kParquetPageValues = 8'000'000;
// Parquet: memory the footer's parsed structures may take (row groups,
// column chunks, schema elements, each leaf's copy of its path), charged
// before each is made: a multiple of the footer's bytes plus a floor.
inline constexpr uint64_t kParquetFooterMemoryFactor = 16;
inline constexpr uint64_t kParquetFooterMemoryFloor = 64 << 20;
// Parquet: pages of one column chunk (each header read from a window
// that slides, so a header costs its own bytes).
inline constexpr size_t kParquetChunkPages = 1'000'000;
// Parquet: what one file's pages may expand to while it is read, all
// columns and row groups together: inflated page bytes, kParquetValueCost
// bytes for each value slot, and the bytes of every value made from a
// dictionary or rebuilt by DELTA_BYTE_ARRAY. A multiple of the file's
// size plus a floor; charged before each buffer grows.
inline constexpr uint64_t kParquetExpandFactor = 64;
inline constexpr uint64_t kParquetExpandFloor = uint64_t(256) << 20;
inline constexpr uint64_t kParquetValueCost = 48;
// Parquet: levels (values, empty and null lists) of one row of a repeated
// (list) column.
inline constexpr size_t kParquetRowValues = 1'000'000;
// Parquet: rows of one row group and of one file (a reader holds a label
// and a path per row of a row group, an item per row of a file).
inline constexpr int64_t kParquetGroupRows = 1'000'000;
inline constexpr int64_t kParquetFileRows = 10'000'000;

// Shard names one pattern ("{000000..999999}", "::" lists) expands to.
inline constexpr size_t kBraceExpansions = 1'000'000;
// Shell globs (sources/patterns.h): folder entries one glob may list, and
// folders deep a "**" may descend.
inline constexpr size_t kGlobEntries = 1'000'000;
inline constexpr size_t kGlobDepth = 64;

// The Hugging Face Hub (storage/hf_storage.cc): entries of one folder's
// listing (its pages together), bytes of one page of it or of one answer
// of the API, and redirects followed for one request.
inline constexpr size_t kHubFolderEntries = 1'000'000;
inline constexpr size_t kHubAnswerBytes = 1 << 20;
inline constexpr int kHubRedirects = 5;

// gzip: bytes one shard may inflate to (a bomb fills no disk beyond it).
inline constexpr uint64_t kInflatedShard = uint64_t(64) << 30;

// pickle: values built (each opcode makes at most one), stack depth.
inline constexpr size_t kPickleValues = 50'000'000;

// JSON (manifest rows, shard .json, COCO, meta.json): nesting depth.
inline constexpr int kJsonDepth = 64;
// JSON Lines / CSV / labels / classes: one line.
inline constexpr size_t kLineBytes = 16 << 20;
// Rows of one manifest (JSON Lines or CSV).
inline constexpr size_t kManifestRows = 100'000'000;

// Classes inferred from label indices ("0".."max"): the largest index may
// be at most max(kSparseClassFloor, kSparseClassFactor * distinct labels
// seen); beyond that it is a typo or an attack, and --classes must say so.
inline constexpr int64_t kSparseClassFloor = 1024;
inline constexpr int64_t kSparseClassFactor = 16;
// Classes of any list.
inline constexpr size_t kClasses = 1 << 24;

// A whole file read into memory (an image, a mask, a field file, a COCO
// or meta.json file).
inline constexpr uint64_t kWholeFile = uint64_t(2) << 30;

}  // namespace imagepack::internal::limits
