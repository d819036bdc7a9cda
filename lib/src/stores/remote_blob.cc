// A blob whose bytes cannot be mapped (a remote object read through the
// block cache; docs/OBJECT_STORAGE.md): header, index and metadata read at
// open, records viewed in the source's cached blocks (no copy when a
// record lies in one block), runs of records prefetched by the loader's
// read-ahead (RecordSource::Fetch) with their reads in flight together.
#include <algorithm>
#include <cstring>

#include "imagepack/byte_source.h"
#include "stores/store_internal.h"

namespace imagepack::internal {
namespace {

class UnmappedBlobSource;

class UnmappedCursor : public RecordCursor {
 public:
  explicit UnmappedCursor(const UnmappedBlobSource* src) : src_(src) {}
  Status ReadRaw(int64_t index, const uint8_t** data, size_t* size) override;

 private:
  const UnmappedBlobSource* src_;
  std::shared_ptr<const void> held_;  // what keeps the last record's bytes
  std::vector<uint8_t> buf_;          // a record across blocks
};

class UnmappedBlobSource : public RecordSource {
 public:
  UnmappedBlobSource(std::shared_ptr<const ByteSource> bytes, BlobLayout layout)
      : bytes_(std::move(bytes)), layout_(std::move(layout)) {}
  const DatasetMeta& meta() const override { return layout_.meta; }
  std::unique_ptr<RecordCursor> NewCursor() const override { return std::make_unique<UnmappedCursor>(this); }
  std::string Describe() const override { return bytes_->Describe() + " (blob)"; }
  bool remote() const override { return bytes_->remote(); }
  int64_t stored_bytes() const override { return static_cast<int64_t>(bytes_->size()); }
  int64_t remote_requests() const override { return bytes_->requests(); }
  int64_t remote_bytes() const override { return bytes_->bytes_fetched(); }
  int64_t Fetch(const std::vector<std::pair<int64_t, int64_t>>& runs) const override {
    std::vector<ByteRange> ranges;
    for (const auto& [first, last] : runs) {
      if (first < 0 || last >= size() || first > last) continue;
      const uint64_t lo = layout_.offsets[first];
      const uint64_t hi = layout_.offsets[last] + layout_.lengths[last];
      if (hi > lo) ranges.push_back({lo, hi - lo});
    }
    return bytes_->Prefetch(ranges);
  }

  // The stored bytes of record `index`.
  Status Read(int64_t index, std::shared_ptr<const void>* held, std::vector<uint8_t>* buf, const uint8_t** data,
              size_t* size) const {
    if (index < 0 || index >= this->size())
      return Status::InvalidArgument("record " + std::to_string(index) + " is out of range");
    const uint64_t off = layout_.offsets[index], len = layout_.lengths[index];
    *size = static_cast<size_t>(len);
    if (len == 0) {
      *data = reinterpret_cast<const uint8_t*>("");
      return Status::Ok();
    }
    Status st = bytes_->View(off, len, held, buf, data);
    return st.ok() ? st : st.WithContext("record " + RecordKey(index));
  }

 private:
  std::shared_ptr<const ByteSource> bytes_;
  BlobLayout layout_;
};

Status UnmappedCursor::ReadRaw(int64_t index, const uint8_t** data, size_t* size) {
  return src_->Read(index, &held_, &buf_, data, size);
}

}  // namespace

Result<std::unique_ptr<RecordSource>> OpenUnmappedBlob(std::shared_ptr<const ByteSource> bytes) {
  const ByteSource& src = *bytes;
  const std::string name = src.Describe();
  // Header first: LMDB is told apart by its first bytes, as for files.
  uint8_t magic[8] = {0};
  if (src.size() >= 8) IMAGEPACK_RETURN_IF_ERROR(src.ReadAt(0, 8, magic));
  if (std::memcmp(magic, kBlobMagic, 8) != 0)
    return Status::NotSupported(name +
                                ": not an imagepack blob; only blobs are read from remote storage (an LMDB needs a "
                                "local memory map): pack with --format blob, or copy the file to local disk");
  std::vector<uint8_t> scratch;
  BlobLayout layout;
  IMAGEPACK_RETURN_IF_ERROR(ParseBlob(name, src.size(),
                                      [&](uint64_t at, uint64_t n, const uint8_t** p) {
                                        if (n > (uint64_t(4) << 30))
                                          return Status::Corruption(name + ": index or metadata of " +
                                                                    std::to_string(n) + " bytes");
                                        scratch.resize(n);
                                        *p = scratch.data();
                                        return n ? src.ReadAt(at, n, scratch.data()) : Status::Ok();
                                      },
                                      &layout));
  return std::unique_ptr<RecordSource>(new UnmappedBlobSource(std::move(bytes), std::move(layout)));
}

}  // namespace imagepack::internal
