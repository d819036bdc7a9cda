// formats/manifest: JSON Lines and CSV manifests as other tools write
// them, and the budgets: each a clear error naming the line.
#include "formats/manifest.h"

#include <gtest/gtest.h>

#include <string>

#include "base/limits.h"

namespace imagepack::internal {
namespace {

TEST(Manifest, JsonLinesRowsWithTheirLineNumbers) {
  const std::string text = "{\"image\": \"a.jpg\", \"label\": 3}\n\n  \n{\"image\": \"b.jpg\", \"tags\": [1, 2]}";
  auto rows = ParseManifest(text, false, "m.jsonl");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].line, 1);
  EXPECT_EQ((*rows)[1].line, 4);
  EXPECT_EQ((*rows)[0].value["label"], 3);
  EXPECT_EQ((*rows)[1].value["tags"], nlohmann::json::array({1, 2}));
  auto not_object = ParseManifest("[1, 2]\n", false, "m.jsonl");
  ASSERT_FALSE(not_object.ok());
  EXPECT_NE(not_object.status().message().find("m.jsonl:1: not a JSON object"), std::string::npos);
  auto broken = ParseManifest("{\"a\": 1}\n{\"a\": \n", false, "m.jsonl");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("m.jsonl:2"), std::string::npos) << broken.status().ToString();
}

TEST(Manifest, CsvCellsAreTheJsonTheySpellElseText) {
  const std::string text = "image,label,boxes,note\r\na.jpg,3,\"[[1,2,5,6,0]]\",\"a, quoted \"\"note\"\"\"\n"
                           "b.jpg,cat,,\n";
  auto rows = ParseManifest(text, true, "m.csv");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  const auto& a = (*rows)[0].value;
  EXPECT_EQ(a["label"], 3);
  EXPECT_EQ(a["boxes"], nlohmann::json::parse("[[1,2,5,6,0]]"));
  EXPECT_EQ(a["note"], "a, quoted \"note\"");
  const auto& b = (*rows)[1].value;
  EXPECT_EQ(b["label"], "cat");
  EXPECT_FALSE(b.contains("boxes"));  // empty cells are left out
  EXPECT_EQ((*rows)[1].line, 3);
  auto cells = ParseManifest("a,b\n1,2,3\n", true, "m.csv");
  ASSERT_FALSE(cells.ok());
  EXPECT_NE(cells.status().message().find("m.csv:2: 3 cells, the header has 2"), std::string::npos);
  auto latin1 = ParseManifest("a\ncaf\xe9\n", true, "m.csv");
  ASSERT_FALSE(latin1.ok());
  EXPECT_NE(latin1.status().message().find("m.csv:2: not UTF-8"), std::string::npos);
  EXPECT_EQ(SplitCsv("a,\"b,c\",,\"\"\"\""), (std::vector<std::string>{"a", "b,c", "", "\""}));
}

TEST(Manifest, NestingBeyondTheBudgetIsRefusedBeforeParsing) {
  const std::string deep = std::string(limits::kJsonDepth + 1, '[') + std::string(limits::kJsonDepth + 1, ']');
  auto json = ParseManifest("{\"a\": " + deep + "}\n", false, "m.jsonl");
  ASSERT_FALSE(json.ok());
  auto csv = ParseManifest("a\n\"" + deep + "\"\n", true, "m.csv");
  ASSERT_FALSE(csv.ok());
  EXPECT_NE(csv.status().message().find("m.csv:2: a cell nested deeper than"), std::string::npos)
      << csv.status().ToString();
}

}  // namespace
}  // namespace imagepack::internal
