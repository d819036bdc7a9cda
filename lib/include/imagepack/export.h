// Writing a database out in the layouts other tools read: WebDataset tar
// shards (webdataset, DALI, timm), an ImageFolder tree (torchvision) and
// TFRecord files of tf.train.Example (TensorFlow, TF-slim, DALI).
// The library side of `export_db`; docs/USAGE.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "imagepack/progress.h"
#include "imagepack/status.h"

namespace imagepack {

enum class ExportLayout { kWebDataset, kImageFolder, kTfRecord };
Result<ExportLayout> ParseExportLayout(const std::string& name);  // "webdataset" | "imagefolder" | "tfrecord"

struct ExportOptions {
  std::vector<std::string> dbs;  // an imagepack database, or the shards of one (read as one)
  std::string dst;  // a folder (created)
  ExportLayout layout = ExportLayout::kWebDataset;
  // WebDataset, TFRecord: records per shard (0: as many as make ~shard_mb MB).
  int64_t records_per_shard = 0;
  int64_t shard_mb = 512;
  bool gzip = false;                 // shards as .tar.gz; TFRecord files gzipped, names unchanged
  std::string prefix = "shard";      // shard names: PREFIX-000000.tar, PREFIX-00000-of-00004
  // Only records [first, last) (last < 0: to the end).
  int64_t first = 0;
  int64_t last = -1;
  int threads = 0;
  CancelFlag* cancel = nullptr;
  Progress* progress = nullptr;
};

struct ExportSummary {
  int64_t records = 0;        // exported by this run
  int64_t kept = 0;           // already there from an earlier run (resumed)
  int64_t files = 0;          // shards or image files written by this run
  int64_t bytes = 0;          // bytes written
  double seconds = 0;
  bool cancelled = false;
};

// Exports opts.dbs (one dataset) into opts.dst.
//
// WebDataset: shards PREFIX-NNNNNN.tar (or .tar.gz) of consecutive records;
// per record KEY.jpg (the stored JPEG bytes, unchanged) or KEY.png (raw
// pixels, lossless), KEY.cls (the class index) and KEY.json ({"path",
// "label", "class"}, and the values of non-spatial fields); spatial fields
// as KEY.NAME.png (masks) or KEY.NAME.jpg / .png (images). KEY is the
// record's path without its extension, dots made '_' (webdataset splits
// keys at the first dot), unique within the shard. classes.txt lists the
// class names in index order; meta.json is the database's metadata (the
// fields and their classes, read back by pack_lmdb's import).
//
// ImageFolder: DST/CLASS/FILE for every record, FILE being the record's
// path below its class folder (or the whole path), with .jpg / .png added
// when the name does not say its content; records without a class are an
// error. classes.txt as above.
//
// TFRecord: files PREFIX-NNNNN-of-MMMMM of consecutive records, framed as
// tf.io.TFRecordWriter frames them (gzip: the whole file one gzip stream,
// as its GZIP option writes), each a tf.train.Example in the TF-slim /
// Inception layout: image/encoded (as WebDataset's image member),
// image/format ("JPEG" or "PNG"), image/filename (the record's path),
// image/height, image/width, image/channels, image/colorspace,
// image/class/label (the class index + 1: 0 is TF-slim's background; none
// for a record without a class) and image/class/text (its name); a boxes
// field (the one named "boxes", else the first) as
// image/object/bbox/{xmin,ymin,xmax,ymax} (divided by the image's width
// and height) and image/object/bbox/label (+ 1). Other fields are not
// written. labels.txt is TF-slim's ("0:background", "N:NAME"), besides
// classes.txt.
//
// Every file appears under its final name complete (written aside and
// renamed); export.json records what was exported. Re-running the same
// export keeps what is there and writes the rest; a DST holding another
// export is refused.
Result<ExportSummary> ExportDatabase(const ExportOptions& opts);

}  // namespace imagepack
