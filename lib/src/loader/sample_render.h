// One sample of the loader: its record's crop and flips drawn from (seed,
// epoch, position), its image rendered into the batch in the batch's layout
// and channels, its fields through the FieldBatcher. Called from the
// loader's worker threads, each with its own scratch image. Internal.
#pragma once

#include <cstdint>

#include "loader/batch_fields.h"
#include "imagepack/augment.h"
#include "imagepack/loader.h"
#include "imagepack/pixels.h"
#include "imagepack/record.h"

namespace imagepack::internal {

// What rendering one sample reads of the loader's options: the draws and
// the output's geometry, nothing of where records come from.
struct SampleOptions {
  uint64_t seed = 0;
  TransformKind transform = TransformKind::kTrain;
  int size = 224, crop_size = 0, eval_resize = 0, pad = 4;
  double scale_min = 0.08, scale_max = 1.0, ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
  bool dct_scaling = true, fast_dct = true, vflip = false;
  double hflip = 0.5;  // LoaderOptions::hflip
  Layout layout = Layout::kNCHW;
  AugmentOptions augment;  // train transforms: after the crop and flips
  EraseOptions erase;
  ResampleFilter filter = ResampleFilter::kTriangle;

  bool augments() const { return augment.kind != AutoAugmentKind::kNone || erase.p > 0; }

  static SampleOptions Of(const LoaderOptions& o);
};

class SampleRenderer {
 public:
  // `o`: the loader's options (eval_resize resolved); `channels`: of the
  // output; `classes`: the dataset's class count (0: unchecked); `fields`:
  // the dataset's (null or empty: none).
  SampleRenderer(const SampleOptions& o, int channels, int64_t classes, const FieldBatcher* fields);

  // Renders record `index` (`rec`) as the sample at position `global` of
  // epoch `epoch`'s order into `dst` (size x size x channels, the batch's
  // layout), and its fields into sample `i` of `arrays`. The crop and the
  // flips depend on (seed, epoch, global) only: not on the thread, nor on
  // how the epoch is split across ranks. A label outside the classes or an
  // impossible size is an error naming the record.
  Status Render(const RecordView& rec, int64_t index, uint64_t epoch, uint64_t global, uint8_t* dst, Image* scratch,
                FieldArrays* arrays, int64_t i) const;

 private:
  // The resampled (already flipped) pixels (1, 3 or 4 = RGBX channels) into
  // the batch, for what the planar path does not cover: one output channel,
  // or NHWC.
  void WriteSample(const Image& img, uint8_t* dst) const;
  // The sample's image for the augmentations: rendered as HWC pixels of the
  // output's channels, flipped, augmented from its own stream of (seed,
  // epoch, global), written into `dst` in the batch's layout.
  Status RenderAugmented(const RecordView& rec, const CropBox& box, const RenderOptions& ro, bool vflip,
                         uint64_t epoch, uint64_t global, uint8_t* dst, Image* scratch) const;

  SampleOptions o_;
  int channels_;
  int64_t classes_;
  const FieldBatcher* fields_;
};

// The policies and erasing move and paint the image alone: with a field
// that follows the image's geometry (a mask, a second image, boxes) they
// are refused, naming it, rather than leaving it unmatched.
Status CheckAugmentsFit(const LoaderOptions& o, const std::vector<FieldSpec>& fields, const std::string& describe);

}  // namespace imagepack::internal
