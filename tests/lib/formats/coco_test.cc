// formats/coco: an instances file as COCO's tools write it (crowd regions,
// keypoint-only and segmentation-only annotations included), and the
// damage each is an error or a problem for.
#include "formats/coco.h"

#include <gtest/gtest.h>

#include <string>

namespace imagepack::internal {
namespace {

const char* kCoco = R"({
  "images": [{"id": 1, "file_name": "a.jpg", "width": 8, "height": 8},
             {"id": 2, "file_name": "sub/b.jpg", "width": 8, "height": 8}],
  "categories": [{"id": 3, "name": "car"}, {"id": 1, "name": "person", "keypoints": ["nose"]}],
  "annotations": [
    {"id": 10, "image_id": 1, "category_id": 1, "bbox": [0.5, 1, 6, 7.25], "iscrowd": 0},
    {"id": 11, "image_id": 1, "category_id": 3, "bbox": [0, 0, 8, 8], "iscrowd": 1},
    {"id": 12, "image_id": 2, "category_id": 1, "keypoints": [1, 1, 2], "num_keypoints": 1},
    {"id": 13, "image_id": 9, "category_id": 1, "bbox": [0, 0, 1, 1]},
    {"id": 14, "image_id": 2, "category_id": 3, "bbox": [0, 0, 1]},
    {"id": 15, "image_id": 2, "category_id": 3, "bbox": [1, 2, 3, 4], "iscrowd": "yes"},
    {"id": 16, "image_id": 2, "category_id": 3, "bbox": [1, 2, 3, 4], "iscrowd": null}]})";

TEST(Coco, ImagesCategoriesInIdOrderAndBoxesAsCorners) {
  auto c = ParseCoco(kCoco, "i.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->categories.size(), 2u);
  EXPECT_EQ(c->categories[0].name, "person");  // id 1 before id 3
  EXPECT_EQ(c->categories[1].name, "car");
  ASSERT_EQ(c->images.size(), 2u);
  EXPECT_EQ(c->images[1].file_name, "sub/b.jpg");
  ASSERT_EQ(c->boxes.size(), 3u);
  const CocoBox& b = c->boxes[0];
  EXPECT_EQ(b.image, 0u);
  EXPECT_EQ(b.category, 0u);
  EXPECT_FLOAT_EQ(b.x0, 0.5f);
  EXPECT_FLOAT_EQ(b.y1, 8.25f);
  EXPECT_FALSE(b.crowd);
  EXPECT_TRUE(c->boxes[1].crowd);
  EXPECT_EQ(c->boxes[1].category, 1u);
  EXPECT_FALSE(c->boxes[2].crowd);  // iscrowd null: not a crowd
  ASSERT_EQ(c->problems.size(), 4u);
  EXPECT_EQ(c->problems[0].where, "annotation 12");
  EXPECT_NE(c->problems[0].why.find("has no bbox"), std::string::npos);
  EXPECT_NE(c->problems[1].why.find("names no known image or category"), std::string::npos);
  EXPECT_NE(c->problems[2].why.find("is not [x, y, w, h]"), std::string::npos);
  EXPECT_NE(c->problems[3].why.find("iscrowd is \"yes\""), std::string::npos);
}

TEST(Coco, WhatIsNotAnInstancesFileIsAnErrorNamingIt) {
  for (const char* bad : {R"([1])", R"({"images": []})",
                          R"({"images": [], "categories": [{"id": "x", "name": "a"}]})",
                          R"({"images": [], "categories": [{"id": 1, "name": "a"}, {"id": 1, "name": "b"}]})",
                          R"({"images": [{"id": 1}], "categories": []})",
                          R"({"images": [{"id": 1, "file_name": "a"}, {"id": 1, "file_name": "b"}], "categories": []})"}) {
    auto c = ParseCoco(bad, "i.json");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().message().rfind("i.json", 0), 0u) << c.status().ToString();
  }
  auto none = ParseCoco(R"({"images": [], "categories": []})", "i.json");
  ASSERT_TRUE(none.ok());  // no annotations: no boxes
  EXPECT_TRUE(none->boxes.empty());
}

}  // namespace
}  // namespace imagepack::internal
