// formats/webdataset: shard names, members grouped into samples by
// webdataset's key rule, and the .json a sample carries (as export_db,
// img2dataset and webdataset's writers make them).
#include "formats/webdataset.h"

#include <gtest/gtest.h>

#include <string>

namespace imagepack::internal {
namespace {

TEST(WebDataset, ShardNamesAndTheKeyRule) {
  for (const char* yes : {"a.tar", "A.TAR", "x/y-000.tar.gz", "s.tgz"}) EXPECT_TRUE(IsShardName(yes)) << yes;
  for (const char* no : {"a.tar.bz2", "a.zip", "tar", "a.gz"}) EXPECT_FALSE(IsShardName(no)) << no;
  EXPECT_TRUE(IsGzipName("s.TGZ"));
  EXPECT_FALSE(IsGzipName("s.tar"));
  using KE = std::pair<std::string, std::string>;
  EXPECT_EQ(KeyAndExtension("dir.v1/base.seg.PNG"), KE("dir.v1/base", "seg.png"));
  EXPECT_EQ(KeyAndExtension("000000001.jpg"), KE("000000001", "jpg"));
  EXPECT_EQ(KeyAndExtension("noext"), KE("noext", ""));
  EXPECT_TRUE(IsImageExtension("jpeg"));
  EXPECT_FALSE(IsImageExtension("json"));
  EXPECT_EQ(LabelExtensions().front(), "cls");
}

TEST(WebDataset, MembersGroupIntoSamplesInTheOrderTheyFirstAppear) {
  std::vector<TarMember> m = {{"b.jpg", 512, 10}, {"a.jpg", 1536, 10}, {"b.cls", 2560, 1},
                              {"README", 3584, 5}, {"a.json", 4608, 2}, {"b.jpg", 5632, 10}};
  auto samples = GroupSamples(m);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].key, "b");
  EXPECT_EQ(samples[1].key, "a");
  EXPECT_EQ(samples[1].parts.size(), 2u);
  EXPECT_EQ(samples[1].parts.at("json").offset, 4608u);
  EXPECT_TRUE(samples[1].error.empty());
  EXPECT_NE(samples[0].error.find("member b.jpg appears twice in the shard"), std::string::npos) << samples[0].error;
}

TEST(WebDataset, ASamplesJson) {
  auto j = ParseSampleJson(R"({"path": "x/b.jpg", "label": "tench", "index": 4, "class": "ignored",
                               "caption": "two words", "score": null, "tags": [1, 2]})",
                           "b");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->path, "x/b.jpg");
  EXPECT_EQ(j->index, 4);
  EXPECT_TRUE(j->label.present && j->label.is_name && j->label.name == "tench");
  EXPECT_EQ(j->values, nlohmann::json::parse(R"({"caption": "two words", "tags": [1, 2]})"));
  auto index = ParseSampleJson(R"({"label": 3})", "k");
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index->label.index, 3);
  EXPECT_EQ(index->index, -1);
  auto bad_label = ParseSampleJson(R"({"label": [3]})", "k");
  ASSERT_TRUE(bad_label.ok());  // a label member, if any, would take precedence
  EXPECT_NE(bad_label->label_error.find("k.json: \"label\" is not an integer or a string"), std::string::npos);
  for (const char* bad : {R"({"index": -1})", R"({"index": 1.5})", "[1]", "{"}) {
    auto b = ParseSampleJson(bad, "k");
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("k.json"), std::string::npos) << b.status().ToString();
  }
}

}  // namespace
}  // namespace imagepack::internal
