// Packing an image tree (or converting a packed database) into one container
// (the library side of `pack_lmdb`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "imagepack/prepare.h"
#include "imagepack/progress.h"
#include "imagepack/resize_tree.h"
#include "imagepack/shard.h"
#include "imagepack/source_options.h"
#include "imagepack/store.h"

namespace imagepack {

// 64 JPEGs of ~20 KB make a ~1 MB LMDB value: the half 4 KB page a value
// wastes at its end is then 0.2% instead of ~10% per JPEG.
constexpr int kJpegRecordsPerValue = 64;

struct PackOptions {
  // An ImageFolder tree (class = first-level folder), a flat folder with
  // labels_file, or an existing imagepack database to convert.
  std::string src;
  std::string dst;
  ContainerFormat format = ContainerFormat::kLmdb;
  Encoding encoding = Encoding::kJpeg;
  // Resize limit, channels, quality, pass-through rule: as resize_imagenet.
  PrepareOptions prepare;
  // Labels, classes, paired trees ("NAME[:KIND]=DIR"), a manifest (JSON
  // Lines or CSV; src is then unused), a COCO instances file (src: its
  // images' folder), masks' classes and ignore value, WebDataset members.
  // Its scratch_dir and cancel are set by PackDataset (beside dst; cancel).
  SourceOptions source;
  int64_t shuffle_seed = -1; // < 0: sorted path order
  Shard shard;
  int threads = 0;
  bool overwrite = false;
  // LMDB: records per value (WriterOptions); 0: kJpegRecordsPerValue for
  // JPEG, 1 for raw (records of hundreds of KB lose under 1% to a half page).
  int lmdb_records_per_value = 0;
  DirectIo direct_io = DirectIo::kAuto;  // blob: O_DIRECT writes (WriterOptions)
  // JPEG: images decoded (reduced) for mean/std (raw: every image). 0: no
  // statistics for either encoding; the metadata's mean and std are empty.
  int64_t stats_sample = 1024;
  // Settings the caller left open (pack_lmdb: options not on its command
  // line). Where the source says how its records were packed (an imagepack
  // database, or shards beside the meta.json export_db writes), each open
  // setting takes that source's value, so that converting a database, or
  // importing its export, gives back the same records; any other source
  // takes the value above. Likewise an open lmdb_records_per_value (0) is
  // the source's when the encoding is, and the options' "shuffle" is the
  // source's when no shuffle_seed is given and the stored order is kept.
  struct FromSource {
    bool encoding = false;
    bool channels = false;
    bool quality = false;
  } from_source;
  std::string tool = "pack_lmdb";
  std::string options_json = "{}";
  CancelFlag* cancel = nullptr;
  Progress* progress = nullptr;
};

struct PackSummary {
  int64_t inputs = 0;           // images (or records) in this shard
  int64_t written = 0;          // records in the container
  int64_t passed_through = 0;   // copied as-is: JPEG bytes (or a database's raw pixels) kept as they were
  int64_t resized = 0;          // made smaller (--max-size, --max-edge)
  int64_t reencoded = 0;        // decoded and encoded again as JPEG at their own size
  int64_t decoded = 0;          // raw records decoded at their own size
  int64_t lossless_as_jpeg = 0; // of the JPEG records, those whose source was lossless (PNG, raw pixels, ...)
  int64_t classes = 0;
  std::vector<FileError> errors;      // inputs skipped (records left out), with reasons
  // Parts of an input left out while the input itself is packed (a COCO
  // annotation without a usable box), with reasons: not records, but not
  // kept either.
  std::vector<FileError> left_out;
  std::vector<std::string> ignored;   // non-image files, images outside any class
  std::vector<std::string> problems;  // listing problems
  int64_t bytes_in = 0;
  int64_t payload_bytes = 0;
  int64_t file_bytes = 0;       // size of the container on disk
  double seconds = 0;
  bool cancelled = false;
  // Every input was skipped (errors lists why): no database was written,
  // not even an empty one.
  bool all_skipped = false;
  bool direct_io = false;       // the blob went to the device with O_DIRECT
  DatasetMeta meta;
};

// Packs opts.src into opts.dst. Records are in the source's order (sorted
// path order; a database's, or exported shards', stored order), or in a
// permutation of it fixed by shuffle_seed; the result is byte-identical
// whatever `threads` is, and from run to run when SOURCE_DATE_EPOCH fixes
// the metadata's creation time (CreationTime). Bad inputs are skipped and
// listed; a non-Ok Status means nothing was written under dst (nor is
// anything on cancel).
Result<PackSummary> PackDataset(const PackOptions& opts);

}  // namespace imagepack
