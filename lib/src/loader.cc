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

#include "imagepack/mask.h"
#include "imagepack/store.h"
#include "read_ahead.h"
#include "threads.h"

namespace imagepack {

std::vector<int64_t> EpochIndices(int64_t n, bool shuffle, uint64_t seed, int64_t epoch, int rank, int world,
                                  bool even_partition, int64_t start) {
  OrderSpec spec;
  spec.kind = shuffle ? Order::kRandom : Order::kSequential;
  spec.seed = seed;
  return DealPositions(EpochOrder(n, spec, epoch), rank, world, even_partition, start);
}

Result<std::vector<int64_t>> ReadLabels(const std::vector<std::string>& paths) {
  OpenOptions oo;
  oo.pread_records = true;
  auto src = OpenDatabases(paths, oo);
  if (!src.ok()) return src.status();
  auto cur = src.value()->NewCursor();
  std::vector<int64_t> labels(static_cast<size_t>(src.value()->size()));
  for (int64_t i = 0; i < src.value()->size(); ++i) {
    auto r = cur->Read(i, /*verify_checksum=*/false);
    if (!r.ok()) return r.status().WithContext(src.value()->Describe());
    labels[static_cast<size_t>(i)] = r->fields.label;
  }
  return labels;
}

namespace {

using Clock = std::chrono::steady_clock;

// One output array of a batch (BatchField), owning its bytes.
struct FieldOut {
  std::string name;
  DType dtype = DType::kUint8;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

struct Batch {
  int64_t number = -1;
  int count = 0;
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
  std::vector<int64_t> indices;  // dataset index of each sample
  Status status;
  // Datasets with fields: the fixed-size arrays (second images, masks,
  // crop_box) written in place by the workers, then the padded ones made
  // from each sample's variable part (`var[slot][sample]`).
  std::vector<FieldOut> outs;
  std::vector<std::vector<std::vector<uint8_t>>> var;
  std::vector<BatchField> Fields() {
    std::vector<BatchField> f;
    for (auto& o : outs) f.push_back({o.name, o.dtype, o.shape, o.bytes.data()});
    return f;
  }
};

// Reverses the rows of `planes` planes of rows x row_bytes (a vertical flip).
void FlipRows(uint8_t* data, int planes, int rows, size_t row_bytes) {
  for (int p = 0; p < planes; ++p) {
    uint8_t* base = data + size_t(p) * rows * row_bytes;
    for (int y = 0; y < rows / 2; ++y)
      std::swap_ranges(base + size_t(y) * row_bytes, base + size_t(y + 1) * row_bytes,
                       base + size_t(rows - 1 - y) * row_bytes);
  }
}

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

class LoaderImpl : public Loader {
 public:
  LoaderImpl(LoaderOptions o, std::unique_ptr<RecordSource> src, OrderSpec spec)
      : o_(std::move(o)), src_(std::move(src)),
        channels_(o_.channels > 0 ? o_.channels : src_->meta().channels),
        arena_(internal::ResolveThreads(o_.threads)), spec_(spec), epoch_spec_(spec) {
    sample_bytes_ = size_t(o_.size) * o_.size * channels_;
    pool_->keep = static_cast<size_t>(std::max(0, o_.prefetch)) + 2;
    for (int t = 0; t < arena_.max_concurrency(); ++t) cursors_.push_back(src_->NewCursor());
    scratch_.resize(cursors_.size());
    if (o_.eval_resize <= 0) o_.eval_resize = static_cast<int>(std::lround(o_.size / 0.875));
    fields_ = src_->meta().fields;
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
      read_ahead_ = std::make_unique<internal::ReadAhead>(src_.get(), io,
                                                          static_cast<uint64_t>(o_.read_chunk_mb * (1 << 20)));
    releaser_ = std::thread([this] { ReleaseLoop(); });
  }
  ~LoaderImpl() override {
    StopProducer();
    {
      std::lock_guard<std::mutex> g(rel_mu_);
      rel_stop_ = true;
    }
    rel_cv_.notify_all();
    releaser_.join();
  }

