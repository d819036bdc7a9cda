// One copy of a database file per machine, in shared memory (OpenOptions::
// in_ram). Internal.
#pragma once

#include <memory>
#include <string>

#include "imagepack/status.h"

namespace imagepack::internal {

// This user's folder for shared copies under `root`: "imagepack-UID",
// made with mode 0700 and used only while it is a folder of this user
// that no one else may enter. When that name is taken by someone else (or
// is not private), another folder of ours, "imagepack-UID-XXXXXX" beside
// it, is found or made, with a warning naming the culprit: a planted
// folder neither poisons nor blocks a run. `fd` is opened O_DIRECTORY.
struct PrivateDir {
  int fd = -1;
  std::string path;
};
Result<PrivateDir> OpenPrivateShmDir(const std::string& root);

// A held copy: `path` stays while this object lives (a shared flock on it
// marks it in use); the destructor removes the file when no other holder
// is left.
class SharedCopy {
 public:
  ~SharedCopy();
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // Locks the copy's pages in RAM (mlock) for as long as this object lives.
  Status Lock();

  // Holds the copy of `source` in this user's private folder under `dir`
  // (empty: $IMAGEPACK_SHM_DIR or /dev/shm), making it first if no process
  // has. The copy is named by the source's device, inode, size,
  // modification and change times, and used only when it is a regular file
  // of this user of the source's size. Errors name the sizes when the copy
  // does not fit.
  static Result<std::unique_ptr<SharedCopy>> Acquire(const std::string& source, const std::string& dir);

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
