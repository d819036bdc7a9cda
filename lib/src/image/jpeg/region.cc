// libjpeg's partial decode of a crop (jpeg.h, DecodeJpegRegion): the rows
// above and below are skipped, the columns cropped to whole iMCUs.
#include <algorithm>
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <vector>

#include <jpeglib.h>  // after <cstdio>: it uses size_t and FILE
#include <jerror.h>

#include "image/jpeg/jpeg.h"

namespace imagepack::internal {
namespace {

// libjpeg reports errors through longjmp; messages are kept for the Status.
struct ErrorMgr {
  jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool premature_end;
};

extern "C" void OnJpegError(j_common_ptr cinfo) {
  ErrorMgr* err = reinterpret_cast<ErrorMgr*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  longjmp(err->jump, 1);
}

extern "C" void OnJpegMessage(j_common_ptr cinfo, int level) {
  ErrorMgr* err = reinterpret_cast<ErrorMgr*>(cinfo->err);
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) err->premature_end = true;
}

}  // namespace

// Damage is judged by JpegDamage, the rule of every decode path. Only POD
// state lives across setjmp.
Status DecodeJpegRegion(const uint8_t* data, size_t size, int num, bool gray_out, int x0, int cols, int y0,
                        int rows, bool fast_dct, std::vector<uint8_t>* buf, int* got_x0, int* got_w,
                        int* channels_out) {
  jpeg_decompress_struct cinfo;
  ErrorMgr err;
  err.premature_end = false;
  err.message[0] = '\0';
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = OnJpegError;
  err.pub.emit_message = OnJpegMessage;
  jpeg_create_decompress(&cinfo);
  JSAMPROW row = nullptr;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return JpegDamage(err.message, /*fatal=*/true, false);
  }
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.scale_num = static_cast<unsigned>(num);
  cinfo.scale_denom = 8;
  cinfo.dct_method = fast_dct ? JDCT_IFAST : JDCT_ISLOW;
  // RGBX: as cheap for libjpeg-turbo as RGB, and the resampler's 4-channel
  // SIMD kernel applies.
  cinfo.out_color_space = gray_out ? JCS_GRAYSCALE : JCS_EXT_RGBX;
  jpeg_start_decompress(&cinfo);
  JDIMENSION xoff = static_cast<JDIMENSION>(std::max(0, x0));
  JDIMENSION width = static_cast<JDIMENSION>(std::min<int>(cols, static_cast<int>(cinfo.output_width) - x0));
  if (width < cinfo.output_width) jpeg_crop_scanline(&cinfo, &xoff, &width);
  const int c = cinfo.output_components;
  const int y_end = std::min<int>(y0 + rows, static_cast<int>(cinfo.output_height));
  buf->resize(size_t(width) * c * std::max(0, y_end - y0));
  if (y0 > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(y0));
  for (int y = y0; y < y_end; ++y) {
    row = buf->data() + size_t(y - y0) * width * c;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  const bool ran_out = err.premature_end;
  jpeg_abort_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  IMAGEPACK_RETURN_IF_ERROR(JpegDamage("", /*fatal=*/false, ran_out));
  *got_x0 = static_cast<int>(xoff);
  *got_w = static_cast<int>(width);
  *channels_out = c;
  return Status::Ok();
}

}  // namespace imagepack::internal
