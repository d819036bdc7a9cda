// The one chooser (sources/registry.h): a path is the format it looks most
// like, whatever the rows' order; pack, verify --against and the loader's
// in-place reading ask it alike.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "formats/tfrecord.h"
#include "sources/registry.h"
#include "sources/patterns.h"
#include "sources/splits.h"
#include "testutil.h"

namespace imagepack::internal {
namespace {

using testing::Spit;
using testing::TempDir;

void Touch(const std::string& path) { Spit(path, std::vector<uint8_t>{'x'}); }

std::string Chosen(const std::string& path, Ask ask = {}) {
  auto c = Choose(path, ask);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() && c->format ? c->format->row.name : "";
}

// One TFRecord frame of `payload`, its two CRCs right (tf.io's framing).
std::vector<uint8_t> TfRecordBytes(const std::string& payload) {
  std::vector<uint8_t> out(12);
  const uint64_t n = payload.size();
  std::memcpy(out.data(), &n, 8);
  const uint32_t head = MaskCrc(Crc32c(out.data(), 8));
  std::memcpy(out.data() + 8, &head, 4);
  out.insert(out.end(), payload.begin(), payload.end());
  const uint32_t data = MaskCrc(Crc32c(reinterpret_cast<const uint8_t*>(payload.data()), payload.size()));
  out.resize(out.size() + 4);
  std::memcpy(out.data() + out.size() - 4, &data, 4);
  return out;
}

TEST(Chooser, NoTwoRowsClaimOneName) {
  // Names each row calls its own: no other row may call them its own too
  // (a tie would be refused; registry.h says it cannot happen).
  const std::vector<std::string> names = {"a.parquet", "train-00000-of-00004.parquet", "x.tfrecord",
                                          "x.tfrec.gz", "mnist-train.tfrecord-00000-of-00001",
                                          "train-00000-of-01024", "s-000001.tar", "s.tar.gz", "s.tgz"};
  for (const std::string& n : names) {
    std::set<std::string> mine;
    for (const RegisteredFormat& f : RegisteredFormats())
      if (f.name_is && f.name_is(n) == NameIs::kMine) mine.insert(f.row.name);
    EXPECT_EQ(mine.size(), 1u) << n;
  }
}

TEST(Chooser, TheStrongestMatchWinsWhateverTheOrder) {
  TempDir d;
  // Any brace pattern may be WebDataset's (the weakest match), but .parquet
  // names say parquet and TF-slim names TFRecords.
  EXPECT_EQ(Chosen(d / "x-{0..3}.parquet"), "parquet");
  EXPECT_EQ(Chosen(d / "train-{00000..00003}-of-00004"), "tfrecord");
  EXPECT_EQ(Chosen(d / "s-{000..009}.tar"), "webdataset");
  EXPECT_EQ(Chosen(d / "s-{000..009}"), "webdataset");  // names that say nothing: the weakest, WebDataset
  // A file whose name says nothing and whose bytes hold a record.
  Spit(d / "records", TfRecordBytes("an example"));
  EXPECT_EQ(Chosen(d / "records"), "tfrecord");
  Spit(d / "other", std::vector<uint8_t>(64, 7));
  EXPECT_EQ(Chosen(d / "other"), "");
}

TEST(Chooser, FoldersByTheirFilesSideFilesAndHiddenOnesAside) {
  TempDir hub, tf, mixed, nested, images;
  for (const char* n : {"train-00000-of-00002.parquet", "train-00001-of-00002.parquet", "README.md",
                        ".gitattributes", "dataset_info.json"})
    Touch(hub / n);
  std::filesystem::create_directories(hub / ".cache");  // hidden: left out
  EXPECT_EQ(Chosen(hub.path()), "parquet");
  // Unnamed TFRecords beside a DALI index and a class list: by their bytes.
  Spit(tf / "part-a", TfRecordBytes("one"));
  Touch(tf / "part-a.idx");
  Touch(tf / "labels.txt");
  EXPECT_EQ(Chosen(tf.path()), "tfrecord");
  // Parquet beside an image: no format's folder (a tree, to pack).
  Touch(mixed / "a.parquet");
  Touch(mixed / "b.jpg");
  EXPECT_EQ(Chosen(mixed.path()), "");
  // A folder of folders is a tree.
  std::filesystem::create_directories(nested / "cat");
  Touch(nested / "a.tar");
  EXPECT_EQ(Chosen(nested.path()), "");
  Touch(images / "a.jpg");
  EXPECT_EQ(Chosen(images.path()), "");
  auto shape = Choose(images.path());
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->shape.kind, PathShape::Kind::kFolder);
  EXPECT_EQ(Choose(images / "missing")->shape.kind, PathShape::Kind::kMissing);
}

TEST(Chooser, CapabilitiesAskOnlyTheirRows) {
  TempDir d;
  // folder2lmdb is neither read in place nor checked --against: a pattern
  // asked for in-place reading still finds WebDataset, a .parquet parquet.
  Touch(d / "a.parquet");
  EXPECT_EQ(Chosen(d / "a.parquet", Ask{&SourceFormat::in_place}), "parquet");
  EXPECT_EQ(Chosen(d / "a.parquet", Ask{&SourceFormat::verify_against}), "parquet");
  for (const RegisteredFormat& f : RegisteredFormats())
    if (f.row.name == "folder2lmdb") EXPECT_FALSE(f.row.in_place || f.row.verify_against);
}

TEST(Chooser, RemoteObjectsByNameOnlyWhenAsked) {
  // https:// is not fetched for a name rule: no server here, and none is
  // needed when the name says it (a request would fail: port 9 is closed).
  EXPECT_EQ(Chosen("http://127.0.0.1:9/d/train-0.parquet", Ask{nullptr, true}), "parquet");
  EXPECT_EQ(Chosen("http://127.0.0.1:9/d/shard-0.tar", Ask{nullptr, true}), "webdataset");
  EXPECT_EQ(Chosen("http://127.0.0.1:9/d/db.blob", Ask{nullptr, true}), "");
  auto c = Choose("http://127.0.0.1:9/d/db.blob", Ask{nullptr, true});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->shape.kind, PathShape::Kind::kRemoteObject);
}

}  // namespace
}  // namespace imagepack::internal

