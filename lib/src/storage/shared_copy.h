// One copy of a database file per machine, in shared memory (OpenOptions::
// in_ram), and the private per-user folder it shares with the node-local
// block cache. Internal.
#pragma once

#include <memory>
#include <string>

#include "imagepack/byte_source.h"
#include "imagepack/status.h"

namespace imagepack::internal {

// This user's folder under `root`: "imagepack-UID", made with mode 0700
// and used only while it is a folder of this user that no one else may
// enter. When that name is taken by someone else (or is not private),
// another folder of ours, "imagepack-UID-XXXXXX" beside it, is found or
// made, with a warning (status.h, Warn) naming the culprit: a planted
// folder neither poisons nor blocks a run. `fd` is opened O_DIRECTORY.
// `what` begins messages ("in_ram", "cache").
struct PrivateDir {
  int fd = -1;
  std::string path;
};
Result<PrivateDir> OpenPrivateUserDir(const std::string& root, const std::string& what);

// A held copy: `path` stays while this object lives (a shared flock on it
// marks it in use). The last holder's destructor removes it, without
// waiting for anything: it removes the name only when its exclusive flock
// on the copy succeeds at once (no other holder), and a process that
// opened the name just before finds its copy unlinked and looks again.
class SharedCopy {
 public:
  ~SharedCopy();
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // Locks the copy's pages in RAM (mlock) for as long as this object lives.
  Status Lock();

  // Holds the copy of `source` in this user's private folder under
  // `shm_dir`, making it first if no process has (one copy is made at a
  // time per folder; a process waits for another's copy here, never in a
  // destructor). The copy is named by the source's identity (a file:
  // device, inode, size, modification and change times; a remote object:
  // its server, name, ETag and size) and used only when it is a regular
  // file of this user of the source's size. Errors name the sizes when the
  // copy does not fit.
  static Result<std::unique_ptr<SharedCopy>> Acquire(const ByteSource& source, const std::string& shm_dir);

  // Removes the copy's name with a warning saying `why` (it proved not to
  // be the source's: the caller found other metadata in it), so that the
  // next Acquire copies again.
  void Discard(const std::string& why);

 private:
  SharedCopy() = default;
  std::string path_, lock_path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  void* locked_ = nullptr;  // the mlocked mapping, if any
};

}  // namespace imagepack::internal
