#include "pack/pack_inputs.h"

#include "imagepack/permutation.h"
#include "sources/item_spill.h"

namespace imagepack::internal {
namespace {

// Position k's item: pi(k) when shuffled, else k.
struct Order {
  bool shuffled = false;
  KeyedPermutation pi;
  Order(uint64_t n, int64_t seed) : shuffled(seed >= 0), pi(n, static_cast<uint64_t>(seed)) {}
  uint64_t At(uint64_t k) const { return shuffled ? pi(k) : k; }
};

class InMemory : public PackInputs {
 public:
  InMemory(std::vector<SourceItem> items, int64_t seed)
      : items_(std::move(items)), order_(items_.size(), seed) {}
  int64_t size() const override { return static_cast<int64_t>(items_.size()); }
  Result<bool> Next(SourceItem* item) override {
    if (next_ >= items_.size()) return false;
    *item = std::move(items_[order_.At(next_++)]);
    return true;
  }

 private:
  std::vector<SourceItem> items_;
  Order order_;
  uint64_t next_ = 0;
};

// A database's records, read when packed: only the index travels.
class Records : public PackInputs {
 public:
  Records(int64_t count, int64_t seed) : count_(count), order_(static_cast<uint64_t>(count), seed) {}
  int64_t size() const override { return count_; }
  Result<bool> Next(SourceItem* item) override {
    if (next_ >= count_) return false;
    *item = SourceItem{};
    item->db_index = static_cast<int64_t>(order_.At(static_cast<uint64_t>(next_++)));
    return true;
  }

 private:
  int64_t count_;
  Order order_;
  int64_t next_ = 0;
};

class FromSpill : public PackInputs {
 public:
  explicit FromSpill(std::shared_ptr<ItemSpill> spill) : spill_(std::move(spill)), reader_(spill_->Read()) {}
  int64_t size() const override { return spill_->size(); }
  Result<bool> Next(SourceItem* item) override { return reader_.Next(item); }

 private:
  std::shared_ptr<ItemSpill> spill_;
  ItemSpill::Reader reader_;
};

class FromKeyed : public PackInputs {
 public:
  explicit FromKeyed(std::unique_ptr<KeyedSpill> spill) : spill_(std::move(spill)) {}
  int64_t size() const override { return spill_->size(); }
  Result<bool> Next(SourceItem* item) override { return spill_->Next(item); }

 private:
  std::unique_ptr<KeyedSpill> spill_;
};

bool Mine(const SourceItem& item, const Shard& shard) { return ShardOfPath(item.rel, shard.count) == shard.index; }

}  // namespace

Result<std::unique_ptr<PackInputs>> PackInputs::Open(DatasetSource* source, const Shard& shard, int64_t seed,
                                                     const std::string& scratch_dir) {
  if (source->db_records) {
    if (shard.count > 1) return Status::InvalidArgument("a database's records shard by path: list them first");
    return std::unique_ptr<PackInputs>(new Records(source->db->size(), seed));
  }
  if (!source->spilled) {
    std::vector<SourceItem> mine;
    if (shard.count <= 1) {
      mine = std::move(source->items);
    } else {
      for (auto& item : source->items)
        if (Mine(item, shard)) mine.push_back(std::move(item));
    }
    source->items = std::vector<SourceItem>();
    return std::unique_ptr<PackInputs>(new InMemory(std::move(mine), seed));
  }
  std::shared_ptr<ItemSpill> spill = std::move(source->spilled);
  SourceItem item;
  if (shard.count > 1) {  // this shard's items, in a spill of their own
    auto kept = ItemSpill::Create(scratch_dir);
    if (!kept.ok()) return kept.status();
    auto reader = spill->Read();
    for (;;) {
      auto more = reader.Next(&item);
      if (!more.ok()) return more.status();
      if (!more.value()) break;
      if (Mine(item, shard)) IMAGEPACK_RETURN_IF_ERROR(kept.value()->Add(item));
    }
    IMAGEPACK_RETURN_IF_ERROR(kept.value()->Finish());
    spill = std::move(kept.value());
  }
  if (seed < 0) return std::unique_ptr<PackInputs>(new FromSpill(std::move(spill)));
  // Item j goes to position pi^-1(j): spread over buckets of positions,
  // each sorted in memory when its turn comes (32 MB of items a bucket).
  const uint64_t n = static_cast<uint64_t>(spill->size());
  const KeyedPermutation pi(n, static_cast<uint64_t>(seed));
  auto keyed = KeyedSpill::Create(scratch_dir, n, spill->bytes(), uint64_t(32) << 20);
  if (!keyed.ok()) return keyed.status();
  auto reader = spill->Read();
  for (uint64_t j = 0;; ++j) {
    auto more = reader.Next(&item);
    if (!more.ok()) return more.status();
    if (!more.value()) break;
    IMAGEPACK_RETURN_IF_ERROR(keyed.value()->Add(pi.Inverse(j), item));
  }
  IMAGEPACK_RETURN_IF_ERROR(keyed.value()->Finish());
  return std::unique_ptr<PackInputs>(new FromKeyed(std::move(keyed.value())));
}

}  // namespace imagepack::internal
