// formats/braces: shard lists as webdataset users write them.
#include "formats/braces.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace imagepack::internal {
namespace {

using V = std::vector<std::string>;

TEST(Braces, RangesAlternativesAndLists) {
  EXPECT_EQ(ExpandShardPattern("s-{008..011}.tar").value(), (V{"s-008.tar", "s-009.tar", "s-010.tar", "s-011.tar"}));
  EXPECT_EQ(ExpandShardPattern("{train,val}-{0..1}.tar").value(),
            (V{"train-0.tar", "train-1.tar", "val-0.tar", "val-1.tar"}));
  EXPECT_EQ(ExpandShardPattern("a.tar::b-{1..2}.tar").value(), (V{"a.tar", "b-1.tar", "b-2.tar"}));
  EXPECT_EQ(ExpandShardPattern("plain.tar").value(), (V{"plain.tar"}));
  EXPECT_TRUE(HasShardPattern("x-{0..3}.tar"));
  EXPECT_TRUE(HasShardPattern("a.tar::b.tar"));
  EXPECT_FALSE(HasShardPattern("weird{name.tar"));
}

TEST(Braces, BadPatternsAreErrorsQuotingThem) {
  for (const std::string p : {"s-{3..1}.tar", "s-{a..b}.tar", "s-{0..", "s-{0..{1..2}}.tar",
                              "s-{0..99999999}.tar", "{0..999}{0..9999}"}) {
    auto r = ExpandShardPattern(p);
    ASSERT_FALSE(r.ok()) << p;
    EXPECT_NE(r.status().message().find(p.substr(0, 3)), std::string::npos) << r.status().message();
  }
}

TEST(Braces, TheToolsBudgetIsAMillionNames) {
  auto ok = ExpandShardPattern("s-{000000..999999}.tar");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->size(), 1000000u);
  EXPECT_EQ(ok->back(), "s-999999.tar");
  EXPECT_FALSE(ExpandShardPattern("s-{0..1000000}.tar").ok());
  EXPECT_FALSE(ExpandShardPattern("{0..1}-{000000..999999}").ok());
}

}  // namespace
}  // namespace imagepack::internal
