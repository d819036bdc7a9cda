// The blob container (docs/FORMAT.md): header, 16-byte-aligned records, an
// (offset, length) index and the metadata JSON, in one file that can be
// mmapped or read into RAM in one go.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <mutex>

#include "imagepack/files.h"
#include "storage/staged_file.h"
#include "stores/store_internal.h"
#include "storage/fd_io.h"
#include "imagepack/byte_source.h"

namespace imagepack::internal {
namespace {

constexpr size_t kHeaderSize = 64;
// The blob layout's own version (the header's); unchanged by format 2, which
// only regrouped LMDB values.
constexpr uint32_t kBlobLayoutVersion = 1;
constexpr uint64_t kAlign = 16;

template <typename T>
T Get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void Put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

class BlobWriter : public RecordWriter, public ParallelRecordWriter {
 public:
  explicit BlobWriter(std::unique_ptr<WritableFile> out)
      : out_(std::move(out)), tmp_(out_->staging_path()), fd_(out_->fd()) {}
  ~BlobWriter() override {
    staged_.reset();  // stops its threads before the file goes
    out_.reset();     // unfinished: the staging file is removed, nothing published
  }

  Status Open(DirectIo direct_io) {
    if (direct_io == DirectIo::kOn || (direct_io == DirectIo::kAuto && DirectIoPays(fd_))) {
      auto staged = StagedFile::Open(tmp_, fd_);
      if (staged.ok()) staged_ = std::move(staged.value());
      else if (direct_io == DirectIo::kOn || staged.status().code() != Status::Code::kNotSupported)
        return staged.status();
    }
    if (!staged_) buf_.reserve(kBufSize);
    return Write(kZeros, kHeaderSize);  // the header is written last
  }

  bool direct_io() const override { return staged_ != nullptr; }

  Status Add(std::vector<uint8_t>&& record) override {
    if (!status_.ok()) return status_;
    offsets_.push_back(pos_);
    lengths_.push_back(record.size());
    status_ = Write(record.data(), record.size());
    if (status_.ok()) status_ = Pad();
    return status_;
  }

  ParallelRecordWriter* parallel() override { return this; }

  // The record's place: after the last one, aligned. The padding in
  // between is never written: a hole in the file reads as zeros.
  Result<uint64_t> Reserve(size_t size) override {
    if (!status_.ok()) return status_;
    if (!buf_.empty()) status_ = FlushBuffer();  // records added before
    if (!status_.ok()) return status_;
    const uint64_t at = pos_;
    offsets_.push_back(at);
    lengths_.push_back(size);
    pos_ += size;
    const size_t pad = static_cast<size_t>((kAlign - pos_ % kAlign) % kAlign);
    // Staged: every byte is put, the padding too (a chunk is written once
    // all of it is there).
    if (staged_ && pad > 0) status_ = staged_->Put(pos_, kZeros, pad);
    if (!status_.ok()) return status_;
    pos_ += pad;
    return at;
  }

  Status WriteReserved(uint64_t at, const uint8_t* record, size_t size) override {
    Status st = staged_ ? staged_->Put(at, record, size) : PwriteAll(record, size, at);
    if (!st.ok()) {
      std::lock_guard<std::mutex> g(parallel_mu_);
      if (parallel_status_.ok()) parallel_status_ = st;
    }
    return st;
  }

  Status status() const override {
    if (!status_.ok()) return status_;
    {
      std::lock_guard<std::mutex> g(parallel_mu_);
      if (!parallel_status_.ok()) return parallel_status_;
    }
    return staged_ ? staged_->status() : Status::Ok();
  }

