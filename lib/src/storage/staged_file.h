// A new file written with O_DIRECT through aligned staging chunks. Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "imagepack/status.h"

namespace imagepack::internal {

struct StagedFileOptions {
  size_t chunk_bytes = 8 << 20;  // a multiple of kDirectAlign
  int io_threads = 2;            // chunks written at once (the device's queue depth)
  int max_queued = 4;            // complete chunks waiting for a writer thread
};

// The alignment O_DIRECT needs of buffer addresses, file offsets and
// lengths on any Linux block device (logical blocks are 512 B or 4 KB).
constexpr size_t kDirectAlign = 4096;

// True when O_DIRECT is worth asking for on the file system holding `fd`:
// not on tmpfs or ramfs, whose pages are the file (Linux >= 6.6 accepts
// O_DIRECT on tmpfs but copies through the page cache anyway, slower).
bool DirectIoPays(int fd);

// Writes a file front to back without the page cache. Bytes are put into
// 4 KB-aligned staging chunks; a chunk whose every byte has been put is
// written by a background thread straight from those chunks to the device
// (DMA: no copy into the page cache, and a 100 GB pack does not evict the
// page cache of a shared machine). Memory: the chunks being filled, plus at
// most max_queued + io_threads complete ones.
//
// Contract: every byte of [0, size) is put exactly once (padding included,
// with PutZeros), from any threads, in any order; Put() blocks while
// max_queued complete chunks wait for the device (backpressure). The first
// failure is sticky: later calls return it. Close() writes the last,
// partial chunk and truncates the file to `size`.
class StagedFile {
 public:
  // Opens `path` (which the caller created, empty) a second time with
  // O_DIRECT. `buffered_fd` is the caller's ordinary descriptor of the same
  // file, used if a direct write comes back short. NotSupported when the
  // file system refuses O_DIRECT.
  static Result<std::unique_ptr<StagedFile>> Open(const std::string& path, int buffered_fd,
                                                  const StagedFileOptions& opts = {});
  // Stops the writer threads; chunks not yet written are dropped (the
  // caller removes the file).
  ~StagedFile();
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;

  Status Put(uint64_t at, const void* data, size_t size);
  Status PutZeros(uint64_t at, size_t size);
  // Waits for the complete chunks, writes the last partial one, truncates
  // to `size`. Fails, naming the byte range, if some byte below `size` was
  // never put. REQUIRES: no Put() running or to come.
  Status Close(uint64_t size);
  Status status() const;

 private:
  struct Impl;
  explicit StagedFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace imagepack::internal