  const DatasetMeta& meta() const override { return src_->meta(); }
  int channels() const override { return channels_; }
  int64_t dataset_size() const override { return src_->size(); }
  Order order() const override { return spec_.kind; }
  int64_t block_records() const override { return spec_.block_records; }
  int64_t samples_per_epoch() const override {
    const int64_t n = src_->size() - start_, w = o_.world_size;
    return o_.even_partition ? (n + w - 1) / w : std::max<int64_t>(0, (n - o_.rank + w - 1) / w);
  }
  int64_t batches_per_epoch() const override {
    const int64_t s = samples_per_epoch();
    return o_.drop_last ? s / o_.batch_size : (s + o_.batch_size - 1) / o_.batch_size;
  }

  void StartEpoch(int64_t epoch) override { Restore(LoaderState{epoch, 0}); }

  LoaderState state() const override {
    const int64_t consumed = next_consume_ * int64_t(o_.batch_size) * o_.world_size;
    const bool blocks = epoch_spec_.kind == Order::kBlocks;
    return {epoch_, std::min(src_->size(), start_ + consumed), epoch_spec_.kind, blocks ? epoch_spec_.world : 0,
            blocks ? epoch_spec_.block_records : 0, blocks ? epoch_spec_.window_blocks : 0};
  }

  void Restore(const LoaderState& state) override {
    StopProducer();
    if (current_) Recycle(std::move(current_));
    epoch_ = state.epoch;
    start_ = std::clamp<int64_t>(state.position, 0, src_->size());
    epoch_spec_ = spec_;
    if (state.order != Order::kAuto) epoch_spec_.kind = state.order;
    if (state.world > 0) epoch_spec_.world = state.world;
    if (state.block_records > 0) epoch_spec_.block_records = state.block_records;
    if (state.window_blocks > 0) epoch_spec_.window_blocks = state.window_blocks;
    indices_ = DealPositions(EpochOrder(src_->size(), epoch_spec_, epoch_), o_.rank, o_.world_size,
                             o_.even_partition, start_);
    if (read_ahead_) read_ahead_->Reset();
    ahead_issued_ = 0;
    ahead_units_.clear();
    next_consume_ = 0;
    stop_ = false;
    for (auto& b : queue_) Recycle(std::move(b));
    queue_.clear();
    producer_ = std::thread([this] { Produce(); });
  }

  Result<int> Next(uint8_t* images, int64_t* labels, int64_t* indices) override {
    auto v = NextView();
    if (!v.ok()) return v.status();
    if (v->count == 0) return 0;
    std::memcpy(images, v->images, size_t(v->count) * sample_bytes_);
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
    return BatchView{current_->count, current_->images.data(), current_->labels.data(), current_->indices.data(),
                     current_->Fields()};
  }

  Result<OwnedBatch> NextOwned() override {
    if (current_) Recycle(std::move(current_));
    auto b = Take();
    if (!b.ok()) return b.status();
    if (!b.value()) return OwnedBatch{};
    Batch* raw = b.value().release();
    OwnedBatch out{raw->count, raw->images.data(), raw->labels.data(), raw->indices.data(), raw->Fields(), nullptr};
    std::weak_ptr<BatchPool> pool = pool_;
    out.hold = std::shared_ptr<void>(raw, [pool](void* p) {
      std::unique_ptr<Batch> batch(static_cast<Batch*>(p));
      if (auto alive = pool.lock()) alive->Put(std::move(batch));
    });
    return out;
  }

  LoaderStats stats() const override {
    LoaderStats s;
    s.images = images_.load();
    s.bytes_read = bytes_.load();
    s.read_seconds = read_ns_.load() / 1e9;
    s.decode_seconds = decode_ns_.load() / 1e9;
    s.wait_seconds = wait_seconds_;
    s.skipped = skipped_.load();
    if (read_ahead_) {
      s.read_ahead_bytes = read_ahead_->bytes_read();
      s.read_ahead_wait_seconds = read_ahead_->wait_seconds();
    }
    s.remote_requests = src_->remote_requests();
    s.remote_bytes = src_->remote_bytes();
    return s;
  }

