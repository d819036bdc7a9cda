#include "image/vips_util.h"

#include <vips/vips.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "image/cmyk.h"

namespace imagepack::internal {
namespace {

void InitVips() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (VIPS_INIT("imagepack") != 0) return;  // reported by the first failing call
    vips_concurrency_set(1);  // we parallelise across images ourselves
    vips_cache_set_max(0);    // every buffer is new: caching only costs memory
    vips_leak_set(FALSE);
  });
}

std::string TakeVipsError() {
  std::string msg = vips_error_buffer();
  vips_error_clear();
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  auto nl = msg.find('\n');
  if (nl != std::string::npos) msg = msg.substr(0, nl);
  return msg.empty() ? "libvips failed" : msg;
}

// Owns one reference to a VipsImage.
class Ref {
 public:
  explicit Ref(VipsImage* im = nullptr) : im_(im) {}
  ~Ref() { if (im_) g_object_unref(im_); }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  VipsImage* get() const { return im_; }
  VipsImage** out() { reset(); return &im_; }
  void reset(VipsImage* im = nullptr) { if (im_) g_object_unref(im_); im_ = im; }
  // Replaces the held image with `next` (which took its own reference).
  void swap_in(Ref& next) { reset(next.im_); next.im_ = nullptr; }

 private:
  VipsImage* im_;
};

// Sequential access streams a huge image through in bounded memory, but a
// TIFF stored in another orientation (fax scanners write them) is read
// against its strip order by vips_autorot ("out of order read"): TIFFs are
// opened for random access.
Result<VipsImage*> Open(const uint8_t* data, size_t size) {
  InitVips();
  const VipsAccess access =
      SniffFormat(data, size) == ImageFormat::kTiff ? VIPS_ACCESS_RANDOM : VIPS_ACCESS_SEQUENTIAL;
  VipsImage* im = vips_image_new_from_buffer(data, size, "", "access", access, "fail_on", VIPS_FAIL_ON_TRUNCATED,
                                             nullptr);
  if (!im) return Status::Corruption(TakeVipsError());
  return im;
}

// An image's pixels, computed and copied out of libvips.
Result<std::vector<uint8_t>> PixelsOf(VipsImage* im) {
  size_t len = 0;
  void* mem = vips_image_write_to_memory(im, &len);
  if (!mem) return Status::Corruption(TakeVipsError());
  std::vector<uint8_t> pixels(static_cast<uint8_t*>(mem), static_cast<uint8_t*>(mem) + len);
  g_free(mem);
  return pixels;
}

uint32_t Le16(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8; }
uint32_t Le32(const uint8_t* p) { return Le16(p) | Le16(p + 2) << 16; }

// What a BMP's header says about how to read it (libvips reads BMP through
// ImageMagick): whether a fourth byte is alpha at all, and whether the file
// is an OS/2 2.x bitmap, whose palette that reader gets wrong.
struct BmpRules {
  bool os2_v2 = false;
  bool drop_alpha = false;
};
BmpRules ReadBmpRules(const uint8_t* d, size_t n) {
  BmpRules r;
  if (n < 14 + 16) return r;
  const uint32_t header = Le32(d + 14);
  r.os2_v2 = header == 16 || header == 64;
  if (header < 40 || n < 14 + 40) return r;
  const uint32_t bpp = Le16(d + 28), compression = Le32(d + 30);
  // 32 bits per pixel: BI_RGB's fourth byte is unused (BGRX); BI_BITFIELDS
  // has alpha only when the header's alpha mask (V3 and later) is set.
  const bool alpha_mask = header >= 56 && n >= 14 + 56 && Le32(d + 14 + 52) != 0;
  r.drop_alpha = bpp == 32 && (compression == 0 || (compression == 3 && !alpha_mask));
  return r;
}

