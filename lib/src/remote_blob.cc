// A blob read from object storage: header, index and metadata with ranged
// GETs at open, records through a BlockCache (docs/OBJECT_STORAGE.md).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "block_cache.h"
#include "imagepack/byte_source.h"
#include "store_internal.h"

namespace imagepack::internal {
namespace {

class RemoteBlobSource;

class RemoteCursor : public RecordCursor {
 public:
  explicit RemoteCursor(const RemoteBlobSource* src) : src_(src) {}
  Status ReadRaw(int64_t index, const uint8_t** data, size_t* size) override;

 private:
  const RemoteBlobSource* src_;
  BlockCache::Block held_;  // the block the last record lies in
  std::vector<uint8_t> buf_;  // a record across blocks
};

class RemoteBlobSource : public RecordSource {
 public:
  RemoteBlobSource(std::unique_ptr<ByteSource> bytes, BlobLayout layout, uint64_t block, size_t ram_blocks,
                   std::unique_ptr<DiskCache> disk)
      : bytes_(std::move(bytes)), layout_(std::move(layout)),
        cache_(bytes_.get(), layout_.records_end, block, ram_blocks, std::move(disk)) {}
  const DatasetMeta& meta() const override { return layout_.meta; }
  std::unique_ptr<RecordCursor> NewCursor() const override { return std::make_unique<RemoteCursor>(this); }
  std::string Describe() const override { return bytes_->Describe() + " (blob)"; }
  bool remote() const override { return true; }
  void DropSharedMeta() override { imagepack::DropSharedMeta(&layout_.meta); }
  int64_t stored_bytes() const override { return static_cast<int64_t>(bytes_->size()); }
  int64_t remote_requests() const override { return bytes_->requests() + 1; }  // + the HEAD at open
  int64_t remote_bytes() const override { return bytes_->bytes_fetched(); }
  int64_t Fetch(const std::vector<std::pair<int64_t, int64_t>>& runs) const override {
    std::vector<uint64_t> blocks;
    const uint64_t bb = cache_.block_bytes();
    for (const auto& [first, last] : runs) {
      if (first < 0 || last >= size() || first > last) continue;
      const uint64_t lo = layout_.offsets[first];
      const uint64_t hi = layout_.offsets[last] + layout_.lengths[last];
      if (hi <= lo) continue;
      for (uint64_t b = lo / bb; b <= (hi - 1) / bb; ++b) blocks.push_back(b);
    }
    return cache_.Fetch(std::move(blocks));
  }

  // The stored bytes of record `index`.
  Status Read(int64_t index, BlockCache::Block* held, std::vector<uint8_t>* buf, const uint8_t** data,
              size_t* size) const {
    if (index < 0 || index >= this->size())
      return Status::InvalidArgument("record " + std::to_string(index) + " is out of range");
    const uint64_t off = layout_.offsets[index], len = layout_.lengths[index];
    const uint64_t bb = cache_.block_bytes();
    *size = static_cast<size_t>(len);
    if (len == 0) {
      *data = reinterpret_cast<const uint8_t*>("");
      return Status::Ok();
    }
    const uint64_t b0 = off / bb, b1 = (off + len - 1) / bb;
    if (b0 == b1) {
      auto blk = cache_.Get(b0);
      if (!blk.ok()) return blk.status().WithContext("record " + RecordKey(index));
      *held = std::move(blk.value());
      *data = (*held)->data() + (off - b0 * bb);
      return Status::Ok();
    }
    buf->resize(len);
    for (uint64_t b = b0; b <= b1; ++b) {
      auto blk = cache_.Get(b);
      if (!blk.ok()) return blk.status().WithContext("record " + RecordKey(index));
      const uint64_t lo = std::max(off, b * bb), hi = std::min(off + len, b * bb + blk.value()->size());
      std::memcpy(buf->data() + (lo - off), blk.value()->data() + (lo - b * bb), hi - lo);
    }
    *data = buf->data();
    return Status::Ok();
  }

