// Where a dataset's images come from, with their labels: an image tree
// (ImageFolder classes, or a flat folder with a labels file) or an existing
// database. pack_lmdb reads its inputs through these; verify_db --against
// lists the tree it compares with through them. Internal.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "imagepack/files.h"
#include "imagepack/status.h"
#include "imagepack/store.h"

namespace imagepack::internal {

struct SourceItem {
  std::string rel;        // tree: path below the root; database: the record's stored path
  int32_t label = -1;
  int64_t db_index = -1;  // database: the record's index
};

struct SourceLabels {
  std::string classes_file;  // class order, one name per line (ReadClassList)
  std::string labels_file;   // flat folder: lines "FILENAME LABEL" (class name or index)
  // A fixed class list (verify: the database's), instead of one read from
  // classes_file or found in the tree; an empty list is then allowed.
  const std::vector<std::string>* classes = nullptr;
};

struct DatasetSource {
  std::vector<std::string> classes;
  std::vector<SourceItem> items;         // labelled inputs: tree, sorted by path; database, record order
  std::vector<std::string> unlabelled;   // tree images without a label, sorted
  std::vector<FileError> errors;         // labels-file misses; unreadable database records
  std::vector<std::string> ignored;      // non-images; images outside any class, with why
  std::vector<std::string> problems;     // listing problems (loops, unreadable folders)
  std::unique_ptr<RecordSource> db;      // a database source: where its items are read
};

// The ImageFolder rule: the first folder of `rel` names its class. Empty for
// a file at the root.
std::string ClassFolderOf(const std::string& rel);

// Every image below `root`, labelled by `labels`: through the labels file
// when there is one, else by class folder. Classes come from labels.classes,
// else classes_file, else the labels file's names (sorted) or largest index,
// else the class folders (sorted).
Result<DatasetSource> OpenTreeSource(const std::string& root, const SourceLabels& labels);

// The records of an existing database (labels and paths as stored).
Result<DatasetSource> OpenDatabaseSource(const std::string& path);

// A regular file is a database; anything else a tree.
Result<DatasetSource> OpenSource(const std::string& path, const SourceLabels& labels);

// Reads a classes file: the first word of each non-empty line not starting
// with '#'. Duplicates are an error naming the line.
Result<std::vector<std::string>> ReadClassList(const std::string& path);

}  // namespace imagepack::internal
