// Dataset sources: how a tree's images get their labels (class folders, a
// labels file, a fixed class list as verify_db --against uses), and a
// database listed as a source.
#include "sources/sources.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "imagepack/pack.h"
#include "testutil.h"

namespace imagepack::internal {
namespace {

using testing::Spit;
using testing::TempDir;

void Text(const std::string& path, const std::string& text) {
  Spit(path, std::vector<uint8_t>(text.begin(), text.end()));
}

std::vector<std::string> Rels(const DatasetSource& s) {
  std::vector<std::string> out;
  for (const auto& item : s.items) out.push_back(item.rel + "=" + std::to_string(item.label));
  return out;
}

// Listing decides by extension only: the bytes need not be images here.
void Touch(const TempDir& d, const std::string& rel) { Text(d / rel, "x"); }

TEST(Sources, ClassFoldersSortedAndImagesOutsideThemIgnoredWithWhy) {
  TempDir d;
  for (const char* rel : {"dog/b.jpg", "cat/a.JPEG", "cat/deep/c.png", "root.jpg", "cat/notes.txt"}) Touch(d, rel);
  auto s = OpenTreeSource(d.path(), {});
  ASSERT_OK(s);
  EXPECT_EQ(s->classes, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(Rels(s.value()), (std::vector<std::string>{"cat/a.JPEG=0", "cat/deep/c.png=0", "dog/b.jpg=1"}));
  EXPECT_EQ(s->unlabelled, (std::vector<std::string>{"root.jpg"}));
  // The image outside every class is skipped with its reason; only the
  // file that is no image is ignored.
  EXPECT_EQ(s->ignored, (std::vector<std::string>{"cat/notes.txt"}));
  ASSERT_EQ(s->errors.size(), 1u);
  EXPECT_EQ(s->errors[0].path, "root.jpg");
  EXPECT_NE(s->errors[0].reason.find("not inside a class folder"), std::string::npos);
  EXPECT_EQ(ClassFolderOf("cat/deep/c.png"), "cat");
  EXPECT_EQ(ClassFolderOf("root.jpg"), "");
}

TEST(Sources, NoClassFoldersIsAnErrorNamingTheTree) {
  TempDir d;
  Touch(d, "a.jpg");
  auto s = OpenTreeSource(d.path(), {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(d.path()), std::string::npos);
  EXPECT_NE(s.status().message().find("no class folders"), std::string::npos);
  // Class folders without images are named, and files ignored counted.
  Touch(d, "b/notes.txt");
  std::filesystem::create_directories(d / "a");
  auto empty = OpenTreeSource(d.path(), {});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("its 2 class folders (a, b) hold no images; 1 files ignored"),
            std::string::npos) << empty.status().message();
}

// --classes FILE: an image of a folder it does not list is skipped, naming
// the file; a class it lists that has no image is a warning.
TEST(Sources, ClassesFileSkipsOtherFoldersAndNamesEmptyClasses) {
  TempDir d, meta, masks;
  for (const char* rel : {"n2/a", "n1/b", "extra/c"}) {
    Touch(d, std::string(rel) + ".jpg");
    Touch(masks, std::string(rel) + ".png");
  }
  Text(meta / "classes.txt", "n1\nn2\nghost\n");
  for (bool paired : {false, true}) {
    // Without paired trees the tree is listed folder by folder (tree_source.cc), with them whole.
    SCOPED_TRACE(paired ? "with a paired tree" : "alone");
    SourceOptions o;
    o.classes_file = meta / "classes.txt";
    if (paired) o.fields = {"mask=" + masks.path()};
    auto s = OpenTreeSource(d.path(), o);
    ASSERT_OK(s);
    EXPECT_EQ(Rels(s.value()), (std::vector<std::string>{"n1/b.jpg=0", "n2/a.jpg=1"}));
    ASSERT_EQ(s->errors.size(), 1u);
    EXPECT_EQ(s->errors[0].path, "extra/c.jpg");
    EXPECT_EQ(s->errors[0].reason, "class 'extra' is not in --classes " + meta / "classes.txt");
    EXPECT_EQ(s->problems, (std::vector<std::string>{"1 class of --classes " + meta / "classes.txt" +
                                                     " has no images: ghost"}));
  }
}

// verify_db --against: the database's classes decide; a folder outside them
// leaves its images unlabelled, and an empty class list is allowed.
TEST(Sources, FixedClassListAsVerifyUsesIt) {
  TempDir d;
  for (const char* rel : {"n2/a.jpg", "n1/b.jpg", "extra/c.jpg"}) Touch(d, rel);
  const std::vector<std::string> classes = {"n2", "n1"};
  auto s = OpenTreeSource(d.path(), {"", "", &classes});
  ASSERT_OK(s);
  EXPECT_EQ(s->classes, classes);
  EXPECT_EQ(Rels(s.value()), (std::vector<std::string>{"n1/b.jpg=1", "n2/a.jpg=0"}));
  EXPECT_EQ(s->unlabelled, (std::vector<std::string>{"extra/c.jpg"}));
  EXPECT_TRUE(s->ignored.empty());
  ASSERT_EQ(s->errors.size(), 1u);
  EXPECT_EQ(s->errors[0].reason, "folder 'extra' is not in the class list");
  const std::vector<std::string> none;
  auto empty = OpenTreeSource(d.path(), {"", "", &none});
  ASSERT_OK(empty);
  EXPECT_TRUE(empty->items.empty());
  EXPECT_EQ(empty->unlabelled.size(), 3u);
}

// A labels file names images by path below the root, else by file name;
// labels are indices (classes 0..max) or names (sorted unless a classes
// file orders them).
TEST(Sources, LabelsFileByPathThenNameIndicesOrNames) {
  TempDir d, meta;
  for (const char* rel : {"x/v1.jpg", "v2.jpg", "v3.jpg"}) Touch(d, rel);
  Text(meta / "idx.txt", "# comment\nx/v1.jpg 2\nv2.jpg 0\n");
  auto s = OpenTreeSource(d.path(), {"", meta / "idx.txt", nullptr});
  ASSERT_OK(s);
  EXPECT_EQ(s->classes, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(Rels(s.value()), (std::vector<std::string>{"v2.jpg=0", "x/v1.jpg=2"}));
  ASSERT_EQ(s->errors.size(), 1u);
  EXPECT_EQ(s->errors[0].path, "v3.jpg");
  EXPECT_NE(s->errors[0].reason.find("no label in " + meta / "idx.txt"), std::string::npos);

  Text(meta / "names.txt", "v1.jpg zebra\nv2.jpg ant\nv3.jpg zebra\n");
  auto n = OpenTreeSource(d.path(), {"", meta / "names.txt", nullptr});
  ASSERT_OK(n);
  EXPECT_EQ(n->classes, (std::vector<std::string>{"ant", "zebra"}));
  EXPECT_EQ(Rels(n.value()), (std::vector<std::string>{"v2.jpg=0", "v3.jpg=1", "x/v1.jpg=1"}));

  Text(meta / "classes.txt", "zebra\nant\n");
  auto ordered = OpenTreeSource(d.path(), {meta / "classes.txt", meta / "names.txt", nullptr});
  ASSERT_OK(ordered);
  EXPECT_EQ(ordered->classes, (std::vector<std::string>{"zebra", "ant"}));
  EXPECT_EQ(Rels(ordered.value()), (std::vector<std::string>{"v2.jpg=1", "v3.jpg=0", "x/v1.jpg=0"}));
}

// pack and verify read a labels file one way (ReadLabelsFile): an index
// among names is a name even where verify fixes the database's class list;
// an entry naming no image and an image labelled twice differently are
// skipped with their reasons, and told apart for verify.
TEST(Sources, LabelsFileIsReadOneWayForPackAndVerify) {
  TempDir d, meta;
  for (const char* rel : {"v1.jpg", "v2.jpg", "v3.jpg", "v4.jpg"}) Touch(d, rel);
  const std::string file = meta / "v2l.txt";
  Text(file, "v1.jpg b\nv2.jpg 7\nv3.jpg a\ngone.jpg a\nv4.jpg a\nv3.jpg a\nv4.jpg b\n");
  auto pack = OpenTreeSource(d.path(), {"", file, nullptr});
  ASSERT_OK(pack);
  EXPECT_EQ(pack->classes, (std::vector<std::string>{"7", "a", "b"}));
  EXPECT_EQ(Rels(pack.value()), (std::vector<std::string>{"v1.jpg=2", "v2.jpg=0", "v3.jpg=1"}));
  ASSERT_EQ(pack->labels_twice.size(), 1u);
  EXPECT_EQ(pack->labels_twice[0].path, "v4.jpg");
  EXPECT_EQ(pack->labels_twice[0].reason,
            "listed twice in " + file + " with different labels: line 5 says 'a', line 7 says 'b'");
  ASSERT_EQ(pack->labels_missing.size(), 1u);
  EXPECT_EQ(pack->labels_missing[0].path, "gone.jpg");
  EXPECT_EQ(pack->labels_missing[0].reason, "listed in " + file + " but not in " + d.path());
  EXPECT_EQ(pack->errors.size(), 2u);

  // verify: the database's classes, matched by name.
  const std::vector<std::string> db = {"a", "b", "7"};
  auto verify = OpenTreeSource(d.path(), {"", file, &db});
  ASSERT_OK(verify);
  EXPECT_EQ(Rels(verify.value()), (std::vector<std::string>{"v1.jpg=1", "v2.jpg=2", "v3.jpg=0"}));
  const std::vector<std::string> other = {"a", "b"};
  auto lacking = OpenTreeSource(d.path(), {"", file, &other});
  ASSERT_OK(lacking);
  ASSERT_EQ(lacking->labels_unknown.size(), 1u);
  EXPECT_EQ(lacking->labels_unknown[0].path, "v2.jpg");
  EXPECT_EQ(lacking->labels_unknown[0].reason, file + ":2 says '7', which is not among the database's 2 classes");
}

TEST(Sources, BadLabelsAndClassFilesAreErrorsNamingTheLine) {
  TempDir d, meta;
  Touch(d, "v1.jpg");
  Text(meta / "short.txt", "v1.jpg\n");
  auto a = OpenTreeSource(d.path(), {"", meta / "short.txt", nullptr});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find(meta / "short.txt" + ":1: expected 'FILENAME LABEL'"), std::string::npos);

  Text(meta / "classes.txt", "a\nb\n");
  Text(meta / "range.txt", "v1.jpg 5\n");
  auto b = OpenTreeSource(d.path(), {meta / "classes.txt", meta / "range.txt", nullptr});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("range.txt:1: v1.jpg: label 5 is not a class of the 2"), std::string::npos)
      << b.status().message();

  Text(meta / "dup.txt", "a\n\nb\na\n");
  auto c = ReadClassList(meta / "dup.txt");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(":4: class 'a' listed twice"), std::string::npos);
}

// A class list names classes whole: spaces and '#' are part of a name (what
// export_db writes for Fashion-MNIST's "Ankle boot"); ImageNet's synset
// mapping names its WordNet ids.
TEST(Sources, ClassListLinesAreWholeNamesExceptSynsetMappings) {
  TempDir meta;
  Text(meta / "fmnist.txt", "T-shirt/top\nAnkle boot\n#hashtag\n  padded  \r\n");
  auto f = ReadClassList(meta / "fmnist.txt");
  ASSERT_OK(f);
  EXPECT_EQ(f.value(), (std::vector<std::string>{"T-shirt/top", "Ankle boot", "#hashtag", "padded"}));
  Text(meta / "synsets.txt", "n01440764 tench, Tinca tinca\nn01443537 goldfish, Carassius auratus\n");
  auto s = ReadClassList(meta / "synsets.txt");
  ASSERT_OK(s);
  EXPECT_EQ(s.value(), (std::vector<std::string>{"n01440764", "n01443537"}));
  Text(meta / "latin1.txt", "caf\xe9\n");
  auto l = ReadClassList(meta / "latin1.txt");
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("latin1.txt:1: not UTF-8"), std::string::npos) << l.status().message();
}