  Status Finish(const DatasetMeta& meta) override {
    status_ = status();
    if (!status_.ok()) return status_;
    if (meta.count != count())
      return status_ = Status::InvalidArgument("metadata count " + std::to_string(meta.count) + " but " +
                                               std::to_string(count()) + " records were added");
    const uint64_t index_offset = pos_;
    std::vector<uint8_t> index(offsets_.size() * 16);
    for (size_t i = 0; i < offsets_.size(); ++i) {
      Put<uint64_t>(&index[i * 16], offsets_[i]);
      Put<uint64_t>(&index[i * 16 + 8], lengths_[i]);
    }
    status_ = Write(index.data(), index.size());
    const uint64_t meta_offset = pos_;
    const std::string json = meta.ToJson();
    if (status_.ok()) status_ = Write(reinterpret_cast<const uint8_t*>(json.data()), json.size());
    if (status_.ok()) status_ = staged_ ? staged_->Close(pos_) : FlushBuffer();
    if (!status_.ok()) return status_;
    uint8_t header[kHeaderSize] = {0};
    std::memcpy(header, kBlobMagic, 8);
    Put<uint32_t>(header + 8, kBlobLayoutVersion);
    Put<uint64_t>(header + 16, static_cast<uint64_t>(count()));
    Put<uint64_t>(header + 24, index_offset);
    Put<uint64_t>(header + 32, meta_offset);
    Put<uint64_t>(header + 40, json.size());
    Put<uint64_t>(header + 48, XXH3_64bits(index.data(), index.size()));
    Put<uint64_t>(header + 56, XXH3_64bits(header, 56));
    if (::pwrite(fd_, header, kHeaderSize, 0) != static_cast<ssize_t>(kHeaderSize))
      return status_ = Status::FromErrno("write header of " + tmp_, errno);
    if (::fsync(fd_) != 0) return status_ = Status::FromErrno("fsync " + tmp_, errno);
    return status_ = out_->Commit();  // a rename beside it, or an upload
  }

  int64_t count() const override { return static_cast<int64_t>(offsets_.size()); }

 private:
  static constexpr size_t kBufSize = 4 << 20;
  static constexpr size_t kUnbuffered = 64 << 10;
  static constexpr uint8_t kZeros[kHeaderSize] = {0};  // the header's room, padding

  // Staged (O_DIRECT): into the staging chunks. Otherwise small records
  // gather in the buffer (few syscalls); large ones (raw images: 200 KB and
  // more) go to the file directly, saving a copy on this one writer thread.
  // Every write says where it goes (pwrite): the file offset plays no part,
  // so reserved records can be written around.
  Status Write(const uint8_t* p, size_t n) {
    const uint64_t at = pos_;
    pos_ += n;
    if (staged_) return staged_->Put(at, p, n);
    if (n >= kUnbuffered || buf_.size() + n > kBufSize) {
      IMAGEPACK_RETURN_IF_ERROR(FlushBuffer());
      if (n >= kUnbuffered) return PwriteAll(p, n, at);
    }
    if (buf_.empty()) buf_at_ = at;
    buf_.insert(buf_.end(), p, p + n);
    return Status::Ok();
  }
  Status Pad() {
    const size_t pad = static_cast<size_t>((kAlign - pos_ % kAlign) % kAlign);
    return pad ? Write(kZeros, pad) : Status::Ok();
  }
  Status FlushBuffer() {
    Status st = PwriteAll(buf_.data(), buf_.size(), buf_at_);
    buf_.clear();
    return st;
  }
  Status PwriteAll(const uint8_t* p, size_t n, uint64_t at) const { return imagepack::PwriteAll(fd_, p, n, at, tmp_); }

