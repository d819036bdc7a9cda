// Reads ahead of the loader's decode threads: record ranges of a database
// file are read with large preads from a pool of threads sized to the
// device (OpenOptions / LoaderOptions::io_threads), so that by the time a
// worker reads a record it is in the page cache (a remote object: the
// ranges are prefetched into its block cache). Where a unit's records lie
// in the file is found by a thread of its own: that can touch index pages
// that are not in memory yet (LMDB's B-tree), and the caller (the loader's
// producer, which hands batches to the decode threads) must not wait
// behind the device for them. Internal.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "imagepack/byte_source.h"
#include "imagepack/order.h"
#include "imagepack/store.h"

namespace imagepack::internal {

class ReadAhead {
 public:
  // `threads` reads in flight, each of at most `chunk_bytes`.
  ReadAhead(const RecordSource* src, int threads, uint64_t chunk_bytes);
  ~ReadAhead();

  // Queues the reads of `records` (any order; they are sorted and merged
  // into runs) as one unit and returns its id at once: the records are
  // located, then read, in the order units were issued. A source in RAM
  // has nothing to read: the unit completes once located.
  // `runs`: the records form long runs (block order). The kernel is then
  // told not to read ahead of these reads (POSIX_FADV_RANDOM on the
  // file): past a 4 MB run it reads the next bytes of the file,
  // which block order wants at some random later time, and on a slow
  // device that spent ~16% of the bandwidth early. For short runs (random
  // order) its read-ahead around each record stays (POSIX_FADV_NORMAL).
  int64_t Issue(std::vector<int64_t> records, bool runs = false);
  // Blocks until every read of unit `id` is done (or dropped by Reset).
  void Wait(int64_t id);
  // Drops the queued reads (a new epoch or a restore); reads in progress
  // finish.
  void Reset();

  int64_t bytes_read() const;
  double wait_seconds() const;  // time Wait() blocked

 private:
  struct Chunk {
    int64_t unit;
    StoredRange range;
    // A remote source: the unit's ranges of it, prefetched by one worker
    // with the GETs in flight together (range names only the source).
    std::vector<ByteRange> prefetch;
  };
  struct Unit {
    int64_t id;
    std::vector<int64_t> records;  // sorted, distinct
    bool runs;
  };
  void Work();
  void Locate();
  // Adds `delta` to unit's count of pending steps; at zero it is complete.
  // Called with mu_ held.
  void Settle(int64_t unit, int delta);

  const RecordSource* src_;
  const bool remote_;  // src_ reads a remote object: chunks prefetch its ranges
  const uint64_t chunk_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, locate_cv_, done_cv_;
  std::deque<Unit> to_locate_;
  std::deque<Chunk> queue_;
  // (unit, steps pending: its location, then its chunks), ascending
  std::vector<std::pair<int64_t, int>> outstanding_;
  uint64_t generation_ = 0;  // Reset() count: a unit located across one is dropped
  int64_t next_unit_ = 0;
  int64_t bytes_ = 0;
  double wait_seconds_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
  std::thread locator_;
  std::set<const ByteSource*> random_;  // sources advised Access::kRandom (the locator's own)
};

// What the loader reads ahead, and when: the reads of the next positions of
// this rank's order are kept in flight (two windows of blocks ahead with
// kBlocks, a batch otherwise), and a batch waits for its own. A window's
// first batch needs the whole window (its records are shuffled across it);
// with one window ahead the device idled whenever decoding a window outran
// reading the next (HDD-like device: 4,893 images/s after the first batch;
// two ahead keep it busy). Blocks: a unit is a window of the rank's run
// (they ramp up from one block), so the first batch waits for the first
// window only. Producer thread only.
class ReadAheadPlan {
 public:
  ReadAheadPlan(std::unique_ptr<ReadAhead> reads, int batch_size)
      : reads_(std::move(reads)), batch_size_(batch_size) {}
  // A new epoch (or a restore): this rank's records (kept by reference
  // until the next Start), the epoch's order, and where the rank's run
  // begins (its entry of position 0: start / world). Drops the reads still
  // queued.
  void Start(const RankOrder* records, const OrderSpec& spec, int64_t run_offset);
  // Before batch `bn` is filled: issues the reads up to the horizon, then
  // waits for those of batch bn.
  void Before(int64_t bn);
  // Positions of the indices handed to the reads so far.
  int64_t issued() const { return issued_; }
  const ReadAhead& reads() const { return *reads_; }

 private:
  // The end (a position of the indices) of the window that holds `pos`.
  int64_t WindowEnd(int64_t pos) const;

  std::unique_ptr<ReadAhead> reads_;
  const int batch_size_;
  const RankOrder* records_ = nullptr;
  OrderSpec spec_;
  int64_t run_offset_ = 0;
  int64_t issued_ = 0;
  std::deque<std::pair<int64_t, int64_t>> units_;  // (end position, unit id), ascending
};

}  // namespace imagepack::internal
