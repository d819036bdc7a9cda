// formats/labels: the one rule that turns labels (indices, names) into a
// class list, and its budget: one typo never sizes a class table.
#include "formats/labels.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace imagepack::internal {
namespace {

struct Resolved {
  Status status;
  std::vector<std::string> classes;
  std::vector<int32_t> labels;
  std::vector<std::string> why;
};

Resolved Resolve(const std::vector<RawLabel>& raw, const std::vector<std::string>& fixed = {}) {
  Resolved r;
  std::vector<std::string> where;
  for (size_t i = 0; i < raw.size(); ++i) where.push_back("f.jsonl:" + std::to_string(i + 1));
  r.status = ResolveLabels(raw, where, fixed, &r.classes, &r.labels, &r.why);
  return r;
}

TEST(Labels, TextIsAnIndexOrAName) {
  EXPECT_FALSE(LabelFromText(" \n").present);
  EXPECT_EQ(LabelFromText(" 42\r\n").index, 42);
  EXPECT_FALSE(LabelFromText("42").is_name);
  EXPECT_EQ(LabelFromText("Ankle boot").name, "Ankle boot");
  EXPECT_TRUE(LabelFromText("-3").is_name);
  EXPECT_TRUE(LabelFromText("99999999999999999999999").is_name);  // not an int64: a name, never a throw
}

TEST(Labels, IndicesMakeClassesZeroToMax) {
  auto r = Resolve({LabelFromIndex(2), LabelFromIndex(0), RawLabel{}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.classes, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(r.labels, (std::vector<int32_t>{2, 0, -1}));
  EXPECT_EQ(r.why[2], "no label");
}

TEST(Labels, NamesAreSortedAndDigitsAmongNamesAreNames) {
  auto r = Resolve({LabelFromText("dog"), LabelFromText("cat"), LabelFromIndex(7)});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.classes, (std::vector<std::string>{"7", "cat", "dog"}));
  EXPECT_EQ(r.labels, (std::vector<int32_t>{2, 1, 0}));
}

TEST(Labels, AFixedListDecidesAndOutsidersAreExplained) {
  auto r = Resolve({LabelFromText("b"), LabelFromIndex(0), LabelFromIndex(5), LabelFromText("zebra")}, {"a", "b"});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.labels, (std::vector<int32_t>{1, 0, -1, -1}));
  EXPECT_NE(r.why[2].find("label 5 is not a class of the 2"), std::string::npos);
  EXPECT_NE(r.why[3].find("'zebra' is not in the class list"), std::string::npos);
}

TEST(Labels, OneHugeIndexIsAnErrorNamingWhereNotAnAllocation) {
  auto r = Resolve({LabelFromIndex(1), LabelFromIndex(999999999), LabelFromIndex(3)});
  ASSERT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("f.jsonl:2"), std::string::npos) << r.status.message();
  EXPECT_NE(r.status.message().find("999999999"), std::string::npos);
  EXPECT_NE(r.status.message().find("--classes"), std::string::npos);
  EXPECT_TRUE(r.classes.empty());
  // ImageNet-sized label sets, sparse or not, are fine.
  EXPECT_TRUE(Resolve({LabelFromIndex(999), LabelFromIndex(3)}).status.ok());
  std::vector<RawLabel> many;
  for (int i = 0; i < 21841; i += 2) many.push_back(LabelFromIndex(i));
  EXPECT_TRUE(Resolve(many).status.ok());
}

// INT64_MAX: "it would make max + 1 classes" overflowed int64, and the
// compiler, free to assume it does not, crashed pack_lmdb (SIGSEGV) on a
// .cls, a TFRecord or a parquet label of 9223372036854775807.
TEST(Labels, TheLargestIndexIsAnErrorNotAnOverflow) {
  auto r = Resolve({LabelFromIndex(0), LabelFromIndex(INT64_MAX)});
  ASSERT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("f.jsonl:2: label 9223372036854775807 is far beyond"), std::string::npos)
      << r.status.message();
  EXPECT_NE(r.status.message().find("9223372036854775808 classes"), std::string::npos) << r.status.message();
  auto fixed = Resolve({LabelFromIndex(INT64_MAX), LabelFromIndex(1)}, {"a", "b"});
  ASSERT_TRUE(fixed.status.ok());
  EXPECT_EQ(fixed.labels, (std::vector<int32_t>{-1, 1}));
}

}  // namespace
}  // namespace imagepack::internal
