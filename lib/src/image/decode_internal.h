// Shared by the decoders (decode.cc, the JPEG module, prepare.cc). Internal.
#pragma once

#include <cstddef>
#include <cstdint>

#include "imagepack/decode.h"

namespace imagepack::internal {

// InvalidArgument naming the size when w x h exceeds max_pixels (--max-pixels):
// checked before anything is allocated for an image (decompression bombs).
Status CheckPixelLimit(int w, int h, int64_t max_pixels);

// DecodeImage once the header is read: the JPEG module for JPEG, libvips
// for the rest. `rgbx`: as DecodeJpeg's.
Result<Image> DecodeProbed(const uint8_t* data, size_t size, const ImageInfo& info, const DecodeOptions& opts,
                           bool rgbx = false);

}  // namespace imagepack::internal
