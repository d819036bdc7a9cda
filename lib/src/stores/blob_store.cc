// The blob container (docs/FORMAT.md): header, 16-byte-aligned records, an
// (offset, length) index and the metadata JSON, in one file that can be
// mmapped or read into RAM in one go.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <mutex>

#include "stores/blob_index.h"
#include "imagepack/files.h"
#include "storage/spill_file.h"
#include "storage/fd_io.h"
#include "storage/staged_file.h"
#include "stores/store_internal.h"
#include "imagepack/byte_source.h"

namespace imagepack::internal {
namespace {

constexpr size_t kHeaderSize = 64;
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
  BlobWriter(std::unique_ptr<WritableFile> out, int chunk_shift, size_t index_memory)
      : out_(std::move(out)), tmp_(out_->staging_path()), fd_(out_->fd()), chunk_shift_(chunk_shift),
        index_memory_(std::max<size_t>(index_memory, 16)) {}
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
    status_ = AddEntry(pos_, record.size());
    if (status_.ok()) status_ = Write(record.data(), record.size());
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
    status_ = AddEntry(at, size);
    if (!status_.ok()) return status_;
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
    // Layout 2 (docs/FORMAT.md) where asked or where the index is large:
    // a checksum per chunk of entries, so that a reader checks each chunk
    // when it first uses it instead of the whole index at open.
    const int shift = chunk_shift_ > 0 ? chunk_shift_
                      : static_cast<uint64_t>(count()) >= kBlobLayout2From ? kBlobChunkShift
                                                                           : 0;
    const uint64_t index_offset = pos_;
    uint64_t index_sum = 0;
    status_ = WriteIndex(shift, &index_sum);
    if (!status_.ok()) return status_;
    const uint64_t meta_offset = pos_;
    const std::string json = meta.ToJson();
    if (status_.ok()) status_ = Write(reinterpret_cast<const uint8_t*>(json.data()), json.size());
    if (status_.ok()) status_ = staged_ ? staged_->Close(pos_) : FlushBuffer();
    if (!status_.ok()) return status_;
    uint8_t header[kHeaderSize] = {0};
    std::memcpy(header, kBlobMagic, 8);
    Put<uint32_t>(header + 8, shift > 0 ? 2 : 1);
    Put<uint32_t>(header + 12, static_cast<uint32_t>(shift));
    Put<uint64_t>(header + 16, static_cast<uint64_t>(count()));
    Put<uint64_t>(header + 24, index_offset);
    Put<uint64_t>(header + 32, meta_offset);
    Put<uint64_t>(header + 40, json.size());
    Put<uint64_t>(header + 48, index_sum);
    Put<uint64_t>(header + 56, XXH3_64bits(header, 56));
    if (::pwrite(fd_, header, kHeaderSize, 0) != static_cast<ssize_t>(kHeaderSize))
      return status_ = Status::FromErrno("write header of " + tmp_, errno);
    if (::fsync(fd_) != 0) return status_ = Status::FromErrno("fsync " + tmp_, errno);
    return status_ = out_->Commit();  // a rename beside it, or an upload
  }

  int64_t count() const override { return count_; }

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

  // The next record's (offset, length) entry: in memory, or once that
  // holds index_memory_ bytes, in a scratch file beside the blob.
  Status AddEntry(uint64_t offset, uint64_t length) {
    uint8_t e[16];
    Put<uint64_t>(e, offset);
    Put<uint64_t>(e + 8, length);
    ++count_;
    if (index_.size() + 16 > index_memory_) {
      if (!spill_) {
        auto spill = SpillFile::Create(fs_dir(), std::min(index_memory_, size_t(4) << 20));
        if (!spill.ok()) return spill.status();
        spill_ = std::move(spill.value());
      }
      IMAGEPACK_RETURN_IF_ERROR(spill_->Append(index_.data(), index_.size()));
      index_.clear();
    }
    index_.insert(index_.end(), e, e + 16);
    return Status::Ok();
  }
  std::string fs_dir() const {
    const std::string dir = std::filesystem::path(tmp_).parent_path().string();
    return dir.empty() ? "." : dir;
  }

