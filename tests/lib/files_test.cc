#include "imagepack/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "testutil.h"
#include "storage/fd_io.h"

namespace fs = std::filesystem;

namespace imagepack {
namespace {

using namespace testing;  // testutil.h: TempDir, Slurp, Spit, Golden, Gradient, ...

TEST(Files, ListsTreeSortedAndSplitsImagesFromOthers) {
  TempDir d;
  Spit(d / "b/2.JPEG", {1});
  Spit(d / "b/1.jpg", {1});
  Spit(d / "a/deep/er/x.PNG", {1});
  Spit(d / "notes.txt", {1});
  Spit(TempPathFor(d / "a/x.JPEG"), {1});  // our own temporary: not listed
  auto l = ListTree(d.path());
  ASSERT_OK(l);
  EXPECT_EQ(l->images, (std::vector<std::string>{"a/deep/er/x.PNG", "b/1.jpg", "b/2.JPEG"}));
  EXPECT_EQ(l->ignored, (std::vector<std::string>{"notes.txt"}));
  EXPECT_TRUE(l->problems.empty());
}

TEST(Files, SymlinkLoopIsReportedNotFollowedForever) {
  TempDir d;
  Spit(d / "a/1.jpg", {1});
  fs::create_directory_symlink("..", d / "a/loop");
  fs::create_directory_symlink(d / "a", d / "alias");  // same dir, second name
  auto l = ListTree(d.path());
  ASSERT_OK(l);
  EXPECT_EQ(l->images, (std::vector<std::string>{"a/1.jpg"}));
  ASSERT_EQ(l->problems.size(), 2u);
  EXPECT_NE(l->problems[0].find("symlink loop"), std::string::npos) << l->problems[0];
}

TEST(Files, MissingSourceIsNotFound) {
  auto l = ListTree("/nonexistent/imagepack");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), Status::Code::kNotFound);
  EXPECT_NE(l.status().message().find("/nonexistent/imagepack"), std::string::npos);
}

TEST(Files, AtomicWriteCreatesParentsAndLeavesNoTemp) {
  TempDir d;
  std::vector<uint8_t> data = {1, 2, 3, 4};
  ASSERT_OK(WriteFileAtomic(d / "x/y/z.bin", data.data(), data.size(), true));
  EXPECT_EQ(Slurp(d / "x/y/z.bin"), data);
  int entries = 0;
  for (auto& e : fs::directory_iterator(d / "x/y")) { (void)e; ++entries; }
  EXPECT_EQ(entries, 1);
}

TEST(Files, FailedAtomicWriteKeepsTheOldFile) {
  TempDir d;
  std::vector<uint8_t> old = {9, 9};
  ASSERT_OK(WriteFileAtomic(d / "f", old.data(), old.size()));
  // Directories squatting on every temporary name make the write fail even
  // for root; the file under the final name must be untouched.
  fs::create_directory(TempPathFor(d / "f"));
  for (int n = 1; n < 100; ++n) fs::create_directory(TempPathFor(d / "f") + "." + std::to_string(n));
  std::vector<uint8_t> data = {1};
  Status st = WriteFileAtomic(d / "f", data.data(), data.size());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(TempPathFor(d / "f")), std::string::npos) << st.ToString();
  EXPECT_EQ(Slurp(d / "f"), old);
}

// A link planted at the temporary's name (by another user of a shared
// folder) is neither followed nor removed: the write goes elsewhere.
TEST(Files, TemporariesNeverFollowAPlantedLink) {
  TempDir d;
  std::vector<uint8_t> precious = {7, 7, 7};
  Spit(d / "precious", precious);
  fs::create_symlink(d / "precious", TempPathFor(d / "f"));
  std::vector<uint8_t> data = {1, 2};
  ASSERT_OK(WriteFileAtomic(d / "f", data.data(), data.size()));
  EXPECT_EQ(Slurp(d / "f"), data);
  EXPECT_EQ(Slurp(d / "precious"), precious);
  EXPECT_TRUE(fs::is_symlink(TempPathFor(d / "f")));
  auto t = CreateTempFor(d / "g");
  ASSERT_OK(t);
  EXPECT_EQ(t->path, TempPathFor(d / "g"));
  ::close(t->fd);
}

TEST(Files, ReadFileNamesThePathInErrors) {
  auto r = ReadFile("/nonexistent/file.jpg");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/nonexistent/file.jpg"), std::string::npos);
  TempDir d;
  std::vector<uint8_t> big(200000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 7);
  Spit(d / "big", big);
  auto ok = ReadFile(d / "big");
  ASSERT_OK(ok);
  EXPECT_EQ(ok.value(), big);
}

// ReadFile reads an unchanged file in one read() (a short read at st_size is
// its end), and still reads to EOF where st_size says nothing: /proc files
// report 0 bytes.
TEST(Files, ReadFileReadsToTheEndWhateverStatSays) {
  TempDir d;
  Spit(d / "empty", {});
  auto empty = ReadFile(d / "empty", 5);
  ASSERT_OK(empty);
  EXPECT_EQ(empty.value().size(), 5u);  // the headroom only
  Spit(d / "three", {1, 2, 3});
  auto three = ReadFile(d / "three", 2);
  ASSERT_OK(three);
  EXPECT_EQ(three.value(), (std::vector<uint8_t>{0, 0, 1, 2, 3}));
  auto proc = ReadFile("/proc/self/status");
  ASSERT_OK(proc);
  const std::string text(proc.value().begin(), proc.value().end());
  EXPECT_EQ(text.rfind("Name:", 0), 0u) << text.substr(0, 40);
  EXPECT_NE(text.find("VmRSS:"), std::string::npos);
  EXPECT_GT(text.size(), 500u);
}

