#include "loader/read_ahead.h"

#include <algorithm>
#include <chrono>

#include "imagepack/byte_source.h"

namespace imagepack::internal {

ReadAhead::ReadAhead(const RecordSource* src, int threads, uint64_t chunk_bytes)
    : src_(src), remote_(src->remote()), chunk_(std::max<uint64_t>(chunk_bytes, 4096)) {
  for (int t = 0; t < std::max(1, threads); ++t) threads_.emplace_back([this] { Work(); });
  locator_ = std::thread([this] { Locate(); });
}

ReadAhead::~ReadAhead() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
    queue_.clear();
    to_locate_.clear();
  }
  work_cv_.notify_all();
  locate_cv_.notify_all();
  for (auto& t : threads_) t.join();
  locator_.join();
}

int64_t ReadAhead::Issue(std::vector<int64_t> records, bool runs) {
  std::sort(records.begin(), records.end());
  records.erase(std::unique(records.begin(), records.end()), records.end());
  std::lock_guard<std::mutex> g(mu_);
  const int64_t id = next_unit_++;
  outstanding_.emplace_back(id, 1);  // its location
  to_locate_.push_back({id, std::move(records), runs});
  locate_cv_.notify_one();
  return id;
}

void ReadAhead::Settle(int64_t unit, int delta) {
  auto it = std::find_if(outstanding_.begin(), outstanding_.end(), [&](const auto& u) { return u.first == unit; });
  if (it == outstanding_.end()) return;  // dropped by Reset
  it->second += delta;
  if (it->second == 0) {
    outstanding_.erase(it);
    done_cv_.notify_all();
  }
}

void ReadAhead::Locate() {
  std::vector<StoredRange> ranges;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    locate_cv_.wait(lock, [&] { return stop_ || !to_locate_.empty(); });
    if (stop_) return;
    Unit u = std::move(to_locate_.front());
    to_locate_.pop_front();
    const uint64_t generation = generation_;
    lock.unlock();
    // The unit's runs of consecutive records (first, last).
    std::vector<std::pair<int64_t, int64_t>> runs;
    const std::vector<int64_t>& r = u.records;
    for (size_t i = 0; i < r.size();) {
      size_t j = i + 1;
      while (j < r.size() && r[j] == r[j - 1] + 1) ++j;
      runs.emplace_back(r[i], r[j - 1]);
      i = j;
    }
    ranges.clear();
    for (const auto& [first, last] : runs) src_->StoredRanges(first, last, &ranges);
    if (remote_) {
      // One chunk a source (a shard): its GETs in flight together.
      std::vector<Chunk> chunks;
      for (const StoredRange& fr : ranges) {
        if (chunks.empty() || chunks.back().range.source != fr.source)
          chunks.push_back(Chunk{u.id, {fr.source, 0, 0}, {}});
        chunks.back().prefetch.push_back({fr.offset, fr.size});
      }
      lock.lock();
      if (generation != generation_) continue;
      for (Chunk& c : chunks) queue_.push_back(std::move(c));
      Settle(u.id, static_cast<int>(chunks.size()) - 1);
      if (!chunks.empty()) work_cv_.notify_all();
      continue;
    }
    for (const StoredRange& fr : ranges)
      if ((random_.count(fr.source) > 0) != u.runs) {
        fr.source->Advise(u.runs ? ByteSource::Access::kRandom : ByteSource::Access::kNormal);
        if (u.runs) random_.insert(fr.source);
        else random_.erase(fr.source);
      }
    lock.lock();
    if (generation != generation_) continue;
    int chunks = 0;
    for (const StoredRange& fr : ranges)
      for (uint64_t at = 0; at < fr.size; at += chunk_, ++chunks)
        queue_.push_back({u.id, {fr.source, fr.offset + at, std::min(chunk_, fr.size - at)}, {}});
    Settle(u.id, chunks - 1);
    if (chunks > 0) work_cv_.notify_all();
  }
}

void ReadAhead::Wait(int64_t id) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return outstanding_.empty() || outstanding_.front().first > id; });
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void ReadAhead::Reset() {
  std::lock_guard<std::mutex> g(mu_);
  queue_.clear();
  to_locate_.clear();
  outstanding_.clear();  // in-progress reads and locations find their unit gone
  ++generation_;
  done_cv_.notify_all();
}

int64_t ReadAhead::bytes_read() const {
  std::lock_guard<std::mutex> g(mu_);
  return bytes_;
}

double ReadAhead::wait_seconds() const {
  std::lock_guard<std::mutex> g(mu_);
  return wait_seconds_;
}

void ReadAhead::Work() {
  std::vector<uint8_t> buf(chunk_);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const Chunk c = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    // Into a scratch buffer: the point is the page cache (object storage:
    // the source's block cache). A failed read is not reported here; the
    // worker's own read of the record reports it.
    int64_t got = 0;
    if (!c.prefetch.empty()) got = c.range.source->Prefetch(c.prefetch);
    else if (c.range.source->ReadAt(c.range.offset, c.range.size, buf.data()).ok()) got = int64_t(c.range.size);
    lock.lock();
    if (got > 0) bytes_ += got;
    Settle(c.unit, -1);
  }
}

void ReadAheadPlan::Start(const RankOrder* records, const OrderSpec& spec, int64_t run_offset) {
  reads_->Reset();
  records_ = records;
  spec_ = spec;
  run_offset_ = run_offset;
  issued_ = 0;
  units_.clear();
}

int64_t ReadAheadPlan::WindowEnd(int64_t pos) const {
  const int64_t k = run_offset_ + pos;
  int64_t end = 0;
  for (int64_t i = 0; end <= k; ++i) end += WindowRecords(spec_, i);
  return std::max(pos + 1, end - run_offset_);
}

void ReadAheadPlan::Before(int64_t bn) {
  const int64_t n = records_->size();
  const bool blocks = spec_.kind == Order::kBlocks;
  const int64_t unit = blocks ? WindowRecords(spec_, 62) : int64_t(batch_size_);
  const int64_t need = std::min(n, (bn + 1) * batch_size_);
  const int64_t ahead = std::min(n, need + (blocks ? 2 : 1) * unit);
  while (issued_ < ahead) {
    const int64_t end = std::min(n, blocks ? WindowEnd(issued_) : issued_ + unit);
    std::vector<int64_t> recs(static_cast<size_t>(end - issued_));
    for (int64_t k = issued_; k < end; ++k) recs[static_cast<size_t>(k - issued_)] = (*records_)[k];
    units_.push_back({end, reads_->Issue(std::move(recs), blocks)});
    issued_ = end;
  }
  while (!units_.empty() && units_.front().first <= bn * batch_size_) units_.pop_front();
  int64_t last = -1;
  for (const auto& [end, id] : units_) {
    last = id;
    if (end >= need) break;
  }
  if (last >= 0) reads_->Wait(last);
}

}  // namespace imagepack::internal
