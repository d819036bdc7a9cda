// The storage environment (storage.h): the factory reads the scheme and
// nothing else does; settings come from the environment, then options;
// the local backend publishes atomically, lists, stats, removes and locks;
// the remote ones refuse what they cannot do by name. The remote backends
// against real servers: tests/python/test_object_storage.py (Ceph) and
// test_https.py (nginx with TLS).
#include "imagepack/storage.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <optional>

#include "storage/fd_io.h"
#include "storage/hf_url.h"
#include "imagepack/files.h"
#include "imagepack/store.h"
#include "testutil.h"

namespace fs = std::filesystem;

namespace imagepack {
namespace {

using namespace testing;  // testutil.h: TempDir, Slurp, Spit, Golden, Gradient, ...

// Sets variables for its lifetime, then puts back what was there.
class ScopedEnv {
 public:
  explicit ScopedEnv(const std::map<std::string, std::string>& vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_.emplace_back(k, old ? std::optional<std::string>(old) : std::nullopt);
      if (v.empty()) ::unsetenv(k.c_str());
      else ::setenv(k.c_str(), v.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : saved_) {
      if (v) ::setenv(k.c_str(), v->c_str(), 1);
      else ::unsetenv(k.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(Storage, TheFactoryPicksTheBackendByScheme) {
  ScopedEnv env({{"AWS_ACCESS_KEY_ID", "k"}, {"AWS_SECRET_ACCESS_KEY", "s"}});
  struct Case {
    std::string url, name;
    bool local, writable, listable;
  };
  for (const Case& c : {Case{"/tmp/x.blob", "file", true, true, true}, Case{"rel/x.lmdb", "file", true, true, true},
                        Case{"odd:name/x", "file", true, true, true}, Case{"s3://bucket/k", "s3", false, true, true},
                        Case{"https://host/x.blob", "https", false, false, false},
                        Case{"http://host:8080/x.tar", "https", false, false, false}}) {
    auto s = OpenStorage(c.url);
    ASSERT_OK(s);
    EXPECT_EQ(s.value()->name(), c.name) << c.url;
    EXPECT_EQ(s.value()->local(), c.local) << c.url;
    EXPECT_EQ(s.value()->writable(), c.writable) << c.url;
    EXPECT_EQ(s.value()->listable(), c.listable) << c.url;
  }
  auto gs = OpenStorage("gs://bucket/x.blob");
  ASSERT_FALSE(gs.ok());
  EXPECT_EQ(gs.status().code(), Status::Code::kNotSupported);
  EXPECT_NE(gs.status().message().find("gs://bucket/x.blob: no storage for 'gs://'"), std::string::npos)
      << gs.status().ToString();
}

TEST(Storage, SettingsComeFromTheEnvironmentAndMalformedOnesAreRefusedByName) {
  {
    ScopedEnv env({{"AWS_ENDPOINT_URL", "http://127.0.0.1:9/"}, {"AWS_REGION", "eu-west-3"},
                   {"IMAGEPACK_S3_ADDRESSING", "virtual"}, {"IMAGEPACK_S3_RETRY_SECONDS", "2.5"},
                   {"IMAGEPACK_FETCH_BLOCK_MB", "0.25"}, {"IMAGEPACK_CACHE_DIR", "/c"},
                   {"CURL_CA_BUNDLE", ""}, {"SSL_CERT_FILE", "/ca.pem"}, {"IMAGEPACK_STAGING_DIR", ""},
                   {"TMPDIR", "/scratch"}, {"IMAGEPACK_SHM_DIR", ""}});
    auto s = StorageSettings::FromEnvironment();
    ASSERT_OK(s);
    EXPECT_EQ(s->s3_endpoint, "http://127.0.0.1:9");
    EXPECT_EQ(s->s3_region, "eu-west-3");
    EXPECT_TRUE(s->s3_virtual_hosted);
    EXPECT_EQ(s->retry_seconds, 2.5);
    EXPECT_EQ(s->fetch_block_mb, 0.25);
    EXPECT_EQ(s->cache_dir, "/c");
    EXPECT_EQ(s->ca_file, "/ca.pem");
    EXPECT_EQ(s->staging_dir, "/scratch");
    EXPECT_EQ(s->shm_dir, "/dev/shm");
  }
  {
    ScopedEnv env({{"CURL_CA_BUNDLE", "/curl.pem"}, {"SSL_CERT_FILE", "/ca.pem"}, {"AWS_ENDPOINT_URL", ""},
                   {"AWS_ENDPOINT_URL_S3", ""}, {"AWS_REGION", "ap-south-1"}});
    auto s = StorageSettings::FromEnvironment();
    ASSERT_OK(s);
    EXPECT_EQ(s->ca_file, "/curl.pem");  // curl's own variable first, as the curl tool
    EXPECT_EQ(s->s3_endpoint, "https://s3.ap-south-1.amazonaws.com");
  }
  for (const auto& [var, value] : std::map<std::string, std::string>{{"IMAGEPACK_FETCH_BLOCK_MB", "2000"},
                                                                     {"IMAGEPACK_S3_TIMEOUT", "soon"},
                                                                     {"IMAGEPACK_RAM_CACHE_MB", "-1"},
                                                                     {"IMAGEPACK_S3_ADDRESSING", "dns"}}) {
    ScopedEnv env(std::map<std::string, std::string>{{var, value}});
    auto s = StorageSettings::FromEnvironment();
    ASSERT_FALSE(s.ok()) << var;
    EXPECT_NE(s.status().message().find(var + "=" + value), std::string::npos) << s.status().ToString();
  }
}

TEST(Storage, TheProcessSettingsAreMadeOnceAndRemadeWhenAVariableChanges) {
  ScopedEnv env({{"IMAGEPACK_CACHE_DIR", "/first"}, {"IMAGEPACK_S3_TIMEOUT", ""}});
  auto a = StorageSettings::ForProcess();
  ASSERT_OK(a);
  EXPECT_EQ(a->cache_dir, "/first");
  {
    ScopedEnv later(std::map<std::string, std::string>{{"IMAGEPACK_CACHE_DIR", "/second"}});
    auto b = StorageSettings::ForProcess();
    ASSERT_OK(b);
    EXPECT_EQ(b->cache_dir, "/second");
    // Every open in between sees them: the cache folder of an open store.
    auto s = OpenStorage("/tmp/x.blob");
    ASSERT_OK(s);
    EXPECT_EQ(s.value()->settings().cache_dir, "/second");
  }
  EXPECT_EQ(StorageSettings::ForProcess()->cache_dir, "/first");
  // A malformed value is the settings' error until it is mended.
  {
    ScopedEnv bad(std::map<std::string, std::string>{{"IMAGEPACK_S3_TIMEOUT", "soon"}});
    auto c = StorageSettings::ForProcess();
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("IMAGEPACK_S3_TIMEOUT=soon"), std::string::npos);
    EXPECT_FALSE(OpenStorage("/tmp/x.blob").ok());
  }
  EXPECT_TRUE(StorageSettings::ForProcess().ok());
}

TEST(Storage, ObjectStorageWithoutCredentialsIsAnErrorNamingTheUrlAndTheVariables) {
  ScopedEnv env({{"AWS_ACCESS_KEY_ID", ""}, {"AWS_SECRET_ACCESS_KEY", ""}});
  auto s = OpenStorage("s3://data/x.blob");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("s3://data/x.blob"), std::string::npos) << s.status().ToString();
  EXPECT_NE(s.status().message().find("AWS_ACCESS_KEY_ID"), std::string::npos) << s.status().ToString();
}

TEST(Storage, HttpIsReadOnlyAndSaysSo) {
  auto s = OpenStorage("https://127.0.0.1:9/x.blob");
  ASSERT_OK(s);
  Storage& st = *s.value();
  auto c = st.Create("https://127.0.0.1:9/x.blob", {});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Status::Code::kNotSupported);
  EXPECT_NE(c.status().message().find("read-only"), std::string::npos) << c.status().ToString();
  EXPECT_FALSE(st.Remove("https://127.0.0.1:9/x.blob").ok());
  EXPECT_FALSE(st.Lock("https://127.0.0.1:9/x.blob").ok());
  auto l = st.List("https://127.0.0.1:9/");
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("brace pattern"), std::string::npos) << l.status().ToString();
  auto folder = st.Open("https://127.0.0.1:9/");
  ASSERT_FALSE(folder.ok());
  EXPECT_NE(folder.status().message().find("naming a file"), std::string::npos) << folder.status().ToString();
}

// Nothing appears under the final name before Commit; a file destroyed
// uncommitted leaves nothing, its staging file included.
TEST(LocalStorage, CreatePublishesAtomicallyAtCommit) {
  TempDir d;
  auto s = OpenStorage(d / "out/a.bin");
  ASSERT_OK(s);
  Storage& st = *s.value();
  {
    auto f = st.Create(d / "out/a.bin", {});
    ASSERT_OK(f);
    EXPECT_EQ(f.value()->staging_path(), TempPathFor(d / "out/a.bin"));
    ASSERT_OK(WriteAll(f.value()->fd(), "abc", 3, "a"));
    EXPECT_FALSE(fs::exists(d / "out/a.bin"));
  }
  EXPECT_TRUE(fs::is_empty(d / "out"));
  auto f = st.Create(d / "out/a.bin", {});
  ASSERT_OK(f);
  ASSERT_OK(WriteAll(f.value()->fd(), "abc", 3, "a"));
  ASSERT_OK(f.value()->Commit());
  EXPECT_EQ(Slurp(d / "out/a.bin"), (std::vector<uint8_t>{'a', 'b', 'c'}));
  f.value().reset();
  EXPECT_EQ(std::distance(fs::directory_iterator(d / "out"), fs::directory_iterator()), 1);
  // An existing file: refused unless overwrite.
  auto again = st.Create(d / "out/a.bin", {});
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("already exists"), std::string::npos) << again.status().ToString();
  Storage::CreateOptions co;
  co.overwrite = true;
  ASSERT_OK(st.Create(d / "out/a.bin", co));
  auto dir = st.Create(d / "out", co);
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("is a directory"), std::string::npos);
}