 private:
  // The next batch of the epoch off the queue (nullptr at its end), or its
  // error.
  Result<std::unique_ptr<Batch>> Take() {
    if (!producer_.joinable()) return Status::InvalidArgument("Next() before StartEpoch()");
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

  void StopProducer() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (producer_.joinable()) producer_.join();
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
      if (read_ahead_) ReadAheadFor(bn);
      Fill(*b, bn);  // one batch is being filled while `prefetch` wait ready
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

  // Keeps the reads of the next positions of this rank's order in flight
  // (two windows of blocks ahead with kBlocks, a batch otherwise), then
  // waits for those of batch bn: its workers then read from the page cache.
  // A window's first batch needs the whole window (its records are
  // shuffled across it); with one window ahead the device idled whenever
  // decoding a window outran reading the next (HDD-like device: 4,893
  // images/s after the first batch; two ahead keep it busy).
  void ReadAheadFor(int64_t bn) {
    const int64_t n = static_cast<int64_t>(indices_.size());
    const bool blocks = epoch_spec_.kind == Order::kBlocks;
    const int64_t unit = blocks ? WindowRecords(epoch_spec_, 62) : int64_t(o_.batch_size);
    const int64_t need = std::min(n, (bn + 1) * o_.batch_size);
    const int64_t ahead = std::min(n, need + (blocks ? 2 : 1) * unit);
    while (ahead_issued_ < ahead) {
      // Blocks: a unit is a window of this rank's run (they ramp up from one
      // block), so the first batch waits for the first window only.
      const int64_t end = std::min(n, blocks ? NextWindowEnd(ahead_issued_) : ahead_issued_ + unit);
      std::vector<int64_t> recs(indices_.begin() + ahead_issued_, indices_.begin() + end);
      ahead_units_.push_back({end, read_ahead_->Issue(std::move(recs), blocks)});
      ahead_issued_ = end;
    }
    int64_t last = -1;
    while (!ahead_units_.empty() && ahead_units_.front().first <= bn * o_.batch_size) ahead_units_.pop_front();
    for (const auto& [end, id] : ahead_units_) {
      last = id;
      if (end >= need) break;
    }
    if (last >= 0) read_ahead_->Wait(last);
  }

  // The end (a position of indices_) of the window of this rank's run that
  // holds position `pos`: the run's entry is start_ / world + pos.
  int64_t NextWindowEnd(int64_t pos) const {
    const int64_t k = start_ / o_.world_size + pos;
    int64_t end = 0;
    for (int64_t i = 0; end <= k; ++i) end += WindowRecords(epoch_spec_, i);
    return std::max(pos + 1, end - start_ / o_.world_size);
  }

  // Renders sample `pos` of the epoch (index indices_[pos]) into dst.
  Status RenderOne(RecordCursor& cur, int64_t index, int64_t pos, uint8_t* dst, int64_t* label, Batch& b, int64_t i) {
    const auto t0 = Clock::now();
    auto rec = cur.Read(index);
    const auto t1 = Clock::now();
    read_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    if (!rec.ok()) return rec.status();
    bytes_ += static_cast<int64_t>(rec->payload_size);
    // Per-sample randomness from (seed, epoch, position in the global epoch
    // order): independent of the thread that renders it, and of how the
    // epoch is split across ranks (rank r's k-th sample is position
    // start + k*world + r; past the end, the padding's own positions).
    const uint64_t global = static_cast<uint64_t>(start_ + pos * o_.world_size + o_.rank);
    SplitMix64 rng(o_.seed ^ (static_cast<uint64_t>(epoch_) << 40) ^ (global * 0xD1B54A32D192ED03ull));
    // A label outside the class list would index past the model's outputs
    // (on a GPU: a device-side assert far from its cause); dimensions feed
    // the crop geometry. Both are checked before use.
    auto where = [&] { return "record " + RecordKey(index) + " (" + std::string(rec->path) + ")"; };
    const int64_t classes = static_cast<int64_t>(src_->meta().classes.size());
    if (classes > 0 && rec->fields.label >= classes)
      return Status::Corruption("label " + std::to_string(rec->fields.label) + " outside the " +
                                std::to_string(classes) + " classes")
          .WithContext(where());
    if (rec->fields.width < 1 || rec->fields.height < 1 || rec->fields.width > 65535 || rec->fields.height > 65535)
      return Status::Corruption("bad size " + std::to_string(rec->fields.width) + "x" +
                                std::to_string(rec->fields.height))
          .WithContext(where());
    const int W = static_cast<int>(rec->fields.width), H = static_cast<int>(rec->fields.height);
    CropBox box;
    bool flip = false;
    switch (o_.transform) {
      case TransformKind::kTrain:
        box = RandomResizedCropBox(W, H, o_.scale_min, o_.scale_max, o_.ratio_min, o_.ratio_max, rng);
        flip = rng.Next() & 1;
        break;
      case TransformKind::kEval: box = CenterCropBox(W, H, o_.size, o_.eval_resize); break;
      case TransformKind::kPadCrop:
        box = PaddedRandomCropBox(W, H, o_.size, o_.pad, rng);
        flip = rng.Next() & 1;
        break;
      case TransformKind::kPadCropEval: box = {(W - o_.size) / 2, (H - o_.size) / 2, o_.size, o_.size}; break;
    }
    RenderOptions ro;
    ro.out_w = ro.out_h = o_.size;
    ro.channels = channels_;
    ro.flip = flip;
    ro.dct_scaling = o_.dct_scaling;
    ro.fast_dct = o_.fast_dct;
    ro.finish = false;  // channels are converted below, in the copy
    // NCHW RGB, the usual training layout: the resampler writes the planes
    // straight into the batch.
    const bool planar = o_.layout == Layout::kNCHW && channels_ == 3;
    Image& img = scratch_[static_cast<size_t>(tbb::this_task_arena::current_thread_index())];
    const bool vflip = o_.vflip && (o_.transform == TransformKind::kTrain || o_.transform == TransformKind::kPadCrop) &&
                       (rng.Next() & 1);
    auto render_image = [&](Encoding enc, const uint8_t* data, size_t size, int channels, uint8_t* out) -> Status {
      ro.planes = planar ? out : nullptr;
      IMAGEPACK_RETURN_IF_ERROR(enc == Encoding::kJpeg ? RenderJpeg(data, size, box, ro, &img)
                                                       : RenderPixels(data, W, H, channels, box, ro, &img));
      if (!planar) WriteSample(img, out);
      if (vflip)
        FlipRows(out, o_.layout == Layout::kNCHW ? channels_ : 1, o_.size,
                 size_t(o_.size) * (o_.layout == Layout::kNCHW ? 1 : channels_));
      return Status::Ok();
    };
    Status st = render_image(rec->fields.encoding, rec->payload, rec->payload_size, rec->fields.channels, dst);
    if (!st.ok()) return st.WithContext(where());
    if (!fields_.empty()) {
      st = RenderFields(rec.value(), box, flip, vflip, render_image, b, i);
      if (!st.ok()) return st.WithContext(where());
    }
    *label = rec->fields.label;
    decode_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t1).count();
    ++images_;
    return Status::Ok();
  }

