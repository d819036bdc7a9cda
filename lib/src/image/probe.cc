// What an encoded image is: sniffed from its first bytes, its header read
// by the JPEG module (jpeg/markers.cc) or by libvips for the rest.
#include <cstring>
#include <string>

#include "imagepack/probe.h"
#include "image/jpeg/jpeg.h"
#include "image/vips_util.h"

namespace imagepack {

const char* ImageFormatName(ImageFormat f) {
  switch (f) {
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kGif: return "GIF";
    case ImageFormat::kBmp: return "BMP";
    case ImageFormat::kTiff: return "TIFF";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kPnm: return "PNM";
    case ImageFormat::kUnknown: break;
  }
  return "unknown";
}

ImageFormat SniffFormat(const uint8_t* d, size_t n) {
  if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return ImageFormat::kJpeg;
  if (n >= 8 && std::memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0) return ImageFormat::kPng;
  if (n >= 4 && std::memcmp(d, "GIF8", 4) == 0) return ImageFormat::kGif;
  if (n >= 2 && d[0] == 'B' && d[1] == 'M') return ImageFormat::kBmp;
  // Classic TIFF (42) and BigTIFF (43), either byte order.
  if (n >= 4 && (std::memcmp(d, "II*\0", 4) == 0 || std::memcmp(d, "MM\0*", 4) == 0 ||
                 std::memcmp(d, "II+\0", 4) == 0 || std::memcmp(d, "MM\0+", 4) == 0))
    return ImageFormat::kTiff;
  if (n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0)
    return ImageFormat::kWebp;
  if (n >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '7') return ImageFormat::kPnm;
  return ImageFormat::kUnknown;
}

Result<ImageInfo> ProbeImage(const uint8_t* data, size_t size) {
  if (size == 0) return Status::Corruption("empty file");
  ImageFormat fmt = SniffFormat(data, size);
  if (fmt == ImageFormat::kJpeg) return internal::ProbeJpeg(data, size);
  if (fmt == ImageFormat::kUnknown) return Status::Corruption("not an image (unrecognised content)");
  auto header = internal::VipsProbe(data, size);
  if (!header.ok()) return header.status();
  header->format = fmt;
  return header;
}

}  // namespace imagepack
