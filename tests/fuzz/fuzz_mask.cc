// libFuzzer target: PNG label maps (lib/src/mask.cc: gray, palette, 1-16
// bits). A decoded mask has as many values as pixels; a damaged PNG is an
// error that leaks nothing (LeakSanitizer runs with the fuzzer).
#include "fuzz_util.h"
#include "imagepack/mask.h"

using namespace imagepack;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = DecodeMask(data, size);
  if (!m.ok()) {
    FUZZ_CHECK(!m.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(m->channels == 1);
  FUZZ_CHECK(m->pixels.size() == size_t(m->width) * size_t(m->height));
  return 0;
}
