// The loader's arrays beyond images and labels, for a dataset with fields
// (docs/LOADER.md "Fields"): per field kind its arrays, each sample's field
// rendered under the sample's crop and flips, the variable-length kinds
// padded to the batch's largest. Used from the loader's worker threads
// (RenderSample, one sample each) and its producer (Prepare, Finish).
// Internal.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "imagepack/fields.h"
#include "imagepack/loader.h"
#include "imagepack/record.h"
#include "imagepack/transform.h"

namespace imagepack::internal {

// One output array of a batch (BatchField), owning its bytes.
struct FieldOut {
  std::string name;
  DType dtype = DType::kUint8;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// One batch's field arrays: the fixed-size ones (second images, masks,
// crop_box) written in place by the workers, the padded ones made from each
// sample's variable part (`var[slot][sample]`) by Finish.
struct FieldArrays {
  std::vector<FieldOut> outs;  // every field's arrays in slot order, then crop_box
  std::vector<std::vector<std::vector<uint8_t>>> var;
  std::vector<BatchField> Views();
};

// Renders an image (JPEG or raw, `channels` stored) under the sample's crop
// and flips into `out`, as the loader renders the sample's image.
using RenderImageFn =
    std::function<Status(Encoding encoding, const uint8_t* data, size_t size, int channels, uint8_t* out)>;

class FieldBatcher {
 public:
  struct Shape {
    int batch_size = 0;
    int size = 0;      // output height and width
    int channels = 3;  // of second images, as the image's
    bool nchw = true;
    double min_box_visible = 0;  // LoaderOptions::min_box_visible
    bool wide_maps_int32 = false;  // LoaderOptions::wide_maps_int32
  };
  FieldBatcher(std::vector<FieldSpec> fields, Shape shape);

  bool empty() const { return fields_.empty(); }
  // Sizes `a` for a batch of batch_size samples (keeping its buffers).
  void Prepare(FieldArrays* a) const;
  // Sample i's fields of `rec` under `box` and the flips. Errors name the
  // field; the caller adds the record.
  Status RenderSample(const RecordView& rec, const CropBox& box, bool flip, bool vflip, const RenderImageFn& render,
                      FieldArrays* a, int64_t i) const;
  // Pads the variable kinds to the largest of the `count` samples and gives
  // every array the batch's own count.
  void Finish(FieldArrays* a, int count) const;

 private:
  Status RenderBoxes(const FieldView& f, const CropBox& box, bool flip, bool vflip, std::vector<uint8_t>* var) const;
  void PadBoxes(const std::vector<std::vector<uint8_t>>& var, size_t n, FieldOut* out) const;
  void PadList(bool floats, const std::vector<std::vector<uint8_t>>& var, size_t n, FieldOut* out) const;
  void PadText(const std::vector<std::vector<uint8_t>>& var, size_t n, FieldOut* out) const;

  std::vector<FieldSpec> fields_;
  Shape s_;
  std::vector<size_t> outs_of_;     // per field slot: its first array in FieldArrays::outs
  std::vector<FieldOut> template_;  // FieldArrays::outs of a new batch
};

}  // namespace imagepack::internal
