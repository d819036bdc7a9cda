// The file ByteSource every local container and archive reads through:
// reads at offsets equal the file's bytes, its mapping is the file, its
// identity follows the file's changes, a file that shrinks is an error
// naming it, and CopyToFile copies every byte whatever the chunking.
#include "imagepack/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "storage/fd_io.h"
#include "testutil.h"

namespace imagepack {
namespace {

using testing::TempDir;

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// True once a file written at `probe` is stamped later than `path` was
// (its modification and change times); false after 60 s.
bool WaitForLaterFileTime(const std::string& path, const std::string& probe) {
  struct stat was {};
  if (::stat(path.c_str(), &was) != 0) return false;
  auto later = [](const timespec& a, const timespec& b) {
    return a.tv_sec != b.tv_sec ? a.tv_sec > b.tv_sec : a.tv_nsec > b.tv_nsec;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    WriteBytes(probe, {1});
    struct stat now {};
    if (::stat(probe.c_str(), &now) == 0 && later(now.st_mtim, was.st_mtim) && later(now.st_ctim, was.st_ctim))
      return true;
    std::this_thread::yield();
  }
  return false;
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(ByteSource, FileReadsMapAndResidencyAreTheFilesBytes) {
  TempDir d;
  const std::string path = d / "f.bin";
  const auto want = RandomBytes(3 * 4096 + 123, 1);
  WriteBytes(path, want);
  auto src = OpenByteSource(path);
  ASSERT_OK(src);
  const ByteSource& s = *src.value();
  EXPECT_EQ(s.size(), want.size());
  EXPECT_FALSE(s.remote());
  EXPECT_EQ(s.Describe(), path);
  // Reads at odd offsets, singly and as ranges, from several threads.
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (uint64_t at = uint64_t(t); at + 777 <= want.size(); at += 501) {
        std::vector<uint8_t> got(777);
        if (!s.ReadAt(at, got.size(), got.data()).ok() || std::memcmp(got.data(), want.data() + at, got.size()))
          ++wrong;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  std::vector<uint8_t> a(10), b(4000);
  ASSERT_OK(s.ReadRanges({{5, 10}, {8000, 4000}}, {a.data(), b.data()}));
  EXPECT_EQ(0, std::memcmp(a.data(), want.data() + 5, 10));
  EXPECT_EQ(0, std::memcmp(b.data(), want.data() + 8000, 4000));
  // The mapping, twice the same, holds the file.
  auto m1 = s.Map(), m2 = s.Map();
  ASSERT_OK(m1);
  ASSERT_OK(m2);
  EXPECT_EQ(*m1, *m2);
  EXPECT_EQ(0, std::memcmp(*m1, want.data(), want.size()));
  // Just read (and written): every page is in the page cache.
  EXPECT_EQ(s.CachedBytes(), want.size());
  s.Advise(ByteSource::Access::kRandom);  // hints only: reads still right
  ASSERT_OK(s.ReadAt(0, 10, a.data()));
  EXPECT_EQ(0, std::memcmp(a.data(), want.data(), 10));
}

TEST(ByteSource, ReadsPastTheEndAndAShrunkFileAreErrorsNamingIt) {
  TempDir d;
  const std::string path = d / "f.bin";
  WriteBytes(path, RandomBytes(10000, 2));
  auto src = OpenByteSource(path);
  ASSERT_OK(src);
  std::vector<uint8_t> buf(200);
  Status past = src.value()->ReadAt(9900, 200, buf.data());
  EXPECT_FALSE(past.ok());
  EXPECT_NE(past.message().find(path), std::string::npos) << past.ToString();
  EXPECT_NE(past.message().find("past the end"), std::string::npos) << past.ToString();
  // Truncated under the open source (another writer): named, not a short read.
  ASSERT_EQ(::truncate(path.c_str(), 5000), 0);
  Status shrunk = src.value()->ReadAt(4900, 200, buf.data());
  EXPECT_FALSE(shrunk.ok());
  EXPECT_NE(shrunk.message().find(path), std::string::npos) << shrunk.ToString();
  EXPECT_NE(shrunk.message().find("shrank"), std::string::npos) << shrunk.ToString();
}

TEST(ByteSource, IdentityChangesWithTheFileAndRefusesNonFiles) {
  TempDir d;
  const std::string path = d / "f.bin";
  WriteBytes(path, RandomBytes(100, 3));
  auto a = OpenByteSource(path);
  ASSERT_OK(a);
  auto again = OpenByteSource(path);
  ASSERT_OK(again);
  EXPECT_EQ(a.value()->identity(), again.value()->identity());
  // The rewrite must fall in a later tick of the clock that stamps files
  // (a few ms, or a second on some file systems): waited for by stamping a
  // probe beside it until its time is past the file's, not slept.
  ASSERT_TRUE(WaitForLaterFileTime(path, d / "probe")) << "the file clock did not advance in 60 s";
  WriteBytes(path, RandomBytes(100, 4));  // same size, rewritten in place
  auto b = OpenByteSource(path);
  ASSERT_OK(b);
  EXPECT_NE(a.value()->identity(), b.value()->identity());
  // A FIFO or a folder is refused by name before any read could block.
  const std::string fifo = d / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& p : {fifo, std::string(d.path())}) {
    auto r = OpenByteSource(p);
    ASSERT_FALSE(r.ok()) << p;
    EXPECT_NE(r.status().message().find(p), std::string::npos) << r.status().ToString();
  }
  // An empty file: size 0, a mapping of nothing, no resident bytes.
  const std::string empty = d / "empty";
  WriteBytes(empty, {});
  auto e = OpenByteSource(empty);
  ASSERT_OK(e);
  EXPECT_EQ(e.value()->size(), 0u);
  EXPECT_OK(e.value()->Map());
  EXPECT_EQ(e.value()->CachedBytes(), 0u);
}

TEST(ByteSource, CopyToFileCopiesEveryByteWhateverTheChunksAndWorkers) {
  TempDir d;
  const std::string path = d / "src.bin";
  const auto want = RandomBytes(1 << 20 | 12345, 5);
  WriteBytes(path, want);
  auto src = OpenByteSource(path);
  ASSERT_OK(src);
  for (uint64_t chunk : {uint64_t(1), uint64_t(4096), uint64_t(100000), uint64_t(8) << 20})
    for (int workers : {1, 3, 8}) {
      if (chunk == 1 && workers != 3) continue;  // a million 1-byte reads once is enough
      SCOPED_TRACE("chunk " + std::to_string(chunk) + ", workers " + std::to_string(workers));
      const std::string dst = d / ("dst-" + std::to_string(chunk) + "-" + std::to_string(workers));
      const int fd = ::open(dst.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      ASSERT_GE(fd, 0);
      Status st = CopyToFile(*src.value(), fd, dst, chunk, workers);
      ::close(fd);
      ASSERT_OK(st);
      EXPECT_EQ(ReadBytes(dst), want);
    }
}

}  // namespace
}  // namespace imagepack
