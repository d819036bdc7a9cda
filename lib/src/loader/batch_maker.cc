// BatchMaker (batch_maker.h).
#include "loader/batch_maker.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "base/threads.h"

namespace imagepack::internal {

using Clock = std::chrono::steady_clock;

BatchMaker::BatchMaker(const LoaderOptions& o, const RecordSource& src, const ClassMap& class_map,
                       const OpenedMix* mix, int channels)
    : o_(o), src_(src), class_map_(class_map), mix_(mix), channels_(channels),
      arena_(ResolveThreads(o_.threads)),
      fields_(src_.meta().fields, FieldShape()),
      renderer_(SampleOptions::Of(o_), channels_, RendererClasses(), &fields_),
      out_(OutputConverter::Make(o_.output_dtype, o_.norm_mean, o_.norm_std, channels_,
                                 o_.pinned_alloc && o_.pinned_free).value()) {
  sample_bytes_ = size_t(o_.size) * o_.size * channels_;
  for (int t = 0; t < arena_.max_concurrency(); ++t) cursors_.push_back(src_.NewCursor());
  scratch_.resize(cursors_.size());
  staged_.resize(cursors_.size());
}

void BatchMaker::SetOptions(const LoaderOptions& o) {
  o_ = o;
  sample_bytes_ = size_t(o_.size) * o_.size * channels_;
  fields_ = FieldBatcher(src_.meta().fields, FieldShape());
  renderer_ = SampleRenderer(SampleOptions::Of(o_), channels_, RendererClasses(), &fields_);
}

FieldBatcher::Shape BatchMaker::FieldShape() const {
  return {o_.batch_size, o_.size, channels_, o_.layout == Layout::kNCHW, o_.min_box_visible, o_.wide_maps_int32};
}

// A mix's labels are checked against their own source's classes (MixLabel).
int64_t BatchMaker::RendererClasses() const {
  return mix_ ? 0 : static_cast<int64_t>(src_.meta().classes.size());
}

void BatchMaker::AddStats(LoaderStats* s) const {
  s->images = images_.load();
  s->bytes_read = bytes_.load();
  s->read_seconds = read_ns_.load() / 1e9;
  s->decode_seconds = decode_ns_.load() / 1e9;
  s->skipped = skipped_.load();
}

// A mix record's label in the mix's classes, checked against its own
// source's.
Result<int64_t> BatchMaker::MixLabel(int64_t index, const RecordView& rec) const {
  const int s = mix_->SourceOf(index);
  const int64_t label = rec.fields.label, classes = mix_->source_classes[size_t(s)];
  if (classes > 0 && label >= classes)
    return Status::Corruption("label " + std::to_string(label) + " outside the " + std::to_string(classes) +
                              " classes of " + mix_->names[size_t(s)])
        .WithContext("record " + RecordKey(index) + " (" + std::string(rec.path) + ")");
  return mix_->class_maps[size_t(s)].Map(label);
}

// Reads record `index` and renders it as sample `pos` of the epoch
// (rank r's k-th sample is position start + k*world + r of the global
// order; past the end, the padding's own positions) into dst.
Status BatchMaker::RenderOne(RecordCursor& cur, int64_t index, int64_t pos, uint8_t* dst, int64_t* label, Batch& b,
                             int64_t i) {
  const auto t0 = Clock::now();
  auto rec = cur.Read(index);
  const auto t1 = Clock::now();
  read_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  if (!rec.ok()) return rec.status();
  Result<int64_t> mixed = mix_ ? MixLabel(index, rec.value()) : Result<int64_t>(class_map_.Map(rec->fields.label));
  if (!mixed.ok()) return mixed.status();
  bytes_ += static_cast<int64_t>(rec->payload_size);
  const uint64_t global = static_cast<uint64_t>(start_ + pos * o_.world_size + o_.rank);
  Image& img = scratch_[static_cast<size_t>(tbb::this_task_arena::current_thread_index())];
  IMAGEPACK_RETURN_IF_ERROR(
      renderer_.Render(rec.value(), index, static_cast<uint64_t>(epoch_), global, dst, &img, &b.fields, i));
  *label = mixed.value();
  decode_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t1).count();
  ++images_;
  return Status::Ok();
}

void BatchMaker::Fill(Batch& b, int64_t bn) {
  const int64_t begin = bn * o_.batch_size;
  const int64_t end = std::min<int64_t>(begin + o_.batch_size, mine_->size());
  b.count = static_cast<int>(end - begin);
  const size_t batch_bytes = size_t(o_.batch_size) * sample_bytes_;
  if (out_.active()) {
    b.images = {};
    b.output.Reserve(batch_bytes * out_.element_bytes(), o_.pinned_alloc, o_.pinned_free);
    for (auto& s : staged_) s.resize(sample_bytes_);
  } else {
    b.images.resize(batch_bytes);
  }
  b.labels.assign(static_cast<size_t>(o_.batch_size), -1);
  b.indices.assign(static_cast<size_t>(o_.batch_size), -1);
  b.status = Status::Ok();
  if (!fields_.empty()) fields_.Prepare(&b.fields);
  std::mutex err_mu;
  arena_.execute([&] {
    tbb::parallel_for(int64_t{0}, static_cast<int64_t>(b.count), [&](int64_t i) {
      const size_t thread = static_cast<size_t>(tbb::this_task_arena::current_thread_index());
      RecordCursor& cur = *cursors_[thread];
      const int64_t pos = begin + i;
      uint8_t* dst = out_.active() ? staged_[thread].data() : b.images.data() + size_t(i) * sample_bytes_;
      b.indices[i] = (*mine_)[pos];
      Status st = RenderOne(cur, b.indices[i], pos, dst, &b.labels[i], b, i);
      // kSkip: try the following records of the epoch order instead.
      for (int64_t k = 1; !st.ok() && o_.on_corrupt == CorruptPolicy::kSkip && k <= 16; ++k) {
        ++skipped_;
        b.indices[i] = (*mine_)[(pos + k) % mine_->size()];
        st = RenderOne(cur, b.indices[i], pos, dst, &b.labels[i], b, i);
      }
      if (st.ok() && out_.active())  // on this thread, while the sample is in its cache
        out_.Convert(dst, sample_bytes_ / size_t(channels_), o_.layout == Layout::kNCHW,
                     b.output.data() + size_t(i) * sample_bytes_ * out_.element_bytes());
      if (!st.ok()) {
        std::lock_guard<std::mutex> g(err_mu);
        if (b.status.ok()) b.status = st;
      }
    });
  });
  if (!fields_.empty() && b.status.ok()) fields_.Finish(&b.fields, b.count);
}

}  // namespace imagepack::internal
