#include "imagepack/loader.h"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <unistd.h>
#include <mutex>
#include <thread>

#include "loader/auto_order.h"
#include "loader/batch_fields.h"
#include "loader/batch_maker.h"
#include "loader/output.h"
#include "loader/sample_render.h"
#include "imagepack/classes.h"
#include "imagepack/store.h"
#include "loader/read_ahead.h"
#include "base/threads.h"

namespace imagepack {

namespace {

using Clock = std::chrono::steady_clock;
using internal::Batch;

// Spare batch buffers, shared with the OwnedBatch handles given out, which
// may outlive the loader.
struct BatchPool {
  std::mutex mu;
  std::vector<std::unique_ptr<Batch>> free;
  size_t keep = 3;
  void Put(std::unique_ptr<Batch> b) {
    std::lock_guard<std::mutex> g(mu);
    if (free.size() < keep) free.push_back(std::move(b));
  }
  std::unique_ptr<Batch> Take() {
    std::lock_guard<std::mutex> g(mu);
    if (free.empty()) return std::make_unique<Batch>();
    std::unique_ptr<Batch> b = std::move(free.back());
    free.pop_back();
    return b;
  }
};

// The metadata a loader with LoaderOptions::classes hands out: those
// classes, and the label counts moved to their indices.
DatasetMeta WithClasses(const DatasetMeta& meta, const std::vector<std::string>& classes, const ClassMap& map) {
  if (classes.empty() || map.identity()) return meta;
  DatasetMeta m = meta;
  m.classes = classes;
  if (!meta.label_counts.empty()) {
    m.label_counts.assign(classes.size(), 0);
    for (size_t i = 0; i < meta.label_counts.size(); ++i)
      m.label_counts[static_cast<size_t>(map.Map(static_cast<int64_t>(i)))] += meta.label_counts[i];
  }
  return m;
}

// kEval's shorter edge before the crop: size / 0.875 unless given.
LoaderOptions WithEvalResize(LoaderOptions o) {
  if (o.eval_resize <= 0) o.eval_resize = static_cast<int>(std::lround(o.size / 0.875));
  return o;
}

// The loader's output size at most `size` can be asked for (Open,
// SetOutputSize): bounds that keep a typo from becoming an allocation the
// machine cannot hold.
Status CheckOutputSize(const LoaderOptions& o, int size) {
  if (size < 1) return Status::InvalidArgument("output size must be positive");
  if (size > 16384) return Status::InvalidArgument("output size must be at most 16384 (eval resize 65536, pad 16384)");
  if (const double batch_bytes = double(o.batch_size) * size * size * 3 *
                                 (o.output_dtype == DType::kUint8 ? 1 : 1 + DTypeBytes(o.output_dtype));
      batch_bytes * (o.prefetch + 2) > double(uint64_t(64) << 30))
    return Status::InvalidArgument("batches of " + std::to_string(o.batch_size) + " x " + std::to_string(size) +
                                   "^2 pixels with prefetch " + std::to_string(o.prefetch) +
                                   " would need over 64 GiB of batch buffers");
  return Status::Ok();
}

class LoaderImpl : public Loader {
 public:
  // `mix`: the sources of a mix (then `src` is its records), or null.
  LoaderImpl(LoaderOptions o, std::unique_ptr<RecordSource> src, OrderSpec spec, ClassMap class_map,
             std::unique_ptr<OpenedMix> mix)
      : eval_resize_given_(o.eval_resize > 0), o_(WithEvalResize(std::move(o))), src_(std::move(src)),
        class_map_(std::move(class_map)), mix_(std::move(mix)),
        meta_(mix_ ? mix_->meta : WithClasses(src_->meta(), o_.classes, class_map_)),
        channels_(o_.channels > 0 ? o_.channels : src_->meta().channels),
        maker_(o_, *src_, class_map_, mix_.get(), channels_),
        spec_(spec), epoch_spec_(spec),
        next_size_(o_.size) {
    pool_->keep = static_cast<size_t>(std::max(0, o_.prefetch)) + 2;
    // Object storage: always (a unit's GETs are in flight together).
    const bool remote = src_->remote();
    // Object storage: 2 units at a time (each unit's GETs are in flight
    // together): with 4, the later, larger windows took the link from the
    // first and the first batch came after 1.2 s instead of 0.5 s.
    const int io = o_.io_threads >= 0 ? o_.io_threads
                   : remote           ? 2
                   : (spec_.kind == Order::kBlocks && !o_.in_ram) ? 4
                                                                  : 0;
    if (io > 0 && (!o_.in_ram || remote))
      read_ahead_ = std::make_unique<internal::ReadAheadPlan>(
          std::make_unique<internal::ReadAhead>(src_.get(), io, static_cast<uint64_t>(o_.read_chunk_mb * (1 << 20))),
          o_.batch_size);
    releaser_ = std::thread([this] { ReleaseLoop(); });
    producer_ = std::thread([this] { ProduceLoop(); });
  }
  ~LoaderImpl() override {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = quit_ = true;
    }
    cv_.notify_all();
    producer_.join();
    {
      std::lock_guard<std::mutex> g(rel_mu_);
      rel_stop_ = true;
    }
    rel_cv_.notify_all();
    releaser_.join();
  }

