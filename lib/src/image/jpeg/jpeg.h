// The JPEG module: every libjpeg-turbo call of the library lives under
// lib/src/jpeg/, behind these functions, with one rule for damaged data.
//
//   markers.cc header facts (ProbeJpeg) and CheckJpegStructure, no decoding
//   damage.cc  JpegDamage: what counts as truncated, corrupt or tolerable
//   turbo.cc   TurboJPEG whole-image decodes (DCT-scaled) and encoding
//   region.cc  libjpeg partial decode of a crop (the loader's ROI decode)
//   planar.cc  the planar YCbCr resize path (decode, resize, encode planes)
//
// Internal; the public entry points are ProbeImage, CheckJpegStructure
// (probe.h), DecodeImage, DecodeJpegInto,
// EncodeJpeg (decode.h), PrepareJpeg (prepare.h) and RenderJpeg
// (transform.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "imagepack/decode.h"
#include "imagepack/prepare.h"
#include "imagepack/status.h"

namespace imagepack::internal {

// ProbeImage for data that starts with a JPEG SOI: the frame header's size
// and components, the colour transform (JFIF/Adobe), EXIF orientation,
// progressive/arithmetic coding, and whether an EOI ends the data.
Result<ImageInfo> ProbeJpeg(const uint8_t* data, size_t size);

// The one rule for damaged JPEG data, on every decode path (TurboJPEG's
// and the libjpeg region decoder): `fatal` (libjpeg stopped on `message`)
// is "JPEG decode failed: <message>"; otherwise a file whose data ran out
// before its EOI (`ran_out`: libjpeg's JWRN_JPEG_EOF, "Premature end of
// JPEG file", always the first warning of a cut file) is "truncated JPEG";
// any other warning (damaged scan data: extraneous bytes before a marker,
// which real ImageNet files have, bad codes, a scan that ends early inside
// a complete file, whose missing blocks decode flat) is tolerated, as
// Pillow, OpenCV and torchvision tolerate it.
Status JpegDamage(const std::string& message, bool fatal, bool ran_out);

// The whole JPEG (`info` from ProbeImage) decoded at the smallest DCT scale
// that keeps opts.limit's target size, CMYK/YCCK converted, resampled to the
// target and turned upright. With `rgbx`, 3-channel results come back as
// 4-byte RGBX pixels (channels == 4): libjpeg-turbo writes them as cheaply
// as RGB and the encoder reads them directly. Without, as RGB straight from
// the decoder (raw records: no conversion pass afterwards).
Result<Image> DecodeJpeg(const uint8_t* data, size_t size, const ImageInfo& info, const DecodeOptions& opts,
                         bool rgbx);

// One full-size decode into `dst` (width x height of gray or RGB, rows
// packed): DecodeJpegInto's work once it has checked the image is plain.
Status DecodeJpegFull(const uint8_t* data, size_t size, int width, int height, int channels, bool fast_dct,
                      uint8_t* dst);

// A crop of the image scaled by num/8: rows [y0, y0 + rows) and the columns
// covering [x0, x0 + cols), decoded into `buf` (gray, or RGBX: 4 bytes a
// pixel). On return *got_x0 / *got_w say which columns the buffer holds
// (whole iMCUs, as libjpeg crops) and *channels_out its bytes per pixel.
// `fast_dct`: JDCT_IFAST instead of the accurate JDCT_ISLOW (full scale).
Status DecodeJpegRegion(const uint8_t* data, size_t size, int num, bool gray_out, int x0, int cols, int y0,
                        int rows, bool fast_dct, std::vector<uint8_t>* buf, int* got_x0, int* got_w,
                        int* channels_out);

// The fast path for YCbCr and gray JPEGs: decode to Y/Cb/Cr planes at the
// best DCT scale, resample each plane, apply the orientation, and encode
// from the planes (4:2:0, or gray). It skips both colour conversions and
// chroma up/down-sampling, and resamples 1.5 bytes per pixel instead of 3.
// Resampling commutes with the (affine) YCbCr transform, so the result
// matches the RGB path up to rounding. Returns NotSupported when the source
// is not a YCbCr/gray JPEG (the caller then takes the RGB path).
Result<PreparedJpeg> PrepareViaYuv(const uint8_t* data, size_t size, const ImageInfo& info,
                                   const PrepareOptions& opts);

}  // namespace imagepack::internal