 private:
  std::unique_ptr<ByteSource> bytes_;
  BlobLayout layout_;
  mutable BlockCache cache_;
};

Status RemoteCursor::ReadRaw(int64_t index, const uint8_t** data, size_t* size) {
  return src_->Read(index, &held_, &buf_, data, size);
}

double EnvNumber(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const double d = std::strtod(v, &end);
  return end != v && *end == '\0' && d > 0 ? d : fallback;
}

}  // namespace

Result<std::unique_ptr<RecordSource>> OpenRemoteBlob(const std::string& url, const OpenOptions& opts) {
  if (!(opts.fetch_block_mb > 0 && opts.fetch_block_mb <= 1024) || !(opts.ram_cache_mb > 0) ||
      opts.cache_limit_mb < 0)
    return Status::InvalidArgument(url + ": fetch block must be in (0, 1024] MB and the RAM cache positive");
  auto bytes = OpenByteSource(url);
  if (!bytes.ok()) return bytes.status();
  const ByteSource& src = *bytes.value();
  // Header first: LMDB is told apart by its first bytes, as for files.
  uint8_t magic[8] = {0};
  if (src.size() >= 8) IMAGEPACK_RETURN_IF_ERROR(src.ReadAt(0, 8, magic));
  if (std::memcmp(magic, kBlobMagic, 8) != 0)
    return Status::NotSupported(url +
                                ": not an imagepack blob; only blobs are read from object storage (an LMDB needs a "
                                "local memory map): pack with --format blob, or copy the file to local disk");
  std::vector<uint8_t> scratch;
  BlobLayout layout;
  IMAGEPACK_RETURN_IF_ERROR(ParseBlob(url, src.size(),
                                      [&](uint64_t at, uint64_t n, const uint8_t** p) {
                                        if (n > (uint64_t(4) << 30))
                                          return Status::Corruption(url + ": index or metadata of " +
                                                                    std::to_string(n) + " bytes");
                                        scratch.resize(n);
                                        *p = scratch.data();
                                        return n ? src.ReadAt(at, n, scratch.data()) : Status::Ok();
                                      },
                                      &layout));
  std::string cache_dir = opts.cache_dir;
  if (cache_dir.empty()) {
    const char* env = std::getenv("IMAGEPACK_CACHE_DIR");
    if (env) cache_dir = env;
  }
  std::unique_ptr<DiskCache> disk;
  if (!cache_dir.empty()) {
    const double limit_mb = opts.cache_limit_mb > 0 ? opts.cache_limit_mb
                                                    : EnvNumber("IMAGEPACK_CACHE_LIMIT_MB", 20480);
    auto d = DiskCache::Open(cache_dir, src.identity(), static_cast<uint64_t>(limit_mb * (1 << 20)));
    if (!d.ok()) return d.status().WithContext(url);
    disk = std::move(d.value());
  }
  // The environment tunes them where no option reaches (tests, Python).
  const double block_mb = EnvNumber("IMAGEPACK_FETCH_BLOCK_MB", opts.fetch_block_mb);
  // With a disk cache, RAM holds the read-ahead's span (blocks let go are
  // reused: fresh memory is slow to fault in); without, it is the cache.
  const double ram_mb = EnvNumber("IMAGEPACK_RAM_CACHE_MB", disk ? std::min(opts.ram_cache_mb, 256.0) : opts.ram_cache_mb);
  const uint64_t block = std::max<uint64_t>(4096, static_cast<uint64_t>(std::min(block_mb, 1024.0) * (1 << 20)));
  const size_t ram_blocks = static_cast<size_t>(std::min(ram_mb * (1 << 20) / double(block), 1e9));
  return std::unique_ptr<RecordSource>(
      new RemoteBlobSource(std::move(bytes.value()), std::move(layout), block, ram_blocks, std::move(disk)));
}

}  // namespace imagepack::internal
