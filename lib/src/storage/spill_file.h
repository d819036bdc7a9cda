// An unnamed scratch file for what a pass over any number of records sets
// aside instead of holding it in memory (a blob's index entries while it is
// written, pack's items while they are sorted or shuffled). Internal.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "imagepack/status.h"

namespace imagepack::internal {

// An O_TMPFILE in folder `dir`, or where the file system has none a
// private name unlinked at once, so nothing is left behind however the
// process ends. The caller closes the descriptor.
Result<int> CreateScratchFile(const std::string& dir);

// Bytes appended through a buffer, then read back at any offset. One
// writer thread; reads are thread-safe once Flush() has returned.
class SpillFile {
 public:
  static Result<std::unique_ptr<SpillFile>> Create(const std::string& dir, size_t buffer_bytes = size_t(1) << 20);
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  Status Append(const void* data, size_t size);
  Status Flush();
  uint64_t size() const { return written_ + buf_.size(); }
  // Exactly `size` bytes at `offset` of what was appended and flushed.
  Status ReadAt(uint64_t offset, size_t size, void* out) const;

 private:
  SpillFile(int fd, std::string dir, size_t buffer_bytes);
  int fd_;
  std::string dir_;  // for messages
  size_t cap_;
  std::vector<uint8_t> buf_;
  uint64_t written_ = 0;
};

}  // namespace imagepack::internal
