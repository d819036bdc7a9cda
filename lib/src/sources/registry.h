// The registry of other tools' formats (imagepack/formats.h) and the one
// chooser that reads it: per format its row, what its file names are, and
// its opener. pack (OpenSource), verify --against and the loader's
// in-place reading all ask Choose. Internal.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "imagepack/byte_source.h"
#include "imagepack/formats.h"
#include "imagepack/storage.h"
#include "sources/sources.h"

namespace imagepack::internal {

// What one file name (a base name) is to a format: one of its files, a
// file that may lie beside them (class lists, indexes, a README), a file
// that rules the format out, or a name that says nothing (its bytes may).
enum class NameIs { kMine, kSide, kForeign, kUnknown };

// How strongly a path looks like a format. The chooser takes the
// strongest: a name outranks bytes, bytes outrank "any pattern"; so the
// rows' order does not matter, and two rows never tie (test_format_registry
// holds each row's names against the others').
enum class Likeness { kNo = 0, kAnyPattern = 1, kBytes = 2, kName = 3 };

// A path as the chooser sees it, looked at once: where it lies and what
// it holds.
struct PathShape {
  enum class Kind { kMissing, kPattern, kFile, kFolder, kRemoteObject, kRemotePrefix };
  std::string path;
  std::shared_ptr<Storage> storage;
  bool local = true;
  Kind kind = Kind::kMissing;
  // A pattern: its expansion; a folder: its entries (paths, sorted,
  // hidden ones left out); a file or remote object: the path.
  std::vector<std::string> files;
  bool subfolders = false;            // a folder holding a (visible) folder
  std::vector<std::string> folders;   // their names
};

struct RegisteredFormat {
  SourceFormat row;
  NameIs (*name_is)(const std::string& base_name);
  // A file's first bytes, asked of files whose names say nothing (null:
  // the format is known by its names alone).
  bool (*bytes_say)(const ByteSource& bytes);
  bool any_pattern;  // any brace pattern may be this format's (the weakest match)
  // A rule of the format's own instead of its names (null: the names').
  Likeness (*looks)(const PathShape& shape);
  SourceOpener open;
};

const std::vector<RegisteredFormat>& RegisteredFormats();

// The rows' rules, each beside its format's opener (sources.h).
NameIs ParquetNameIs(const std::string& base_name);
NameIs TfRecordNameIs(const std::string& base_name);
bool TfRecordBytesSay(const ByteSource& bytes);
NameIs WebDatasetNameIs(const std::string& base_name);
Likeness PickledLmdbLooks(const PathShape& shape);

// Which rows are asked: only those with `capability` (&SourceFormat::
// in_place, ...); with `remote_names_only`, a remote object (not a
// pattern) only by its name: no request is made for it.
struct Ask {
  bool SourceFormat::*capability = nullptr;
  bool remote_names_only = false;
};

// What a path is: the format it looks most like (null: none; local_only
// rows are asked of local paths only) and its shape, for the caller's
// own fallback (a database, a manifest, a tree). An error only when the
// path's storage cannot be opened.
//
// A folder laid out as the Hub lays out a dataset repository is read
// where its files are, when a format takes them there: the `data/`
// folder beside README.md, split folders (`data/train/`, `data/test/`:
// read as the pattern FOLDER/*/*, so that --split picks one), and the
// one configuration folder of the Hub's parquet conversion
// (`default/train/0000.parquet`). The shape's path is then that folder
// or pattern: callers open `shape.path`, not the path given.
struct Choice {
  const RegisteredFormat* format = nullptr;
  PathShape shape;
};
Result<Choice> Choose(const std::string& path, Ask ask = {});

// How strongly `shape` looks like `format` (the chooser's rule, one row).
Likeness LikenessOf(const RegisteredFormat& format, const PathShape& shape, bool remote_names_only = false);

// The base name of a path or URL (after its last '/').
std::string BaseNameOf(const std::string& path);

}  // namespace imagepack::internal
