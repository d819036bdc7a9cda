// File-system helpers: tree listing, whole-file reads, atomic writes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "imagepack/status.h"

namespace imagepack {

// One input that could not be processed, with the reason (resize_imagenet
// and pack_lmdb report these; the tools print them and --errors lists them).
struct FileError {
  std::string path;  // relative to the source root
  std::string reason;
};

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

// Opens `path` read-only if it is a regular file; a FIFO, device, socket
// or directory is refused by name before any byte is read (opened with
// O_NONBLOCK, so a FIFO cannot block the open itself). The caller closes
// the descriptor.
Result<int> OpenRegularFile(const std::string& path);

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

// The temporary name used for `path` by this process:
// "<dir>/.<name>.ipk-tmp.<host>.<pid>".
std::string TempPathFor(const std::string& path);

// A new temporary file for `path`, opened O_RDWR: TempPathFor's name, or
// that name with ".1", ".2", ... while a file of that name exists (planted
// by someone else, or a dead run's that is not ours to remove). Created
// with O_CREAT | O_EXCL | O_NOFOLLOW, so it never opens, truncates or
// follows a file or link another user put there first.
struct TempFile {
  int fd = -1;
  std::string path;
};
Result<TempFile> CreateTempFor(const std::string& path, mode_t mode = 0644);

// Deletes temporary files below `root` left by dead processes of this host.
// Returns how many were removed.
int64_t RemoveStaleTemps(const std::string& root);

// Deletes only the temporaries of `path` itself (".NAME.ipk-tmp.HOST.PID"
// beside it) left by dead processes of this host.
int64_t RemoveStaleTempsFor(const std::string& path);

// An exclusive advisory lock (flock) on ".NAME.ipk-lock" beside `path`,
// held for the object's lifetime, so two writers never share a destination.
// Never waits: a held lock is an error naming the lock file and its owner
// (a lock another user planted in a shared folder fails the run at once,
// naming them, instead of blocking it). The lock file is opened without
// following links.
class PathLock {
 public:
  static Result<std::unique_ptr<PathLock>> Acquire(const std::string& path);
  ~PathLock();
  PathLock(const PathLock&) = delete;
  PathLock& operator=(const PathLock&) = delete;

 private:
  PathLock(int fd, std::string lock_path) : fd_(fd), lock_path_(std::move(lock_path)) {}
  int fd_;
  std::string lock_path_;
};

// write(2)s all of `data` to `fd`, retrying short writes and EINTR. Errors
// name `path`.
Status WriteAll(int fd, const void* data, size_t size, const std::string& path);

// pwrite(2)s all of `data` at `offset`, retrying short writes and EINTR.
// Errors name `path`.
Status PwriteAll(int fd, const void* data, size_t size, uint64_t offset, const std::string& path);

// pread(2)s `size` bytes at `offset`, retrying short reads and EINTR.
// Returns the bytes read (fewer than `size` only at the end of the file),
// or -1 with errno set.
ssize_t PreadFull(int fd, void* data, size_t size, uint64_t offset);

// fsyncs the directory holding `path` so a rename into it is durable.
Status SyncParentDir(const std::string& path);

}  // namespace imagepack
