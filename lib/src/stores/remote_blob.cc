// A blob whose bytes cannot be mapped (a remote object read through the
// block cache; docs/OBJECT_STORAGE.md): header, index and metadata read at
// open, records viewed in the source's cached blocks (no copy when a
// record lies in one block), runs of records prefetched by the loader's
// read-ahead (RecordSource::StoredRanges, then the byte source's Prefetch)
// with their reads in flight together.
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
  void ByteSources(std::vector<const ByteSource*>* out) const override { out->push_back(bytes_.get()); }
  void StoredRanges(int64_t first, int64_t last, std::vector<StoredRange>* out) const override {
    first = std::max<int64_t>(first, 0);
    last = std::min<int64_t>(last, size() - 1);
    for (int64_t i = first; i <= last; ++i) AppendRange(bytes_.get(), layout_.offsets[i], layout_.lengths[i], out);
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
