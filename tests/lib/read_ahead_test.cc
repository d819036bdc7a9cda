// ReadAhead: units are located on a thread of their own, then read in
// chunks by the I/O threads, in the order they were issued. The source here
// is a real file of fixed-size records whose location step can be held
// shut, as a cold index page on a slow device holds it.
#include "loader/read_ahead.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "imagepack/byte_source.h"
#include "stores/memory_source.h"
#include "testutil.h"

namespace imagepack::internal {
namespace {

using testing::TempDir;

constexpr int64_t kRecords = 64;
constexpr uint64_t kRecordBytes = 3000;  // chunks of 4096 split runs unevenly

// Threads that have read through a ReaderExits source and ended since:
// an event a test can wait for (a reader thread ends only once its
// ReadAhead has been told to stop).
class ReaderExits {
 public:
  int count() const {
    std::lock_guard<std::mutex> g(mu_);
    return exited_;
  }
  // Blocks until more than `n` have ended, or `deadline` passes: false.
  bool AwaitMoreThan(int n, std::chrono::seconds deadline) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, deadline, [&] { return exited_ > n; });
  }
  void Ended() {
    std::lock_guard<std::mutex> g(mu_);
    ++exited_;
    cv_.notify_all();
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  int exited_ = 0;
};

// A file's bytes, each thread that reads them counted in `exits` when it
// ends (a thread_local's destructor runs as its thread exits).
class ExitReportingFile : public ByteSource {
 public:
  ExitReportingFile(std::unique_ptr<ByteSource> file, ReaderExits* exits) : file_(std::move(file)), exits_(exits) {}
  uint64_t size() const override { return file_->size(); }
  Status ReadAt(uint64_t offset, uint64_t n, uint8_t* out) const override {
    struct Reader {
      ReaderExits* exits = nullptr;
      ~Reader() {
        if (exits) exits->Ended();
      }
    };
    thread_local Reader reader;
    reader.exits = exits_;
    return file_->ReadAt(offset, n, out);
  }
  std::string identity() const override { return file_->identity(); }
  std::string Describe() const override { return file_->Describe(); }

 private:
  std::unique_ptr<ByteSource> file_;
  ReaderExits* exits_;
};

class GatedSource : public RecordSource {
 public:
  explicit GatedSource(const std::string& path) {
    std::ofstream(path, std::ios::binary) << std::string(kRecords * kRecordBytes, 'x');
    file_ = std::make_unique<ExitReportingFile>(std::move(OpenByteSource(path).value()), &reader_exits_);
    meta_.count = kRecords;
  }
  // Reader threads of this source's file that have ended.
  const ReaderExits& reader_exits() const { return reader_exits_; }
  const DatasetMeta& meta() const override { return meta_; }
  std::unique_ptr<RecordCursor> NewCursor() const override { return nullptr; }
  std::string Describe() const override { return "gated test source"; }
  void StoredRanges(int64_t first, int64_t last, std::vector<StoredRange>* out) const override {
    std::unique_lock<std::mutex> lock(mu_);
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    if (in_ram_) return;
    out->push_back({file_.get(), static_cast<uint64_t>(first) * kRecordBytes,
                    static_cast<uint64_t>(last - first + 1) * kRecordBytes});
  }
  void Close() {
    std::lock_guard<std::mutex> g(mu_);
    open_ = false;
  }
  void Open() {
    std::lock_guard<std::mutex> g(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Blocks until StoredRanges has been entered `n` times in all.
  void AwaitEntered(int n) const {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return entered_ >= n; });
  }
  void SetInRam() { in_ram_ = true; }
  int entered() const {
    std::lock_guard<std::mutex> g(mu_);
    return entered_;
  }