  // The resampled (already flipped) pixels (1, 3 or 4 = RGBX channels) into
  // the batch, for what the planar path does not cover: one output channel,
  // or NHWC.
  void WriteSample(const Image& img, uint8_t* dst) const {
    const int cc = img.channels, C = channels_;
    const size_t n = size_t(img.width) * img.height;
    const bool nchw = o_.layout == Layout::kNCHW;
    const uint8_t* px = img.pixels.data();
    if (cc == C) {
      std::memcpy(dst, px, n * C);
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      const uint8_t* p = px + i * cc;
      if (C == 1) {
        dst[i] = Luma(p[0], p[1], p[2]);
      } else if (cc == 1) {
        if (nchw) dst[i] = dst[n + i] = dst[2 * n + i] = p[0];
        else dst[i * 3] = dst[i * 3 + 1] = dst[i * 3 + 2] = p[0];
      } else {  // NHWC from RGBX
        dst[i * 3] = p[0];
        dst[i * 3 + 1] = p[1];
        dst[i * 3 + 2] = p[2];
      }
    }
  }

  void Fill(Batch& b, int64_t bn) {
    const int64_t begin = bn * o_.batch_size;
    const int64_t end = std::min<int64_t>(begin + o_.batch_size, static_cast<int64_t>(indices_.size()));
    b.count = static_cast<int>(end - begin);
    b.images.resize(size_t(o_.batch_size) * sample_bytes_);
    b.labels.assign(static_cast<size_t>(o_.batch_size), -1);
    b.indices.assign(static_cast<size_t>(o_.batch_size), -1);
    b.status = Status::Ok();
    if (!fields_.empty()) PrepareFields(b);
    std::mutex err_mu;
    arena_.execute([&] {
      tbb::parallel_for(int64_t{0}, static_cast<int64_t>(b.count), [&](int64_t i) {
        RecordCursor& cur = *cursors_[static_cast<size_t>(tbb::this_task_arena::current_thread_index())];
        const int64_t pos = begin + i;
        uint8_t* dst = b.images.data() + size_t(i) * sample_bytes_;
        b.indices[i] = indices_[pos];
        Status st = RenderOne(cur, indices_[pos], pos, dst, &b.labels[i], b, i);
        // kSkip: try the following records of the epoch order instead.
        for (int64_t k = 1; !st.ok() && o_.on_corrupt == CorruptPolicy::kSkip && k <= 16; ++k) {
          ++skipped_;
          b.indices[i] = indices_[(pos + k) % indices_.size()];
          st = RenderOne(cur, b.indices[i], pos, dst, &b.labels[i], b, i);
        }
        if (!st.ok()) {
          std::lock_guard<std::mutex> g(err_mu);
          if (b.status.ok()) b.status = st;
        }
      });
    });
    if (!fields_.empty() && b.status.ok()) FinishFields(b);
  }

