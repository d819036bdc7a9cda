// A pack's items set aside on disk instead of held in memory, so that a
// source of any number of inputs packs in bounded memory: appended in
// order and read back in that order (ItemSpill), or appended with a key
// and read back in key order (KeyedSpill: the shuffle, one bucket of keys
// in memory at a time). Scratch files (spill_file.h) in the folder given,
// gone when the object is. Internal.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "imagepack/status.h"
#include "sources/sources.h"
#include "storage/spill_file.h"

namespace imagepack::internal {

// An item's bytes (every member, fields included), appended to `out`.
void EncodeItem(const SourceItem& item, std::string* out);
// Parses one item from [p, end); false when the bytes are not one.
bool DecodeItem(const uint8_t* p, const uint8_t* end, SourceItem* item);

class ItemSpill {
 public:
  static Result<std::unique_ptr<ItemSpill>> Create(const std::string& dir);
  Status Add(const SourceItem& item);
  // After the last Add, before reading.
  Status Finish();
  int64_t size() const { return count_; }
  uint64_t bytes() const { return file_->size(); }

  // Reads the items from the first, in order. Several readers may read
  // one finished spill, each from its own thread.
  class Reader {
   public:
    explicit Reader(const ItemSpill* spill) : spill_(spill) {}
    // The next item: true, false at the end, or the error of a short read.
    Result<bool> Next(SourceItem* item);

   private:
    const ItemSpill* spill_;
    uint64_t at_ = 0;  // the file offset of buf_'s first byte
    std::vector<uint8_t> buf_;
    size_t used_ = 0;
  };
  Reader Read() const { return Reader(this); }

 private:
  explicit ItemSpill(std::unique_ptr<SpillFile> file) : file_(std::move(file)) {}
  std::unique_ptr<SpillFile> file_;
  std::string scratch_;
  int64_t count_ = 0;
};

// Items with keys in [0, key_count), read back by ascending key (ties in
// the order added). Keys are spread over buckets of consecutive key
// ranges, about `bucket_bytes` of items each (from `expected_bytes`, the
// items' total); Next() reads one bucket into memory at a time and sorts it.
class KeyedSpill {
 public:
  static Result<std::unique_ptr<KeyedSpill>> Create(const std::string& dir, uint64_t key_count,
                                                     uint64_t expected_bytes, uint64_t bucket_bytes);
  Status Add(uint64_t key, const SourceItem& item);
  Status Finish();
  int64_t size() const { return count_; }
  Result<bool> Next(SourceItem* item);

 private:
  KeyedSpill(std::vector<std::unique_ptr<SpillFile>> buckets, uint64_t key_count)
      : buckets_(std::move(buckets)), key_count_(key_count) {}
  Status LoadBucket(size_t b);

  std::vector<std::unique_ptr<SpillFile>> buckets_;
  const uint64_t key_count_;
  int64_t count_ = 0;
  std::string scratch_;
  size_t next_bucket_ = 0;
  std::vector<std::pair<uint64_t, SourceItem>> loaded_;  // the bucket being read, sorted
  size_t loaded_at_ = 0;
};

}  // namespace imagepack::internal