// The first frame's rectangle on a GIF's logical screen, or the whole
// screen when it cannot be read. Walks the blocks before the first image
// descriptor; every length is checked.
struct Rect {
  int x = 0, y = 0, w = 0, h = 0;
};
Rect GifFirstFrame(const uint8_t* d, size_t n) {
  Rect screen;
  if (n < 13) return screen;
  screen.w = int(Le16(d + 6));
  screen.h = int(Le16(d + 8));
  size_t at = 13;
  if (d[10] & 0x80) at += 3u << ((d[10] & 7) + 1);  // global colour table
  while (at < n) {
    if (d[at] == 0x2C) {  // image descriptor
      if (at + 9 > n) return screen;
      return {int(Le16(d + at + 1)), int(Le16(d + at + 3)), int(Le16(d + at + 5)), int(Le16(d + at + 7))};
    }
    if (d[at] != 0x21 || at + 2 > n) return screen;  // not an extension: give up
    at += 2;
    while (at < n && d[at] != 0) at += size_t(d[at]) + 1;  // sub-blocks
    ++at;
  }
  return screen;
}

}  // namespace

Result<ImageInfo> VipsProbe(const uint8_t* data, size_t size) {
  auto opened = Open(data, size);
  if (!opened.ok()) return opened.status();
  Ref im(opened.value());
  ImageInfo info;
  info.width = vips_image_get_width(im.get());
  info.height = vips_image_get_height(im.get());
  info.components = vips_image_get_bands(im.get());
  int orientation = 1;
  if (vips_image_get_typeof(im.get(), VIPS_META_ORIENTATION) &&
      vips_image_get_int(im.get(), VIPS_META_ORIENTATION, &orientation) == 0 &&
      orientation >= 1 && orientation <= 8) {
    info.orientation = orientation;
  }
  info.has_eoi = true;
  return info;
}