  // Per field of the dataset, in slot order: the fixed-size arrays of the
  // batch (sized for batch_size) and the per-sample slots of the variable
  // ones. outs_of_[slot] is the first array the slot writes.
  void PrepareFields(Batch& b) {
    const int64_t B = o_.batch_size, S = o_.size;
    if (outs_of_.empty()) {
      std::vector<FieldOut>& outs = out_template_;
      for (const FieldSpec& f : fields_) {
        outs_of_.push_back(outs.size());
        switch (f.kind) {
          case FieldKind::kImage:
            outs.push_back({f.name, DType::kUint8,
                              o_.layout == Layout::kNCHW ? std::vector<int64_t>{B, channels_, S, S}
                                                         : std::vector<int64_t>{B, S, S, channels_},
                              {}});
            break;
          case FieldKind::kMask: outs.push_back({f.name, DType::kUint8, {B, S, S}, {}}); break;
          case FieldKind::kBoxes:
            outs.push_back({f.name, DType::kFloat32, {B, 0, 4}, {}});
            outs.push_back({FieldLabelsName(f.name), DType::kInt64, {B, 0}, {}});
            outs.push_back({FieldCountName(f.name), DType::kInt64, {B}, {}});
            break;
          case FieldKind::kInts:
          case FieldKind::kFloats:
            outs.push_back({f.name, f.kind == FieldKind::kInts ? DType::kInt64 : DType::kFloat32, {B, 0}, {}});
            outs.push_back({FieldCountName(f.name), DType::kInt64, {B}, {}});
            break;
          case FieldKind::kText:
            outs.push_back({f.name, DType::kUint8, {0}, {}});
            outs.push_back({f.name + "_offsets", DType::kInt64, {B + 1}, {}});
            break;
        }
      }
      outs.push_back({"crop_box", DType::kInt64, {B, 6}, {}});
    }
    if (b.outs.empty()) b.outs = out_template_;
    for (size_t slot = 0; slot < fields_.size(); ++slot) {
      FieldOut& o = b.outs[outs_of_[slot]];
      if (fields_[slot].kind == FieldKind::kImage || fields_[slot].kind == FieldKind::kMask) {
        o.shape[0] = B;
        size_t n = 1;
        for (int64_t d : o.shape) n *= size_t(d);
        o.bytes.resize(n);
      }
    }
    FieldOut& crop = b.outs.back();
    crop.shape[0] = B;
    crop.bytes.assign(size_t(B) * 6 * 8, 0);
    b.var.resize(fields_.size());
    for (auto& v : b.var) v.assign(size_t(B), {});
  }

