// What an encoded image is, read from its header without decoding pixels,
// and the structural check that decides whether JPEG bytes can be kept as
// they are. Every length read from the data is bounds-checked (fuzzed).
#pragma once

#include <cstddef>
#include <cstdint>

#include "imagepack/status.h"

namespace imagepack {

enum class ImageFormat { kUnknown, kJpeg, kPng, kGif, kBmp, kTiff, kWebp, kPnm };
const char* ImageFormatName(ImageFormat f);
ImageFormat SniffFormat(const uint8_t* data, size_t size);

enum class JpegColor { kUnknown, kGray, kYCbCr, kRgb, kCmyk, kYcck };

// What the header says, read without decoding pixels.
struct ImageInfo {
  ImageFormat format = ImageFormat::kUnknown;
  int width = 0;        // as stored, before EXIF orientation
  int height = 0;
  int components = 0;   // colour components as stored (JPEG: 1, 3 or 4)
  int orientation = 1;  // EXIF orientation 1..8 (1 = upright or absent)
  // JPEG only:
  JpegColor jpeg_color = JpegColor::kUnknown;
  bool progressive = false;
  bool arithmetic = false;
  bool adobe_marker = false;  // APP14 "Adobe": CMYK samples are stored inverted
  bool has_eoi = false;       // an EOI marker ends the data (not truncated)

  // Width and height once EXIF orientation is applied.
  int upright_width() const { return orientation >= 5 ? height : width; }
  int upright_height() const { return orientation >= 5 ? width : height; }
};

// Reads the header (JPEG markers, PNG IHDR, or libvips' header parse for the
// rest). Every length read from the data is bounds-checked.
Result<ImageInfo> ProbeImage(const uint8_t* data, size_t size);

// Walks every marker of a baseline Huffman JPEG, scan data included, without
// decoding: one SOI, one frame header, well-formed tables, every
// quantisation table a scan uses defined before it, no stray SOI, and an EOI.
// Fast (a memchr over the scan data). A file that passes can fail only with
// libjpeg warnings (bit errors in the scan data), which every decoder
// tolerates. PrepareJpeg passes bytes through only when this holds.
Status CheckJpegStructure(const uint8_t* data, size_t size);

}  // namespace imagepack
