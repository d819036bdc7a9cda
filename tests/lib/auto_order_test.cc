// AutoOrder from what the source says of itself: in RAM, not stored
// shuffled, small, or mostly cached -> random; object storage, or large and
// cold -> blocks. (What real stores say, stored_bytes and the file's
// pages in the page cache: store_test.cc and byte_source_test.cc.)
#include "loader/auto_order.h"

#include <gtest/gtest.h>

#include "testutil.h"

namespace imagepack::internal {
namespace {

class FakeSource : public RecordSource {
 public:
  FakeSource(bool shuffled, int64_t stored, int64_t cached, bool remote)
      : stored_(stored), cached_(cached), remote_(remote) {
    meta_.count = 10;
    if (shuffled) meta_.options_json = R"({"shuffle": 1})";
  }
  const DatasetMeta& meta() const override { return meta_; }
  std::unique_ptr<RecordCursor> NewCursor() const override { return nullptr; }
  std::string Describe() const override { return "fake"; }
  bool remote() const override { return remote_; }
  int64_t stored_bytes() const override { return stored_; }
  int64_t cached_bytes() const override { return cached_; }

 private:
  DatasetMeta meta_;
  int64_t stored_, cached_;
  bool remote_;
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
}

}  // namespace
}  // namespace imagepack::internal
