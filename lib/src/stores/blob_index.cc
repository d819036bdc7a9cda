#include "stores/blob_index.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "imagepack/record.h"
#include "stores/store_internal.h"

namespace imagepack::internal {
namespace {

constexpr uint64_t kHeaderSize = 64;

uint64_t Get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t Get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

Status ParseBlobHead(const std::string& path, uint64_t file_size,
                     const std::function<Status(uint64_t, uint64_t, const uint8_t**)>& read, BlobHead* out) {
  if (file_size < kHeaderSize)
    return Status::Corruption(path + ": blob is " + std::to_string(file_size) +
                              " bytes, shorter than its header (truncated)");
  const uint8_t* base = nullptr;
  IMAGEPACK_RETURN_IF_ERROR(read(0, kHeaderSize, &base));
  if (std::memcmp(base, kBlobMagic, 8) != 0) return Status::Corruption(path + ": not an imagepack blob (bad magic)");
  if (Get64(base + 56) != XXH3_64bits(base, 56))
    return Status::Corruption(path + ": blob header checksum mismatch (header damaged, or the file was not finished)");
  BlobHead h;
  h.layout = Get32(base + 8);
  if (h.layout != 1 && h.layout != 2)
    return Status::NotSupported(path + ": blob format version " + std::to_string(h.layout));
  const uint32_t shift = Get32(base + 12);
  h.count = Get64(base + 16);
  h.index_offset = Get64(base + 24);
  const uint64_t meta_offset = Get64(base + 32);
  const uint64_t meta_len = Get64(base + 40);
  h.index_sum = Get64(base + 48);
  if (h.layout == 1 && shift != 0) return Status::Corruption(path + ": blob header's reserved field is not 0");
  if (h.layout == 2 && (shift < 1 || shift > 40))
    return Status::Corruption(path + ": blob index chunk size 2^" + std::to_string(shift) + " (expected 2^1..2^40)");
  h.chunk_shift = h.layout == 1 ? 63 : static_cast<int>(shift);
  // Every offset and length is checked against the file before use.
  if (h.count > file_size / 16 || h.index_offset < kHeaderSize || h.index_offset > file_size ||
      h.count * 16 > file_size - h.index_offset)
    return Status::Corruption(path + ": blob index lies outside the file (" + std::to_string(file_size) +
                              " bytes): truncated or damaged");
  if (h.layout == 2) {
    const uint64_t chunks = (h.count + (uint64_t(1) << h.chunk_shift) - 1) >> h.chunk_shift;
    const uint64_t table = h.index_offset + h.count * 16;
    if (chunks * 8 > file_size - table)
      return Status::Corruption(path + ": blob index checksums lie outside the file (" + std::to_string(file_size) +
                                " bytes): truncated or damaged");
    const uint8_t* sums = nullptr;
    IMAGEPACK_RETURN_IF_ERROR(read(table, chunks * 8, &sums));
    if (h.index_sum != XXH3_64bits(sums, chunks * 8))
      return Status::Corruption(path + ": blob index checksum table mismatch at offset " + std::to_string(table));
    h.chunk_sums.resize(chunks);
    for (uint64_t c = 0; c < chunks; ++c) h.chunk_sums[c] = Get64(sums + c * 8);
  }
  if (meta_offset > file_size || meta_len > file_size - meta_offset)
    return Status::Corruption(path + ": blob metadata lies outside the file (" + std::to_string(file_size) +
                              " bytes): truncated or damaged");
  const uint8_t* meta_bytes = nullptr;
  IMAGEPACK_RETURN_IF_ERROR(read(meta_offset, meta_len, &meta_bytes));
  auto meta = ParseMeta(meta_bytes, meta_len);
  if (!meta.ok()) return meta.status().WithContext(path);
  if (static_cast<uint64_t>(meta->count) != h.count)
    return Status::Corruption(path + ": blob header says " + std::to_string(h.count) + " records, metadata says " +
                              std::to_string(meta->count));
  h.meta = std::move(meta.value());
  *out = std::move(h);
  return Status::Ok();
}

uint64_t IndexChunks(const BlobHead& head) {
  if (head.layout == 1) return 1;
  return head.chunk_sums.size();
}

void ChunkRange(const BlobHead& head, uint64_t chunk, uint64_t* first, uint64_t* count) {
  if (head.layout == 1) {
    *first = 0;
    *count = head.count;
    return;
  }
  *first = chunk << head.chunk_shift;
  *count = std::min<uint64_t>(uint64_t(1) << head.chunk_shift, head.count - *first);
}

namespace {

Status SumMismatch(const BlobHead& head, uint64_t chunk) {
  uint64_t first = 0, n = 0;
  ChunkRange(head, chunk, &first, &n);
  if (head.layout == 1)
    return Status::Corruption("blob index checksum mismatch at offset " + std::to_string(head.index_offset));
  const std::string records = n == 1 ? "record " + RecordKey(int64_t(first))
                                     : "records " + RecordKey(int64_t(first)) + ".." + RecordKey(int64_t(first + n - 1));
  return Status::Corruption("blob index checksum mismatch in chunk " + std::to_string(chunk) + " (" + records +
                            ", offset " + std::to_string(head.index_offset + first * 16) + ")");
}

// Entries of records first .. first + n - 1: each inside the record area.
Status CheckEntries(const BlobHead& head, uint64_t first, const uint8_t* entries, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t off = Get64(entries + i * 16), len = Get64(entries + i * 16 + 8);
    if (off < kHeaderSize || off > head.index_offset || len > head.index_offset - off)
      return Status::Corruption("record " + RecordKey(static_cast<int64_t>(first + i)) + " at offset " +
                                std::to_string(off) + " + " + std::to_string(len) + " lies outside the record area");
  }
  return Status::Ok();
}

uint64_t ChunkSum(const BlobHead& head, uint64_t chunk) {
  return head.layout == 1 ? head.index_sum : head.chunk_sums[chunk];
}

}  // namespace

Status CheckIndexChunk(const BlobHead& head, uint64_t chunk, const uint8_t* entries) {
  uint64_t first = 0, n = 0;
  ChunkRange(head, chunk, &first, &n);
  if (XXH3_64bits(entries, n * 16) != ChunkSum(head, chunk)) return SumMismatch(head, chunk);
  return CheckEntries(head, first, entries, n);
}

BlobIndex::BlobIndex(std::string path, BlobHead head, const ByteSource* bytes, const uint8_t* mapped)
    : path_(std::move(path)), head_(std::move(head)), bytes_(bytes), mapped_(mapped) {
  const uint64_t words = (IndexChunks(head_) + 63) / 64;
  checked_.reset(new std::atomic<uint64_t>[words]);
  for (uint64_t w = 0; w < words; ++w) checked_[w].store(0, std::memory_order_relaxed);
}

Result<std::unique_ptr<BlobIndex>> BlobIndex::Open(std::string path, BlobHead head, const ByteSource* bytes,
                                                   const uint8_t* mapped) {
  std::unique_ptr<BlobIndex> index(new BlobIndex(std::move(path), std::move(head), bytes, mapped));
  // Layout 1 has one checksum for the whole index: checked now, as ever.
  if (index->head_.layout == 1) IMAGEPACK_RETURN_IF_ERROR(index->CheckChunk(0, true));
  return index;
}

Status BlobIndex::CheckChunk(uint64_t chunk, bool named) const {
  uint64_t first = 0, n = 0;
  ChunkRange(head_, chunk, &first, &n);
  Status st;
  if (mapped_) {
    st = CheckIndexChunk(head_, chunk, mapped_ + first * 16);
  } else {
    // Read in pieces (a layout 1 index is one chunk of any size).
    XXH3_state_t* sum = XXH3_createState();
    XXH3_64bits_reset(sum);
    std::vector<uint8_t> piece(static_cast<size_t>(std::min<uint64_t>(n, 1 << 18) * 16));
    Status outside;  // the first entry outside the record area: reported if the checksum holds
    for (uint64_t at = 0; st.ok() && at < n; at += piece.size() / 16) {
      const uint64_t m = std::min<uint64_t>(piece.size() / 16, n - at);
      st = bytes_->ReadAt(head_.index_offset + (first + at) * 16, m * 16, piece.data());
      if (st.ok()) XXH3_64bits_update(sum, piece.data(), m * 16);
      if (st.ok() && outside.ok()) outside = CheckEntries(head_, first + at, piece.data(), m);
    }
    if (st.ok()) st = XXH3_64bits_digest(sum) != ChunkSum(head_, chunk) ? SumMismatch(head_, chunk) : outside;
    XXH3_freeState(sum);
  }
  if (!st.ok()) return named ? st.WithContext(path_) : st;
  checked_[chunk / 64].fetch_or(uint64_t(1) << (chunk % 64), std::memory_order_acq_rel);
  return Status::Ok();
}

Status BlobIndex::Entries(uint64_t first, uint64_t n, uint8_t* out) const {
  if (n == 0) return Status::Ok();
  for (uint64_t c = first >> head_.chunk_shift; c <= (first + n - 1) >> head_.chunk_shift; ++c)
    if (!Checked(c)) IMAGEPACK_RETURN_IF_ERROR(CheckChunk(c, true));
  if (mapped_) {
    std::memcpy(out, mapped_ + first * 16, n * 16);
    return Status::Ok();
  }
  return bytes_->ReadAt(head_.index_offset + first * 16, n * 16, out);
}

void BlobIndex::CheckAll(const std::function<void(const std::string&)>& report) const {
  for (uint64_t c = 0; c < IndexChunks(head_); ++c) {
    if (Checked(c)) continue;
    Status st = CheckChunk(c, false);
    if (!st.ok()) report(st.message());
  }
}

}  // namespace imagepack::internal
