// libFuzzer target: the nesting budget of imagepack's own JSON, counted
// before anything parses it (formats/text.cc JsonDepth), at its three
// callers: a database's metadata (fields/meta.cc ParseMeta, "options" and
// all), ParseJsonBounded (an export folder's export.json) and a mix
// description compared with a saved state's (loader/mix.cc CompareMixes).
// fuzz_meta checks what the metadata means, fuzz_json JSON from other
// tools; neither compares the count with the parser's own nesting, nor
// reaches a mix description, and their corpora hold nothing deep.
//
// The first byte chooses the caller; the rest is the text (a mix: the
// saved and the current description, split at the first NUL byte). What
// must hold: JsonDepth equals the depth nlohmann's parser sees in any text
// it accepts (its SAX parser keeps a stack of its own, so this recursion-
// free count is the reference), so no JSON deeper than the budget gets
// past the count; text deeper than limits::kJsonDepth is an error with a
// message at every caller, never parsed into a value that recursion
// (dump, compare, copy) would then walk; what parses dumps and parses
// again within the budget.
#include <algorithm>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/limits.h"
#include "formats/text.h"
#include "fuzz_util.h"
#include "imagepack/meta.h"
#include "imagepack/mix.h"

using namespace imagepack;

namespace {

constexpr int kBudget = internal::limits::kJsonDepth;

// The parser's own view of the nesting: the deepest open object or array.
struct DepthSax : nlohmann::json_sax<nlohmann::json> {
  int depth = 0, deepest = 0;
  bool open() {
    deepest = std::max(deepest, ++depth);
    return true;
  }
  bool close() {
    --depth;
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

// -1 where the parser refuses the text, else its nesting.
int ParserDepth(std::string_view text) {
  DepthSax sax;
  const bool ok = nlohmann::json::sax_parse(text.begin(), text.end(), &sax, nlohmann::json::input_format_t::json,
                                            /*strict=*/true);
  return ok ? sax.deepest : -1;
}

void Meta(std::string_view text) {
  const int depth = internal::JsonDepth(text);
  auto m = ParseMeta(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  if (depth > kBudget) {
    FUZZ_CHECK(!m.ok());
    FUZZ_CHECK(m.status().message().find("nested") != std::string::npos);
    return;
  }
  if (!m.ok()) {
    FUZZ_CHECK(!m.status().message().empty());
    return;
  }
  // The options come back as text: within the budget, and they parse.
  if (!m->options_json.empty()) {
    FUZZ_CHECK(internal::JsonDepth(m->options_json) <= kBudget);
    FUZZ_CHECK(internal::ParseJsonBounded(m->options_json, "options").ok());
  }
  const std::string json = m->ToJson();
  FUZZ_CHECK(internal::JsonDepth(json) <= kBudget);
  FUZZ_CHECK(ParseMeta(reinterpret_cast<const uint8_t*>(json.data()), json.size()).ok());
}

void Bounded(std::string_view text) {
  const int depth = internal::JsonDepth(text);
  const int parsed = ParserDepth(text);
  // nlohmann ends its input at a NUL byte; the count reads past it, so it
  // may count more (never less: the parser sees a prefix of what it reads).
  if (parsed >= 0) FUZZ_CHECK(text.find('\0') == std::string_view::npos ? depth == parsed : depth >= parsed);
  auto j = internal::ParseJsonBounded(text, "export.json");
  FUZZ_CHECK(j.ok() == (parsed >= 0 && depth <= kBudget));
  if (!j.ok()) {
    FUZZ_CHECK(!j.status().message().empty());
    return;
  }
  const std::string again = j->dump();
  FUZZ_CHECK(internal::JsonDepth(again) == parsed);
  auto k = internal::ParseJsonBounded(again, "again");
  FUZZ_CHECK(k.ok() && *k == *j);
}

void Mix(std::string_view text) {
  const size_t cut = std::min(text.find('\0'), text.size());
  const std::string saved(text.substr(0, cut));
  const std::string current(cut < text.size() ? text.substr(cut + 1) : std::string_view());
  const bool deep_saved = internal::JsonDepth(saved) > kBudget;
  const Status st = CompareMixes(saved, current);
  // The saved one is read first (a damaged one is named before the other).
  if (deep_saved) FUZZ_CHECK(!st.ok() && st.message().find("nested deeper") != std::string::npos);
  if (internal::JsonDepth(current) > kBudget) FUZZ_CHECK(!st.ok());
  if (!st.ok()) FUZZ_CHECK(!st.message().empty());
  // Against itself: a verdict, with a message where it is an error.
  const Status same = CompareMixes(current, current);
  FUZZ_CHECK(same.ok() || !same.message().empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
  if (input_size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(input + 1), input_size - 1);
  switch (input[0] % 3) {
    case 0: Meta(text); break;
    case 1: Bounded(text); break;
    default: Mix(text);
  }
  return 0;
}
