// Images: probing, decoding, resizing and encoding.
//
// Everything works on bytes in memory; nothing here touches the file system.
// Decoding is by content, never by file name. All functions are thread-safe
// (each thread keeps its own libjpeg-turbo handles).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "imagepack/status.h"

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

// How output size is capped. Never upscales.
//   kShorterEdge: min(w, h) <= n   (resize_imagenet --max-size)
//   kLongerEdge:  max(w, h) <= n   (--max-edge)
// The capped edge becomes exactly n; the other edge is
// round(other * n / capped) with halves rounded up, and at least 1.
struct SizeLimit {
  enum class Mode { kNone, kShorterEdge, kLongerEdge };
  Mode mode = Mode::kNone;
  int n = 0;
};
std::pair<int, int> TargetSize(int width, int height, const SizeLimit& limit);

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

// Converts between 1 and 3 channels: gray -> RGB replicates, RGB -> gray is
// Rec. 601 luma of one pixel, rounded (as libjpeg and Pillow's "L").
inline uint8_t Luma(int r, int g, int b) {
  return static_cast<uint8_t>((r * 299 + g * 587 + b * 114 + 500) / 1000);
}

// Rec. 601 luma (0.299 R + 0.587 G + 0.114 B, as libjpeg and Pillow's "L").
// 4-channel RGBX input (internal decode buffers) converts to either.
Image ConvertChannels(Image img, int channels);

// Applies an EXIF orientation (1..8) so the result is upright.
Image ApplyOrientation(Image img, int orientation);

struct DecodeOptions {
  int channels = 3;            // 1 or 3
  SizeLimit limit;             // resize while decoding
  int64_t max_pixels = 200000000;  // refuse larger sources (decompression bombs)
  ResampleFilter filter = ResampleFilter::kTriangle;
  bool apply_orientation = true;
  bool fast_dct = true;        // libjpeg-turbo's fast integer IDCT
};

// Decodes any supported format to upright 8-bit pixels resized to the limit.
// JPEGs are decoded at the smallest DCT scale that keeps the target size, so
// huge JPEGs never materialise at full size. Alpha is composited over white.
// CMYK/YCCK JPEGs (Adobe-inverted or not) are converted to RGB.
// A truncated JPEG is an error ("truncated JPEG").
Result<Image> DecodeImage(const uint8_t* data, size_t size, const DecodeOptions& opts);

// DecodeImage's plain case straight into caller memory: a JPEG (`info` from
// ProbeImage) that needs no resize under opts.limit, no orientation change
// and no CMYK conversion, decoded to opts.channels into `dst`
// (info.width * info.height * opts.channels bytes, rows packed). The same
// pixels DecodeImage gives. Returns NotSupported, writing nothing, for any
// other image (then call DecodeImage); decode errors as DecodeImage.
Status DecodeJpegInto(const uint8_t* data, size_t size, const ImageInfo& info, const DecodeOptions& opts,
                      uint8_t* dst);

// Encodes as baseline JPEG, 4:2:0 for colour. channels 4 is read as RGBX
// (the fourth byte ignored).
Result<std::vector<uint8_t>> EncodeJpeg(const Image& img, int quality);

struct PrepareOptions {
  DecodeOptions decode;
  int quality = 90;
  bool reencode = false;  // never pass bytes through
};

// The result of preparing one source image as a training JPEG.
struct PreparedJpeg {
  std::vector<uint8_t> bytes;
  int width = 0;
  int height = 0;
  int channels = 0;      // components in `bytes`: 1 or 3
  bool passed_through = false;
};

// True when `data` (probed as `info`) is a JPEG that can be used byte for
// byte: baseline Huffman, gray or YCbCr, upright, complete, within `opts`'
// limits, and structurally sound (CheckJpegStructure).
bool CanPassThrough(const uint8_t* data, size_t size, const ImageInfo& info, const PrepareOptions& opts);

// Source bytes -> JPEG ready for training: passes clean JPEGs through,
// decodes/resizes/re-encodes the rest.
Result<PreparedJpeg> PrepareJpeg(const uint8_t* data, size_t size, const PrepareOptions& opts);

}  // namespace imagepack