  // One sample's fields under the sample's crop and flips: second images
  // like the image, masks by nearest neighbour (RenderMask), boxes mapped,
  // clipped and filtered; list kinds copied for FinishFields to pad.
  template <typename RenderImage>
  Status RenderFields(const RecordView& rec, const CropBox& box, bool flip, bool vflip, RenderImage& render_image,
                      Batch& b, int64_t i) {
    const std::vector<FieldView> views = RecordFieldViews(rec);
    if (views.size() != fields_.size())
      return Status::Corruption("holds " + std::to_string(views.size()) + " fields, the dataset declares " +
                                std::to_string(fields_.size()));
    const int S = o_.size;
    for (size_t slot = 0; slot < views.size(); ++slot) {
      const FieldView& f = views[slot];
      const FieldSpec& spec = fields_[slot];
      if (f.slot != slot || f.kind != spec.kind)
        return Status::Corruption("field " + std::to_string(slot) + " is not the declared " + spec.name);
      if (InfoOf(f.kind).spatial && f.kind != FieldKind::kBoxes &&
          (f.width != rec.fields.width || f.height != rec.fields.height))
        return Status::Corruption(spec.name + " is " + std::to_string(f.width) + "x" + std::to_string(f.height) +
                                  ", the image " + std::to_string(rec.fields.width) + "x" +
                                  std::to_string(rec.fields.height));
      FieldOut& out = b.outs[outs_of_[slot]];
      std::vector<uint8_t>& var = b.var[slot][size_t(i)];
      switch (f.kind) {
        case FieldKind::kImage: {
          Status st = render_image(static_cast<Encoding>(f.encoding), f.data, f.size, f.channels,
                                   out.bytes.data() + size_t(i) * sample_bytes_);
          if (!st.ok()) return st.WithContext(spec.name);
          break;
        }
        case FieldKind::kMask:
          RenderMask(f.data, int(f.width), int(f.height), box, S, S, flip, vflip,
                     static_cast<uint8_t>(spec.ignore >= 0 ? spec.ignore : 0),
                     out.bytes.data() + size_t(i) * S * S);
          break;
        case FieldKind::kBoxes: {
          const double fx = double(S) / box.w, fy = double(S) / box.h;
          std::vector<Box> kept;
          for (const Box& bx : ReadBoxes(f)) {
            double x0 = (bx.x0 - box.x) * fx, x1 = (bx.x1 - box.x) * fx;
            double y0 = (bx.y0 - box.y) * fy, y1 = (bx.y1 - box.y) * fy;
            if (flip) std::tie(x0, x1) = std::make_pair(S - x1, S - x0);
            if (vflip) std::tie(y0, y1) = std::make_pair(S - y1, S - y0);
            const double area = (x1 - x0) * (y1 - y0);
            x0 = std::clamp(x0, 0.0, double(S));
            x1 = std::clamp(x1, 0.0, double(S));
            y0 = std::clamp(y0, 0.0, double(S));
            y1 = std::clamp(y1, 0.0, double(S));
            const double visible = (x1 - x0) * (y1 - y0);
            if (x1 <= x0 || y1 <= y0 || visible < o_.min_box_visible * area) continue;
            kept.push_back({float(x0), float(y0), float(x1), float(y1), bx.label});
          }
          WriteBoxes(kept, &var);
          break;
        }
        case FieldKind::kInts:
        case FieldKind::kFloats:
        case FieldKind::kText: var.assign(f.data, f.data + f.size); break;
      }
    }
    const int64_t crop[6] = {box.x, box.y, box.w, box.h, flip, vflip};
    std::memcpy(b.outs.back().bytes.data() + size_t(i) * sizeof crop, crop, sizeof crop);
    return Status::Ok();
  }