  // Writes the index (spilled entries, then those in memory) and, for
  // layout 2 (shift > 0), the table of its chunks' checksums; *sum is the
  // header's: the whole index's checksum (layout 1) or the table's.
  Status WriteIndex(int shift, uint64_t* sum) {
    XXH3_state_t* whole = XXH3_createState();
    XXH3_state_t* chunk = XXH3_createState();
    XXH3_64bits_reset(whole);
    XXH3_64bits_reset(chunk);
    std::vector<uint8_t> table;
    const uint64_t per_chunk = shift > 0 ? (uint64_t(1) << shift) * 16 : 0;
    uint64_t in_chunk = 0;  // bytes of the current chunk so far
    auto put = [&](const uint8_t* p, size_t n) -> Status {
      IMAGEPACK_RETURN_IF_ERROR(Write(p, n));
      if (shift == 0) {
        XXH3_64bits_update(whole, p, n);
        return Status::Ok();
      }
      while (n > 0) {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(n, per_chunk - in_chunk));
        XXH3_64bits_update(chunk, p, take);
        in_chunk += take, p += take, n -= take;
        if (in_chunk == per_chunk) {
          uint8_t d[8];
          Put<uint64_t>(d, XXH3_64bits_digest(chunk));
          table.insert(table.end(), d, d + 8);
          XXH3_64bits_reset(chunk);
          in_chunk = 0;
        }
      }
      return Status::Ok();
    };
    Status st;
    if (spill_) st = spill_->Flush();
    std::vector<uint8_t> piece(spill_ ? size_t(4) << 20 : 0);
    for (uint64_t at = 0; st.ok() && spill_ && at < spill_->size(); at += piece.size()) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(piece.size(), spill_->size() - at));
      st = spill_->ReadAt(at, n, piece.data());
      if (st.ok()) st = put(piece.data(), n);
    }
    if (st.ok()) st = put(index_.data(), index_.size());
    if (st.ok() && shift > 0) {
      if (in_chunk > 0) {
        uint8_t d[8];
        Put<uint64_t>(d, XXH3_64bits_digest(chunk));
        table.insert(table.end(), d, d + 8);
      }
      *sum = XXH3_64bits(table.data(), table.size());
      st = Write(table.data(), table.size());
    } else if (st.ok()) {
      *sum = XXH3_64bits_digest(whole);
    }
    XXH3_freeState(whole);
    XXH3_freeState(chunk);
    spill_.reset();
    index_ = std::vector<uint8_t>();
    return st;
  }

  std::unique_ptr<WritableFile> out_;
  const std::string tmp_;
  const int fd_;
  std::unique_ptr<StagedFile> staged_;  // O_DIRECT writes; null: buffered
  std::vector<uint8_t> buf_;
  uint64_t pos_ = 0;
  const int chunk_shift_;  // layout 2's chunk size (WriterOptions); 0: by the count
  const size_t index_memory_;
  int64_t count_ = 0;
  std::vector<uint8_t> index_;          // the last entries, (offset, length) each
  std::unique_ptr<SpillFile> spill_;    // the entries before them, if any
  Status status_;
  uint64_t buf_at_ = 0;        // where buf_'s first byte goes
  mutable std::mutex parallel_mu_;
  Status parallel_status_;     // the first WriteReserved() failure
};

}  // namespace

Result<std::unique_ptr<RecordWriter>> NewBlobWriter(std::unique_ptr<WritableFile> out, DirectIo direct_io,
                                                    int index_chunk_shift, size_t index_memory) {
  auto w = std::make_unique<BlobWriter>(std::move(out), index_chunk_shift, index_memory);  // unpublished on failure
  if (index_chunk_shift < 0 || index_chunk_shift > 40)
    return Status::InvalidArgument("blob index chunks of 2^" + std::to_string(index_chunk_shift) +
                                   " entries (expected 2^1..2^40, or 0 for the default)");
  IMAGEPACK_RETURN_IF_ERROR(w->Open(direct_io));
  return std::unique_ptr<RecordWriter>(std::move(w));
}

Status ParseBlob(const std::string& path, uint64_t file_size,
                 const std::function<Status(uint64_t, uint64_t, const uint8_t**)>& read, BlobLayout* out) {
  BlobHead head;
  IMAGEPACK_RETURN_IF_ERROR(ParseBlobHead(path, file_size, read, &head));
  // The whole index, checked chunk by chunk (layout 1: one chunk).
  std::vector<uint64_t> offsets(head.count), lengths(head.count);
  for (uint64_t c = 0; c < IndexChunks(head); ++c) {
    uint64_t first = 0, n = 0;
    ChunkRange(head, c, &first, &n);
    const uint8_t* entries = nullptr;
    IMAGEPACK_RETURN_IF_ERROR(read(head.index_offset + first * 16, n * 16, &entries));
    Status st = CheckIndexChunk(head, c, entries);
    if (!st.ok()) return st.WithContext(path);
    for (uint64_t i = 0; i < n; ++i) {
      offsets[first + i] = Get<uint64_t>(entries + i * 16);
      lengths[first + i] = Get<uint64_t>(entries + i * 16 + 8);
    }
  }
  out->meta = std::move(head.meta);
  out->offsets = std::move(offsets);
  out->lengths = std::move(lengths);
  out->records_end = head.index_offset;
  return Status::Ok();
}

Result<std::unique_ptr<RecordSource>> OpenBlob(std::shared_ptr<const ByteSource> bytes, const OpenOptions& opts) {
  const std::string path = bytes->Describe();
  const uint64_t file_size = bytes->size();
  if (file_size < kHeaderSize)
    return Status::Corruption(path + ": blob is " + std::to_string(file_size) +
                              " bytes, shorter than its header (truncated)");
  // in_ram is OpenDatabase's (a shared copy, read here like any file).
  // pread_records: nothing of the file is mapped (header, metadata and
  // index entries are read like the records); else all of it.
  const uint8_t* base = nullptr;
  if (!opts.pread_records) {
    auto mapped = bytes->Map();
    if (!mapped.ok()) return mapped.status();
    base = mapped.value();
  }
  std::vector<uint8_t> scratch;
  BlobHead head;
  IMAGEPACK_RETURN_IF_ERROR(ParseBlobHead(path, file_size,
                                          [&](uint64_t at, uint64_t n, const uint8_t** p) {
                                            if (base) {
                                              *p = base + at;
                                              return Status::Ok();
                                            }
                                            scratch.resize(n);
                                            *p = scratch.data();
                                            return n ? bytes->ReadAt(at, n, scratch.data()) : Status::Ok();
                                          },
                                          &head));
  // The index is read where it lies: nothing per record is copied into
  // this process.
  DatasetMeta meta = std::move(head.meta);
  const uint8_t* entries = base ? base + head.index_offset : nullptr;
  auto index = BlobIndex::Open(path, std::move(head), bytes.get(), entries);
  if (!index.ok()) return index.status();
  return NewMemorySource(std::move(meta), path + " (blob)", std::move(bytes), std::move(index.value()),
                         opts.pread_records);
}

}  // namespace imagepack::internal