  const DatasetMeta& meta() const override { return meta_; }
  int channels() const override { return channels_; }
  int64_t dataset_size() const override { return src_->size(); }
  int64_t epoch_length() const override {
    if (!mix_) return src_->size();
    int64_t n = 0;
    for (int64_t c : mix_->counts) n += c;
    return n;
  }
  std::vector<SourceInfo> sources() const override {
    if (!mix_) {
      std::string name;
      for (const auto& p : o_.paths) name += (name.empty() ? "" : ",") + p;
      return {{name, src_->size(), src_->size()}};
    }
    std::vector<SourceInfo> out;
    for (size_t i = 0; i < mix_->counts.size(); ++i)
      out.push_back({mix_->names[i], mix_->starts[i + 1] - mix_->starts[i], mix_->counts[i]});
    return out;
  }
  Order order() const override { return spec_.kind; }
  int64_t block_records() const override { return spec_.block_records; }
  int64_t samples_per_epoch() const override {
    const int64_t n = epoch_length() - start_, w = o_.world_size;
    return o_.even_partition ? (n + w - 1) / w : std::max<int64_t>(0, (n - o_.rank + w - 1) / w);
  }
  int64_t batches_per_epoch() const override {
    const int64_t s = samples_per_epoch();
    return o_.drop_last ? s / o_.batch_size : (s + o_.batch_size - 1) / o_.batch_size;
  }

  void StartEpoch(int64_t epoch) override { Restore(LoaderState{epoch, 0}); }

  Status SetOutputSize(int size) override {
    IMAGEPACK_RETURN_IF_ERROR(CheckOutputSize(o_, size));
    next_size_ = size;
    return Status::Ok();
  }
  int output_size() const override { return started_ ? o_.size : next_size_; }

  LoaderState state() const override {
    const int64_t consumed = next_consume_ * int64_t(o_.batch_size) * o_.world_size;
    const bool blocks = epoch_spec_.kind == Order::kBlocks;
    return {epoch_, std::min(epoch_length(), start_ + consumed), epoch_spec_.kind, blocks ? epoch_spec_.world : 0,
            blocks ? epoch_spec_.block_records : 0, blocks ? epoch_spec_.window_blocks : 0, o_.size,
            mix_ ? mix_->description : std::string()};
  }

  Status CheckState(const LoaderState& state) const override {
    IMAGEPACK_RETURN_IF_ERROR(CompareMixes(state.mix, mix_ ? mix_->description : std::string()));
    if (state.position < 0 || state.position > epoch_length())
      return Status::InvalidArgument("position " + std::to_string(state.position) + " outside the epoch's " +
                                     std::to_string(epoch_length()) + " positions");
    return Status::Ok();
  }

  void Restore(const LoaderState& state) override {
    StopProducer();
    if (current_) Recycle(std::move(current_));
    if (const int size = state.size > 0 ? state.size : next_size_; size != o_.size && CheckOutputSize(o_, size).ok())
      ApplySize(size);
    epoch_ = state.epoch;
    start_ = std::clamp<int64_t>(state.position, 0, epoch_length());
    epoch_spec_ = spec_;
    if (state.order != Order::kAuto) epoch_spec_.kind = state.order;
    if (state.world > 0) epoch_spec_.world = state.world;
    if (state.block_records > 0) epoch_spec_.block_records = state.block_records;
    if (state.window_blocks > 0) epoch_spec_.window_blocks = state.window_blocks;
    // Computed position by position: nothing here grows with the dataset
    // (a mix's order is a list: its counts are per epoch and interleaved).
    EpochPermutation order;
    if (mix_) {
      // A mix's order is world-independent: random (or sequential), its
      // reads ahead a batch at a time.
      if (epoch_spec_.kind != Order::kSequential) epoch_spec_.kind = Order::kRandom;
      MixSpec ms{{}, mix_->counts, epoch_spec_.kind, o_.seed};
      for (size_t i = 0; i + 1 < mix_->starts.size(); ++i) ms.sizes.push_back(mix_->starts[i + 1] - mix_->starts[i]);
      order = EpochPermutation::FromList(MixOrder(ms, epoch_));
    } else {
      order = EpochPermutation(src_->size(), epoch_spec_, epoch_);
    }
    mine_ = RankOrder(std::move(order), o_.rank, o_.world_size, o_.even_partition, start_);
    maker_.SetEpoch(epoch_, start_, &mine_);
    if (read_ahead_) read_ahead_->Start(&mine_, epoch_spec_, start_ / o_.world_size);
    next_consume_ = 0;
    for (auto& b : queue_) Recycle(std::move(b));
    queue_.clear();
    started_ = true;
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = false;
      ++requested_;
    }
    cv_.notify_all();
  }

