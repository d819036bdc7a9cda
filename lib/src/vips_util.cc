#include "vips_util.h"

#include <vips/vips.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

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

Result<VipsImage*> Open(const uint8_t* data, size_t size) {
  InitVips();
  VipsImage* im = vips_image_new_from_buffer(data, size, "", "access", VIPS_ACCESS_SEQUENTIAL,
                                             "fail_on", VIPS_FAIL_ON_TRUNCATED, nullptr);
  if (!im) return Status::Corruption(TakeVipsError());
  return im;
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
  Ref next;
  if (opts.apply_orientation) {
    if (vips_autorot(im.get(), next.out(), nullptr) != 0) return Status::Corruption(TakeVipsError());
    im.swap_in(next);
  }
  auto [tw, th] = TargetSize(vips_image_get_width(im.get()), vips_image_get_height(im.get()), opts.limit);
  int factor = std::min(vips_image_get_width(im.get()) / tw, vips_image_get_height(im.get()) / th);
  if (factor >= 2) {
    if (vips_shrink(im.get(), next.out(), double(factor), double(factor), nullptr) != 0)
      return Status::Corruption(TakeVipsError());
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
  if (vips_colourspace(im.get(), next.out(), want, nullptr) != 0)
    return Status::NotSupported(TakeVipsError());
  im.swap_in(next);
  const int want_bands = gray ? 1 : 3;
  if (vips_image_get_bands(im.get()) > want_bands) {
    if (vips_extract_band(im.get(), next.out(), 0, "n", want_bands, nullptr) != 0)
      return Status::Corruption(TakeVipsError());
    im.swap_in(next);
  }
  if (vips_image_get_format(im.get()) != VIPS_FORMAT_UCHAR) {
    if (vips_cast(im.get(), next.out(), VIPS_FORMAT_UCHAR, nullptr) != 0)
      return Status::Corruption(TakeVipsError());
    im.swap_in(next);
  }
  if (vips_image_get_bands(im.get()) != want_bands)
    return Status::NotSupported("cannot convert image with " +
                                std::to_string(vips_image_get_bands(im.get())) + " bands");
  size_t len = 0;
  void* mem = vips_image_write_to_memory(im.get(), &len);
  if (!mem) return Status::Corruption(TakeVipsError());
  Image out;
  out.width = vips_image_get_width(im.get());
  out.height = vips_image_get_height(im.get());
  out.channels = want_bands;
  out.pixels.assign(static_cast<uint8_t*>(mem), static_cast<uint8_t*>(mem) + len);
  g_free(mem);
  out = ConvertChannels(std::move(out), opts.channels);
  if (out.width != tw || out.height != th) out = ResampleImage(out, tw, th, opts.filter);
  return out;
}

}  // namespace imagepack::internal
