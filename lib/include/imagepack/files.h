// File-system helpers: tree listing, whole-file reads, atomic writes.
#pragma once

#include <cstdint>
#include <memory>
#include <functional>
#include <string>
#include <vector>

#include "imagepack/status.h"

namespace imagepack {

// One input that could not be processed, with the reason (resize_imagenet
// and pack_lmdb report these; the tools print them and --errors lists them).
struct FileError {
  std::string path;  // relative to the source root
  std::string reason;
  // The inputs this entry stands for: 1, or more where one entry names
  // many skipped alike (a TFRecord file none of whose records has a label;
  // the records of a file past its budget of error entries).
  int64_t count = 1;
};

// The inputs `errors` stand for: the sum of their counts (summaries).
inline int64_t SkippedCount(const std::vector<FileError>& errors) {
  int64_t n = 0;
  for (const FileError& e : errors) n += e.count;
  return n;
}

// True for the extensions imagepack treats as images (case-insensitive):
// jpg jpeg jpe png gif bmp tif tiff webp ppm pgm pbm pnm. Content decides how
// a file is decoded; the extension only decides what is considered at all.
bool HasImageExtension(const std::string& path);

// `s` with ASCII letters in lower case (file names, extensions).
std::string LowerAscii(std::string s);

struct TreeListing {
  std::vector<std::string> images;   // relative paths, '/'-separated, sorted
  std::vector<std::string> ignored;  // other regular files, sorted
  std::vector<std::string> problems; // "path: reason" for unreadable dirs, loops
};

// Lists every regular file below `root` (any depth), following symlinks but
// never entering the same directory twice (loops are reported in problems).
// Temporary files this project writes (".*.ipk-tmp.*") are not listed.
Result<TreeListing> ListTree(const std::string& root);

// The one walk of a tree that ListTree and the bounded tree listing share:
// every regular file below `root` handed to `file` (its '/'-separated
// relative path, and whether its name is an image's) in sorted path order
// (a folder sorts as its name with '/': "a.b/x" before "a/x"), one
// folder's names in memory at a time. Symlinks are followed, no directory
// is entered twice, temporaries (".*.ipk-tmp.*") are skipped; unreadable
// folders, broken links and loops go to `problems`. The first error
// `file` returns stops the walk and is returned.
Status WalkTree(const std::string& root, const std::function<Status(std::string rel, bool image)>& file,
                std::vector<std::string>* problems);

// Reads a whole file (a regular file only: see OpenRegularFile), at most
// `max_bytes` of it (an error past that, naming the file). With `headroom`, the bytes start at that offset of the
// returned buffer (the first `headroom` bytes are left for the caller, e.g.
// a record header, saving a copy).
Result<std::vector<uint8_t>> ReadFile(const std::string& path, size_t headroom = 0,
                                      uint64_t max_bytes = uint64_t(2) << 30);

// Writes `data` to a temporary file beside `path`, then renames it over
// `path`: readers see the old file or the complete new one, never a part.
// Creates missing parent directories. With `sync`, fsyncs the file before
// renaming and the folder after, so the new file survives a power cut.
Status WriteFileAtomic(const std::string& path, const void* data, size_t size, bool sync = false);

// Temporaries, one scheme for every file and folder imagepack writes on
// its way to a final name (docs/RELIABILITY.md, "Temporaries"): the name
// carries its owner, "ipk-tmp.UID.HOST.BOOT.PID" (BOOT: this kernel boot
// and PID namespace), so that a temporary is removed by a later run only
// when its writer is provably dead: this user's (by name and by the
// file's owner), of this host and boot, and its PID gone. Another host's,
// another boot's or another user's temporaries are left alone.
//
// The temporary name used for `path` by this process:
// "<dir>/.<name>.ipk-tmp.UID.HOST.BOOT.PID".
std::string TempPathFor(const std::string& path);

// Deletes the temporaries below `root` whose writers are provably dead.
// Returns how many were removed.
int64_t RemoveStaleTemps(const std::string& root);

// Deletes only the temporaries of `path` itself (".NAME.ipk-tmp...."
// beside it) whose writers are provably dead.
int64_t RemoveStaleTempsFor(const std::string& path);

// fsyncs the directory holding `path` so a rename into it is durable.
Status SyncParentDir(const std::string& path);

}  // namespace imagepack
