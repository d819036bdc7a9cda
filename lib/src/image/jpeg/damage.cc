// The one rule for damaged JPEG data (jpeg.h, JpegDamage), and its reading
// of TurboJPEG's messages.
#include <string>

#include "image/jpeg/jpeg.h"
#include "image/jpeg/turbo.h"

namespace imagepack::internal {

namespace {

// libjpeg-turbo 2.1's warning messages (jerror.h, JWRN_*). TurboJPEG 2.x's
// tjGetErrorCode() keeps saying "warning" when a fatal error follows a
// warning in the same image (found by fuzz_verify: extraneous bytes, then
// "Quantization table 0x00 was not defined", came back as a warning and a
// half-decoded image as success). The last message is the one that counts.
bool IsWarningMessage(const std::string& msg) {
  for (const char* w : {"Corrupt JPEG data", "Premature end of JPEG file", "Unknown Adobe color transform",
                        "Inconsistent progression sequence", "Warning:", "Invalid SOS parameters for sequential",
                        "Application transferred too many scanlines"})
    if (msg.rfind(w, 0) == 0) return true;
  return false;
}

}  // namespace

Status JpegDamage(const std::string& message, bool fatal, bool ran_out) {
  if (fatal) return Status::Corruption("JPEG decode failed: " + message);
  if (ran_out) return Status::Corruption("truncated JPEG (Premature end of JPEG file)");
  return Status::Ok();
}

// TurboJPEG gives messages, not codes: its last message decides (see
// IsWarningMessage). Counting "premature end of data segment" (a scan
// ending early) as truncation once made pack_lmdb pass through bytes that
// the loader then refused (found by fuzz_decode).
Status DecodeFailure(tjhandle h) {
  const std::string msg = TjError(h);
  const bool fatal = tjGetErrorCode(h) != TJERR_WARNING || !IsWarningMessage(msg);
  return JpegDamage(msg, fatal, msg.rfind("Premature end of JPEG file", 0) == 0);
}

}  // namespace imagepack::internal
