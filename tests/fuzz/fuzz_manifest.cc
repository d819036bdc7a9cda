// libFuzzer target: the manifest parser (lib/src/formats/manifest.cc). The
// first byte picks JSON Lines or CSV; the rest is the manifest. Whatever
// parses is objects with line numbers in order; an error names the file.
#include <string_view>

#include "formats/manifest.h"
#include "fuzz_util.h"

using namespace imagepack;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool csv = data[0] & 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto rows = internal::ParseManifest(text, csv, "fuzz.manifest");
  if (!rows.ok()) {
    FUZZ_CHECK(rows.status().message().find("fuzz.manifest") != std::string::npos);
    return 0;
  }
  int last = 0;
  for (const auto& r : rows.value()) {
    FUZZ_CHECK(r.value.is_object() && r.line > last);
    last = r.line;
  }
  return 0;
}
