// Proving a packed database complete and intact (the library side of
// `verify_db`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "imagepack/progress.h"
#include "imagepack/store.h"

namespace imagepack {

struct VerifyOptions {
  std::vector<std::string> paths;  // one container, or the shards of one dataset
  bool decode = false;             // decode every JPEG fully, check its size
  std::string against;
  std::string split;  // --against another tool's files: the split pack read (SourceOptions::split)             // a source tree (or a manifest file) that must match exactly
  // --against a folder: the labels file the pack was given ("FILENAME
  // LABEL" lines): each image's label is checked against it (a flat
  // folder's labels cannot be checked otherwise).
  std::string labels_file;
  // The classes file the pack was given: the database's class list must be
  // it, and --against's images in folders it does not list are not
  // expected in the database (pack skipped them).
  std::string classes_file;
  bool stats = false;              // class histogram, sizes, pixel mean/std
  bool fast_dct = false;           // --decode/--stats: the fast IDCT instead of the accurate (Pillow's)
  int threads = 0;
  Progress* progress = nullptr;
  CancelFlag* cancel = nullptr;
};

// One thing wrong, located as exactly as possible.
struct VerifyProblem {
  std::string where;   // "shard.lmdb record 0000001234" or the path
  std::string path;    // source path stored in the record, when known
  std::string reason;
};

struct VerifyReport {
  int64_t records = 0;        // records the metadata promises (all shards)
  int64_t checked = 0;        // records read and checked
  int64_t bytes = 0;          // record bytes checksummed
  std::vector<VerifyProblem> problems;  // sorted by where
  int64_t problems_total = 0;           // problems, including any not kept
  bool cancelled = false;
  double seconds = 0;
  // --against: what could not be checked or was not expected, said in
  // the summary ("labels not checked: DIR is a flat folder; give --labels
  // FILE"); empty when everything was checked.
  std::vector<std::string> notes;
  // --stats
  std::vector<std::string> classes;
  std::vector<int64_t> class_counts;
  int64_t min_width = 0, max_width = 0, min_height = 0, max_height = 0;
  double mean_width = 0, mean_height = 0;
  std::vector<int64_t> payload_percentiles;  // bytes at 0, 10, 50, 90, 100 %
  std::vector<double> mean, std;             // recomputed from decoded pixels
  bool ok() const { return problems_total == 0 && !cancelled; }
};

// Checks: metadata well formed; records exactly 0..count-1 (LMDB keys);
// every record's header, length and checksum; encoding and channels agree
// with the metadata; labels within the class count; label_counts agree;
// with decode, every JPEG decodes completely to its recorded size; with
// against, every image of the tree is present exactly once with its label.
// Never crashes on damaged input: every problem is reported and counted.
// A non-Ok Status is returned only for bad options.
Result<VerifyReport> VerifyDatabases(const VerifyOptions& opts);

}  // namespace imagepack
