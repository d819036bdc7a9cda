// A blob's record index read where it lies (docs/FORMAT.md, "Blob
// container"): the (offset, length) entries of the file, read through its
// mapping or with pread when a record is, never copied whole, so every
// process on a machine reads the same pages (the page cache, or the shared
// in-RAM copy) and a process's own memory does not grow with the records.
// Internal.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "imagepack/byte_source.h"
#include "imagepack/meta.h"
#include "imagepack/status.h"

namespace imagepack::internal {

// A blob's header, chunk table and metadata, checked; the index itself
// is not read (BlobIndex reads it).
struct BlobHead {
  DatasetMeta meta;
  uint32_t layout = 1;        // the header's blob layout version: 1 or 2
  uint64_t count = 0;
  uint64_t index_offset = 0;  // = the end of the record area
  uint64_t index_sum = 0;     // layout 1: XXH3-64 of the whole index
  int chunk_shift = 0;        // layout 2: 2^chunk_shift entries per checksummed chunk
  std::vector<uint64_t> chunk_sums;  // layout 2: XXH3-64 of each chunk's entries
};

// Blob layout 2's chunk size by default: 65,536 entries (1 MiB of index).
constexpr int kBlobChunkShift = 16;
// The smallest count pack writes in layout 2 by default: a smaller index
// is checked whole at open in a few milliseconds, and stays readable by
// builds that know layout 1 only.
constexpr uint64_t kBlobLayout2From = uint64_t(1) << 22;

// `read(offset, size, &p)` makes p point at those bytes of the file
// (valid until the next call). Every offset is checked against the file.
Status ParseBlobHead(const std::string& path, uint64_t file_size,
                     const std::function<Status(uint64_t, uint64_t, const uint8_t**)>& read, BlobHead* out);

// The chunks of the index (layout 1: one, the whole index) and the
// entries they hold.
uint64_t IndexChunks(const BlobHead& head);
void ChunkRange(const BlobHead& head, uint64_t chunk, uint64_t* first, uint64_t* count);
// Checks chunk `c`, whose entries are at `entries`: its checksum, and every
// entry inside the record area. The error names the chunk's records (not
// the file).
Status CheckIndexChunk(const BlobHead& head, uint64_t chunk, const uint8_t* entries);

class BlobIndex {
 public:
  // The index of the blob `bytes` (kept by the caller while this lives):
  // read in `mapped` (the file's mapping) or, when that is null, with
  // ReadAt (no page of the file mapped: a file that shrinks under a reader
  // gives errors, not a SIGBUS). Layout 1 is checked whole here (its one
  // checksum), layout 2 chunk by chunk as entries are first used.
  static Result<std::unique_ptr<BlobIndex>> Open(std::string path, BlobHead head, const ByteSource* bytes,
                                                 const uint8_t* mapped);

  const BlobHead& head() const { return head_; }
  uint64_t size() const { return head_.count; }
  // Record i's place in the file. Corruption when its chunk fails its
  // checksum (checked once per process) or the entry lies outside the
  // record area; an error reading the file. Thread-safe. REQUIRES: i <
  // size().
  Status Entry(uint64_t i, uint64_t* offset, uint64_t* length) const {
    uint8_t e[16];
    IMAGEPACK_RETURN_IF_ERROR(Entries(i, 1, e));
    __builtin_memcpy(offset, e, 8);
    __builtin_memcpy(length, e + 8, 8);
    return Status::Ok();
  }
  // Entries first .. first + n - 1 into out (16 bytes each), their chunks
  // checked. REQUIRES: first + n <= size().
  Status Entries(uint64_t first, uint64_t n, uint8_t* out) const;
  // Checks every chunk not checked yet; each failure goes to `report`
  // (without the file's name).
  void CheckAll(const std::function<void(const std::string&)>& report) const;

 private:
  BlobIndex(std::string path, BlobHead head, const ByteSource* bytes, const uint8_t* mapped);
  bool Checked(uint64_t chunk) const {
    return checked_[chunk / 64].load(std::memory_order_acquire) >> (chunk % 64) & 1;
  }
  // Checks chunk `chunk`; `named`: its error names the file.
  Status CheckChunk(uint64_t chunk, bool named) const;

  std::string path_;
  BlobHead head_;
  const ByteSource* bytes_;
  const uint8_t* mapped_;  // the index's first entry in the mapping, or null
  std::unique_ptr<std::atomic<uint64_t>[]> checked_;  // a bit per chunk
};

}  // namespace imagepack::internal