// A regular file is a database: its records, in order, with stored labels.
TEST(Sources, DatabaseListedAsASource) {
  TempDir src, out;
  const auto jpeg = EncodeJpeg(testing::Gradient(20, 16), 90).value();
  for (const char* rel : {"b/1.jpg", "a/2.jpg", "a/3.jpg"}) Spit(src / rel, jpeg);
  PackOptions o;
  o.src = src.path();
  o.dst = out / "db.lmdb";
  ASSERT_OK(PackDataset(o));
  auto s = OpenSource(out / "db.lmdb", {});
  ASSERT_OK(s);
  ASSERT_TRUE(s->db != nullptr);
  EXPECT_EQ(s->classes, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Rels(s.value()), (std::vector<std::string>{"a/2.jpg=0", "a/3.jpg=0", "b/1.jpg=1"}));
  for (size_t i = 0; i < s->items.size(); ++i) EXPECT_EQ(s->items[i].db_index, int64_t(i));
}

// A manifest key's kind comes from --field NAME:KIND, its name, or its
// value's JSON type; never from what a string looks like (a "target" or
// "source" path of make_photo_pairs.py's manifest is text).
TEST(Manifest, KindsByRuleNotByLook) {
  using nlohmann::json;
  EXPECT_EQ(KindOfValue("target", json("train/sharp/000000.png")), FieldKind::kText);
  EXPECT_EQ(KindOfValue("source", json("wallpapers/x/contents/images/1920x1080.jpg")), FieldKind::kText);
  EXPECT_EQ(KindOfValue("image_target", json("a/b.png")), FieldKind::kImage);
  EXPECT_EQ(KindOfValue("mask", json("labels/7")), FieldKind::kMask);  // named so: a path, any extension
  EXPECT_EQ(KindOfValue("depth_raw", json("d.png")), FieldKind::kDepth);
  EXPECT_EQ(KindOfValue("depth", json::array({1.5, 2})), FieldKind::kFloats);  // not a string: by type
  EXPECT_EQ(KindOfValue("mask", json("m.png"), /*paths=*/false), FieldKind::kText);  // a shard's .json
  EXPECT_EQ(KindOfValue("boxes", json::array()), FieldKind::kBoxes);
  auto d = ParseDeclaredField("target:image");
  ASSERT_OK(d);
  EXPECT_EQ(d->first, "target");
  EXPECT_EQ(d->second, FieldKind::kImage);
  EXPECT_EQ(ParseDeclaredField("a:b:text")->first, "a:b");
  EXPECT_FALSE(ParseDeclaredField("target=dir").ok());
  EXPECT_FALSE(ParseDeclaredField("target").ok());
  EXPECT_FALSE(ParseDeclaredField("target:picture").ok());
}

