// Decoded pixels: the Image buffer, channel conversion and EXIF orientation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace imagepack {

// 8-bit interleaved pixels, rows packed (stride = width * channels).
// channels is 1 (gray) or 3 (RGB).
struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;

  size_t stride() const { return static_cast<size_t>(width) * channels; }
};

// Converts between 1 and 3 channels: gray -> RGB replicates, RGB -> gray is
// Rec. 601 luma of one pixel, rounded (as libjpeg and Pillow's "L").
inline uint8_t Luma(int r, int g, int b) {
  return static_cast<uint8_t>((r * 299 + g * 587 + b * 114 + 500) / 1000);
}

// Rec. 601 luma (0.299 R + 0.587 G + 0.114 B, as libjpeg and Pillow's "L").
// 4-channel RGBX input (internal decode buffers) converts to either.
Image ConvertChannels(Image img, int channels);

// n interleaved RGB pixels into three planes (HWC to CHW).
void RgbToPlanes(const uint8_t* rgb, size_t n, uint8_t* r, uint8_t* g, uint8_t* b);

// Applies an EXIF orientation (1..8) so the result is upright.
Image ApplyOrientation(Image img, int orientation);

}  // namespace imagepack