namespace {

// The first `n` bands of `im`, in place.
Status KeepBands(Ref& im, int n) {
  Ref next;
  if (vips_extract_band(im.get(), next.out(), 0, "n", n, nullptr) != 0) return Status::Corruption(TakeVipsError());
  im.swap_in(next);
  return Status::Ok();
}

// The format's own rules before anything else: an OS/2 2.x BMP refused,
// a BMP's unused fourth byte dropped (BmpRules), packed encodings (8-bit
// CIELab TIFFs load as LABQ) to plain bands, which every later step reads.
Status ApplyFormatRules(const uint8_t* data, size_t size, ImageFormat format, Ref& im) {
  Ref next;
  if (format == ImageFormat::kBmp) {
    const BmpRules bmp = ReadBmpRules(data, size);
    if (bmp.os2_v2)
      return Status::NotSupported("OS/2 2.x BMP is not supported (its palette would be read wrongly); "
                                  "convert it to PNG first");
    if (bmp.drop_alpha && vips_image_get_bands(im.get()) == 4) IMAGEPACK_RETURN_IF_ERROR(KeepBands(im, 3));
  }
  if (vips_image_get_coding(im.get()) != VIPS_CODING_NONE) {
    if (vips_image_decode(im.get(), next.out()) != 0) return Status::Corruption(TakeVipsError());
    im.swap_in(next);
  }
  return Status::Ok();
}

// A GIF whose first frame leaves part of the screen uncovered: that part is
// transparent (and so white, as all transparency here); the GIF reader
// leaves it black when the frame itself has no transparency.
Status WhitenGifBorder(const uint8_t* data, size_t size, Ref& im) {
  const Rect f = GifFirstFrame(data, size);
  const int W = vips_image_get_width(im.get()), H = vips_image_get_height(im.get());
  const int x0 = std::clamp(f.x, 0, W), y0 = std::clamp(f.y, 0, H);
  const int x1 = std::clamp(f.x + f.w, x0, W), y1 = std::clamp(f.y + f.h, y0, H);
  if (x0 == 0 && y0 == 0 && x1 == W && y1 == H) return Status::Ok();
  VipsImage* copy = vips_image_copy_memory(im.get());
  if (!copy) return Status::Corruption(TakeVipsError());
  Ref next(copy);
  im.swap_in(next);
  std::vector<double> white(size_t(vips_image_get_bands(im.get())), 255.0);
  const int n = int(white.size());
  const int rects[4][4] = {{0, 0, W, y0}, {0, y1, W, H - y1}, {0, y0, x0, y1 - y0}, {x1, y0, W - x1, y1 - y0}};
  for (const auto& r : rects)
    if (r[2] > 0 && r[3] > 0 &&
        vips_draw_rect(im.get(), white.data(), n, r[0], r[1], r[2], r[3], "fill", TRUE, nullptr) != 0)
      return Status::Corruption(TakeVipsError());
  return Status::Ok();
}

// CMYK by the same plain rule as CMYK JPEGs (cmyk.h), not libvips' colour
// management with a fallback profile.
Result<Image> CmykPixels(Ref& im, int channels) {
  Ref next;
  if (vips_image_get_format(im.get()) != VIPS_FORMAT_UCHAR) {
    if (vips_msb(im.get(), next.out(), nullptr) != 0) return Status::Corruption(TakeVipsError());
    im.swap_in(next);
  }
  const int bands = std::min(vips_image_get_bands(im.get()), 5);
  if (vips_image_get_bands(im.get()) != bands) IMAGEPACK_RETURN_IF_ERROR(KeepBands(im, bands));
  auto cmyk = PixelsOf(im.get());
  if (!cmyk.ok()) return cmyk.status();
  Image out;
  out.width = vips_image_get_width(im.get());
  out.height = vips_image_get_height(im.get());
  out.channels = channels;
  out.pixels.resize(out.stride() * out.height);
  CmykTo(cmyk->data(), bands, size_t(out.width) * out.height, false, channels, out.pixels.data());
  return out;
}

// Every other interpretation: alpha flattened over white, gray kept gray
// and the rest made sRGB, 8 bits, then `channels` by our own rules.
Result<Image> GrayOrRgbPixels(Ref& im, int channels) {
  Ref next;
  // CIELab (with alpha, say) to sRGB before the flatten: white is 255 in
  // every band only there.
  if (vips_image_get_interpretation(im.get()) == VIPS_INTERPRETATION_LAB) {
    if (vips_colourspace(im.get(), next.out(), VIPS_INTERPRETATION_sRGB, nullptr) != 0)
      return Status::NotSupported(TakeVipsError());
    im.swap_in(next);
  }
  if (vips_image_hasalpha(im.get())) {
    const VipsBandFormat bf = vips_image_get_format(im.get());
    double white = (bf == VIPS_FORMAT_USHORT || bf == VIPS_FORMAT_SHORT) ? 65535.0 : 255.0;
    VipsArrayDouble* bg = vips_array_double_new(&white, 1);
    int rc = vips_flatten(im.get(), next.out(), "background", bg, nullptr);
    vips_area_unref(VIPS_AREA(bg));
    if (rc != 0) return Status::Corruption(TakeVipsError());
    im.swap_in(next);
  }
  // Gray stays gray; everything else becomes sRGB, and 1-channel output is
  // then our Rec. 601 luma, the same as for JPEG (libvips' B_W is CIE L*).
  const VipsInterpretation interp = vips_image_get_interpretation(im.get());
  const bool gray = interp == VIPS_INTERPRETATION_B_W || interp == VIPS_INTERPRETATION_GREY16;
  const VipsInterpretation want = gray ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB;
  if (vips_colourspace(im.get(), next.out(), want, nullptr) != 0) return Status::NotSupported(TakeVipsError());
  im.swap_in(next);
  const int want_bands = gray ? 1 : 3;
  if (vips_image_get_bands(im.get()) > want_bands) IMAGEPACK_RETURN_IF_ERROR(KeepBands(im, want_bands));
  if (vips_image_get_format(im.get()) != VIPS_FORMAT_UCHAR) {
    if (vips_cast(im.get(), next.out(), VIPS_FORMAT_UCHAR, nullptr) != 0) return Status::Corruption(TakeVipsError());
    im.swap_in(next);
  }
  if (vips_image_get_bands(im.get()) != want_bands)
    return Status::NotSupported("cannot convert image with " + std::to_string(vips_image_get_bands(im.get())) +
                                " bands");
  auto pixels = PixelsOf(im.get());
  if (!pixels.ok()) return pixels.status();
  Image out;
  out.width = vips_image_get_width(im.get());
  out.height = vips_image_get_height(im.get());
  out.channels = want_bands;
  out.pixels = std::move(pixels.value());
  return ConvertChannels(std::move(out), channels);
}

}  // namespace