  Result<int> Next(uint8_t* images, int64_t* labels, int64_t* indices) override {
    auto v = NextView();
    if (!v.ok()) return v.status();
    if (v->count == 0) return 0;
    std::memcpy(images, v->images, size_t(v->count) * maker_.sample_bytes() * maker_.element_bytes());
    std::memcpy(labels, v->labels, size_t(v->count) * sizeof(int64_t));
    if (indices) std::memcpy(indices, v->indices, size_t(v->count) * sizeof(int64_t));
    return v->count;
  }

  Result<BatchView> NextView() override {
    if (current_) Recycle(std::move(current_));  // the previous view ends here
    auto b = Take();
    if (!b.ok()) return b.status();
    if (!b.value()) return BatchView{};
    current_ = std::move(b.value());
    return BatchView{current_->count, Images(*current_), current_->labels.data(), current_->indices.data(),
                     current_->fields.Views()};
  }

  Result<OwnedBatch> NextOwned() override {
    if (current_) Recycle(std::move(current_));
    auto b = Take();
    if (!b.ok()) return b.status();
    if (!b.value()) return OwnedBatch{};
    Batch* raw = b.value().release();
    OwnedBatch out{raw->count, Images(*raw), raw->labels.data(), raw->indices.data(), raw->fields.Views(), nullptr};
    std::weak_ptr<BatchPool> pool = pool_;
    out.hold = std::shared_ptr<void>(raw, [pool](void* p) {
      std::unique_ptr<Batch> batch(static_cast<Batch*>(p));
      if (auto alive = pool.lock()) alive->Put(std::move(batch));
    });
    return out;
  }

  LoaderStats stats() const override {
    LoaderStats s;
    maker_.AddStats(&s);
    s.wait_seconds = wait_seconds_;
    if (read_ahead_) {
      s.read_ahead_bytes = read_ahead_->reads().bytes_read();
      s.read_ahead_wait_seconds = read_ahead_->reads().wait_seconds();
    }
    s.remote_requests = src_->remote_requests();
    s.remote_bytes = src_->remote_bytes();
    return s;
  }

