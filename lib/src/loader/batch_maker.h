// One batch of an epoch made on the loader's threads (the producer's
// work, loader.cc): each sample's record read, its label mapped (a mix's
// checked against its own source's classes), the sample rendered into the
// batch's layout (sample_render.h), its fields batched (batch_fields.h)
// and converted to the output type (output.h). Internal.
#pragma once

#include <tbb/task_arena.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "imagepack/classes.h"
#include "imagepack/loader.h"
#include "imagepack/mix.h"
#include "imagepack/order.h"
#include "imagepack/store.h"
#include "loader/batch_fields.h"
#include "loader/output.h"
#include "loader/sample_render.h"

namespace imagepack::internal {

struct Batch {
  int64_t number = -1;
  int count = 0;
  std::vector<uint8_t> images;  // uint8 images as rendered (empty when `output` holds them)
  OutputBuffer output;  // the images as output_dtype, or pinned (OutputConverter::active)
  std::vector<int64_t> labels;
  std::vector<int64_t> indices;  // dataset index of each sample
  Status status;
  FieldArrays fields;  // datasets with fields (batch_fields.h)
};

class BatchMaker {
 public:
  // `src`, `class_map` and `mix` (null: one dataset) outlive the maker.
  BatchMaker(const LoaderOptions& o, const RecordSource& src, const ClassMap& class_map, const OpenedMix* mix,
             int channels);
  // The options of the epochs to come (another output size: the renderer
  // and the field arrays follow it). Between epochs only.
  void SetOptions(const LoaderOptions& o);
  // The epoch being made: its number, the epoch position this rank's order
  // begins at, and that order (which outlives the epoch's batches).
  void SetEpoch(int64_t epoch, int64_t start, const RankOrder* mine) {
    epoch_ = epoch, start_ = start, mine_ = mine;
  }
  // Batch `bn` of the epoch into `b` (its status: the first sample's error).
  void Fill(Batch& b, int64_t bn);
  // The images of a made batch as handed out.
  uint8_t* Images(Batch& b) const { return out_.active() ? b.output.data() : b.images.data(); }
  size_t sample_bytes() const { return sample_bytes_; }
  size_t element_bytes() const { return out_.element_bytes(); }
  int threads() const { return arena_.max_concurrency(); }
  void AddStats(LoaderStats* s) const;

 private:
  FieldBatcher::Shape FieldShape() const;
  int64_t RendererClasses() const;
  Result<int64_t> MixLabel(int64_t index, const RecordView& rec) const;
  Status RenderOne(RecordCursor& cur, int64_t index, int64_t pos, uint8_t* dst, int64_t* label, Batch& b, int64_t i);

  LoaderOptions o_;  // size: the current epoch's
  const RecordSource& src_;
  const ClassMap& class_map_;
  const OpenedMix* mix_;
  const int channels_;
  size_t sample_bytes_ = 0;
  tbb::task_arena arena_;
  std::vector<std::unique_ptr<RecordCursor>> cursors_;
  std::vector<Image> scratch_;  // per arena thread: the resampled sample
  // Per arena thread: the uint8 sample before its conversion, when the
  // output buffer holds the images (it stays in the thread's cache).
  std::vector<std::vector<uint8_t>> staged_;
  FieldBatcher fields_;         // the dataset's fields (meta().fields)
  SampleRenderer renderer_;
  OutputConverter out_;  // the images' output type (output_dtype, norm_mean, norm_std)
  int64_t epoch_ = 0;
  int64_t start_ = 0;
  const RankOrder* mine_ = nullptr;
  std::atomic<int64_t> images_{0}, bytes_{0}, read_ns_{0}, decode_ns_{0}, skipped_{0};
};

}  // namespace imagepack::internal
