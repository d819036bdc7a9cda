// Pixel operations on decoded images: channel conversion, EXIF orientation.
#include <cstring>

#include "imagepack/pixels.h"

namespace imagepack {

Image ConvertChannels(Image img, int channels) {
  if (img.channels == channels) return img;
  Image out;
  out.width = img.width;
  out.height = img.height;
  out.channels = channels;
  out.pixels.resize(out.stride() * out.height);
  const size_t n = size_t(img.width) * img.height;
  const uint8_t* s = img.pixels.data();
  uint8_t* d = out.pixels.data();
  if (img.channels == 3 && channels == 1) {
    for (size_t i = 0; i < n; ++i, s += 3) d[i] = Luma(s[0], s[1], s[2]);
  } else if (img.channels == 1 && channels == 3) {
    for (size_t i = 0; i < n; ++i, d += 3) d[0] = d[1] = d[2] = s[i];
  } else if (img.channels == 4 && channels == 3) {  // RGBX
    for (size_t i = 0; i < n; ++i, s += 4, d += 3) {
      d[0] = s[0]; d[1] = s[1]; d[2] = s[2];
    }
  } else if (img.channels == 4 && channels == 1) {
    for (size_t i = 0; i < n; ++i, s += 4) d[i] = Luma(s[0], s[1], s[2]);
  }
  return out;
}

Image ApplyOrientation(Image img, int orientation) {
  if (orientation <= 1 || orientation > 8) return img;
  const int W = img.width, H = img.height, C = img.channels;
  const bool transposed = orientation >= 5;
  Image out;
  out.width = transposed ? H : W;
  out.height = transposed ? W : H;
  out.channels = C;
  out.pixels.resize(img.pixels.size());
  for (int yo = 0; yo < out.height; ++yo) {
    uint8_t* d = &out.pixels[size_t(yo) * out.stride()];
    for (int xo = 0; xo < out.width; ++xo) {
      int x, y;
      switch (orientation) {
        case 2: x = W - 1 - xo; y = yo; break;
        case 3: x = W - 1 - xo; y = H - 1 - yo; break;
        case 4: x = xo; y = H - 1 - yo; break;
        case 5: x = yo; y = xo; break;
        case 6: x = yo; y = H - 1 - xo; break;
        case 7: x = W - 1 - yo; y = H - 1 - xo; break;
        default: x = W - 1 - yo; y = xo; break;  // 8
      }
      std::memcpy(d + size_t(xo) * C, &img.pixels[(size_t(y) * W + x) * C], C);
    }
  }
  return out;
}

}  // namespace imagepack
