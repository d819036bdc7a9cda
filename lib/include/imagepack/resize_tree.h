// Resizing a whole image tree (the library side of `resize_imagenet`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "imagepack/files.h"
#include "imagepack/prepare.h"
#include "imagepack/progress.h"
#include "imagepack/shard.h"
#include "imagepack/status.h"

namespace imagepack {

struct ResizeTreeOptions {
  std::string src;
  std::string dst;
  PrepareOptions prepare;
  Shard shard;
  int threads = 0;          // 0: all cores
  bool overwrite = false;   // redo outputs that already exist
  // A tree of label maps (masks): each PNG resized by nearest neighbour
  // under the same size rule as the images (so a mask keeps its image's
  // geometry), written as an 8-bit gray PNG under the same name with the
  // extension .png. One that needs no resize is copied as it is.
  bool masks = false;
  CancelFlag* cancel = nullptr;
  Progress* progress = nullptr;
};

struct ResizeTreeSummary {
  int64_t files = 0;             // images in this shard
  int64_t written = 0;           // outputs written by this run
  int64_t passed_through = 0;    // of which copied byte for byte
  int64_t already_done = 0;      // outputs present from an earlier run
  int64_t stale_temps_removed = 0;
  std::vector<FileError> errors; // inputs skipped, sorted by path
  std::vector<std::string> ignored;   // non-image files (whole tree)
  std::vector<std::string> problems;  // listing problems (loops, unreadable dirs)
  int64_t bytes_in = 0;
  int64_t bytes_out = 0;
  double seconds = 0;
  bool cancelled = false;
  // Set when an output could not be written (disk full, read-only, ...):
  // the run stopped there. Outputs already written are complete.
  std::string destination_error;
};

// Mirrors every image below opts.src into opts.dst at the same relative path
// and file name, as a JPEG prepared by PrepareJpeg. Each output is written to
// a temporary name and renamed, so an interrupted run leaves only complete
// files; a re-run skips outputs that exist (unless overwrite).
// Bad inputs do not stop the run: they are listed in summary.errors. A
// destination that cannot be written stops it (summary.destination_error).
// A non-Ok Status means the run could not proceed at all (src missing or
// holding no image, dst not writable); dst is then not created.
Result<ResizeTreeSummary> ResizeTree(const ResizeTreeOptions& opts);

}  // namespace imagepack