  std::unique_ptr<WritableFile> out_;
  const std::string tmp_;
  const int fd_;
  std::unique_ptr<StagedFile> staged_;  // O_DIRECT writes; null: buffered
  std::vector<uint8_t> buf_;
  uint64_t pos_ = 0;
  std::vector<uint64_t> offsets_, lengths_;
  Status status_;
  uint64_t buf_at_ = 0;        // where buf_'s first byte goes
  mutable std::mutex parallel_mu_;
  Status parallel_status_;     // the first WriteReserved() failure
};

}  // namespace

Result<std::unique_ptr<RecordWriter>> NewBlobWriter(std::unique_ptr<WritableFile> out, DirectIo direct_io) {
  auto w = std::make_unique<BlobWriter>(std::move(out));
  IMAGEPACK_RETURN_IF_ERROR(w->Open(direct_io));
  return std::unique_ptr<RecordWriter>(std::move(w));
}

Status ParseBlob(const std::string& path, uint64_t file_size,
                 const std::function<Status(uint64_t, uint64_t, const uint8_t**)>& read, BlobLayout* out) {
  if (file_size < kHeaderSize)
    return Status::Corruption(path + ": blob is " + std::to_string(file_size) +
                              " bytes, shorter than its header (truncated)");
  const uint8_t* base = nullptr;
  IMAGEPACK_RETURN_IF_ERROR(read(0, kHeaderSize, &base));
  if (std::memcmp(base, kBlobMagic, 8) != 0) return Status::Corruption(path + ": not an imagepack blob (bad magic)");
  if (Get<uint64_t>(base + 56) != XXH3_64bits(base, 56))
    return Status::Corruption(path + ": blob header checksum mismatch (header damaged, or the file was not finished)");
  const uint32_t version = Get<uint32_t>(base + 8);
  if (version != kBlobLayoutVersion)
    return Status::NotSupported(path + ": blob format version " + std::to_string(version));
  const uint64_t count = Get<uint64_t>(base + 16);
  const uint64_t index_offset = Get<uint64_t>(base + 24);
  const uint64_t meta_offset = Get<uint64_t>(base + 32);
  const uint64_t meta_len = Get<uint64_t>(base + 40);
  const uint64_t index_sum = Get<uint64_t>(base + 48);
  // Every offset and length is checked against the file before use.
  if (count > file_size / 16 || index_offset < kHeaderSize || index_offset > file_size ||
      count * 16 > file_size - index_offset)
    return Status::Corruption(path + ": blob index lies outside the file (" + std::to_string(file_size) +
                              " bytes): truncated or damaged");
  if (meta_offset > file_size || meta_len > file_size - meta_offset)
    return Status::Corruption(path + ": blob metadata lies outside the file (" + std::to_string(file_size) +
                              " bytes): truncated or damaged");
  const uint8_t* index = nullptr;
  IMAGEPACK_RETURN_IF_ERROR(read(index_offset, count * 16, &index));
  if (index_sum != XXH3_64bits(index, count * 16))
    return Status::Corruption(path + ": blob index checksum mismatch at offset " + std::to_string(index_offset));
  std::vector<uint64_t> offsets(count), lengths(count);
  for (uint64_t i = 0; i < count; ++i) {
    offsets[i] = Get<uint64_t>(index + i * 16);
    lengths[i] = Get<uint64_t>(index + i * 16 + 8);
    if (offsets[i] < kHeaderSize || offsets[i] > index_offset || lengths[i] > index_offset - offsets[i])
      return Status::Corruption(path + ": record " + RecordKey(static_cast<int64_t>(i)) + " at offset " +
                                std::to_string(offsets[i]) + " + " + std::to_string(lengths[i]) +
                                " lies outside the record area");
  }
  const uint8_t* meta_bytes = nullptr;
  IMAGEPACK_RETURN_IF_ERROR(read(meta_offset, meta_len, &meta_bytes));
  auto meta = ParseMeta(meta_bytes, meta_len);
  if (!meta.ok()) return meta.status().WithContext(path);
  if (static_cast<uint64_t>(meta->count) != count)
    return Status::Corruption(path + ": blob header says " + std::to_string(count) + " records, metadata says " +
                              std::to_string(meta->count));
  out->meta = std::move(meta.value());
  out->offsets = std::move(offsets);
  out->lengths = std::move(lengths);
  out->records_end = index_offset;
  return Status::Ok();
}

Result<std::unique_ptr<RecordSource>> OpenBlob(std::shared_ptr<const ByteSource> bytes, const OpenOptions& opts) {
  const std::string path = bytes->Describe();
  const uint64_t file_size = bytes->size();
  if (file_size < kHeaderSize)
    return Status::Corruption(path + ": blob is " + std::to_string(file_size) +
                              " bytes, shorter than its header (truncated)");
  // in_ram is OpenDatabase's (a shared copy, mapped here like any file).
  auto base = bytes->Map();
  if (!base.ok()) return base.status();
  BlobLayout layout;
  IMAGEPACK_RETURN_IF_ERROR(ParseBlob(path, file_size,
                                      [&](uint64_t at, uint64_t, const uint8_t** p) {
                                        *p = *base + at;
                                        return Status::Ok();
                                      },
                                      &layout));
  return NewMemorySource(std::move(layout.meta), path + " (blob)", std::move(bytes), std::move(layout.offsets),
                         std::move(layout.lengths), opts.pread_records);
}

}  // namespace imagepack::internal
