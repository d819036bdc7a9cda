// libFuzzer target: JSON from other tools within the nesting budget, and
// the UTF-8 check on names (lib/src/formats/text.cc). What parses is no
// deeper than the budget, and dumps without throwing.
#include <string_view>

#include "base/limits.h"
#include "formats/text.h"
#include "fuzz_util.h"

using namespace imagepack;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool utf8 = internal::IsUtf8(text);
  const std::string shown = internal::Shown(text);
  FUZZ_CHECK(internal::IsUtf8(shown));
  FUZZ_CHECK(utf8 || shown != text);
  auto r = internal::ParseJsonBounded(text, "fuzz.json");
  if (!r.ok()) return 0;
  FUZZ_CHECK(internal::JsonDepth(text) <= internal::limits::kJsonDepth);
  const std::string again = r->dump();
  FUZZ_CHECK(internal::ParseJsonBounded(again, "again").ok());
  return 0;
}
