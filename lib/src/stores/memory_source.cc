#include "stores/memory_source.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace imagepack::internal {
namespace {

// Record `index`'s place, from the index in the mapping.
Status Locate(const BlobIndex& idx, int64_t index, uint64_t* offset, uint64_t* length) {
  if (index < 0 || static_cast<uint64_t>(index) >= idx.size())
    return Status::InvalidArgument("record " + RecordKey(index) + " is out of range");
  Status st = idx.Entry(static_cast<uint64_t>(index), offset, length);
  return st.ok() ? st : st.WithContext("record " + RecordKey(index));
}

class MappedCursor : public RecordCursor {
 public:
  MappedCursor(const uint8_t* base, const BlobIndex* index) : base_(base), index_(index) {}
  Status ReadRaw(int64_t index, const uint8_t** data, size_t* size) override {
    uint64_t offset = 0, length = 0;
    IMAGEPACK_RETURN_IF_ERROR(Locate(*index_, index, &offset, &length));
    *data = base_ + offset;
    *size = static_cast<size_t>(length);
    return Status::Ok();
  }

 private:
  const uint8_t* base_;
  const BlobIndex* index_;
};

// Records read with ReadAt into the cursor's buffer (OpenOptions::
// pread_records).
class ReadingCursor : public RecordCursor {
 public:
  ReadingCursor(const ByteSource* bytes, const BlobIndex* index) : bytes_(bytes), index_(index) {}
  Status ReadRaw(int64_t index, const uint8_t** data, size_t* size) override {
    uint64_t offset = 0, length = 0;
    IMAGEPACK_RETURN_IF_ERROR(Locate(*index_, index, &offset, &length));
    const size_t n = static_cast<size_t>(length);
    if (buf_.size() < n) buf_.resize(n);
    Status st = bytes_->ReadAt(offset, n, buf_.data());
    if (!st.ok()) return st.WithContext("record " + RecordKey(index));
    *data = buf_.data();
    *size = n;
    return Status::Ok();
  }

 private:
  const ByteSource* bytes_;
  const BlobIndex* index_;
  std::vector<uint8_t> buf_;
};

class MemorySource : public RecordSource {
 public:
  MemorySource(DatasetMeta meta, std::string describe, std::shared_ptr<const ByteSource> bytes, const uint8_t* base,
               std::unique_ptr<BlobIndex> index, bool pread)
      : meta_(std::move(meta)), describe_(std::move(describe)), bytes_(std::move(bytes)), base_(base),
        pread_(pread), index_(std::move(index)) {}
  const DatasetMeta& meta() const override { return meta_; }
  std::unique_ptr<RecordCursor> NewCursor() const override {
    if (pread_) return std::make_unique<ReadingCursor>(bytes_.get(), index_.get());
    return std::make_unique<MappedCursor>(base_, index_.get());
  }
  std::string Describe() const override { return describe_; }
  void CheckLayout(const std::function<void(const std::string&)>& report) const override { index_->CheckAll(report); }
  // The records' pages only: the index's stay mapped, read by every
  // record's lookup (shared with every process that maps the file).
  void ReleaseMappedPages() const override {
    if (base_) ReleasePages(base_, index_->head().index_offset);
  }
  void StoredRanges(int64_t first, int64_t last, std::vector<StoredRange>* out) const override {
    first = std::max<int64_t>(first, 0);
    last = std::min<int64_t>(last, static_cast<int64_t>(index_->size()) - 1);
    std::vector<uint8_t> entries;
    for (int64_t at = first; at <= last;) {  // entries a chunk of the index at a time
      const uint64_t n = std::min<uint64_t>(uint64_t(last - at + 1), 1 << 16);
      entries.resize(static_cast<size_t>(n * 16));
      if (!index_->Entries(static_cast<uint64_t>(at), n, entries.data()).ok()) return;  // the reader reports it
      for (uint64_t k = 0; k < n; ++k) {
        uint64_t offset, length;
        std::memcpy(&offset, &entries[k * 16], 8);
        std::memcpy(&length, &entries[k * 16 + 8], 8);
        AppendRange(bytes_.get(), offset, length, out);
      }
      at += static_cast<int64_t>(n);
    }
  }
  void ByteSources(std::vector<const ByteSource*>* out) const override { out->push_back(bytes_.get()); }
  void DropSharedMeta() override { imagepack::DropSharedMeta(&meta_); }

 private:
  DatasetMeta meta_;
  std::string describe_;
  std::shared_ptr<const ByteSource> bytes_;
  const uint8_t* base_;  // bytes_'s mapping (null with pread)
  const bool pread_;
  std::unique_ptr<BlobIndex> index_;
};

}  // namespace

Result<std::unique_ptr<RecordSource>> NewMemorySource(DatasetMeta meta, std::string describe,
                                                      std::shared_ptr<const ByteSource> bytes,
                                                      std::unique_ptr<BlobIndex> index, bool pread) {
  const uint8_t* base = nullptr;
  if (!pread) {
    auto mapped = bytes->Map();
    if (!mapped.ok()) return mapped.status();
    base = mapped.value();
  }
  return std::unique_ptr<RecordSource>(new MemorySource(std::move(meta), std::move(describe), std::move(bytes),
                                                        base, std::move(index), pread));
}

void AppendRange(const ByteSource* source, uint64_t offset, uint64_t size, std::vector<StoredRange>* out) {
  if (size == 0) return;
  // Records are 16-byte aligned in a blob: a gap below 4 KB is one page.
  if (!out->empty() && out->back().source == source && offset >= out->back().offset &&
      offset <= out->back().offset + out->back().size + 4096) {
    out->back().size = std::max(out->back().size, offset + size - out->back().offset);
    return;
  }
  out->push_back({source, offset, size});
}

bool FindMapping(const void* p, const void** begin, size_t* size) {
  std::ifstream maps("/proc/self/maps");
  const uintptr_t at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx", &lo, &hi) != 2) continue;
    if (at >= lo && at < hi) {
      *begin = reinterpret_cast<const void*>(static_cast<uintptr_t>(lo));
      *size = static_cast<size_t>(hi - lo);
      return true;
    }
  }
  return false;
}

void ReleasePages(const void* addr, size_t size) {
  if (size == 0) return;
  // Whole pages inside [addr, addr + size) of a read-only file mapping;
  // MADV_DONTNEED there only unmaps (page-cache pages are not discarded).
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(addr) / page * page;  // mappings start on a page
  const uintptr_t end = (reinterpret_cast<uintptr_t>(addr) + size + page - 1) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace imagepack::internal
