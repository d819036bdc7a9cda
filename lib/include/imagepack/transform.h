// Training-time transforms on one record: crop geometry (torchvision's
// definitions) and rendering a crop of a JPEG or of raw pixels to a fixed
// output size. Pure functions of their inputs; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "imagepack/resample.h"
#include "imagepack/shard.h"
#include "imagepack/status.h"

namespace imagepack {

// A rectangle of the source image, in source pixels. For the pad-and-crop
// transform it may reach outside the image (padding is zeros).
struct CropBox {
  int x = 0, y = 0, w = 0, h = 0;
};

// torchvision.transforms.RandomResizedCrop.get_params: up to 10 tries of a
// random area fraction in [scale_min, scale_max] and a log-uniform aspect
// ratio in [ratio_min, ratio_max]; then the central crop clamped to the
// ratio range.
CropBox RandomResizedCropBox(int width, int height, double scale_min, double scale_max, double ratio_min,
                             double ratio_max, SplitMix64& rng);

// Resize(shorter edge -> resize_to) + CenterCrop(size), expressed as the
// source box that ends up in the crop (one resample instead of two).
CropBox CenterCropBox(int width, int height, int size, int resize_to);

// Pad by `pad` zeros on every side, then a random size x size crop
// (torchvision RandomCrop(size, padding=pad)).
CropBox PaddedRandomCropBox(int width, int height, int size, int pad, SplitMix64& rng);

struct RenderOptions {
  int out_w = 224, out_h = 224;
  int channels = 3;      // 1 or 3
  bool flip = false;     // horizontal (folded into the resampling weights)
  bool dct_scaling = true;  // JPEG: decode at a reduced DCT scale when the crop allows
  // JPEG at full scale: libjpeg's fast integer IDCT (the loader's default:
  // it decodes every epoch) instead of the accurate one (Pillow's pixels).
  bool fast_dct = true;
  ResampleFilter filter = ResampleFilter::kTriangle;
  // false: skip the channel conversion and hand back the resampled (and
  // flipped) pixels as decoded (1, 3, or 4 = RGBX channels), for a caller
  // that converts while copying into its own layout (the loader).
  bool finish = true;
  // With channels == 3: the result goes here instead, as three planes of
  // out_w x out_h bytes one after another (NCHW for one sample), with no
  // interleaved copy in between; `out` is left alone.
  uint8_t* planes = nullptr;
};

// Decodes only the part of the JPEG under `box` (libjpeg-turbo skips the
// rows above and below it and crops the columns to whole iMCUs), at the
// smallest DCT scale that keeps the crop at least as large as the output,
// then resamples to out_w x out_h, flips, and writes HWC pixels to `out`
// (reusing its capacity).
// Errors name what is wrong ("truncated JPEG", ...). Falls back to a full
// decode for what the partial decoder cannot do (CMYK, boxes outside).
Status RenderJpeg(const uint8_t* data, size_t size, const CropBox& box, const RenderOptions& opts, Image* out);

// The same from decoded pixels (raw records, or a fully decoded image).
Status RenderPixels(const uint8_t* pixels, int width, int height, int channels, const CropBox& box,
                    const RenderOptions& opts, Image* out);

}  // namespace imagepack
