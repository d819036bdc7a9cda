// Metadata parsing (meta.cc): the classes and label_counts that most of a
// large dataset's metadata is are read by a scan of their own; every other
// text goes to the JSON parser whole, with the same result.
#include "imagepack/meta.h"

#include <gtest/gtest.h>

#include "testutil.h"

namespace imagepack {
namespace {

Result<DatasetMeta> Parse(const std::string& text) {
  return ParseMeta(reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

std::string Format2(const std::string& classes, const std::string& counts, const std::string& more = "") {
  return "{\"format\": \"imagepack\", \"format_version\": 2, \"count\": 100, \"classes\": " + classes +
         ", \"encoding\": \"jpeg\", \"channels\": 3, \"records_per_value\": 1, \"label_counts\": " + counts + more +
         "}";
}

TEST(Meta, ManyClassesRoundTrip) {
  DatasetMeta m;
  m.count = 5000;
  for (int c = 0; c < 1000; ++c) {
    m.classes.push_back("n0" + std::to_string(1440764 + c));
    m.label_counts.push_back(c % 7);
  }
  m.options_json = "{\"classes\": [\"not\", \"these\"], \"label_counts\": [9]}";
  auto back = Parse(m.ToJson());
  ASSERT_OK(back);
  EXPECT_EQ(back->classes, m.classes);
  EXPECT_EQ(back->label_counts, m.label_counts);
  EXPECT_EQ(back->ToJson(), m.ToJson());
}

// Entries the scan does not take (escapes, non-ASCII names, numbers that
// are not plain integers) and keys seen twice read as the JSON parser
// reads them; what it refuses is refused.
TEST(Meta, ArraysTheScanDoesNotTakeReadAsJsonSays) {
  auto a = Parse(Format2("[\"a\\\"b\", \"caf\xc3\xa9\", \"tab\\t\"]", "[1, 2, 3]"));
  ASSERT_OK(a);
  EXPECT_EQ(a->classes, (std::vector<std::string>{"a\"b", "caf\xc3\xa9", "tab\t"}));
  EXPECT_EQ(a->label_counts, (std::vector<int64_t>{1, 2, 3}));
  auto b = Parse(Format2("[\"x\", \"y\"]", "[ 10 ,\n 0 ]"));
  ASSERT_OK(b);
  EXPECT_EQ(b->classes, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(b->label_counts, (std::vector<int64_t>{10, 0}));
  auto twice = Parse(Format2("[\"x\"]", "[1]", ", \"classes\": [\"p\", \"q\"], \"label_counts\": [1, 2]"));
  ASSERT_OK(twice);
  EXPECT_EQ(twice->classes, (std::vector<std::string>{"p", "q"}));  // the last, as the JSON parser keeps
  EXPECT_EQ(twice->label_counts, (std::vector<int64_t>{1, 2}));
  for (const char* counts : {"[1.0, 2]", "[-1, 2]", "[1e1, 2]", "[01, 2]"}) {
    auto bad = Parse(Format2("[\"x\", \"y\"]", counts));
    EXPECT_FALSE(bad.ok()) << counts;
  }
  EXPECT_FALSE(Parse(Format2("[\"x\", 3]", "[1, 2]")).ok());
  EXPECT_FALSE(Parse(Format2("[\"x\", \"y\"]", "[1]")).ok());          // a count per class
  EXPECT_FALSE(Parse(Format2("[\"x\", \"y\"]", "[1, 2]") + "x").ok());  // trailing bytes
  EXPECT_FALSE(Parse(Format2("[\"x\", \"y\"", "[1, 2]")).ok());
  EXPECT_FALSE(Parse(Format2("[\"x\", \"y\"]", "[1, 2")).ok());
  EXPECT_FALSE(Parse(Format2("\"x\"", "[1]")).ok());  // classes not a list
}

}  // namespace
}  // namespace imagepack
