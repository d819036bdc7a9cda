#include "imagepack/shard.h"

#include <gtest/gtest.h>

#include <set>

#include "testutil.h"

namespace imagepack {
namespace {

TEST(Shard, ParsesIOverN) {
  auto s = ParseShard("3/8");
  ASSERT_OK(s);
  EXPECT_EQ(s->index, 3);
  EXPECT_EQ(s->count, 8);
  EXPECT_EQ(s->ToString(), "3/8");
  for (const char* bad : {"8/8", "-1/4", "1/0", "a/2", "1/", "/2", "12", "1/2x", ""}) {
    auto r = ParseShard(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos);
  }
}

TEST(Shard, PathShardsPartitionAndAreStable) {
  std::vector<std::string> paths;
  for (int i = 0; i < 5000; ++i) paths.push_back("n0144/" + std::to_string(i) + ".JPEG");
  for (int n : {1, 2, 3, 7}) {
    std::vector<int> sizes(n);
    for (const auto& p : paths) {
      int s = ShardOfPath(p, n);
      ASSERT_GE(s, 0);
      ASSERT_LT(s, n);
      ASSERT_EQ(s, ShardOfPath(p, n));  // a pure function of the path
      ++sizes[s];
    }
    for (int s : sizes) EXPECT_NEAR(s, 5000.0 / n, 5000.0 / n * 0.1) << n;
  }
}

TEST(Shard, RangesCoverEverythingOnce) {
  for (int64_t total : {0, 1, 7, 100, 1281167}) {
    for (int n : {1, 2, 3, 8}) {
      int64_t expect_begin = 0;
      for (int i = 0; i < n; ++i) {
        ShardRange r = RangeOf(total, i, n);
        EXPECT_EQ(r.begin, expect_begin);
        EXPECT_LE(r.end - r.begin, total / n + 1);
        EXPECT_GE(r.end - r.begin, total / n);
        expect_begin = r.end;
      }
      EXPECT_EQ(expect_begin, total);
    }
  }
}

}  // namespace
}  // namespace imagepack