TEST(LocalStorage, ListStatRemoveAndLock) {
  TempDir d;
  Spit(d / "b.tar", {1, 2, 3});
  Spit(d / "a.tar", {1});
  fs::create_directory(d / "sub");
  auto s = OpenStorage(d.path());
  ASSERT_OK(s);
  Storage& st = *s.value();
  auto names = st.List(d.path());
  ASSERT_OK(names);
  EXPECT_EQ(names.value(), (std::vector<std::string>{"a.tar", "b.tar", "sub/"}));
  auto info = st.Stat(d / "b.tar");
  ASSERT_OK(info);
  EXPECT_TRUE(info->exists && !info->directory);
  EXPECT_EQ(info->size, 3u);
  auto none = st.Stat(d / "none");
  ASSERT_OK(none);
  EXPECT_FALSE(none->exists);
  EXPECT_TRUE(st.Stat(d / "sub")->directory);
  ASSERT_OK(st.Remove(d / "a.tar"));
  EXPECT_FALSE(fs::exists(d / "a.tar"));
  ASSERT_OK(st.Remove(d / "a.tar"));  // gone already: nothing to do
  auto lock = st.Lock(d / "b.tar");
  ASSERT_OK(lock);
  auto second = st.Lock(d / "b.tar");
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("another process is writing " + d / "b.tar"), std::string::npos)
      << second.status().ToString();
  lock.value().reset();
  EXPECT_OK(st.Lock(d / "b.tar"));
}

