// formats/text: UTF-8 checks on names from other people's files, and JSON
// nesting refused before any recursive step sees it.
#include "formats/text.h"

#include <gtest/gtest.h>

#include <string>

#include "base/limits.h"

namespace imagepack::internal {
namespace {

TEST(Text, Utf8AsTheStandardDefinesIt) {
  EXPECT_TRUE(IsUtf8("plain ascii"));
  EXPECT_TRUE(IsUtf8("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsUtf8("caf\xe9"));               // Latin-1
  EXPECT_FALSE(IsUtf8("\xc0\xaf"));               // overlong
  EXPECT_FALSE(IsUtf8("\xed\xa0\x80"));           // surrogate
  EXPECT_FALSE(IsUtf8("\xf4\x90\x80\x80"));       // past U+10FFFF
  EXPECT_FALSE(IsUtf8("\xe2\x82"));               // truncated
  EXPECT_FALSE(IsUtf8("\x80"));                   // a continuation byte alone
  EXPECT_FALSE(IsUtf8("\xc3"));                   // a lead byte alone
  EXPECT_TRUE(IsUtf8(""));
  EXPECT_TRUE(IsUtf8(std::string("nul \0 inside", 13)));
  EXPECT_EQ(Shown("caf\xe9"), "\"caf\\xe9\"");
  EXPECT_EQ(Shown("caf\xc3\xa9"), "caf\xc3\xa9");
}

TEST(Text, NamesRefusedWithTheirBytesShown) {
  EXPECT_TRUE(CheckName("n01440764/a.JPEG", "file name").ok());
  const Status latin1 = CheckName("caf\xe9/a.jpg", "file name");
  ASSERT_FALSE(latin1.ok());
  EXPECT_NE(latin1.message().find("\\xe9"), std::string::npos) << latin1.message();
  EXPECT_FALSE(CheckName(std::string("a\0b", 3), "record path").ok());
  EXPECT_FALSE(CheckName("two\nlines", "class").ok());
}

TEST(Text, DeepJsonIsRefusedBeforeParsing) {
  const std::string deep = std::string(400000, '[') + std::string(400000, ']');
  EXPECT_EQ(JsonDepth(deep), 400000);
  auto r = ParseJsonBounded(deep, "x.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("x.json"), std::string::npos);
  EXPECT_NE(r.status().message().find("budget"), std::string::npos);
  EXPECT_EQ(JsonDepth("{\"a\": \"[[[[[[\", \"b\": [1, {\"c\": \"\\\"[\"}]}"), 3);
  const std::string ok = std::string(limits::kJsonDepth, '[') + std::string(limits::kJsonDepth, ']');
  EXPECT_TRUE(ParseJsonBounded(ok, "x").ok());
  EXPECT_FALSE(ParseJsonBounded("{\"a\": \"caf\xe9\"}", "x").ok());  // not UTF-8
  EXPECT_FALSE(ParseJsonBounded("{\"a\": ", "x").ok());
}

}  // namespace
}  // namespace imagepack::internal
