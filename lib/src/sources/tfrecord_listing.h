// A set of TFRecord files as it is listed (tfrecord_source.cc), recognised
// (tfrecord_sniff.cc) and labelled (tfrecord_labels.cc): shared by those
// three files only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "formats/tfrecord.h"
#include "sources/sources.h"

namespace imagepack::internal {

// What one record gave, in item order: small, as a file may hold
// millions (its place is the file's index and the record's number, its
// message built only when it has one).
struct TfRecordInfo {
  int64_t label = -1;          // 0-based, when `labelled`; within int32
  bool labelled = false;
  bool has_boxes = false;
  int32_t file = 0;            // in TfListing::files
  int64_t record = 0;
  std::vector<Box> boxes;      // in pixels; labels 0-based as written
};

// A file's error entries: the first limits::kTfFileErrors listed, the rest
// counted into one entry (FileError::count) naming the first of them.
struct TfFileErrors {
  size_t listed = 0;
  int64_t folded = 0;
  std::string first;
};

struct TfListing {
  std::vector<std::string> files;
  std::vector<TfFileErrors> file_errors;       // per file
  std::vector<TfRecordInfo> infos;
  std::map<std::string, int64_t> unused;       // feature keys not packed -> records (the first 64 keys)
  int64_t unused_other = 0;                    // records with keys past those
  int label_base = 1;                          // image/class/label's first class
  // The names the records give their classes (synset, else text), by
  // label; `names_clash` says why they are not used, when they are not.
  std::map<int64_t, std::string> names;
  std::string names_clash;

  std::string Where(const TfRecordInfo& r) const { return TfRecordWhere(files[size_t(r.file)], r.record); }
};

// A skipped record of file `file` into s.errors, within the file's budget
// of entries (limits::kTfFileErrors).
void AddTfError(TfListing& l, DatasetSource& s, int32_t file, int64_t record, std::string reason);

// The counted rest of each file's errors, one entry a file.
void FoldTfErrors(TfListing& l, DatasetSource& s);

// The classes beside the files: TF-slim's labels.txt (which also says where
// image/class/label starts), else TFDS's label.labels.txt or a
// classes.txt (one name per line, in label order). Empty when none.
Status BesideTfClasses(Storage& storage, const std::string& dir, std::vector<std::string>* names, int* base);

// The class list and each item's label (sources.h, OpenTfRecordSource);
// items whose label cannot be placed go to errors. A file none of whose
// records has a label is one entry (counting its records) naming
// --no-class, not one a record.
Status ResolveTfLabels(const std::vector<std::string>& beside, TfListing& l, const SourceOptions& opts,
                       DatasetSource& s);

}  // namespace imagepack::internal