Result<Image> VipsDecode(const uint8_t* data, size_t size, const DecodeOptions& opts) {
  auto opened = Open(data, size);
  if (!opened.ok()) return opened.status();
  Ref im(opened.value());
  int64_t pixels = int64_t(vips_image_get_width(im.get())) * vips_image_get_height(im.get());
  if (pixels > opts.max_pixels) {
    return Status::InvalidArgument(
        "image is " + std::to_string(vips_image_get_width(im.get())) + "x" +
        std::to_string(vips_image_get_height(im.get())) + " = " + std::to_string(pixels) +
        " pixels, over the limit of " + std::to_string(opts.max_pixels) + " (--max-pixels)");
  }
  const ImageFormat format = SniffFormat(data, size);
  IMAGEPACK_RETURN_IF_ERROR(ApplyFormatRules(data, size, format, im));
  if (format == ImageFormat::kGif && !vips_image_hasalpha(im.get()))
    IMAGEPACK_RETURN_IF_ERROR(WhitenGifBorder(data, size, im));
  Ref next;
  if (opts.apply_orientation) {
    if (vips_autorot(im.get(), next.out(), nullptr) != 0) return Status::Corruption(TakeVipsError());
    im.swap_in(next);
  }
  const int up_w = vips_image_get_width(im.get()), up_h = vips_image_get_height(im.get());
  auto [tw, th] = TargetSize(up_w, up_h, opts.limit);
  const int factor = std::min(up_w / tw, up_h / th);
  if (factor >= 2) {
    if (vips_shrink(im.get(), next.out(), double(factor), double(factor), nullptr) != 0)
      return Status::Corruption(TakeVipsError());
    im.swap_in(next);
  }
  const bool cmyk =
      vips_image_get_interpretation(im.get()) == VIPS_INTERPRETATION_CMYK && vips_image_get_bands(im.get()) >= 4;
  auto made = cmyk ? CmykPixels(im, opts.channels) : GrayOrRgbPixels(im, opts.channels);
  if (!made.ok()) return made.status();
  Image out = std::move(made.value());
  if (out.width != tw || out.height != th) {
    // The shrink's output is a whole number of pixels; the picture in it is
    // up_w / factor wide (its last pixel may be partial or cut).
    const double ew = factor >= 2 ? double(up_w) / factor : out.width;
    const double eh = factor >= 2 ? double(up_h) / factor : out.height;
    out = ResampleImage(out, ew, eh, tw, th, opts.filter);
  }
  return out;
}

}  // namespace imagepack::internal

namespace imagepack::internal {

Result<Image> RenderText(const std::string& text, int height_px) {
  InitVips();
  if (text.empty()) return Image{};
  // Pango markup is off: the text is shown as it is.
  gchar* escaped = g_markup_escape_text(text.c_str(), -1);
  VipsImage* out = nullptr;
  const std::string font = "DejaVu Sans " + std::to_string(std::max(4, height_px * 3 / 4)) + "px";
  const int rc = vips_text(&out, escaped, "font", font.c_str(), "dpi", 72, nullptr);
  g_free(escaped);
  if (rc != 0) return Status::IOError("text rendering: " + TakeVipsError());
  Ref ref(out);
  size_t size = 0;
  void* mem = vips_image_write_to_memory(out, &size);
  if (!mem) return Status::IOError("text rendering: " + TakeVipsError());
  Image img;
  img.width = vips_image_get_width(out);
  img.height = vips_image_get_height(out);
  img.channels = 1;
  img.pixels.assign(static_cast<uint8_t*>(mem), static_cast<uint8_t*>(mem) + size);
  g_free(mem);
  return img;
}

}  // namespace imagepack::internal