  // The variable kinds padded to the batch's largest count.
  void FinishFields(Batch& b) {
    const size_t n = size_t(b.count);
    for (size_t slot = 0; slot < fields_.size(); ++slot) {
      const FieldKind kind = fields_[slot].kind;
      if (kind == FieldKind::kImage || kind == FieldKind::kMask) continue;
      auto& var = b.var[slot];
      const size_t eb = InfoOf(kind).element_bytes;
      FieldOut* out = &b.outs[outs_of_[slot]];
      if (kind == FieldKind::kText) {
        size_t total = 0;
        for (size_t i = 0; i < n; ++i) total += var[i].size();
        out->bytes.resize(total);
        out->shape = {int64_t(total)};
        FieldOut& offsets = out[1];
        offsets.shape = {int64_t(n) + 1};
        offsets.bytes.resize((n + 1) * 8);
        int64_t* off = reinterpret_cast<int64_t*>(offsets.bytes.data());
        off[0] = 0;
        for (size_t i = 0; i < n; ++i) {
          if (!var[i].empty()) std::memcpy(out->bytes.data() + off[i], var[i].data(), var[i].size());
          off[i + 1] = off[i] + int64_t(var[i].size());
        }
        continue;
      }
      size_t m = 0;
      for (size_t i = 0; i < n; ++i) m = std::max(m, var[i].size() / eb);
      FieldOut& counts = kind == FieldKind::kBoxes ? out[2] : out[1];
      counts.shape = {int64_t(n)};
      counts.bytes.resize(n * 8);
      int64_t* count = reinterpret_cast<int64_t*>(counts.bytes.data());
      if (kind == FieldKind::kBoxes) {
        FieldOut& labels = out[1];
        out->shape = {int64_t(n), int64_t(m), 4};
        out->bytes.assign(n * m * 16, 0);
        labels.shape = {int64_t(n), int64_t(m)};
        labels.bytes.resize(n * m * 8);
        float* xy = reinterpret_cast<float*>(out->bytes.data());
        int64_t* cls = reinterpret_cast<int64_t*>(labels.bytes.data());
        std::fill(cls, cls + n * m, -1);
        for (size_t i = 0; i < n; ++i) {
          FieldView fv;
          fv.count = uint32_t(var[i].size() / eb);
          fv.data = var[i].data();
          const auto boxes = ReadBoxes(fv);
          count[i] = int64_t(boxes.size());
          for (size_t k = 0; k < boxes.size(); ++k) {
            float* q = xy + (i * m + k) * 4;
            q[0] = boxes[k].x0, q[1] = boxes[k].y0, q[2] = boxes[k].x1, q[3] = boxes[k].y1;
            cls[i * m + k] = boxes[k].label;
          }
        }
        continue;
      }
      out->shape = {int64_t(n), int64_t(m)};
      if (kind == FieldKind::kInts) {
        out->bytes.resize(n * m * 8);
        int64_t* v = reinterpret_cast<int64_t*>(out->bytes.data());
        std::fill(v, v + n * m, -1);
        for (size_t i = 0; i < n; ++i) {
          count[i] = int64_t(var[i].size() / 4);
          for (int64_t k = 0; k < count[i]; ++k) {
            int32_t x;
            std::memcpy(&x, var[i].data() + 4 * k, 4);
            v[i * m + k] = x;
          }
        }
      } else {
        out->bytes.assign(n * m * 4, 0);
        for (size_t i = 0; i < n; ++i) {
          count[i] = int64_t(var[i].size() / 4);
          if (!var[i].empty()) std::memcpy(out->bytes.data() + i * m * 4, var[i].data(), var[i].size());
        }
      }
    }
    // The fixed-size arrays were made for batch_size samples; a short
    // batch shows its own count.
    for (size_t slot = 0; slot < fields_.size(); ++slot)
      if (fields_[slot].kind == FieldKind::kImage || fields_[slot].kind == FieldKind::kMask)
        b.outs[outs_of_[slot]].shape[0] = int64_t(n);
    b.outs.back().shape[0] = int64_t(n);
  }

