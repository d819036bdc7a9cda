#include "sources/item_spill.h"

#include <algorithm>
#include <cstring>

namespace imagepack::internal {
namespace {

template <typename T>
void PutPod(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}
void PutBytes(std::string* out, const void* p, size_t n) {
  PutPod<uint32_t>(out, static_cast<uint32_t>(n));
  out->append(static_cast<const char*>(p), n);
}

// Reads from [p, end), every length checked against what is left.
struct Cursor {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;
  template <typename T>
  T Pod() {
    T v{};
    if (!ok || size_t(end - p) < sizeof v) {
      ok = false;
      return v;
    }
    std::memcpy(&v, p, sizeof v);
    p += sizeof v;
    return v;
  }
  // `count` elements of `size` bytes.
  const uint8_t* Take(size_t count, size_t size) {
    if (!ok || (size != 0 && count > size_t(end - p) / size)) {
      ok = false;
      return nullptr;
    }
    const uint8_t* at = p;
    p += count * size;
    return at;
  }
  std::string String() {
    const uint32_t n = Pod<uint32_t>();
    const uint8_t* at = Take(n, 1);
    return ok ? std::string(reinterpret_cast<const char*>(at), n) : std::string();
  }
  template <typename T>
  std::vector<T> Vector() {
    const uint32_t n = Pod<uint32_t>();
    const uint8_t* at = Take(n, sizeof(T));
    std::vector<T> v(ok ? n : 0);
    if (ok && n) std::memcpy(v.data(), at, n * sizeof(T));
    return v;
  }
};

// An item as it is spilled: its length, then its bytes.
Status AddTo(SpillFile* file, const SourceItem& item, std::string* scratch) {
  scratch->clear();
  PutPod<uint32_t>(scratch, 0);
  EncodeItem(item, scratch);
  const uint32_t len = static_cast<uint32_t>(scratch->size() - 4);
  std::memcpy(scratch->data(), &len, 4);
  return file->Append(scratch->data(), scratch->size());
}

}  // namespace

void EncodeItem(const SourceItem& item, std::string* out) {
  PutBytes(out, item.rel.data(), item.rel.size());
  PutPod<int32_t>(out, item.label);
  PutPod<int64_t>(out, item.db_index);
  PutPod<int32_t>(out, item.archive);
  PutPod<uint64_t>(out, item.offset);
  PutPod<uint64_t>(out, item.size);
  PutPod<uint32_t>(out, static_cast<uint32_t>(item.fields.size()));
  for (const SourceField& f : item.fields) {
    PutPod<int32_t>(out, f.slot);
    PutBytes(out, f.file.data(), f.file.size());
    PutPod<int32_t>(out, f.archive);
    PutPod<uint64_t>(out, f.offset);
    PutPod<uint64_t>(out, f.size);
    PutBytes(out, f.ints.data(), f.ints.size() * sizeof(int32_t));
    PutBytes(out, f.floats.data(), f.floats.size() * sizeof(float));
    PutPod<uint32_t>(out, static_cast<uint32_t>(f.boxes.size()));
    for (const Box& b : f.boxes) {
      PutPod<float>(out, b.x0), PutPod<float>(out, b.y0), PutPod<float>(out, b.x1), PutPod<float>(out, b.y1);
      PutPod<int32_t>(out, b.label);
    }
    PutBytes(out, f.text.data(), f.text.size());
  }
}

bool DecodeItem(const uint8_t* p, const uint8_t* end, SourceItem* item) {
  Cursor c{p, end};
  item->rel = c.String();
  item->label = c.Pod<int32_t>();
  item->db_index = c.Pod<int64_t>();
  item->archive = c.Pod<int32_t>();
  item->offset = c.Pod<uint64_t>();
  item->size = c.Pod<uint64_t>();
  const uint32_t fields = c.Pod<uint32_t>();
  item->fields.clear();
  for (uint32_t i = 0; c.ok && i < fields; ++i) {
    SourceField f;
    f.slot = c.Pod<int32_t>();
    f.file = c.String();
    f.archive = c.Pod<int32_t>();
    f.offset = c.Pod<uint64_t>();
    f.size = c.Pod<uint64_t>();
    // Lengths in bytes, as PutBytes wrote them.
    const uint32_t ints = c.Pod<uint32_t>();
    const uint8_t* ip = c.Take(ints, 1);
    if (c.ok && ints % 4 == 0) {
      f.ints.resize(ints / 4);
      if (ints) std::memcpy(f.ints.data(), ip, ints);
    }
    const uint32_t floats = c.Pod<uint32_t>();
    const uint8_t* fp = c.Take(floats, 1);
    if (c.ok && floats % 4 == 0) {
      f.floats.resize(floats / 4);
      if (floats) std::memcpy(f.floats.data(), fp, floats);
    }
    const uint32_t boxes = c.Pod<uint32_t>();
    for (uint32_t b = 0; c.ok && b < boxes; ++b) {
      Box box;
      box.x0 = c.Pod<float>(), box.y0 = c.Pod<float>(), box.x1 = c.Pod<float>(), box.y1 = c.Pod<float>();
      box.label = c.Pod<int32_t>();
      f.boxes.push_back(box);
    }
    f.text = c.String();
    item->fields.push_back(std::move(f));
  }
  return c.ok && c.p == end;
}

Result<std::unique_ptr<ItemSpill>> ItemSpill::Create(const std::string& dir) {
  auto file = SpillFile::Create(dir, size_t(4) << 20);
  if (!file.ok()) return file.status();
  return std::unique_ptr<ItemSpill>(new ItemSpill(std::move(file.value())));
}

Status ItemSpill::Add(const SourceItem& item) {
  ++count_;
  return AddTo(file_.get(), item, &scratch_);
}

Status ItemSpill::Finish() { return file_->Flush(); }

Result<bool> ItemSpill::Reader::Next(SourceItem* item) {
  constexpr size_t kRead = size_t(4) << 20;
  for (;;) {
    const size_t have = buf_.size() - used_;
    if (have >= 4) {
      uint32_t len;
      std::memcpy(&len, buf_.data() + used_, 4);
      if (have - 4 >= len) {
        const uint8_t* p = buf_.data() + used_ + 4;
        if (!DecodeItem(p, p + len, item)) return Status::Corruption("a scratch file of items is damaged");
        used_ += 4 + size_t(len);
        return true;
      }
    }
    // Refill: what is left, then the next bytes of the file.
    const uint64_t file_at = at_ + used_;
    if (file_at + have >= spill_->file_->size()) {
      if (have > 0) return Status::Corruption("a scratch file of items ends inside an item");
      return false;
    }
    // From the first byte not used (an item cut by the last read included),
    // at least that item's length.
    size_t need = kRead;
    if (have >= 4) {
      uint32_t len;
      std::memcpy(&len, buf_.data() + used_, 4);
      need = std::max(need, 4 + size_t(len));
    }
    std::vector<uint8_t> next(need);
    const size_t n = static_cast<size_t>(std::min<uint64_t>(next.size(), spill_->file_->size() - file_at));
    IMAGEPACK_RETURN_IF_ERROR(spill_->file_->ReadAt(file_at, n, next.data()));
    next.resize(n);
    buf_ = std::move(next);
    at_ = file_at;
    used_ = 0;
  }
}

Result<std::unique_ptr<KeyedSpill>> KeyedSpill::Create(const std::string& dir, uint64_t key_count,
                                                       uint64_t expected_bytes, uint64_t bucket_bytes) {
  // At most 512 buckets (a descriptor and a buffer each).
  const uint64_t n = std::clamp<uint64_t>((expected_bytes + bucket_bytes - 1) / std::max<uint64_t>(bucket_bytes, 1),
                                          1, std::min<uint64_t>(512, std::max<uint64_t>(key_count, 1)));
  std::vector<std::unique_ptr<SpillFile>> buckets;
  for (uint64_t b = 0; b < n; ++b) {
    auto f = SpillFile::Create(dir, size_t(256) << 10);
    if (!f.ok()) return f.status();
    buckets.push_back(std::move(f.value()));
  }
  return std::unique_ptr<KeyedSpill>(new KeyedSpill(std::move(buckets), key_count));
}

Status KeyedSpill::Add(uint64_t key, const SourceItem& item) {
  const size_t b = static_cast<size_t>(static_cast<unsigned __int128>(std::min(key, key_count_ - 1)) *
                                       buckets_.size() / std::max<uint64_t>(key_count_, 1));
  scratch_.clear();
  PutPod<uint64_t>(&scratch_, key);
  PutPod<uint32_t>(&scratch_, 0);
  EncodeItem(item, &scratch_);
  const uint32_t len = static_cast<uint32_t>(scratch_.size() - 12);
  std::memcpy(scratch_.data() + 8, &len, 4);
  ++count_;
  return buckets_[b]->Append(scratch_.data(), scratch_.size());
}

Status KeyedSpill::Finish() {
  for (auto& b : buckets_) IMAGEPACK_RETURN_IF_ERROR(b->Flush());
  return Status::Ok();
}

Status KeyedSpill::LoadBucket(size_t b) {
  SpillFile& f = *buckets_[b];
  std::vector<uint8_t> bytes(static_cast<size_t>(f.size()));
  if (!bytes.empty()) IMAGEPACK_RETURN_IF_ERROR(f.ReadAt(0, bytes.size(), bytes.data()));
  buckets_[b].reset();  // its scratch file goes now
  loaded_.clear();
  for (size_t at = 0; at < bytes.size();) {
    if (bytes.size() - at < 12) return Status::Corruption("a scratch file of items is damaged");
    uint64_t key;
    uint32_t len;
    std::memcpy(&key, &bytes[at], 8);
    std::memcpy(&len, &bytes[at + 8], 4);
    if (bytes.size() - at - 12 < len) return Status::Corruption("a scratch file of items is damaged");
    SourceItem item;
    if (!DecodeItem(&bytes[at + 12], &bytes[at + 12] + len, &item))
      return Status::Corruption("a scratch file of items is damaged");
    loaded_.emplace_back(key, std::move(item));
    at += 12 + size_t(len);
  }
  std::stable_sort(loaded_.begin(), loaded_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  loaded_at_ = 0;
  return Status::Ok();
}

Result<bool> KeyedSpill::Next(SourceItem* item) {
  while (loaded_at_ >= loaded_.size()) {
    if (next_bucket_ >= buckets_.size()) return false;
    IMAGEPACK_RETURN_IF_ERROR(LoadBucket(next_bucket_++));
  }
  *item = std::move(loaded_[loaded_at_++].second);
  if (loaded_at_ == loaded_.size()) loaded_ = std::vector<std::pair<uint64_t, SourceItem>>();
  return true;
}

}  // namespace imagepack::internal
