// libFuzzer target: the image entry points on arbitrary bytes. The first
// input byte picks the path and options, the next eight a crop box; the rest
// is the file. Covers ProbeImage (own JPEG marker parser), DecodeImage
// (libjpeg-turbo, libvips, orientation, colour conversion, shrink-on-load,
// resample), PrepareJpeg (pack_lmdb's pass-through/re-encode) and RenderJpeg
// (the loader's partial decode). Every success must be self-consistent.
#include <algorithm>
#include <cstring>

#include "fuzz_util.h"
#include "imagepack/image.h"
#include "imagepack/transform.h"

using namespace imagepack;

namespace {

// Keeps each input fast: the pixel limit is a tested option of its own.
constexpr int64_t kMaxPixels = 1 << 22;

void CheckImage(const Image& img) {
  FUZZ_CHECK(img.width > 0 && img.height > 0);
  FUZZ_CHECK(img.channels == 1 || img.channels == 3 || img.channels == 4);
  FUZZ_CHECK(img.pixels.size() == size_t(img.width) * img.height * img.channels);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  const uint8_t mode = data[0];
  uint16_t box_raw[4];
  std::memcpy(box_raw, data + 1, 8);
  const uint8_t* file = data + 9;
  const size_t n = size - 9;

  auto info = ProbeImage(file, n);
  if (info.ok()) FUZZ_CHECK(info->width > 0 && info->height > 0);

  DecodeOptions d;
  d.max_pixels = kMaxPixels;
  d.channels = (mode & 1) ? 1 : 3;
  d.apply_orientation = (mode & 2) != 0;
  d.fast_dct = (mode & 4) != 0;
  if (mode & 8) {
    d.limit.mode = (mode & 16) ? SizeLimit::Mode::kLongerEdge : SizeLimit::Mode::kShorterEdge;
    d.limit.n = 1 + box_raw[0] % 300;
  }

  switch ((mode >> 5) % 4) {
    case 0:
    case 1: {
      auto img = DecodeImage(file, n, d);
      if (img.ok()) {
        CheckImage(*img);
        FUZZ_CHECK(img->channels == d.channels);
        if (d.limit.n > 0) {
          const int capped = d.limit.mode == SizeLimit::Mode::kLongerEdge ? std::max(img->width, img->height)
                                                                    : std::min(img->width, img->height);
          FUZZ_CHECK(capped <= d.limit.n);
        }
      }
      break;
    }
    case 2: {
      PrepareOptions p;
      p.decode = d;
      p.quality = 75;
      p.reencode = (mode & 4) != 0;
      auto out = PrepareJpeg(file, n, p);
      if (out.ok()) {
        FUZZ_CHECK(out->width > 0 && out->height > 0);
        FUZZ_CHECK(out->channels == 1 || out->channels == 3);
        // What pack_lmdb stores must itself decode to the size it claims.
        DecodeOptions again;
        again.channels = out->channels;
        again.apply_orientation = false;
        again.max_pixels = int64_t{1} << 40;
        auto img = DecodeImage(out->bytes.data(), out->bytes.size(), again);
        FUZZ_CHECK(img.ok());
        FUZZ_CHECK(img->width == out->width && img->height == out->height);
      }
      break;
    }
    case 3: {
      if (!info.ok() || int64_t(info->width) * info->height > kMaxPixels) break;
      CropBox box;
      box.w = 1 + box_raw[0] % 512;
      box.h = 1 + box_raw[1] % 512;
      box.x = int(box_raw[2] % 1024) - 256;  // may reach outside: padding
      box.y = int(box_raw[3] % 1024) - 256;
      RenderOptions r;
      r.out_w = 1 + box_raw[0] % 64;
      r.out_h = 1 + box_raw[1] % 64;
      r.channels = d.channels;
      r.flip = (mode & 2) != 0;
      r.dct_scaling = (mode & 4) != 0;
      Image out;
      Status s = RenderJpeg(file, n, box, r, &out);
      if (s.ok()) {
        CheckImage(out);
        FUZZ_CHECK(out.width == r.out_w && out.height == r.out_h && out.channels == r.channels);
      }
      break;
    }
  }
  return 0;
}