namespace imagepack::internal {
namespace {

TEST(Splits, TheHubsNamesAndKeywords) {
  // The Hub's shards and TF-slim's: NAME-DDDDD-of-DDDDD, any NAME.
  EXPECT_EQ(SplitOf("data/train-00000-of-00004.parquet"), "train");
  EXPECT_EQ(SplitOf("data/test-00001-of-00002.parquet"), "test");
  EXPECT_EQ(SplitOf("validation-00000-of-00128"), "validation");
  EXPECT_EQ(SplitOf("data/extra-00000-of-00001.parquet"), "extra");
  // Keywords as words of the name (separators - _ . space and digits).
  EXPECT_EQ(SplitOf("mnist-train.tfrecord-00000-of-00001"), "train");
  EXPECT_EQ(SplitOf("val.tar"), "validation");
  EXPECT_EQ(SplitOf("imagenet_dev_3.tar"), "validation");
  EXPECT_EQ(SplitOf("eval-0.parquet"), "test");
  EXPECT_EQ(SplitOf("data/training/part-0.parquet"), "train");  // the folder's name
  // Not words: devices, contest, trainee.
  EXPECT_EQ(SplitOf("devices-0.parquet"), "");
  EXPECT_EQ(SplitOf("contest.tar"), "");
  EXPECT_EQ(SplitOf("trainee-00000.tar"), "");
  EXPECT_EQ(SplitOf("shard-000001.tar"), "");
  EXPECT_EQ(CanonicalSplit("val"), "validation");
  EXPECT_EQ(CanonicalSplit("extra"), "extra");
}

TEST(Splits, SeveralAreRefusedUnlessOneIsGiven) {
  const std::vector<std::string> files = {"d/test-00000-of-00001.parquet", "d/train-00000-of-00002.parquet",
                                          "d/train-00001-of-00002.parquet"};
  auto merged = SelectSplit(files, "", "d", true);
  ASSERT_FALSE(merged.ok());
  EXPECT_NE(merged.status().message().find("d holds several splits: test (1 file), train (2 files); read one with "
                                           "--split NAME"),
            std::string::npos)
      << merged.status().message();
  auto train = SelectSplit(files, "train", "d", true);
  ASSERT_TRUE(train.ok());
  EXPECT_EQ(*train, (std::vector<std::string>{files[1], files[2]}));
  auto val = SelectSplit(files, "val", "d", true);
  ASSERT_FALSE(val.ok());
  EXPECT_NE(val.status().message().find("d holds no files of split validation (its splits: test (1 file), train"),
            std::string::npos)
      << val.status().message();
  // One split, or none named: all of them; files named one by one (a
  // brace pattern) are the user's choice.
  EXPECT_EQ(SelectSplit({files[1], files[2]}, "", "d", true)->size(), 2u);
  EXPECT_EQ(SelectSplit({"a.tar", "b.tar"}, "", "d", true)->size(), 2u);
  EXPECT_EQ(SelectSplit(files, "", "d/{train,test}-*", false)->size(), 3u);
  EXPECT_TRUE(FindsFiles("d") && FindsFiles("d/*.parquet") && FindsFiles("d/{a,b}/*.tar"));
  EXPECT_FALSE(FindsFiles("d/{train,val}-{0..1}.tar") || FindsFiles("a.tar::b.tar"));
}

}  // namespace
}  // namespace imagepack::internal

