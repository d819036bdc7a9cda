// libFuzzer target: PNG maps (lib/src/mask.cc: gray, palette, 1-16 bits),
// decoded as uint8 and as uint16. A decoded map has as many samples as
// pixels, of the asked width, and survives EncodeMaskPng and a second
// decode unchanged; a damaged PNG is an error that leaks nothing
// (LeakSanitizer runs with the fuzzer).
#include "fuzz_util.h"
#include "imagepack/mask.h"

using namespace imagepack;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (int bits : {8, 16}) {
    auto m = DecodeMask(data, size, bits);
    if (!m.ok()) {
      FUZZ_CHECK(!m.status().message().empty());
      continue;
    }
    FUZZ_CHECK(m->channels == bits / 8);
    FUZZ_CHECK(m->pixels.size() == size_t(m->width) * size_t(m->height) * size_t(m->channels));
    if (m->pixels.size() > (1u << 20)) continue;  // the round trip on small maps only (time)
    auto png = EncodeMaskPng(m.value());
    FUZZ_CHECK(png.ok());
    auto again = DecodeMask(png->data(), png->size(), bits);
    FUZZ_CHECK(again.ok() && again->pixels == m->pixels);
  }
  return 0;
}
