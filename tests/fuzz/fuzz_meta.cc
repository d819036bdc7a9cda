// libFuzzer target: the metadata JSON parser (lib/src/meta.cc). Whatever it
// accepts must be valid by its own rules and survive a round trip through
// ToJson unchanged.
#include <numeric>

#include "fuzz_util.h"
#include "imagepack/meta.h"

using namespace imagepack;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = ParseMeta(data, size);
  if (!m.ok()) {
    FUZZ_CHECK(!m.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(m->count >= 0);
  FUZZ_CHECK(m->channels == 1 || m->channels == 3);
  if (!m->label_counts.empty()) {
    FUZZ_CHECK(m->label_counts.size() == m->classes.size());
    for (int64_t c : m->label_counts) FUZZ_CHECK(c >= 0);
    // Unlabelled records (label -1) are not counted: the sum may be less.
    FUZZ_CHECK(std::accumulate(m->label_counts.begin(), m->label_counts.end(), int64_t{0}) <= m->count);
  }
  const std::string json = m->ToJson();
  auto again = ParseMeta(reinterpret_cast<const uint8_t*>(json.data()), json.size());
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->count == m->count);
  FUZZ_CHECK(again->classes == m->classes);
  FUZZ_CHECK(again->encoding == m->encoding);
  FUZZ_CHECK(again->channels == m->channels);
  FUZZ_CHECK(again->label_counts == m->label_counts);
  FUZZ_CHECK(again->ToJson() == json);
  return 0;
}