 private:
  ReaderExits reader_exits_;  // before file_, which points to it
  std::unique_ptr<ByteSource> file_;
  DatasetMeta meta_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable int entered_ = 0;
  bool open_ = true;
  bool in_ram_ = false;
};

class ReadAheadTest : public ::testing::Test {
 protected:
  TempDir dir_;
  GatedSource src_{dir_ / "data"};
};

TEST_F(ReadAheadTest, ReadsEveryByteOfTheIssuedUnits) {
  ReadAhead ra(&src_, 3, 4096);
  // Two runs (0..9, 20..22) in one unit, one run in the next.
  const int64_t a = ra.Issue({22, 3, 0, 1, 2, 4, 5, 6, 7, 8, 9, 20, 21, 3});
  const int64_t b = ra.Issue({40, 41});
  EXPECT_LT(a, b);
  ra.Wait(b);
  EXPECT_EQ(ra.bytes_read(), static_cast<int64_t>((10 + 3 + 2) * kRecordBytes));
}

TEST_F(ReadAheadTest, IssueDoesNotWaitForTheLocation) {
  src_.Close();
  ReadAhead ra(&src_, 2, 4096);
  const int64_t a = ra.Issue({0, 1, 2});
  src_.AwaitEntered(1);  // the locator is held inside StoredRanges
  // A second unit queues behind it; Issue must return while the first
  // location is still held (it would block forever were it synchronous).
  auto second = std::async(std::launch::async, [&] { return ra.Issue({10, 11}); });
  const bool returned = second.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  const int64_t read_while_held = ra.bytes_read();
  src_.Open();  // before any assertion: a failed one must not leave the locator held
  ASSERT_TRUE(returned);
  EXPECT_EQ(read_while_held, 0);
  const int64_t b = second.get();
  ra.Wait(b);
  EXPECT_GT(b, a);
  EXPECT_EQ(ra.bytes_read(), static_cast<int64_t>(5 * kRecordBytes));
}

TEST_F(ReadAheadTest, ResetDropsAUnitBeingLocated) {
  src_.Close();
  ReadAhead ra(&src_, 2, 4096);
  ra.Issue({0, 1, 2, 3});
  src_.AwaitEntered(1);
  ra.Reset();  // a new epoch: the unit in the locator's hands is gone
  const int64_t b = ra.Issue({30});
  src_.Open();
  ra.Wait(b);
  EXPECT_EQ(ra.bytes_read(), static_cast<int64_t>(kRecordBytes));  // unit b alone
}

TEST_F(ReadAheadTest, NothingToReadCompletesTheUnit) {
  src_.SetInRam();
  ReadAhead ra(&src_, 2, 4096);
  const int64_t a = ra.Issue({0, 1, 2});
  ra.Wait(a);
  EXPECT_EQ(ra.bytes_read(), 0);
}

// A remote object: records are never read here, its ranges are handed to
// Prefetch (one call a unit, its GETs in flight together), which answers
// the bytes it fetched.
class RemoteBytes : public ByteSource {
 public:
  uint64_t size() const override { return kRecords * kRecordBytes; }
  Status ReadAt(uint64_t, uint64_t, uint8_t*) const override { return Status::IOError("remote: read by Prefetch"); }
  std::string identity() const override { return "etag"; }
  std::string Describe() const override { return "s3://bucket/shard"; }
  bool remote() const override { return true; }
  int64_t Prefetch(const std::vector<ByteRange>& ranges) const override {
    std::lock_guard<std::mutex> g(mu_);
    calls_.push_back(ranges);
    int64_t n = 0;
    for (const ByteRange& r : ranges) n += static_cast<int64_t>(r.size);
    return n;
  }
  std::vector<std::vector<ByteRange>> calls() const {
    std::lock_guard<std::mutex> g(mu_);
    return calls_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::vector<std::vector<ByteRange>> calls_;
};

// Two remote shards of kRecords records each, records laid end to end.
class RemoteShards : public RecordSource {
 public:
  RemoteShards() { meta_.count = 2 * kRecords; }
  const DatasetMeta& meta() const override { return meta_; }
  std::unique_ptr<RecordCursor> NewCursor() const override { return nullptr; }
  std::string Describe() const override { return "two remote shards"; }
  void ByteSources(std::vector<const ByteSource*>* out) const override {
    for (const RemoteBytes& s : shards_) out->push_back(&s);
  }
  void StoredRanges(int64_t first, int64_t last, std::vector<StoredRange>* out) const override {
    for (int64_t i = first; i <= last; ++i)
      AppendRange(&shards_[i / kRecords], static_cast<uint64_t>(i % kRecords) * kRecordBytes, kRecordBytes, out);
  }
  const RemoteBytes& shard(int i) const { return shards_[i]; }