  LoaderOptions o_;
  std::unique_ptr<RecordSource> src_;
  int channels_;
  size_t sample_bytes_ = 0;
  tbb::task_arena arena_;
  std::vector<std::unique_ptr<RecordCursor>> cursors_;
  std::vector<Image> scratch_;  // per arena thread: the resampled sample
  std::vector<FieldSpec> fields_;  // the dataset's (meta().fields)
  std::vector<size_t> outs_of_;    // per field slot: its first array in Batch::outs
  std::vector<FieldOut> out_template_;  // Batch::outs before the first batch (producer thread)
  const OrderSpec spec_;  // the order epochs start with
  OrderSpec epoch_spec_;  // the current epoch's (Restore may continue another)
  std::unique_ptr<internal::ReadAhead> read_ahead_;  // null: none
  int64_t ahead_issued_ = 0;                         // positions of indices_ handed to read_ahead_
  std::deque<std::pair<int64_t, int64_t>> ahead_units_;  // (end position, unit id), ascending
  int64_t epoch_ = 0;
  int64_t start_ = 0;  // the epoch position this rank's indices_ begin at
  std::vector<int64_t> indices_;
  int64_t next_consume_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Batch>> queue_;
  std::shared_ptr<BatchPool> pool_ = std::make_shared<BatchPool>();
  std::unique_ptr<Batch> current_;  // the batch the last NextView() shows
  bool stop_ = false;
  std::thread producer_;
  std::thread releaser_;
  std::mutex rel_mu_;
  std::condition_variable rel_cv_;
  bool rel_pending_ = false, rel_stop_ = false;
  std::atomic<int64_t> images_{0}, bytes_{0}, read_ns_{0}, decode_ns_{0}, skipped_{0};
  double wait_seconds_ = 0;
};

// Order::kAuto (LoaderOptions::order): random where reads are cheap (in
// RAM, a small dataset that the first epoch brings into the page cache,
// files already mostly cached) or where blocks would mix poorly (records
// not stored shuffled: blocks of a pack in class order hold one class
// each); blocks otherwise.
// `file_bytes`: the files' total size.
Order AutoOrder(const LoaderOptions& o, const RecordSource& src, int64_t file_bytes) {
  const DatasetMeta& meta = src.meta();
  if (o.in_ram || !StoredShuffled(meta)) return Order::kRandom;
  if (src.remote()) return Order::kBlocks;  // object storage: every read is a request
  if (file_bytes < (int64_t(256) << 20)) return Order::kRandom;
  return src.cached_bytes() * 2 >= file_bytes ? Order::kRandom : Order::kBlocks;
}

}  // namespace

Result<std::unique_ptr<Loader>> Loader::Open(const LoaderOptions& o) {
  if (o.batch_size < 1) return Status::InvalidArgument("batch size must be positive");
  if (o.size < 1) return Status::InvalidArgument("output size must be positive");
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size)
    return Status::InvalidArgument("rank " + std::to_string(o.rank) + " not in [0, " + std::to_string(o.world_size) + ")");
  if (o.channels != 0 && o.channels != 1 && o.channels != 3) return Status::InvalidArgument("channels must be 1 or 3");
  if (o.block_mb <= 0 || o.window_blocks < 1 || o.read_chunk_mb <= 0)
    return Status::InvalidArgument("block size, window and read chunk must be positive");
  // Bounds on what a caller (Python included) can ask for, so a typo is an
  // error rather than an allocation or a thread count the machine cannot
  // hold.
  if (o.size > 16384 || o.eval_resize < 0 || o.eval_resize > 65536 || o.pad < 0 || o.pad > 16384)
    return Status::InvalidArgument("output size must be at most 16384 (eval resize 65536, pad 16384)");
  if (o.batch_size > 65536) return Status::InvalidArgument("batch size must be at most 65536");
  if (o.threads < 0 || o.threads > 1024 || o.io_threads < -1 || o.io_threads > 256)
    return Status::InvalidArgument("threads must be in 0..1024 and io_threads in -1..256");
  if (o.prefetch < 1 || o.prefetch > 64) return Status::InvalidArgument("prefetch must be in 1..64");
  if (o.block_mb > 1024 || o.read_chunk_mb > 1024 || o.window_blocks > 65536)
    return Status::InvalidArgument("block and read chunk at most 1024 MB, window at most 65536 blocks");
  if (const double batch_bytes = double(o.batch_size) * o.size * o.size * 3;
      batch_bytes * (o.prefetch + 2) > double(uint64_t(64) << 30))
    return Status::InvalidArgument("batches of " + std::to_string(o.batch_size) + " x " + std::to_string(o.size) +
                                   "^2 pixels with prefetch " + std::to_string(o.prefetch) +
                                   " would need over 64 GiB of batch buffers");
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
  auto src = OpenDatabases(o.paths, oo);
  if (!src.ok()) return src.status();
  const RecordSource& s = *src.value();
  if (s.size() == 0) return Status::InvalidArgument("dataset " + s.Describe() + " is empty");
  if (Status keys = CheckBatchKeys(s.meta().fields); !keys.ok()) return keys.WithContext(s.Describe());
  // Blocks are of the files' (objects') bytes: what the device reads.
  const int64_t file_bytes = s.stored_bytes();
  OrderSpec spec;
  spec.seed = o.seed;
  spec.world = o.world_size;
  spec.kind = !o.shuffle                  ? Order::kSequential
              : o.order != Order::kAuto ? o.order
                                        : AutoOrder(o, s, file_bytes);
  spec.window_blocks = o.window_blocks;
  spec.block_records = BlockRecords(s.size(), file_bytes, static_cast<int64_t>(o.block_mb * (1 << 20)),
                                    s.meta().records_per_value);
  return std::unique_ptr<Loader>(new LoaderImpl(o, std::move(src.value()), spec));
}

}  // namespace imagepack
