// Label maps (segmentation masks): lossless decoding to uint8 values,
// PNG encoding, and nearest-neighbour resampling that never invents a
// value. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "imagepack/pixels.h"
#include "imagepack/status.h"
#include "imagepack/transform.h"

namespace imagepack {

// A PNG label map as its stored values, 1 channel: gray (1 to 8 bits, or 16
// bits holding values below 256) as the gray values, palette PNGs (VOC) as
// the palette indices, never the palette's colours. Anything else is an
// error that says what it is (a JPEG mask: lossy, refused; an RGB PNG: not
// a label map).
Result<Image> DecodeMask(const uint8_t* data, size_t size);

// A 1-channel uint8 image as an 8-bit gray PNG.
Result<std::vector<uint8_t>> EncodeMaskPng(const Image& mask);

// A 1-channel (gray) or 3-channel (RGB) uint8 image as an 8-bit PNG:
// lossless, for exported raw records and inspection pictures.
Result<std::vector<uint8_t>> EncodePng(const Image& img);

// Nearest neighbour from w x h to tw x th: output pixel (x, y) takes the
// source pixel under its centre, floor((x + 0.5) * w / tw).
Image ResizeMaskNearest(const uint8_t* src, int w, int h, int tw, int th);

// The loader's mask crop: the source box `box` (may reach outside the
// mask: `fill` there) to out_w x out_h by nearest neighbour, with the
// sample's flips. Output pixel (x, y) takes source pixel
// (box.x + floor((x' + 0.5) * box.w / out_w), likewise y), where x' is x or
// out_w - 1 - x when flipped horizontally (y' likewise, vertically): the
// pixel whose centre the image resampler centres that output pixel on.
void RenderMask(const uint8_t* src, int w, int h, const CropBox& box, int out_w, int out_h, bool hflip, bool vflip,
                uint8_t fill, uint8_t* dst);

}  // namespace imagepack
