#include "loader/sample_render.h"

#include <algorithm>
#include <cstring>

#include "imagepack/shard.h"
#include "imagepack/transform.h"

namespace imagepack::internal {
namespace {

// Reverses the rows of `planes` planes of rows x row_bytes (a vertical flip).
void FlipRows(uint8_t* data, int planes, int rows, size_t row_bytes) {
  for (int p = 0; p < planes; ++p) {
    uint8_t* base = data + size_t(p) * rows * row_bytes;
    for (int y = 0; y < rows / 2; ++y)
      std::swap_ranges(base + size_t(y) * row_bytes, base + size_t(y + 1) * row_bytes,
                       base + size_t(rows - 1 - y) * row_bytes);
  }
}

// A horizontal flip with probability p, from one draw: at 1/2 its lowest
// bit (the loader's draw before LoaderOptions::hflip existed), else its top
// 53 bits as a uniform in [0, 1).
bool DrawFlip(double p, SplitMix64& rng) {
  const uint64_t r = rng.Next();
  if (p == 0.5) return r & 1;
  return double(r >> 11) * 0x1.0p-53 < p;
}

}  // namespace

SampleOptions SampleOptions::Of(const LoaderOptions& o) {
  SampleOptions r;
  r.seed = o.seed;
  r.transform = o.transform;
  r.size = o.size;
  r.crop_size = o.crop_size;
  r.eval_resize = o.eval_resize;
  r.pad = o.pad;
  r.scale_min = o.scale_min, r.scale_max = o.scale_max;
  r.ratio_min = o.ratio_min, r.ratio_max = o.ratio_max;
  r.dct_scaling = o.dct_scaling;
  r.fast_dct = o.fast_dct;
  r.vflip = o.vflip;
  r.hflip = o.hflip;
  r.layout = o.layout;
  r.augment = o.augment;
  r.erase = o.erase;
  r.filter = o.filter;
  return r;
}

SampleRenderer::SampleRenderer(const SampleOptions& o, int channels, int64_t classes, const FieldBatcher* fields)
    : o_(o), channels_(channels), classes_(classes), fields_(fields) {}

Status SampleRenderer::Render(const RecordView& rec, int64_t index, uint64_t epoch, uint64_t global, uint8_t* dst,
                              Image* scratch, FieldArrays* arrays, int64_t i) const {
  SplitMix64 rng(o_.seed ^ (epoch << 40) ^ (global * 0xD1B54A32D192ED03ull));
  // A label outside the class list would index past the model's outputs
  // (on a GPU: a device-side assert far from its cause); dimensions feed
  // the crop geometry. Both are checked before use.
  auto where = [&] { return "record " + RecordKey(index) + " (" + std::string(rec.path) + ")"; };
  if (classes_ > 0 && rec.fields.label >= classes_)
    return Status::Corruption("label " + std::to_string(rec.fields.label) + " outside the " +
                              std::to_string(classes_) + " classes")
        .WithContext(where());
  if (rec.fields.width < 1 || rec.fields.height < 1 || rec.fields.width > 65535 || rec.fields.height > 65535)
    return Status::Corruption("bad size " + std::to_string(rec.fields.width) + "x" + std::to_string(rec.fields.height))
        .WithContext(where());
  const int W = static_cast<int>(rec.fields.width), H = static_cast<int>(rec.fields.height);
  CropBox box;
  bool flip = false;
  const int crop = o_.crop_size > 0 ? o_.crop_size : o_.size;  // pad-crop: the crop's side in stored pixels
  switch (o_.transform) {
    case TransformKind::kTrain:
      box = RandomResizedCropBox(W, H, o_.scale_min, o_.scale_max, o_.ratio_min, o_.ratio_max, rng);
      flip = DrawFlip(o_.hflip, rng);
      break;
    case TransformKind::kEval: box = CenterCropBox(W, H, o_.size, o_.eval_resize); break;
    case TransformKind::kPadCrop:
      box = PaddedRandomCropBox(W, H, crop, o_.pad, rng);
      flip = DrawFlip(o_.hflip, rng);
      break;
    case TransformKind::kPadCropEval: box = {(W - crop) / 2, (H - crop) / 2, crop, crop}; break;
  }
  RenderOptions ro;
  ro.out_w = ro.out_h = o_.size;
  ro.channels = channels_;
  ro.flip = flip;
  ro.dct_scaling = o_.dct_scaling;
  ro.fast_dct = o_.fast_dct;
  ro.finish = false;  // channels are converted in WriteSample's copy
  ro.filter = o_.filter;
  // NCHW RGB, the usual training layout: the resampler writes the planes
  // straight into the batch.
  const bool nchw = o_.layout == Layout::kNCHW;
  const bool planar = nchw && channels_ == 3;
  const bool vflip = o_.vflip && (o_.transform == TransformKind::kTrain || o_.transform == TransformKind::kPadCrop) &&
                     (rng.Next() & 1);
  auto render_image = [&](Encoding enc, const uint8_t* data, size_t size, int channels, uint8_t* out) -> Status {
    ro.planes = planar ? out : nullptr;
    IMAGEPACK_RETURN_IF_ERROR(enc == Encoding::kJpeg ? RenderJpeg(data, size, box, ro, scratch)
                                                     : RenderPixels(data, W, H, channels, box, ro, scratch));
    if (!planar) WriteSample(*scratch, out);
    if (vflip) FlipRows(out, nchw ? channels_ : 1, o_.size, size_t(o_.size) * (nchw ? 1 : channels_));
    return Status::Ok();
  };
  const bool train = o_.transform == TransformKind::kTrain || o_.transform == TransformKind::kPadCrop;
  Status st = train && o_.augments() ? RenderAugmented(rec, box, ro, vflip, epoch, global, dst, scratch)
                                     : render_image(rec.fields.encoding, rec.payload, rec.payload_size,
                                                    rec.fields.channels, dst);
  if (!st.ok()) return st.WithContext(where());
  if (fields_ && !fields_->empty()) {
    st = fields_->RenderSample(rec, box, flip, vflip, render_image, arrays, i);
    if (!st.ok()) return st.WithContext(where());
  }
  return Status::Ok();
}

Status SampleRenderer::RenderAugmented(const RecordView& rec, const CropBox& box, const RenderOptions& base,
                                       bool vflip, uint64_t epoch, uint64_t global, uint8_t* dst,
                                       Image* scratch) const {
  RenderOptions ro = base;
  ro.planes = nullptr;
  ro.finish = true;  // HWC pixels of the output's channels
  const int W = static_cast<int>(rec.fields.width), H = static_cast<int>(rec.fields.height);
  IMAGEPACK_RETURN_IF_ERROR(rec.fields.encoding == Encoding::kJpeg
                                ? RenderJpeg(rec.payload, rec.payload_size, box, ro, scratch)
                                : RenderPixels(rec.payload, W, H, rec.fields.channels, box, ro, scratch));
  const int C = channels_, S = o_.size;
  if (scratch->channels != C || scratch->width != S || scratch->height != S)
    return Status::Corruption("rendered " + std::to_string(scratch->width) + "x" + std::to_string(scratch->height) +
                              "x" + std::to_string(scratch->channels) + ", expected " + std::to_string(S));
  if (vflip) FlipRows(scratch->pixels.data(), 1, S, size_t(S) * C);
  // A stream of its own: the crop's and flips' draws stay as they were.
  SplitMix64 mixer(o_.seed ^ (epoch << 40) ^ (global * 0xD1B54A32D192ED03ull) ^ 0x6A09E667F3BCC909ull);
  SplitMix64 rng(mixer.Next());
  AutoAugmentImage(o_.augment, rng, scratch);
  if (o_.erase.p > 0) ApplyErase(o_.erase, DrawErase(o_.erase, S, S, rng), scratch, rng);
  const size_t n = size_t(S) * S;
  if (o_.layout == Layout::kNHWC || C == 1) {
    std::memcpy(dst, scratch->pixels.data(), n * C);
  } else {
    RgbToPlanes(scratch->pixels.data(), n, dst, dst + n, dst + 2 * n);
  }
  return Status::Ok();
}

void SampleRenderer::WriteSample(const Image& img, uint8_t* dst) const {
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

Status CheckAugmentsFit(const LoaderOptions& o, const std::vector<FieldSpec>& fields, const std::string& describe) {
  if (!TransformTrains(o.transform) || (o.augment.kind == AutoAugmentKind::kNone && !(o.erase.p > 0)))
    return Status::Ok();
  for (const FieldSpec& f : fields)
    if (InfoOf(f.kind).spatial())
      return Status::InvalidArgument(describe + ": field '" + f.name + "' (" + InfoOf(f.kind).name +
                                     ") follows the image's geometry, which the augmentation policy and random "
                                     "erasing change for the image alone; they are not applied to fields: train "
                                     "without them on this dataset");
  return Status::Ok();
}

}  // namespace imagepack::internal