TEST(Manifest, DeclaredKindsOverrideNamesAndDeclareAbsentKeys) {
  TempDir d;
  Text(d / "m.jsonl", "{\"image\": \"a.png\", \"mask_note\": \"x.png\", \"target\": \"t.png\"}\n");
  SourceOptions so;
  so.fields = {"mask_note:text", "target:image", "extra:ints"};
  auto s = OpenManifestSource(d / "m.jsonl", so);
  ASSERT_OK(s);
  ASSERT_EQ(s->fields.size(), 3u);
  EXPECT_EQ(s->fields[0].name, "mask_note");
  EXPECT_EQ(s->fields[0].kind, FieldKind::kText);
  EXPECT_EQ(s->fields[1].kind, FieldKind::kImage);
  EXPECT_EQ(s->fields[2].name, "extra");
  EXPECT_EQ(s->fields[2].kind, FieldKind::kInts);
  ASSERT_EQ(s->items.size(), 1u);
  EXPECT_EQ(s->items[0].fields[0].text, "x.png");
  EXPECT_EQ(s->items[0].fields[1].file, (d / "t.png"));
  EXPECT_TRUE(s->problems.empty());
  so.fields.clear();  // undeclared: target is text, and a warning says how to open it
  s = OpenManifestSource(d / "m.jsonl", so);
  ASSERT_OK(s);
  EXPECT_EQ(s->fields[1].kind, FieldKind::kText);
  ASSERT_EQ(s->problems.size(), 1u);
  EXPECT_NE(s->problems[0].find("--field target:KIND"), std::string::npos) << s->problems[0];
}

// The first value that shows a key's kind decides it: a first row without
// tags ([]) or with a null does not make the field text.
TEST(Manifest, EmptyListsAndNullsDoNotDecideAKind) {
  TempDir d;
  Text(d / "m.jsonl",
       "{\"image\": \"a.png\", \"tags\": [], \"note\": null, \"empty\": []}\n"
       "{\"image\": \"b.png\", \"tags\": [3, 4], \"note\": \"x\", \"empty\": null}\n");
  auto s = OpenManifestSource(d / "m.jsonl", SourceOptions());
  ASSERT_OK(s);
  std::map<std::string, FieldKind> kinds;
  for (const auto& f : s->fields) kinds[f.name] = f.kind;
  EXPECT_EQ(kinds, (std::map<std::string, FieldKind>{
                       {"tags", FieldKind::kInts}, {"note", FieldKind::kText}, {"empty", FieldKind::kInts}}));
  ASSERT_EQ(s->items.size(), 2u);
  EXPECT_TRUE(s->errors.empty());
}

}  // namespace
}  // namespace imagepack::internal