 private:
  // The next batch of the epoch off the queue (nullptr at its end), or its
  // error.
  Result<std::unique_ptr<Batch>> Take() {
    if (!started_) return Status::InvalidArgument("Next() before StartEpoch()");
    if (next_consume_ >= batches_per_epoch()) return std::unique_ptr<Batch>();
    const auto t0 = Clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty(); });
    std::unique_ptr<Batch> b = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    cv_.notify_all();
    wait_seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
    ++next_consume_;
    if (!b->status.ok()) {
      Status st = b->status;
      Recycle(std::move(b));
      return st;
    }
    return b;
  }

  // The producer thread lives as long as the loader (its threads and open
  // databases outlast every epoch and size change); each Restore hands it
  // an epoch. Returns when it is idle with nothing requested.
  void StopProducer() {
    std::unique_lock<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !busy_ && picked_ == requested_; });
  }

  void ProduceLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return quit_ || picked_ != requested_; });
      if (quit_) return;
      picked_ = requested_;
      busy_ = true;
      lock.unlock();
      Produce();
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  // What depends on the output size, for `size` (between epochs,
  // the producer idle): eval_resize follows it unless it was given.
  void ApplySize(int size) {
    o_.size = size;
    if (!eval_resize_given_) o_.eval_resize = static_cast<int>(std::lround(size / 0.875));
    maker_.SetOptions(o_);
  }
  // A mapped database's pages stay mapped after a read, so a pass over the
  // file would grow the resident set to its size (5 GB for 20k raw 256-px
  // images). After each batch this thread unmaps them (the page cache keeps
  // the data; safe while workers read: a page maps back with the same
  // bytes). Unmapping costs ~0.2 us per page; here it overlaps the next
  // batch instead of delaying it.
  void ReleaseLoop() {
    std::unique_lock<std::mutex> lock(rel_mu_);
    while (true) {
      rel_cv_.wait(lock, [&] { return rel_stop_ || rel_pending_; });
      if (rel_stop_) return;
      rel_pending_ = false;
      lock.unlock();
      src_->ReleaseMappedPages();
      lock.lock();
    }
  }

  void Recycle(std::unique_ptr<Batch> b) { pool_->Put(std::move(b)); }
  uint8_t* Images(Batch& b) const { return maker_.Images(b); }

  void Produce() {
    const int64_t nbatches = batches_per_epoch();
    for (int64_t bn = 0; bn < nbatches; ++bn) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || static_cast<int>(queue_.size()) < std::max(1, o_.prefetch); });
        if (stop_) return;
      }
      std::unique_ptr<Batch> b = pool_->Take();
      b->number = bn;
      if (read_ahead_) read_ahead_->Before(bn);
      maker_.Fill(*b, bn);  // one batch is being filled while `prefetch` wait ready
      {
        std::lock_guard<std::mutex> g(rel_mu_);
        rel_pending_ = true;
      }
      rel_cv_.notify_all();
      {
        std::lock_guard<std::mutex> g(mu_);
        queue_.push_back(std::move(b));
      }
      cv_.notify_all();
    }
  }

  const bool eval_resize_given_;
  LoaderOptions o_;  // size: the current epoch's
  std::unique_ptr<RecordSource> src_;
  ClassMap class_map_;
  std::unique_ptr<OpenedMix> mix_;  // a mix's sources (src_ holds their records); null: one dataset
  DatasetMeta meta_;  // the source's, with LoaderOptions::classes; a mix's own
  int channels_;
  internal::BatchMaker maker_;  // each batch of the epoch, on the loader's threads
  const OrderSpec spec_;  // the order epochs start with
  OrderSpec epoch_spec_;  // the current epoch's (Restore may continue another)
  int next_size_;         // the output size epochs start with (SetOutputSize)
  bool started_ = false;  // an epoch was started or restored
  std::unique_ptr<internal::ReadAheadPlan> read_ahead_;  // null: none
  int64_t epoch_ = 0;
  int64_t start_ = 0;  // the epoch position this rank's order begins at
  RankOrder mine_;     // this rank's records from start_ on
  int64_t next_consume_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Batch>> queue_;
  std::shared_ptr<BatchPool> pool_ = std::make_shared<BatchPool>();
  std::unique_ptr<Batch> current_;  // the batch the last NextView() shows
  bool stop_ = false;  // the producer abandons the epoch in progress
  bool quit_ = false;  // the producer thread ends
  bool busy_ = false;  // the producer is making an epoch's batches
  uint64_t requested_ = 0, picked_ = 0;  // epochs handed to the producer, and taken up by it
  std::thread producer_;
  std::thread releaser_;
  std::mutex rel_mu_;
  std::condition_variable rel_cv_;
  bool rel_pending_ = false, rel_stop_ = false;
  double wait_seconds_ = 0;
};

}  // namespace

