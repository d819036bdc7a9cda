// libFuzzer target: the COCO instances parser (lib/src/formats/coco.cc).
// Whatever parses has categories in id order, and every box names an
// image and a category that exist; an error names the file.
#include <string_view>

#include "formats/coco.h"
#include "fuzz_util.h"

using namespace imagepack;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto c = internal::ParseCoco(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  if (!c.ok()) {
    FUZZ_CHECK(c.status().message().find("fuzz.json") != std::string::npos);
    return 0;
  }
  for (size_t i = 1; i < c->categories.size(); ++i) FUZZ_CHECK(c->categories[i - 1].id < c->categories[i].id);
  for (const auto& b : c->boxes) FUZZ_CHECK(b.image < c->images.size() && b.category < c->categories.size());
  return 0;
}
