// The planar YCbCr resize path (jpeg.h, PrepareViaYuv).
#include <algorithm>
#include <array>
#include <vector>

#include "image/jpeg/jpeg.h"
#include "image/jpeg/turbo.h"

namespace imagepack::internal {

namespace {

// A single-channel plane that ApplyOrientation and Resample can work on.
Image Plane(int w, int h) {
  Image p;
  p.width = w;
  p.height = h;
  p.channels = 1;
  p.pixels.resize(size_t(w) * h);
  return p;
}

// Where one axis of an output plane reads from the matching input plane, in
// input plane samples. A plane sample covers `factor` luma pixels of its
// image (JFIF's centred siting), and TurboJPEG pads planes to whole MCUs, so
// a plane's last samples may lie partly or wholly past the image's edge.
// Mapping through luma coordinates (output luma t <-> decoded luma
// t * decoded / target, `decoded` the scaled picture's extent) keeps every plane aligned with the luma plane;
// `reversed` (the orientation flips this axis) puts the output's padding,
// which ends up past the right or bottom edge once upright, at the start.
struct AxisRegion {
  double start;
  double span;
};
AxisRegion PlaneAxis(int out_samples, int out_factor, int target, int in_factor, double decoded, bool reversed) {
  const double covered = double(out_samples) * out_factor;  // output luma pixels
  const double offset = reversed ? target - covered : 0.0;
  const double scale = double(decoded) / (double(target) * in_factor);
  return {offset * scale, covered * scale};
}

// Sampling factors of plane i (luma pixels per sample, x and y).
std::pair<int, int> PlaneFactors(int i, int subsamp) {
  if (i == 0 || subsamp == TJSAMP_GRAY) return {1, 1};
  return {tjMCUWidth[subsamp] / 8, tjMCUHeight[subsamp] / 8};
}

}  // namespace

Result<PreparedJpeg> PrepareViaYuv(const uint8_t* data, size_t size, const ImageInfo& info,
                                   const PrepareOptions& opts) {
  const DecodeOptions& d = opts.decode;
  if (d.channels != 3 || info.format != ImageFormat::kJpeg ||
      (info.jpeg_color != JpegColor::kYCbCr && info.jpeg_color != JpegColor::kGray))
    return Status::NotSupported("not a YCbCr or gray JPEG");
  TjDecompressor decompressor;
  tjhandle dec = decompressor.get();
  tjhandle enc = Handles().enc;
  if (!dec || !enc) return Status::IOError("cannot create libjpeg-turbo handles");
  int w = 0, h = 0, subsamp = -1, colorspace = -1;
  if (tjDecompressHeader3(dec, data, static_cast<unsigned long>(size), &w, &h, &subsamp,
                          &colorspace) != 0 ||
      subsamp < 0 || (colorspace != TJCS_YCbCr && colorspace != TJCS_GRAY))
    return Status::NotSupported("unusual JPEG layout");
  const bool gray = colorspace == TJCS_GRAY;
  const int planes = gray ? 1 : 3;

  const int orientation = d.apply_orientation ? info.orientation : 1;
  const bool transposed = orientation >= 5;
  // Which stored axes run backwards once upright (see ApplyOrientation).
  const bool reversed_x = orientation == 2 || orientation == 3 || orientation == 7 || orientation == 8;
  const bool reversed_y = orientation == 3 || orientation == 4 || orientation == 6 || orientation == 7;
  auto [tw, th] = TargetSize(transposed ? h : w, transposed ? w : h, d.limit);
  const int need_w = transposed ? th : tw;
  const int need_h = transposed ? tw : th;
  // The output is 4:2:0 (chroma every 2 luma pixels each way). A source
  // whose chroma is sparser along an axis (4:1:1: every 4 horizontally) is
  // decoded at a larger scale, so that DCT scaling does not leave its chroma
  // coarser than the output's.
  const int out_subsamp = gray ? TJSAMP_GRAY : TJSAMP_420;
  const auto [cx, cy] = PlaneFactors(1, subsamp);
  const auto [ocx, ocy] = PlaneFactors(1, out_subsamp);
  const tjscalingfactor sf = PickScale(w, h, need_w * std::max(1, cx / ocx), need_h * std::max(1, cy / ocy));
  const int dw = TJSCALED(w, sf), dh = TJSCALED(h, sf);

  std::array<Image, 3> in;
  std::array<unsigned char*, 3> in_ptr{};
  std::array<int, 3> in_stride{};
  for (int i = 0; i < planes; ++i) {
    in[i] = Plane(tjPlaneWidth(i, dw, subsamp), tjPlaneHeight(i, dh, subsamp));
    in_ptr[i] = in[i].pixels.data();
    in_stride[i] = in[i].width;
  }
  // TJFLAG_FASTDCT only at full scale. Below it every component takes a
  // scaled IDCT whatever the flag says, except where libjpeg would have
  // decoded a 4:2:0 chroma plane at twice the luma's scale: TurboJPEG then
  // forces the luma's scaled IDCT onto it, which reads its coefficient
  // multipliers in the "islow" form, while the chroma table was built for
  // the method the flag chose. At scale 4/8 that was the 8x8 fast IDCT's
  // AAN-scaled table: chroma came out 1.1-2.4x too strong (saturation
  // doubled, hues shifted).
  const int flags = d.fast_dct && sf.num == sf.denom ? TJFLAG_FASTDCT : 0;
  if (tjDecompressToYUVPlanes(dec, data, static_cast<unsigned long>(size), in_ptr.data(), dw,
                              in_stride.data(), dh, flags) != 0) {
    IMAGEPACK_RETURN_IF_ERROR(DecodeFailure(dec));
  }

  std::array<Image, 3> out;
  std::array<const unsigned char*, 3> out_ptr{};
  std::array<int, 3> out_stride{};
  for (int i = 0; i < planes; ++i) {
    // Plane sizes of the upright output (padded to whole MCUs, as the
    // encoder reads them), then as stored before orientation.
    const int pw = tjPlaneWidth(i, tw, out_subsamp), ph = tjPlaneHeight(i, th, out_subsamp);
    const int sw = transposed ? ph : pw, sh = transposed ? pw : ph;
    const auto [ox, oy] = PlaneFactors(i, out_subsamp);  // 4:2:0 and gray: the same both ways
    const auto [ix, iy] = PlaneFactors(i, subsamp);
    const AxisRegion rx = PlaneAxis(sw, ox, need_w, ix, ScaledExtent(w, sf), reversed_x);
    const AxisRegion ry = PlaneAxis(sh, oy, need_h, iy, ScaledExtent(h, sf), reversed_y);
    const Image& p = in[i];
    Image r = Plane(sw, sh);
    ResampleRegion(p.pixels.data(), p.width, p.height, p.stride(), 1, rx.start, ry.start, rx.span, ry.span,
                   r.pixels.data(), sw, sh, r.stride(), d.filter);
    out[i] = ApplyOrientation(std::move(r), orientation);
    out_ptr[i] = out[i].pixels.data();
    out_stride[i] = out[i].width;
  }

  PreparedJpeg result;
  result.bytes.resize(tjBufSize(tw, th, out_subsamp));
  unsigned char* buf = result.bytes.data();
  unsigned long len = result.bytes.size();
  if (tjCompressFromYUVPlanes(enc, out_ptr.data(), tw, out_stride.data(), th, out_subsamp, &buf,
                              &len, opts.quality, TJFLAG_NOREALLOC) != 0)
    return Status::IOError("JPEG encode failed: " + TjError(enc));
  result.bytes.resize(len);
  result.width = tw;
  result.height = th;
  result.channels = gray ? 1 : 3;
  return result;
}

}  // namespace imagepack::internal
