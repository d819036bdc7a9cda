// Per-pixel maps (segmentation masks, depth): lossless decoding to their
// stored values, PNG encoding, and nearest-neighbour resampling that never
// invents a value. A map is an Image of 1 or 2 bytes per pixel (`channels`
// 1: uint8; 2: one uint16 sample, little-endian as records store it).
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "imagepack/pixels.h"
#include "imagepack/status.h"
#include "imagepack/transform.h"

namespace imagepack {

// A PNG map as its stored values: gray (1 to 16 bits) as the gray values,
// palette PNGs (VOC) as the palette indices, never the palette's colours.
// bits 8: uint8 samples (a 16-bit PNG only when every value is below 256);
// bits 16: uint16 samples (any gray or palette PNG, values as stored, never
// scaled). Anything else is an error that says what it is (a JPEG: lossy,
// refused; an RGB PNG: not a map).
Result<Image> DecodeMask(const uint8_t* data, size_t size, int bits = 8);

// A map as a gray PNG: 8-bit for 1 byte per pixel, 16-bit for 2.
Result<std::vector<uint8_t>> EncodeMaskPng(const Image& mask);

// A 1-channel (gray) or 3-channel (RGB) uint8 image as an 8-bit PNG:
// lossless, for exported raw records and inspection pictures.
Result<std::vector<uint8_t>> EncodePng(const Image& img);

// Nearest neighbour from w x h to tw x th: output pixel (x, y) takes the
// source pixel under its centre, floor((x + 0.5) * w / tw). `bytes` per
// pixel: 1 or 2.
Image ResizeMaskNearest(const uint8_t* src, int w, int h, int tw, int th, int bytes = 1);

// The loader's mask crop: the source box `box` (may reach outside the
// mask: `fill` there) to out_w x out_h by nearest neighbour, with the
// sample's flips. Output pixel (x, y) takes source pixel
// (box.x + floor((x' + 0.5) * box.w / out_w), likewise y), where x' is x or
// out_w - 1 - x when flipped horizontally (y' likewise, vertically): the
// pixel whose centre the image resampler centres that output pixel on.
// `bytes` per pixel: 1 (uint8) or 2 (uint16; `fill` any uint16).
void RenderMask(const uint8_t* src, int w, int h, const CropBox& box, int out_w, int out_h, bool hflip, bool vflip,
                uint16_t fill, uint8_t* dst, int bytes = 1);

}  // namespace imagepack
