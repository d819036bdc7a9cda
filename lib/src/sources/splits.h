// Splits as the Hugging Face Hub names them, for every format's file list
// (a folder's, a pattern's): a folder that holds train and test files is
// refused unless a split is given, never merged in silence. Internal.
//
// The conventions followed are those of huggingface/datasets
// (src/datasets/data_files.py, SPLIT_PATTERN_SHARDED and SPLIT_KEYWORDS):
//   NAME-DDDDD-of-DDDDD...   a shard of split NAME (any name: the Hub's
//                            "train-00000-of-00004.parquet", TF-slim's
//                            "validation-00000-of-00128")
//   a keyword as a word of the file's name or of its folder's, words
//   separated by "-", "_", ".", " " or digits:
//     train, training                      -> train
//     validation, valid, dev, val          -> validation
//     test, testing, eval, evaluation      -> test
// Not followed: a dataset card's `configs:` block (README.md), and split
// words deeper than the file's own folder.
#pragma once

#include <string>
#include <vector>

#include "imagepack/status.h"

namespace imagepack::internal {

// The split `path` belongs to, or "" when its name says none.
std::string SplitOf(const std::string& path);

// `split` as the files name it: an alias (val, dev, training, ...) made
// the Hub's name (validation, train, test); any other name as it is.
std::string CanonicalSplit(const std::string& split);

// The files of `split` among `files` (in order); with no split given, all
// of them, unless they were found (a folder's, a glob's: `found`) and
// hold several splits: then an error naming `src`, each split with its
// file count, and the option that picks one. Files named one by one (a
// brace pattern, a "::" list) are the user's choice, never refused.
Result<std::vector<std::string>> SelectSplit(std::vector<std::string> files, const std::string& split,
                                             const std::string& src, bool found);

// Whether `src` finds its files (a folder, a prefix, a glob) rather than
// naming each one (a file, a brace pattern, a "::" list).
bool FindsFiles(const std::string& src);

}  // namespace imagepack::internal
