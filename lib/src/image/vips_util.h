// libvips glue for the formats libjpeg-turbo does not cover (PNG, GIF, TIFF,
// WebP, BMP, PNM). Internal: VipsImage never appears in a public header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "imagepack/decode.h"

namespace imagepack::internal {

// Header-only read: width, height, bands, orientation.
Result<ImageInfo> VipsProbe(const uint8_t* data, size_t size);

// Full decode to upright 8-bit pixels with `opts.channels`, resized to
// `opts.limit` (an integer box pre-shrink streams huge images in bounded
// memory; our resampler does the rest).
Result<Image> VipsDecode(const uint8_t* data, size_t size, const DecodeOptions& opts);

// `text` as a 1-channel coverage image (255: ink), glyphs about
// `height_px` tall, in DejaVu Sans through Pango (fonts-dejavu-core).
Result<Image> RenderText(const std::string& text, int height_px);

}  // namespace imagepack::internal