// A writer locks its destination before it creates it (CreateWriter):
// a destination in folders that do not exist yet is locked, created and
// published, as `pack_lmdb TREE out/new/train.lmdb` needs.
TEST(LocalStorage, ALockMakesTheFoldersItsFileNeeds) {
  TempDir d;
  const std::string path = d / "new/deeper/train.blob";
  auto s = OpenStorage(path);
  ASSERT_OK(s);
  auto lock = s.value()->Lock(path);
  ASSERT_OK(lock);
  EXPECT_TRUE(fs::is_directory(d / "new/deeper"));
  auto f = s.value()->Create(path, {});
  ASSERT_OK(f);
  ASSERT_OK(WriteAll(f.value()->fd(), "abc", 3, "a"));
  ASSERT_OK(f.value()->Commit());
  EXPECT_EQ(Slurp(path), (std::vector<uint8_t>{'a', 'b', 'c'}));
  // The writer of the store itself, end to end.
  auto w = CreateWriter(ContainerFormat::kLmdb, d / "other/new/train.lmdb", {});
  ASSERT_OK(w);
}

TEST(Storage, ParentJoinAndWholeReads) {
  EXPECT_EQ(Storage::Parent("s3://b/p/x.tar"), "s3://b/p/");
  EXPECT_EQ(Storage::Parent("https://h/x.tar"), "https://h/");
  EXPECT_EQ(Storage::Parent("x.tar"), "");
  EXPECT_EQ(Storage::Join("", "meta.json"), "meta.json");
  EXPECT_EQ(Storage::Join("s3://b/p/", "meta.json"), "s3://b/p/meta.json");
  EXPECT_EQ(Storage::Join("/d", "meta.json"), "/d/meta.json");
  TempDir d;
  Spit(d / "f", {1, 2, 3, 4});
  auto s = OpenStorage(d / "f");
  ASSERT_OK(s);
  auto all = ReadWhole(*s.value(), d / "f", 4);
  ASSERT_OK(all);
  EXPECT_EQ(all->size(), 4u);
  auto over = ReadWhole(*s.value(), d / "f", 3);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("over the budget"), std::string::npos);
}

