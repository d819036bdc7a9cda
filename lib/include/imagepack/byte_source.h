// Where a container's bytes come from: a local file, an object in
// S3-compatible object storage, a file served over HTTP(S). In the spirit
// of leveldb's RandomAccessFile: read at an offset into a buffer, from any
// thread. Made by a Storage (storage.h); configuration of the remote ones:
// docs/OBJECT_STORAGE.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "imagepack/status.h"

namespace imagepack {

struct ByteRange {
  uint64_t offset = 0;
  uint64_t size = 0;
};

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // The size when opened; an object that changes later is an error on read.
  virtual uint64_t size() const = 0;
  // Reads exactly `n` bytes at `offset` into `out`. Thread-safe. Reading
  // past the end is an error naming the source.
  virtual Status ReadAt(uint64_t offset, uint64_t n, uint8_t* out) const = 0;
  // Reads several ranges; object storage keeps them in flight together
  // (up to its connection limit). outs[i] receives ranges[i].
  virtual Status ReadRanges(const std::vector<ByteRange>& ranges, const std::vector<uint8_t*>& outs) const;
  // Changes whenever the bytes do (file: device, inode, size, mtime, ctime;
  // object: ETag and size). For caches.
  virtual std::string identity() const = 0;
  // The path or URL, for messages. Never holds a credential.
  virtual std::string Describe() const = 0;
  virtual bool remote() const { return false; }
  // Requests made so far (object storage: GETs; files: 0). For statistics.
  virtual int64_t requests() const { return 0; }
  // Bytes received from the server so far (files: 0).
  virtual int64_t bytes_fetched() const { return 0; }

  // Hints about what will be read next (files: posix_fadvise; object
  // storage: none, its reads are explicit ranges).
  enum class Access { kNormal, kRandom, kSequential };
  virtual void Advise(Access access) const { (void)access; }
  // A file: the whole of it mapped read-only, made on the first call and
  // valid while this source lives (pages come from the page cache, shared
  // with every other reader). Object storage: NotSupported.
  virtual Result<const uint8_t*> Map() const;
  // Bytes of the source already in this machine's memory (a file: its
  // pages in the page cache, by mincore; an object: 0). For deciding
  // whether reads will be cheap.
  virtual uint64_t CachedBytes() const { return 0; }

  // Points *data at bytes [offset, offset + n): into the source's own
  // memory where it can (a cached block of a remote object, kept alive by
  // *hold), else read into *scratch. Valid while *hold and *scratch are
  // left alone. Thread-safe (each caller with its own hold and scratch).
  virtual Status View(uint64_t offset, uint64_t n, std::shared_ptr<const void>* hold,
                      std::vector<uint8_t>* scratch, const uint8_t** data) const;
  // Brings `ranges` into the source's caches with their reads in flight
  // together; returns the bytes fetched from the network. Failures are left
  // for the later read to report. Files (and uncached sources): nothing.
  virtual int64_t Prefetch(const std::vector<ByteRange>& ranges) const {
    (void)ranges;
    return 0;
  }
};

// The bytes of `path`: OpenStorage(path) (storage.h), then its Open.
Result<std::unique_ptr<ByteSource>> OpenByteSource(const std::string& path);

}  // namespace imagepack
