// The formats of other tools imagepack reads, in one registry: pack_lmdb
// imports them, verify_db --against checks an import against them, and
// the loader (both trainers, Python) reads them in place. A format is its
// source file in lib/src/sources/ plus one row of the registry
// (sources/registry.cc); the tools' --help prints the rows and a test
// holds docs/USAGE.md's table to them (docs/ARCHITECTURE.md, "Adding an
// import format").
#pragma once

#include <string>
#include <vector>

namespace imagepack {

struct SourceFormat {
  std::string name;   // "parquet", "tfrecord", ...
  std::string files;  // what SRC may name, one line
  bool in_place = false;        // the loader reads it where it lies
  bool verify_against = false;  // verify_db --against takes it
  bool local_only = false;      // a local path only (not s3://, https://)
};

// The rows, in no order that matters: a path is the format it looks most
// like (by its names, then its bytes, then any pattern).
const std::vector<SourceFormat>& SourceFormats();

// The name of the format `path` names (a file, a brace pattern, a
// folder), or "" when it names none of them (a database, a tree, a
// manifest).
std::string SourceFormatOf(const std::string& path);

// True when `text` names files by a pattern rather than one path: a
// brace pattern ("train-{0000..0099}.tar"), a "::" list, or a shell glob
// ("data/train-*.parquet", "**/*.tar"). Every tool, both trainers and
// the Python package ask this (code: sources/patterns.cc).
bool IsFilePattern(const std::string& text);

// Why a validation set is not apart from its training data: "" when the
// files `val` (paths, read with `val_split`) reads share none with those
// of `data` (read with `data_split`), else a message naming the count
// and one shared file. Files are those the readers find (a folder's, a
// glob's, after the split; a database or a tree folder as itself, a
// tree holding the other's files included). Both trainers ask it before
// anything is read; paths that cannot be listed are left to the readers.
std::string SharedFiles(const std::vector<std::string>& data, const std::string& data_split,
                        const std::vector<std::string>& val, const std::string& val_split);

// The rows as the tools print them after their options (--help).
std::string SourceFormatsHelp();

}  // namespace imagepack