 private:
  DatasetMeta meta_;
  RemoteBytes shards_[2];
};

TEST(ReadAheadRemote, EachShardsRangesArePrefetchedInOneCall) {
  RemoteShards src;
  ASSERT_TRUE(src.remote());
  ReadAhead ra(&src, 2, 4096);
  // Runs 0..2 and 10..11 of shard 0, 64..65 (0..1 of shard 1): one unit.
  const int64_t a = ra.Issue({65, 11, 0, 1, 2, 10, 64});
  ra.Wait(a);
  EXPECT_EQ(ra.bytes_read(), static_cast<int64_t>(7 * kRecordBytes));
  const auto first = src.shard(0).calls(), second = src.shard(1).calls();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].size(), 2u);
  EXPECT_EQ(first[0][0].offset, 0u);
  EXPECT_EQ(first[0][0].size, 3 * kRecordBytes);
  EXPECT_EQ(first[0][1].offset, 10 * kRecordBytes);
  EXPECT_EQ(first[0][1].size, 2 * kRecordBytes);
  ASSERT_EQ(second.size(), 1u);
  ASSERT_EQ(second[0].size(), 1u);
  EXPECT_EQ(second[0][0].offset, 0u);
  EXPECT_EQ(second[0][0].size, 2 * kRecordBytes);
}

TEST_F(ReadAheadTest, DestroyedWhileLocationIsHeld) {
  std::future<bool> opener;
  {
    ReadAhead ra(&src_, 1, 4096);
    ra.Wait(ra.Issue({0}));  // its one I/O thread has read (and counts when it ends)
    src_.Close();
    ra.Issue({1});
    src_.AwaitEntered(2);  // the locator holds unit 1
    ra.Issue({2});
    // The location returns once the destructor has begun: its I/O thread
    // ends only after the stop (and the queue dropped), never on a timer.
    const int ended = src_.reader_exits().count();
    opener = std::async(std::launch::async, [&, ended] {
      const bool stopped = src_.reader_exits().AwaitMoreThan(ended, std::chrono::seconds(120));
      src_.Open();  // in any case: a destructor waiting for the locator must not wait for ever
      return stopped;
    });
  }  // joins the locator once the held location returns; unit 2 dropped
  EXPECT_TRUE(opener.get()) << "the I/O thread did not end within 120 s of the destructor";
  EXPECT_EQ(src_.entered(), 2);  // the third unit was never located
}

// ReadAheadPlan: blocks keep two windows beyond the batch's in flight
// (windows ramp up 1, 2 blocks, then window_blocks); random order one batch;
// each batch's own records are read before Before() returns; a new epoch
// starts over.
TEST_F(ReadAheadTest, PlanKeepsTwoWindowsAheadWithBlocksAndOneBatchOtherwise) {
  OrderSpec shuffled;  // any order of the records: the plan reads what the rank order names
  shuffled.kind = Order::kRandom;
  const RankOrder indices(EpochPermutation(kRecords, shuffled, 0), 0, 1, false);
  OrderSpec blocks;
  blocks.kind = Order::kBlocks;
  blocks.block_records = 4;
  blocks.window_blocks = 2;
  ASSERT_EQ(WindowRecords(blocks, 0), 4);
  ASSERT_EQ(WindowRecords(blocks, 1), 8);
  ASSERT_EQ(WindowRecords(blocks, 2), 8);
  ReadAheadPlan plan(std::make_unique<ReadAhead>(&src_, 2, 4096), 4);
  plan.Start(&indices, blocks, 0);
  plan.Before(0);  // needs positions 0..3; two windows of 8 beyond: up to 20
  EXPECT_EQ(plan.issued(), 20);
  EXPECT_GE(plan.reads().bytes_read(), static_cast<int64_t>(4 * kRecordBytes));  // batch 0's window, read
  plan.Before(3);  // needs 0..15: up to 32, on window ends (4, 12, 20, 28, 36)
  EXPECT_EQ(plan.issued(), 36);
  EXPECT_GE(plan.reads().bytes_read(), static_cast<int64_t>(12 * kRecordBytes));
  // Random order: one batch beyond the one needed.
  OrderSpec random;
  plan.Start(&indices, random, 0);
  EXPECT_EQ(plan.issued(), 0);
  plan.Before(0);
  EXPECT_EQ(plan.issued(), 8);
  plan.Before(5);
  EXPECT_EQ(plan.issued(), 28);
  // The end of the rank's indices bounds it.
  plan.Before(15);
  EXPECT_EQ(plan.issued(), kRecords);
  // A run resumed mid-way (entry 6 of the run): windows end at run entries
  // 4, 12, 20, ..., so the first unit is positions 0..5 (entries 6..11).
  plan.Start(&indices, blocks, 6);
  plan.Before(0);
  EXPECT_EQ(plan.issued(), 6 + 8 + 8);
}

}  // namespace
}  // namespace imagepack::internal
