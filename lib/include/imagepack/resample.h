// Antialiased resampling of interleaved 8-bit pixels: whole images and
// fractional regions (crops), scalar or SIMD, the same bytes either way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "imagepack/pixels.h"
#include "imagepack/status.h"

namespace imagepack {

// Antialiased separable resampling filters (support grows with the
// downscale factor, so every source pixel contributes).
enum class ResampleFilter { kBox, kTriangle, kCatmullRom, kLanczos3 };
Result<ResampleFilter> ParseResampleFilter(const std::string& name);
const char* ResampleFilterName(ResampleFilter f);

// Resamples a w x h region of `src` (row stride src_stride bytes,
// `channels` interleaved) to dst_w x dst_h into `dst` (stride dst_stride).
// REQUIRES: all sizes >= 1, channels in 1..4.
void Resample(const uint8_t* src, int src_w, int src_h, size_t src_stride, int channels,
              uint8_t* dst, int dst_w, int dst_h, size_t dst_stride, ResampleFilter filter);
Image ResampleImage(const Image& src, int dst_w, int dst_h, ResampleFilter filter);
// The same from the region (0, 0, extent_w, extent_h) of `src`: the picture
// part of a decode whose last pixel is partial (a DCT-scaled decode, an
// integer shrink), so that the output maps onto the source exactly.
Image ResampleImage(const Image& src, double extent_w, double extent_h, int dst_w, int dst_h,
                    ResampleFilter filter);

// Resamples the region (x, y, w, h) of `src`, given in fractional source
// pixels, to dst_w x dst_h: output pixel i covers [x + i*w/dst_w,
// x + (i+1)*w/dst_w). Filter taps outside the image are dropped and the
// rest renormalised, so a region may reach a little past the edge (planes
// padded to whole MCUs, a DCT-scaled decode's partial last pixel).
// `mirror` flips the result horizontally (at no extra cost).
void ResampleRegion(const uint8_t* src, int src_w, int src_h, size_t src_stride, int channels, double x,
                    double y, double w, double h, uint8_t* dst, int dst_w, int dst_h, size_t dst_stride,
                    ResampleFilter filter, bool mirror = false);

// ResampleRegion for 3- or 4-channel (RGBX) pixels with the result's first
// three channels written as planes (NCHW): row y of channel c at
// planes[c] + y * plane_stride. Same bytes as ResampleRegion then a split.
void ResampleRegionToPlanes(const uint8_t* src, int src_w, int src_h, size_t src_stride, int channels, double x,
                            double y, double w, double h, uint8_t* const planes[3], size_t plane_stride, int dst_w,
                            int dst_h, ResampleFilter filter, bool mirror = false);

}  // namespace imagepack