// A temporary's name carries its owner: user, host, boot, process.
TEST(Files, TempNamesNameTheirOwner) {
  const std::string tmp = TempPathFor("/some/dir/a.lmdb");
  TempOwner o;
  ASSERT_TRUE(ParseTempOwner(fs::path(tmp).filename().string(), &o)) << tmp;
  EXPECT_EQ(fs::path(tmp).parent_path(), "/some/dir");
  EXPECT_EQ(fs::path(tmp).filename().string().rfind(".a.lmdb.ipk-tmp.", 0), 0u) << tmp;
  EXPECT_EQ(o.uid, ::geteuid());
  EXPECT_EQ(o.pid, ::getpid());
  EXPECT_FALSE(o.host.empty());
  EXPECT_EQ(o.host.find('.'), std::string::npos);
  EXPECT_GE(o.boot.size(), 8u);
  EXPECT_EQ(tmp, fs::path("/some/dir") / (".a.lmdb." + TempTag()));
  // A numbered variant (CreateTempFor when the name is taken) parses too.
  TempOwner v;
  ASSERT_TRUE(ParseTempOwner(fs::path(tmp).filename().string() + ".3", &v));
  EXPECT_EQ(v.pid, o.pid);
  for (const char* bad : {".a.ipk-tmp.host.12", ".a.ipk-tmp.x.h.b.12", ".a.ipk-tmp.0.h.b.", "a.lmdb"})
    EXPECT_FALSE(ParseTempOwner(bad, &v)) << bad;
}

// Stale only when provably dead: this user's, this host's and boot's, and
// its process gone. Anything else may belong to a live writer elsewhere (a
// shared file system) and stays.
TEST(Files, RemovesStaleTempsOfProvablyDeadProcessesOnly) {
  TempDir d;
  const std::string mine = TempPathFor(d / "sub/a.jpg");
  Spit(mine, {1});
  // The same owner but a process that cannot exist (pid 2^22+1 > pid_max default).
  const std::string base = mine.substr(0, mine.rfind('.'));
  const std::string dead = base + ".4194305";
  Spit(dead, {1});
  TempOwner o;
  ASSERT_TRUE(ParseTempOwner(fs::path(mine).filename().string(), &o));
  auto renamed = [&](const std::string& from, const std::string& to) {
    std::string n = dead;
    n.replace(n.rfind("." + from + "."), from.size() + 2, "." + to + ".");
    return n;
  };
  const std::string other_host = renamed(o.host, "otherhost");
  const std::string other_boot = renamed(o.boot, "0badb007");
  const std::string other_user = renamed(std::to_string(o.uid), std::to_string(o.uid + 1));
  for (const std::string& p : {other_host, other_boot, other_user}) Spit(p, {1});
  EXPECT_EQ(RemoveStaleTemps(d.path()), 1);
  EXPECT_TRUE(fs::exists(mine));  // ours, alive
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(other_host));  // may belong to a live process elsewhere
  EXPECT_TRUE(fs::exists(other_boot));  // a PID of another boot (or machine) means nothing here
  EXPECT_TRUE(fs::exists(other_user));  // another user's to remove
  EXPECT_TRUE(IsProvablyDeadTemp(fs::path(dead).filename().string(), ::geteuid()));
  // A file of another owner under our name is not ours to remove.
  EXPECT_FALSE(IsProvablyDeadTemp(fs::path(dead).filename().string(), ::geteuid() + 1));
}

// Staging folders follow the same rule: another node's folder on a shared
// file system (its host in the name, its PID meaningless here) is never
// removed; a dead process's of this host and boot is.
TEST(Files, TempFoldersOfOtherHostsSurvive) {
  TempDir root;
  auto a = MakeTempDir(root.path(), "upload");
  ASSERT_OK(a);
  const std::string name = fs::path(*a).filename().string();
  EXPECT_EQ(name.rfind("imagepack-upload." + TempTag() + ".", 0), 0u) << name;
  EXPECT_EQ(fs::status(*a).permissions() & fs::perms::all, fs::perms::owner_all);
  TempOwner o;
  ASSERT_TRUE(ParseTempOwner(name, &o));
  std::string dead = name, other = name;
  dead.replace(dead.find("." + std::to_string(o.pid) + "."), std::to_string(o.pid).size() + 2, ".4194305.");
  other.replace(other.find("." + o.host + "."), o.host.size() + 2, ".othernode.");
  other.replace(other.find("." + std::to_string(o.pid) + "."), std::to_string(o.pid).size() + 2, ".4194305.");
  fs::create_directory(root / dead);
  fs::create_directory(root / other);
  Spit(root / (other + "/part"), {1});
  auto b = MakeTempDir(root.path(), "shards");
  ASSERT_OK(b);
  EXPECT_TRUE(fs::exists(*a));  // alive: ours
  EXPECT_FALSE(fs::exists(root / dead));
  EXPECT_TRUE(fs::exists(root / (other + "/part")));
}

}  // namespace
}  // namespace imagepack
