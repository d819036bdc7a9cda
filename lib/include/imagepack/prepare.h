// One source image made into a training JPEG: clean JPEGs kept byte for
// byte, the rest decoded, resized and re-encoded (resize_imagenet, and
// pack_lmdb's JPEG records).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "imagepack/decode.h"
#include "imagepack/status.h"

namespace imagepack {

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
