// formats/folder2lmdb: the pickled values folder2lmdb.py writes (Python
// 3.11, protocol 4, bytes as Python printed them), and values that are not
// a record, a key list or a count.
#include "formats/folder2lmdb.h"

#include <gtest/gtest.h>

#include <string>

namespace imagepack::internal {
namespace {

const uint8_t* U(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// pickle.dumps((b"\xff\xd8jpeg", "tench"), protocol=4)
const std::string kNamed("\x80\x04\x95\x14\x00\x00\x00\x00\x00\x00\x00\x43\x06\xff\xd8\x6a\x70\x65\x67\x94\x8c\x05"
                         "\x74\x65\x6e\x63\x68\x94\x86\x94\x2e", 31);
// pickle.dumps((b"xy", None), protocol=4), (b"xy",), (b"xy", [1]), "nope"
const std::string kUnlabelled("\x80\x04\x95\x09\x00\x00\x00\x00\x00\x00\x00\x43\x02\x78\x79\x94\x4e\x86\x94\x2e", 20);
const std::string kAlone("\x80\x04\x95\x08\x00\x00\x00\x00\x00\x00\x00\x43\x02\x78\x79\x94\x85\x94\x2e", 19);
const std::string kListLabel("\x80\x04\x95\x0d\x00\x00\x00\x00\x00\x00\x00\x43\x02\x78\x79\x94\x5d\x94\x4b\x01"
                             "\x61\x86\x94\x2e", 24);
const std::string kStr("\x80\x04\x95\x08\x00\x00\x00\x00\x00\x00\x00\x8c\x04\x6e\x6f\x70\x65\x94\x2e", 19);
// pickle.dumps([b"a0", "b0"], protocol=4), [b"a0", 3], 5
const std::string kKeys("\x80\x04\x95\x0f\x00\x00\x00\x00\x00\x00\x00\x5d\x94\x28\x43\x02\x61\x30\x94\x8c\x02\x62"
                        "\x30\x94\x65\x2e", 26);
const std::string kBadKeys("\x80\x04\x95\x0c\x00\x00\x00\x00\x00\x00\x00\x5d\x94\x28\x43\x02\x61\x30\x94\x4b\x03"
                           "\x65\x2e", 23);
const std::string kFive("\x80\x04\x4b\x05\x2e", 5);

TEST(Folder2Lmdb, ARecordGivesTheImagesBytesInPlaceAndItsLabel) {
  auto v = ParseRecordValue(U(kNamed), kNamed.size());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(kNamed.substr(v->image_offset, v->image_size), "\xff\xd8jpeg");
  EXPECT_TRUE(v->label.present && v->label.is_name);
  EXPECT_EQ(v->label.name, "tench");
  for (const std::string* unlabelled : {&kUnlabelled, &kAlone}) {
    auto u = ParseRecordValue(U(*unlabelled), unlabelled->size());
    ASSERT_TRUE(u.ok()) << u.status().ToString();
    EXPECT_EQ(unlabelled->substr(u->image_offset, u->image_size), "xy");
    EXPECT_FALSE(u->label.present);
  }
}

TEST(Folder2Lmdb, ValuesThatAreNotRecordsSayWhat) {
  auto f = ParseRecordValue(U(kListLabel), kListLabel.size());
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("label is not an int, a str or None"), std::string::npos);
  auto s = ParseRecordValue(U(kStr), kStr.size());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not a pickled (image bytes, label)"), std::string::npos);
  auto cut = ParseRecordValue(U(kNamed), kNamed.size() - 3);  // a truncated pickle
  EXPECT_FALSE(cut.ok());
}

TEST(Folder2Lmdb, KeysLengthAndKeyText) {
  auto keys = ParseKeyList(U(kKeys), kKeys.size());
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(keys.value(), (std::vector<std::string>{"a0", "b0"}));
  auto bad = ParseKeyList(U(kBadKeys), kBadKeys.size());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("__keys__ holds a value that is not bytes or str"), std::string::npos);
  auto not_list = ParseKeyList(U(kFive), kFive.size());
  ASSERT_FALSE(not_list.ok());
  EXPECT_NE(not_list.status().message().find("__keys__ is not a list"), std::string::npos);
  EXPECT_EQ(ParseLen(U(kFive), kFive.size()), std::optional<int64_t>(5));
  EXPECT_FALSE(ParseLen(U(kKeys), kKeys.size()).has_value());
  EXPECT_EQ(KeyText("a0"), "a0");
  EXPECT_EQ(KeyText(std::string("a/\x01", 3)), "key-612f01");
  EXPECT_EQ(KeyText(""), "key-");
}

}  // namespace
}  // namespace imagepack::internal
