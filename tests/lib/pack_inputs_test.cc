// A pack's inputs in bounded memory (pack_inputs.cc, tree_source.cc): a
// tree spilled to scratch files packs exactly as one held in memory, for
// every shard and shuffle; the shuffle is the keyed bijection of the
// items; a database converted whole is read record by record.
#include "pack/pack_inputs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "imagepack/pack.h"
#include "imagepack/permutation.h"
#include "testutil.h"

namespace imagepack {
namespace {

using namespace testing;  // testutil.h: TempDir, Slurp, Spit, Golden, Gradient, ...

// Folders whose names sort differently from their paths ("n1-b/..." and
// "n1.c/..." before "n1/..."), a file at the root, a broken JPEG.
void MakeTree(const std::string& root) {
  int i = 0;
  for (const char* c : {"n1", "n1-b", "n1.c", "n2"})
    for (const char* f : {"a.jpg", "b.JPEG", "z-1.jpg", "z.jpg"}) {
      Image img = Gradient(16 + i, 12 + i % 5);
      Spit(root + "/" + c + "/" + f, EncodeJpeg(img, 80).value());
      ++i;
    }
  Spit(root + "/n2/deeper/x.jpg", EncodeJpeg(Gradient(9, 9), 80).value());
  Spit(root + "/n2/broken.jpg", Golden("truncated.jpg"));
  Spit(root + "/stray.jpg", Golden("rgb.jpg"));
  Spit(root + "/n1/notes.txt", {'x'});
}

PackOptions Opts(const std::string& src, const std::string& dst) {
  PackOptions o;
  o.src = src;
  o.dst = dst;
  o.threads = 2;
  o.stats_sample = 4;
  return o;
}

std::vector<std::string> Paths(const std::string& db) {
  auto src = OpenDatabase(db);
  EXPECT_OK(src);
  std::vector<std::string> out;
  auto cur = src.value()->NewCursor();
  for (int64_t i = 0; i < src.value()->size(); ++i) out.emplace_back(cur->Read(i)->path);
  return out;
}

class SpilledTree : public ::testing::Test {
 protected:
  void SetUp() override { setenv("SOURCE_DATE_EPOCH", "1700000000", 1); }
  void TearDown() override { unsetenv("SOURCE_DATE_EPOCH"); }
};

TEST_F(SpilledTree, PacksByteForByteAsInMemoryForEveryShardAndShuffle) {
  TempDir src, out;
  MakeTree(src.path());
  for (bool no_class : {false, true})
    for (Shard shard : {Shard{0, 1}, Shard{1, 3}})
      for (int64_t seed : {int64_t(-1), int64_t(7)}) {
        SCOPED_TRACE(std::string(no_class ? "no class" : "classes") + " shard " + shard.ToString() + " seed " +
                     std::to_string(seed));
        std::vector<std::vector<uint8_t>> files;
        for (uint64_t memory : {uint64_t(256) << 20, uint64_t(1)}) {
          const std::string dst = out / ("db-" + std::to_string(memory));
          auto o = Opts(src.path(), dst);
          o.overwrite = true;
          o.shard = shard;
          o.shuffle_seed = seed;
          o.source.no_class = no_class;
          o.source.item_memory = memory;
          o.source.scratch_dir = out / "scratch";
          std::filesystem::create_directories(o.source.scratch_dir);
          auto r = PackDataset(o);
          ASSERT_OK(r);
          if (shard.count == 1) {
            EXPECT_EQ(r->inputs, no_class ? 19 : 18);
            // stray.jpg, outside every class folder, is skipped with its reason.
            ASSERT_EQ(r->errors.size(), no_class ? 1u : 2u);
            EXPECT_EQ(r->errors[0].path, "n2/broken.jpg");
            if (!no_class) EXPECT_EQ(r->errors[1].path, "stray.jpg");
            EXPECT_EQ(r->ignored, std::vector<std::string>{"n1/notes.txt"});
          }
          files.push_back(Slurp(dst));
          // Scratch files are unnamed: nothing is left behind.
          EXPECT_TRUE(std::filesystem::is_empty(o.source.scratch_dir));
        }
        EXPECT_EQ(files[0], files[1]);
      }
  // Unshuffled, the paths are sorted as whole paths.
  auto o = Opts(src.path(), out / "sorted");
  o.source.item_memory = 1;
  ASSERT_OK(PackDataset(o));
  const auto paths = Paths(out / "sorted");
  EXPECT_TRUE(std::is_sorted(paths.begin(), paths.end()));
  EXPECT_EQ(paths.front(), "n1-b/a.jpg");
  EXPECT_EQ(paths.back(), "n2/z.jpg");
}

// Record k of a shuffled pack is item pi(k) of the sorted items, pi the
// keyed bijection of the seed; a database converted whole (records read as
// packed) keeps its order, or takes the same rule.
TEST_F(SpilledTree, ShuffleIsTheKeyedBijectionAndDatabasesConvertRecordByRecord) {
  TempDir src, out;
  MakeTree(src.path());
  ASSERT_OK(PackDataset(Opts(src.path(), out / "sorted")));
  auto o = Opts(src.path(), out / "shuffled");
  o.shuffle_seed = 11;
  ASSERT_OK(PackDataset(o));
  const auto sorted = Paths(out / "sorted"), shuffled = Paths(out / "shuffled");
  // The items: the records and the broken file, which has no record.
  auto items = sorted;
  items.push_back("n2/broken.jpg");
  std::sort(items.begin(), items.end());
  const KeyedPermutation pi(items.size(), 11);
  std::vector<std::string> expected;
  for (size_t k = 0; k < items.size(); ++k)
    if (items[pi(k)] != "n2/broken.jpg") expected.push_back(items[pi(k)]);
  EXPECT_EQ(shuffled, expected);
  // Conversions of the sorted pack: whole (record by record) and shuffled.
  auto c = Opts(out / "sorted", out / "copy.blob");
  c.format = ContainerFormat::kBlob;
  auto r = PackDataset(c);
  ASSERT_OK(r);
  EXPECT_EQ(r->inputs, int64_t(sorted.size()));
  EXPECT_EQ(Paths(out / "copy.blob"), sorted);
  c.dst = out / "copy-shuffled.blob";
  c.shuffle_seed = 11;
  ASSERT_OK(PackDataset(c));
  const KeyedPermutation records_pi(sorted.size(), 11);
  const auto converted = Paths(out / "copy-shuffled.blob");
  ASSERT_EQ(converted.size(), sorted.size());
  for (size_t k = 0; k < sorted.size(); ++k) EXPECT_EQ(converted[k], sorted[records_pi(k)]) << k;
}

}  // namespace
}  // namespace imagepack