TEST(Storage, PublishTreeCopiesEveryFileUnderThePrefix) {
  TempDir from, to;
  Spit(from / "a/x.tar", {1, 2});
  Spit(from / "meta.json", {'{', '}'});
  auto s = OpenStorage(to.path());
  ASSERT_OK(s);
  ASSERT_OK(PublishTree(from.path(), *s.value(), to / "out"));
  EXPECT_EQ(Slurp(to / "out/a/x.tar"), (std::vector<uint8_t>{1, 2}));
  EXPECT_EQ(Slurp(to / "out/meta.json"), (std::vector<uint8_t>{'{', '}'}));
}

}  // namespace
}  // namespace imagepack

// hf:// as huggingface_hub's HfFileSystem writes it (hf_file_system.py):
// the revision after '@', quoted or a special ref with its slashes.
TEST(HubUrl, ReadsTheSyntaxOfHfFileSystem) {
  using imagepack::internal::ParseHubUrl;
  struct Case {
    const char* url;
    const char* repo;
    const char* revision;
    const char* path;
  } cases[] = {
      {"hf://datasets/org/name", "org/name", "main", ""},
      {"hf://datasets/org/name/", "org/name", "main", ""},
      {"hf://datasets/org/name/data/train-*.parquet", "org/name", "main", "data/train-*.parquet"},
      {"hf://datasets/org/name@v1.0/data", "org/name", "v1.0", "data"},
      {"hf://datasets/org/name@refs%2Fconvert%2Fparquet/default/train", "org/name", "refs/convert/parquet",
       "default/train"},
      {"hf://datasets/org/name@refs/convert/parquet/default", "org/name", "refs/convert/parquet", "default"},
      {"hf://datasets/org/name@refs/pr/12", "org/name", "refs/pr/12", ""},
      {"hf://datasets/o-1/n_2.x@0123456789abcdef0123456789abcdef01234567/a/b.tar", "o-1/n_2.x",
       "0123456789abcdef0123456789abcdef01234567", "a/b.tar"},
  };
  for (const Case& c : cases) {
    auto h = ParseHubUrl(c.url);
    ASSERT_TRUE(h.ok()) << c.url << ": " << h.status().ToString();
    EXPECT_EQ(h->repo, c.repo) << c.url;
    EXPECT_EQ(h->revision, c.revision) << c.url;
    EXPECT_EQ(h->path, c.path) << c.url;
  }
  for (const char* bad : {"hf://models/org/name/x", "hf://org/name", "hf://datasets/org", "hf://datasets//name",
                          "hf://datasets/org/na me", "hf://datasets/org/-name", "hf://datasets/org/a--b",
                          "hf://datasets/org/name@/x", "hf://datasets/org/name/a//b", "hf://datasets/org/name/../x",
                          "hf://datasets/org/name@a%0Ab/x"}) {
    auto h = ParseHubUrl(bad);
    EXPECT_FALSE(h.ok()) << bad;
    if (!h.ok()) EXPECT_NE(h.status().message().find(bad), std::string::npos) << h.status().message();
  }
  EXPECT_TRUE(imagepack::internal::IsCommit("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(imagepack::internal::IsCommit("0123456789ABCDEF0123456789abcdef01234567"));
  EXPECT_FALSE(imagepack::internal::IsCommit("main"));
}
