// What the layouts of ExportDatabase (imagepack/export.h) share: export.cc
// writes WebDataset shards and ImageFolder trees, export_tfrecord.cc
// TFRecord files. Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <zlib.h>

#include "imagepack/progress.h"
#include "imagepack/record.h"
#include "imagepack/status.h"
#include "imagepack/store.h"

namespace imagepack::internal {

// A file of an export written aside (plain, or one gzip stream at level 1:
// JPEG bytes hardly shrink, and level 1 is 5x faster than 6 for the same
// size) and renamed into place by Finish; removed when dropped unfinished.
// The first error stays; writes after it do nothing.
class AsideFile {
 public:
  AsideFile(std::string path, bool gzip);
  ~AsideFile();
  AsideFile(const AsideFile&) = delete;
  AsideFile& operator=(const AsideFile&) = delete;

  void Write(const void* data, size_t size);
  void Write(const std::vector<uint8_t>& b) { Write(b.data(), b.size()); }
  // Closes, renames into place and sets *bytes to the size as stored.
  Status Finish(uint64_t* bytes);

 private:
  std::string path_, tmp_;
  int fd_ = -1;
  gzFile gz_ = nullptr;
  Status status_;
  bool done_ = false;
};

// An encoded image: the JPEG as stored (*ext "jpg"), or raw pixels as a
// PNG, lossless (*ext "png").
Status ImageBytes(Encoding enc, int channels, uint32_t h, uint32_t w, const uint8_t* data, size_t size,
                  std::vector<uint8_t>* out, const char** ext);

// The name of class `label`; "" for none.
std::string ClassName(const DatasetMeta& meta, int32_t label);

// TFRecord file `shard` of `shards`: PREFIX-NNNNN-of-MMMMM (TF-slim's and
// the Inception converter's names; 5 digits or more).
std::string TfRecordFileName(const std::string& prefix, int64_t shard, int64_t shards);

// TF-slim's labels.txt: "0:background", then "N:NAME" for class N-1 (the
// TFRecord importer reads labels as counted from 1 so).
std::string SlimLabelsText(const std::vector<std::string>& classes);

// One TFRecord file to write: records [first, last) into `path`.
struct TfRecordFileJob {
  std::string path;
  int64_t first = 0;
  int64_t last = 0;
  bool gzip = false;     // the whole file one gzip stream (TFRecordWriter's GZIP)
  std::string shown;     // the database in messages
  CancelFlag* cancel = nullptr;
  Progress* progress = nullptr;
};

// Writes the job's records, one tf.train.Example each, aside and renamed
// to job.path when complete. *written is false when cancelled (nothing is
// left behind); *bytes is the file's size as stored.
Status WriteTfRecordFile(RecordCursor& cur, const DatasetMeta& meta, const TfRecordFileJob& job, bool* written,
                         uint64_t* bytes);

}  // namespace imagepack::internal
