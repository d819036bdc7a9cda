// The registry (registry.h): one row per format of another tool. A new
// format adds its row here and its source file beside this one.
#include "sources/registry.h"

#include "imagepack/storage.h"

namespace imagepack {
namespace internal {

const std::vector<RegisteredFormat>& RegisteredFormats() {
  // Parquet and TFRecords first: a brace pattern of theirs is no WebDataset's.
  static const std::vector<RegisteredFormat> formats = {
      {{"parquet", "Hugging Face parquet shards: .parquet files (a file, a brace pattern, a folder)", true, true,
        false},
       LooksLikeParquet, OpenParquetSource},
      {{"tfrecord",
        "TFRecords of tf.train.Example, TF-slim / Inception or TFDS, plain or gzipped: .tfrecord, .tfrec or "
        "NAME-NNNNN-of-NNNNN files, else a record's CRC (a file, a brace pattern, a folder)",
        true, true, false},
       LooksLikeTfRecord, OpenTfRecordSource},
      {{"webdataset", "WebDataset shards: .tar, .tar.gz, .tgz (a file, a brace pattern, a folder)", true, true,
        false},
       LooksLikeWebDataset, OpenWebDatasetSource},
      {{"folder2lmdb", "an LMDB of pickled (image bytes, label) pairs, as folder2lmdb writes it", false, false,
        true},
       LooksLikePickledLmdb, OpenPickledLmdbSource},
  };
  return formats;
}

const RegisteredFormat* FormatOf(const std::string& path, bool SourceFormat::*capability) {
  bool local = true;
  if (auto storage = OpenStorage(path); storage.ok()) local = storage.value()->local();
  for (const RegisteredFormat& f : RegisteredFormats())
    if ((local || !f.row.local_only) && (!capability || f.row.*capability) && f.looks_like(path)) return &f;
  return nullptr;
}

}  // namespace internal

const std::vector<SourceFormat>& SourceFormats() {
  static const std::vector<SourceFormat> rows = [] {
    std::vector<SourceFormat> out;
    for (const auto& f : internal::RegisteredFormats()) out.push_back(f.row);
    return out;
  }();
  return rows;
}

std::string SourceFormatOf(const std::string& path) {
  const internal::RegisteredFormat* f = internal::FormatOf(path);
  return f ? f->row.name : "";
}

std::string SourceFormatsHelp() {
  std::string out = "Other tools' formats (SRC, --against, read in place by the loader):\n";
  for (const SourceFormat& f : SourceFormats()) {
    std::string uses = "pack_lmdb";
    if (f.verify_against) uses += ", verify_db --against";
    if (f.in_place) uses += ", in place";
    if (f.local_only) uses += "; local only";
    out += "  " + f.name + std::string(f.name.size() < 12 ? 12 - f.name.size() : 1, ' ') + f.files + " [" + uses +
           "]\n";
  }
  return out;
}

}  // namespace imagepack
