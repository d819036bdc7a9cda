// AutoOrder from what the source says of itself: in RAM, not stored
// shuffled, small, or mostly cached -> random; object storage, or large and
// cold -> blocks. (What real stores say, stored_bytes and the file's
// pages in the page cache: store_test.cc and byte_source_test.cc.)
#include "loader/auto_order.h"

#include <gtest/gtest.h>

#include "imagepack/byte_source.h"
#include "testutil.h"

namespace imagepack::internal {
namespace {

// A file or object of `size` bytes, `cached` of them in memory.
class FakeBytes : public ByteSource {
 public:
  FakeBytes(int64_t size, int64_t cached, bool remote) : size_(size), cached_(cached), remote_(remote) {}
  uint64_t size() const override { return static_cast<uint64_t>(size_); }
  Status ReadAt(uint64_t, uint64_t, uint8_t*) const override { return Status::IOError("fake: not read"); }
  std::string identity() const override { return "fake"; }
  std::string Describe() const override { return "fake"; }
  bool remote() const override { return remote_; }
  uint64_t CachedBytes() const override { return static_cast<uint64_t>(cached_); }

 private:
  int64_t size_, cached_;
  bool remote_;
};

// A source over one or more byte sources (shards).
class FakeSource : public RecordSource {
 public:
  FakeSource(bool shuffled, int64_t stored, int64_t cached, bool remote) : FakeSource(shuffled, {{stored, cached, remote}}) {}
  FakeSource(bool shuffled, std::vector<FakeBytes> parts) : parts_(std::move(parts)) {
    meta_.count = 10;
    if (shuffled) meta_.options_json = R"({"shuffle": 1})";
  }
  const DatasetMeta& meta() const override { return meta_; }
  std::unique_ptr<RecordCursor> NewCursor() const override { return nullptr; }
  std::string Describe() const override { return "fake"; }
  void ByteSources(std::vector<const ByteSource*>* out) const override {
    for (const FakeBytes& p : parts_) out->push_back(&p);
  }

 private:
  DatasetMeta meta_;
  std::vector<FakeBytes> parts_;
};

constexpr int64_t kMB = 1 << 20;

TEST(AutoOrder, FromWhatTheSourceSays) {
  EXPECT_TRUE(StoredShuffled(FakeSource(true, 0, 0, false).meta()));
  EXPECT_FALSE(StoredShuffled(FakeSource(false, 0, 0, false).meta()));
  // Large and cold: blocks; in RAM or at least half cached: random.
  EXPECT_EQ(AutoOrder(false, FakeSource(true, 1000 * kMB, 0, false)), Order::kBlocks);
  EXPECT_EQ(AutoOrder(true, FakeSource(true, 1000 * kMB, 0, false)), Order::kRandom);
  EXPECT_EQ(AutoOrder(false, FakeSource(true, 1000 * kMB, 499 * kMB, false)), Order::kBlocks);
  EXPECT_EQ(AutoOrder(false, FakeSource(true, 1000 * kMB, 500 * kMB, false)), Order::kRandom);
  // Under 256 MB: the first epoch caches it.
  EXPECT_EQ(AutoOrder(false, FakeSource(true, 255 * kMB, 0, false)), Order::kRandom);
  // Packed in class order: blocks would hold one class each.
  EXPECT_EQ(AutoOrder(false, FakeSource(false, 1000 * kMB, 0, false)), Order::kRandom);
  // Object storage: blocks whatever its size (every read is a request).
  EXPECT_EQ(AutoOrder(false, FakeSource(true, 10 * kMB, 0, true)), Order::kBlocks);
  EXPECT_EQ(AutoOrder(false, FakeSource(false, 10 * kMB, 0, true)), Order::kRandom);
  // Shards: their sizes and cached bytes add up; one remote shard makes
  // the dataset remote.
  const FakeSource halves(true, {{600 * kMB, 600 * kMB, false}, {600 * kMB, 0, false}});
  EXPECT_EQ(halves.stored_bytes(), 1200 * kMB);
  EXPECT_EQ(halves.cached_bytes(), 600 * kMB);
  EXPECT_FALSE(halves.remote());
  EXPECT_EQ(AutoOrder(false, halves), Order::kRandom);
  EXPECT_EQ(AutoOrder(false, FakeSource(true, {{600 * kMB, 599 * kMB, false}, {600 * kMB, 0, false}})),
            Order::kBlocks);
  const FakeSource mixed(true, {{10 * kMB, 10 * kMB, false}, {10 * kMB, 0, true}});
  EXPECT_TRUE(mixed.remote());
  EXPECT_EQ(AutoOrder(false, mixed), Order::kBlocks);
}

}  // namespace
}  // namespace imagepack::internal
