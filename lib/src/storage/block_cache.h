// Blocks of a remote object, fetched with ranged GETs and kept in RAM and
// in a node-local folder (docs/OBJECT_STORAGE.md, "The cache"). Internal.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "imagepack/byte_source.h"
#include "imagepack/status.h"

namespace imagepack::internal {

// A block's bytes and what keeps them alive (a buffer, or a mapping of its
// cache file).
class BlockBytes {
 public:
  BlockBytes(const uint8_t* p, size_t n, std::shared_ptr<void> keep) : p_(p), n_(n), keep_(std::move(keep)) {}
  const uint8_t* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  const uint8_t* p_;
  size_t n_;
  std::shared_ptr<void> keep_;
};

// The node-local cache of one object: a folder named by the object's
// identity (endpoint, bucket, key, ETag, size) under the user's cache root
// (ROOT/imagepack-UID, 0700, checked as ours), one file per block. A block
// is written with its XXH3-64 under a temporary name and renamed:
// a reader sees a whole block or none, and serves none whose checksum
// fails. Downloads are claimed per block with an OFD lock on
// a byte of the folder's lock file, so the processes of a node fetch each
// block once (a process that dies drops its claims with its descriptor).
// The root is kept under its limit by removing the least recently used
// blocks (of every object) after writing.
class DiskCache {
 public:
  static Result<std::unique_ptr<DiskCache>> Open(const std::string& root, const std::string& identity,
                                                 uint64_t limit_bytes);
  ~DiskCache();
  // Block `b` (exactly `size` bytes), mapped from its file (no copy, and
  // no fresh memory to fault in); null when absent or of another size or
  // checksum (then removed).
  std::shared_ptr<const BlockBytes> Load(uint64_t b, uint64_t size) const;
  // Claims block b for download: true when this process holds the claim
  // (without waiting); false when another process does.
  bool TryClaim(uint64_t b) const;
  // Waits for another process's claim on b to end (it wrote the block, or
  // died).
  void WaitClaim(uint64_t b) const;
  void Release(uint64_t b) const;
  // Stores a block (under a temporary name, then renamed); errors are
  // ignored: the cache is an optimisation.
  void Store(uint64_t b, const uint8_t* data, uint64_t size) const;
  const std::string& dir() const { return dir_; }
  // The blocks of an object of `size` bytes in blocks of `block` bytes
  // that have no file of the right size here (checksums are checked when
  // a block is read).
  std::vector<uint64_t> Missing(uint64_t size, uint64_t block) const;

  // The version of an object last opened with this cache (its pin), by a
  // key naming the object (endpoint and name): JSON text written by
  // WritePin, read back for a run whose server is unreachable. The pins
  // live in ROOT/imagepack-UID/pins, one file per key.
  static Result<std::string> ReadPin(const std::string& root, const std::string& key);
  static Status WritePin(const std::string& root, const std::string& key, const std::string& text);

 private:
  DiskCache(std::string root, std::string dir, int lock_fd, uint64_t limit)
      : root_(std::move(root)), dir_(std::move(dir)), lock_fd_(lock_fd), limit_(limit) {}
  std::string BlockPath(uint64_t b) const;
  void Trim() const;
  std::string root_, dir_;
  int lock_fd_;
  uint64_t limit_;
  mutable std::atomic<uint64_t> total_{0};  // bytes under root_: the last scan + what this process wrote since
};

// The blocks of [0, end) of a source (a remote object, whole), block_bytes
// each (the last shorter).
// Get() returns a block, fetching it if needed (one fetch per block however
// many threads ask); Fetch() brings many in with GETs in flight together,
// adjacent missing blocks merged into one range. Up to ram_blocks are kept
// (least recently used dropped; a block in use stays valid for its holder).
class BlockCache {
 public:
  using Block = std::shared_ptr<const BlockBytes>;
  BlockCache(const ByteSource* bytes, uint64_t end, uint64_t block_bytes, size_t ram_blocks,
             std::unique_ptr<DiskCache> disk);
  Result<Block> Get(uint64_t b);
  // Returns the bytes fetched from the source.
  int64_t Fetch(std::vector<uint64_t> blocks);
  uint64_t block_bytes() const { return block_; }
  uint64_t BlockSize(uint64_t b) const { return std::min(block_, end_ - b * block_); }

 private:
  struct Entry {
    Block data;            // null while loading
    bool loading = false;
    std::list<uint64_t>::iterator lru;
  };
  // Fetches `blocks` (marked loading by this thread) from disk or the
  // source; publishes them. Returns the first error (blocks that failed are
  // unmarked, so a later Get tries again).
  // `first`, when given, receives blocks[0]'s data.
  Status Load(const std::vector<uint64_t>& blocks, int64_t* fetched, Block* first);
  // GETs `remote` (sorted here) in ranges of adjacent blocks; each block to
  // `done` and the disk cache.
  Status Download(std::vector<uint64_t> remote, int64_t* fetched, std::vector<std::pair<uint64_t, Block>>* done);
  void Publish(uint64_t b, Block data);
  // A block buffer: one let go earlier when there is one (its memory is
  // already faulted in: fresh memory costs a page fault per 4 KB), else new.
  // Not zero-filled (a memset of fresh memory was 15% of a first epoch).
  struct Buffer {
    std::unique_ptr<uint8_t[]> p;
    size_t cap = 0;
    uint8_t* Reserve(size_t n) {
      if (n > cap) {
        p.reset(new uint8_t[n]);
        cap = n;
      }
      return p.get();
    }
  };
  std::shared_ptr<Buffer> NewBuffer();
  struct Pool {
    std::mutex mu;
    static constexpr size_t kMaxBytes = size_t(128) << 20;  // kept for reuse, at most
    std::vector<Buffer*> free;
    size_t bytes = 0;
    ~Pool() {
      for (auto* v : free) delete v;
    }
  };
  std::shared_ptr<Pool> pool_ = std::make_shared<Pool>();

  const ByteSource* bytes_;
  const uint64_t end_, block_;
  const size_t ram_blocks_;
  std::unique_ptr<DiskCache> disk_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<uint64_t, Entry> blocks_;
  std::list<uint64_t> lru_;  // front: most recent; loaded blocks only
};

}  // namespace imagepack::internal
