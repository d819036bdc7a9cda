// Descriptor-level file I/O: regular-file opens, temporaries created
// without following links, destination locks, whole reads and writes.
// Internal: public headers hold no descriptors (byte_source.h reads files).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>

#include "imagepack/byte_source.h"
#include "imagepack/files.h"
#include "imagepack/status.h"

namespace imagepack {

// Opens `path` read-only if it is a regular file; a FIFO, device, socket
// or directory is refused by name before any byte is read (opened with
// O_NONBLOCK, so a FIFO cannot block the open itself). The caller closes
// the descriptor.
Result<int> OpenRegularFile(const std::string& path);

// The owner a temporary's name carries (files.h, TempPathFor):
// "ipk-tmp.UID.HOST.BOOT.PID" and an optional ".SUFFIX".
struct TempOwner {
  uid_t uid = 0;
  std::string host, boot;
  pid_t pid = 0;
};
// This process's "ipk-tmp.UID.HOST.BOOT.PID".
std::string TempTag();
// The owner named in `name` (a file or folder name holding ".ipk-tmp.").
bool ParseTempOwner(const std::string& name, TempOwner* out);
// True when the temporary `name`, a file or folder owned by `file_owner`,
// was made by a process that is provably dead: this user's, this host's
// and boot's, and no process has its PID.
bool IsProvablyDeadTemp(const std::string& name, uid_t file_owner);

// A new private folder (0700) under `root`, named
// "imagepack-WHAT.ipk-tmp.UID.HOST.BOOT.PID.XXXXXX"; such folders of
// provably dead processes are removed first.
Result<std::string> MakeTempDir(const std::string& root, const std::string& what);

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

// A local regular file's bytes (OpenRegularFile, then AdoptFileSource).
Result<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path);

// A byte source over `fd` (taken: the source closes it), named `path` in
// messages and identified by fstat() now.
Result<std::unique_ptr<ByteSource>> AdoptFileSource(int fd, const std::string& path);

// Copies all of `src` into `fd` (named `dst` in errors) at the same
// offsets, in chunks of `chunk` bytes, from `workers` threads (each a read
// in flight: ranged GETs for an object, preads for a file).
Status CopyToFile(const ByteSource& src, int fd, const std::string& dst, uint64_t chunk, int workers = 8);

}  // namespace imagepack