Result<std::unique_ptr<Loader>> Loader::Open(const LoaderOptions& o) {
  if (o.batch_size < 1) return Status::InvalidArgument("batch size must be positive");
  if (o.size < 1) return Status::InvalidArgument("output size must be positive");
  if (!o.sources.empty() && !o.paths.empty())
    return Status::InvalidArgument("give the loader paths (one dataset) or sources (a mix), not both");
  if (!o.sources.empty() && o.shuffle && o.order == Order::kBlocks)
    return Status::InvalidArgument("a mix is read in random order: block order gives each rank blocks of its own, "
                                   "which an order the same for every world size cannot");
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    return Status::InvalidArgument("rank " + std::to_string(o.rank) + " not in [0, " + std::to_string(o.world_size) + ")");
  if (o.channels != 0 && o.channels != 1 && o.channels != 3) return Status::InvalidArgument("channels must be 1 or 3");
  if (o.block_mb <= 0 || o.window_blocks < 1 || o.read_chunk_mb <= 0)
    return Status::InvalidArgument("block size, window and read chunk must be positive");
  // Bounds on what a caller (Python included) can ask for, so a typo is an
  // error rather than an allocation or a thread count the machine cannot
  // hold.
  if (o.size > 16384 || o.eval_resize < 0 || o.eval_resize > 65536 || o.pad < 0 || o.pad > 16384 ||
      o.crop_size < 0 || o.crop_size > 16384)
    return Status::InvalidArgument("output size must be at most 16384 (eval resize 65536, pad 16384)");
  if (o.batch_size > 65536) return Status::InvalidArgument("batch size must be at most 65536");
  if (o.threads < 0 || o.threads > 1024 || o.io_threads < -1 || o.io_threads > 256)
    return Status::InvalidArgument("threads must be in 0..1024 and io_threads in -1..256");
  if (o.prefetch < 1 || o.prefetch > 64) return Status::InvalidArgument("prefetch must be in 1..64");
  if (o.block_mb > 1024 || o.read_chunk_mb > 1024 || o.window_blocks > 65536)
    return Status::InvalidArgument("block and read chunk at most 1024 MB, window at most 65536 blocks");
  IMAGEPACK_RETURN_IF_ERROR(CheckAugmentOptions(o.augment));
  if (!(o.erase.p >= 0 && o.erase.p <= 1)) return Status::InvalidArgument("random erasing's p must be in [0, 1]");
  if (!(o.hflip >= 0 && o.hflip <= 1)) return Status::InvalidArgument("hflip must be in [0, 1]");
  IMAGEPACK_RETURN_IF_ERROR(CheckOutputSize(o, o.size));
  // Records are read with pread, from storage or from the in-RAM copy
  // (each worker thread has its own cursor, and a record is done with
  // before that cursor reads the next): no page faults, and resident
  // memory does not grow with the file.
  OpenOptions oo;
  oo.in_ram = o.in_ram;
  oo.lock_in_ram = o.lock_in_ram;
  oo.pread_records = true;
  oo.cache_dir = o.cache_dir;
  oo.cache_limit_mb = o.cache_limit_mb;
  oo.ca_file = o.ca_file;
  oo.split = o.split;
  oo.image_column = o.image_column;
  oo.label_column = o.label_column;
  oo.no_class = o.no_class;
  oo.skip_unreadable = o.on_corrupt == CorruptPolicy::kSkip;
  std::unique_ptr<OpenedMix> mix;
  if (!o.sources.empty()) {
    auto m = OpenMix(o.sources, o.epoch_size, o.classes, o.classes_from, o.channels, oo);
    if (!m.ok()) return m.status();
    mix = std::make_unique<OpenedMix>(std::move(m.value()));
  } else if (o.epoch_size != 0) {
    return Status::InvalidArgument("epoch_size applies to a mix (sources)");
  }
  auto src = mix ? Result<std::unique_ptr<RecordSource>>(std::move(mix->records)) : OpenDatabases(o.paths, oo);
  if (!src.ok()) return src.status();
  const RecordSource& s = *src.value();
  if (s.size() == 0) return Status::InvalidArgument("dataset " + s.Describe() + " is empty");
  if (Status keys = CheckBatchKeys(s.meta().fields); !keys.ok()) return keys.WithContext(s.Describe());
  IMAGEPACK_RETURN_IF_ERROR(internal::CheckAugmentsFit(o, s.meta().fields, s.Describe()));
  // Blocks are of the files' (objects') bytes: what the device reads.
  const int64_t file_bytes = s.stored_bytes();
  if (auto out = internal::OutputConverter::Make(o.output_dtype, o.norm_mean, o.norm_std,
                                                 o.channels > 0 ? o.channels : s.meta().channels); !out.ok())
    return out.status();
  OrderSpec spec;
  spec.seed = o.seed;
  spec.world = o.world_size;
  spec.kind = !o.shuffle                  ? Order::kSequential
              : mix                     ? Order::kRandom
              : o.order != Order::kAuto ? o.order
                                        : internal::AutoOrder(o.in_ram, s);
  spec.window_blocks = o.window_blocks;
  spec.block_records = BlockRecords(s.size(), file_bytes, static_cast<int64_t>(o.block_mb * (1 << 20)),
                                    s.meta().records_per_value);
  ClassMap class_map;
  if (!o.classes.empty() && !mix) {
    auto m = MatchClasses(o.classes, o.classes_from.empty() ? "the given class list" : o.classes_from, s.meta().classes,
                          s.Describe());
    if (!m.ok()) return m.status();
    class_map = std::move(m.value());
  }
  return std::unique_ptr<Loader>(new LoaderImpl(o, std::move(src.value()), spec, std::move(class_map), std::move(mix)));
}

}  // namespace imagepack
