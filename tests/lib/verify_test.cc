#include "imagepack/verify.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "imagepack/pack.h"
#include "testutil.h"

namespace fs = std::filesystem;

namespace imagepack {
namespace {

using testing::Gradient;
using testing::Slurp;
using testing::Spit;
using testing::TempDir;

void MakeTree(const std::string& root) {
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 6; ++i)
      Spit(root + "/c" + std::to_string(c) + "/" + std::to_string(i) + ".jpg",
           EncodeJpeg(Gradient(60 + i, 50 + c), 90).value());
}

std::string Pack(const std::string& src, const std::string& dst, ContainerFormat f = ContainerFormat::kLmdb) {
  PackOptions o;
  o.src = src;
  o.dst = dst;
  o.format = f;
  auto r = PackDataset(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return dst;
}

VerifyReport Verify(const std::vector<std::string>& paths, bool decode = false, const std::string& against = "") {
  VerifyOptions o;
  o.paths = paths;
  o.decode = decode;
  o.against = against;
  o.stats = true;
  auto r = VerifyDatabases(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.value();
}

bool HasProblem(const VerifyReport& r, const std::string& where, const std::string& words) {
  return std::any_of(r.problems.begin(), r.problems.end(), [&](const VerifyProblem& p) {
    return p.where.find(where) != std::string::npos && p.reason.find(words) != std::string::npos;
  });
}

std::string Dump(const VerifyReport& r) {
  std::string s;
  for (auto& p : r.problems) s += p.where + " (" + p.path + "): " + p.reason + "\n";
  return s;
}

TEST(Verify, IntactDatabaseIsOkWithStats) {
  TempDir src, out;
  MakeTree(src.path());
  for (auto f : {ContainerFormat::kLmdb, ContainerFormat::kBlob}) {
    auto db = Pack(src.path(), out / ("db" + std::string(ContainerFormatName(f))), f);
    auto r = Verify({db}, true, src.path());
    EXPECT_TRUE(r.ok()) << Dump(r);
    EXPECT_EQ(r.checked, 12);
    EXPECT_EQ(r.class_counts, (std::vector<int64_t>{6, 6}));
    EXPECT_EQ(r.min_width, 60);
    EXPECT_EQ(r.max_width, 65);
    ASSERT_EQ(r.mean.size(), 3u);
    EXPECT_GT(r.mean[0], 0.1);
  }
}

TEST(Verify, DamagedPayloadIsReportedWithKeyAndPath) {
  TempDir src, out;
  MakeTree(src.path());
  auto db = Pack(src.path(), out / "db");
  auto bytes = Slurp(db);
  auto target = Slurp(src / "c1/3.jpg");
  auto it = std::search(bytes.begin(), bytes.end(), target.begin(), target.end());
  ASSERT_NE(it, bytes.end());
  *(it + 300) ^= 0x40;
  Spit(db, bytes);
  auto r = Verify({db});
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.problems_total, 1) << Dump(r);
  ASSERT_FALSE(r.problems.empty());
  EXPECT_NE(r.problems[0].where.find("record 0000000009"), std::string::npos) << Dump(r);
  EXPECT_EQ(r.problems[0].path, "c1/3.jpg") << Dump(r);  // the file to pack again
  EXPECT_NE(r.problems[0].reason.find("checksum mismatch"), std::string::npos);
}

TEST(Verify, TruncatedJpegInsideAValidRecordIsFoundByDecode) {
  // A record whose checksum is right but whose JPEG is cut: only --decode sees it.
  TempDir out;
  auto w = CreateWriter(ContainerFormat::kBlob, out / "db");
  ASSERT_OK(w);
  auto jpeg = EncodeJpeg(Gradient(200, 150), 90).value();
  auto cut = std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + jpeg.size() / 2);
  ASSERT_OK(w.value()->Add(EncodeRecord({Encoding::kJpeg, 3, 0, 150, 200}, "ok.jpg", jpeg.data(), jpeg.size())));
  ASSERT_OK(w.value()->Add(EncodeRecord({Encoding::kJpeg, 3, 0, 150, 200}, "cut.jpg", cut.data(), cut.size())));
  ASSERT_OK(w.value()->Add(EncodeRecord({Encoding::kJpeg, 3, 5, 150, 200}, "label.jpg", jpeg.data(), jpeg.size())));
  ASSERT_OK(w.value()->Add(EncodeRecord({Encoding::kJpeg, 3, 0, 99, 200}, "size.jpg", jpeg.data(), jpeg.size())));
  DatasetMeta m;
  m.count = 4;
  m.classes = {"only"};
  m.label_counts = {3};
  ASSERT_OK(w.value()->Finish(m));
  auto quick = Verify({out / "db"});
  EXPECT_FALSE(HasProblem(quick, "record 0000000001", "truncated")) << Dump(quick);
  EXPECT_TRUE(HasProblem(quick, "record 0000000002", "label 5 out of range [0,1)")) << Dump(quick);
  EXPECT_TRUE(HasProblem(quick, "record 0000000003", "JPEG is 200x150, record says 200x99")) << Dump(quick);
  auto full = Verify({out / "db"}, true);
  EXPECT_TRUE(HasProblem(full, "record 0000000001", "truncated JPEG")) << Dump(full);
  ASSERT_FALSE(full.problems.empty());
  EXPECT_EQ(full.problems[0].path, "cut.jpg");
}

TEST(Verify, AgainstSourceFindsMissingExtraAndWrongLabels) {
  TempDir src, out;
  MakeTree(src.path());
  auto db = Pack(src.path(), out / "db");
  fs::remove(src / "c0/2.jpg");  // in the database, no longer in the tree
  Spit(src / "c1/new.jpg", EncodeJpeg(Gradient(30, 30), 90).value());  // in the tree only
  auto r = Verify({db}, false, src.path());
  EXPECT_EQ(r.problems_total, 2) << Dump(r);
  EXPECT_TRUE(HasProblem(r, src.path(), "source image is not in the database")) << Dump(r);
  EXPECT_TRUE(HasProblem(r, "record", "not in the source tree")) << Dump(r);
}

TEST(Verify, ShardsTogetherAndUnreadableDatabase) {
  TempDir src, out;
  MakeTree(src.path());
  std::vector<std::string> shards;
  for (int i = 0; i < 2; ++i) {
    PackOptions o;
    o.src = src.path();
    o.dst = out / ("s" + std::to_string(i));
    o.shard = {i, 2};
    ASSERT_OK(PackDataset(o));
    shards.push_back(o.dst);
  }
  auto r = Verify(shards, true, src.path());
  EXPECT_TRUE(r.ok()) << Dump(r);
  EXPECT_EQ(r.checked, 12);
  auto one = Verify({shards[0]}, false, src.path());  // half the tree is missing
  EXPECT_FALSE(one.ok());
  Spit(out / "junk", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  auto junk = Verify({out / "junk"});
  EXPECT_FALSE(junk.ok());
  EXPECT_TRUE(HasProblem(junk, out / "junk", "")) << Dump(junk);
}

}  // namespace
}  // namespace imagepack