namespace imagepack::internal {
namespace {

std::vector<std::string> Expanded(const std::string& pattern) {
  auto storage = OpenStorage(pattern);
  EXPECT_TRUE(storage.ok());
  auto files = ExpandFilePattern(*storage.value(), pattern);
  EXPECT_TRUE(files.ok()) << pattern << ": " << files.status().message();
  return files.ok() ? files.value() : std::vector<std::string>{};
}

TEST(Patterns, GlobsAsPythonsGlobWithRecursion) {
  TempDir d;
  for (const char* f : {"data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet",
                        "data/test-00000-of-00001.parquet", "data/README.md", "data/.hidden.parquet",
                        "deep/a/b/x.tar", "deep/a/y.tar", "deep/z.tar", "deep/.git/w.tar", "deep/a/b/notes.txt"}) {
    std::filesystem::create_directories(std::filesystem::path(d / f).parent_path());
    Touch(d / f);
  }
  EXPECT_EQ(Expanded(d / "data/train-*.parquet"),
            (std::vector<std::string>{d / "data/train-00000-of-00002.parquet", d / "data/train-00001-of-00002.parquet"}));
  EXPECT_EQ(Expanded(d / "data/*.parquet").size(), 3u);  // the hidden one is not matched by '*'
  EXPECT_EQ(Expanded(d / "data/.*.parquet"), (std::vector<std::string>{d / "data/.hidden.parquet"}));
  EXPECT_EQ(Expanded(d / "data/t?st-0000[0-9]-of-00001.parquet").size(), 1u);
  // "**": any number of folders, none included; hidden folders left out.
  EXPECT_EQ(Expanded(d / "deep/**/*.tar"),
            (std::vector<std::string>{d / "deep/a/b/x.tar", d / "deep/a/y.tar", d / "deep/z.tar"}));
  EXPECT_EQ(Expanded(d / "deep/**").size(), 4u);  // every file below, notes.txt too
  // Braces first, then globs in each name; a name without one as it is.
  EXPECT_EQ(Expanded(d / "{data/test-*.parquet,deep/z.tar}"),
            (std::vector<std::string>{d / "data/test-00000-of-00001.parquet", d / "deep/z.tar"}));
  // A glob that matches nothing is named.
  auto storage = OpenStorage(d.path());
  auto none = ExpandFilePattern(*storage.value(), d / "data/val-*.parquet");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("data/val-*.parquet matches no file"), std::string::npos);
  // The chooser sees the glob's files.
  EXPECT_EQ(Chosen(d / "data/train-*.parquet"), "parquet");
  EXPECT_TRUE(IsFilePattern("data/*.tar") && IsFilePattern("a-{0..3}.tar") && IsFilePattern("a.tar::b.tar"));
  EXPECT_FALSE(IsFilePattern("data/train-00000.tar") || IsFilePattern("s3://b/x.tar"));
}

TEST(Patterns, DepthAndRemoteWithoutListingAreRefusedByName) {
  TempDir d;
  std::string deep = d.path();
  for (int i = 0; i < 70; ++i) deep += "/f";
  std::filesystem::create_directories(deep);
  Touch(deep + "/x.tar");
  auto storage = OpenStorage(d.path());
  auto r = ExpandFilePattern(*storage.value(), d / "**/*.tar");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("descends more than 64 folders (budget)"), std::string::npos);
  auto http = OpenStorage("http://127.0.0.1:9/d/*.tar");
  ASSERT_TRUE(http.ok());
  auto h = ExpandFilePattern(*http.value(), "http://127.0.0.1:9/d/*.tar");
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("name the files with a brace pattern"), std::string::npos);
}

}  // namespace
}  // namespace imagepack::internal
