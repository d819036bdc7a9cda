// One copy of a database file per machine, in shared memory (OpenOptions::
// in_ram). Internal.
#pragma once

#include <memory>
#include <string>

#include "imagepack/status.h"

namespace imagepack::internal {

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

  // Maps the copy of `source` in `dir` (empty: $IMAGEPACK_SHM_DIR or
  // /dev/shm), making it first if no process has. Errors name the sizes
  // when the copy does not fit.
  static Result<std::unique_ptr<SharedCopy>> Acquire(const std::string& source, const std::string& dir);

 private:
  SharedCopy() = default;
  std::string path_, lock_path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  void* locked_ = nullptr;  // the mlocked mapping, if any
};

}  // namespace imagepack::internal
