// StagedFile: O_DIRECT writes from staging chunks, bytes put from several
// threads in any order. Small chunks, so that many complete mid-test.
#include "storage/staged_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <random>
#include <thread>

#include "testutil.h"

namespace imagepack::internal {
namespace {

using testing::Slurp;
using testing::TempDir;

StagedFileOptions SmallChunks() {
  StagedFileOptions o;
  o.chunk_bytes = 8192;
  o.io_threads = 2;
  o.max_queued = 2;
  return o;
}

// A created, empty file and its ordinary descriptor.
struct NewFile {
  explicit NewFile(std::string p) : path(std::move(p)) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  ~NewFile() {
    if (fd >= 0) ::close(fd);
  }
  std::string path;
  int fd = -1;
};

// Opens a StagedFile, or skips the test where the file system has no
// O_DIRECT (tmpfs before Linux 6.6).
#define OPEN_OR_SKIP(var, file, opts)                                            \
  auto var##_r = StagedFile::Open((file).path, (file).fd, (opts));               \
  if (!var##_r.ok() && var##_r.status().code() == Status::Code::kNotSupported)   \
    GTEST_SKIP() << var##_r.status().ToString();                                 \
  ASSERT_OK(var##_r);                                                            \
  auto& var = *var##_r.value()

struct Piece {
  uint64_t at;
  size_t size;
  bool zeros;
};

TEST(StagedFile, EveryByteLandsWhereItWasPutWhateverTheOrderAndThread) {
  TempDir d;
  NewFile f(d / "out");
  ASSERT_GE(f.fd, 0);
  OPEN_OR_SKIP(sf, f, SmallChunks());
  // Records of 1 B .. 30 KB (some spanning several chunks), each followed
  // by zero padding to 16 bytes, as the blob lays them out.
  std::mt19937 rng(3);
  std::vector<Piece> pieces;
  uint64_t pos = 0;
  for (int i = 0; i < 400; ++i) {
    const size_t n = 1 + rng() % 30000;
    pieces.push_back({pos, n, false});
    pos += n;
    const size_t pad = (16 - pos % 16) % 16;
    if (pad) pieces.push_back({pos, pad, true});
    pos += pad;
  }
  pieces.push_back({pos, 77, false});  // a last, partial chunk
  pos += 77;
  std::vector<uint8_t> expect(pos);
  for (uint64_t i = 0; i < pos; ++i) expect[i] = static_cast<uint8_t>(i * 131 + (i >> 11));
  for (const Piece& p : pieces)
    if (p.zeros) std::fill_n(expect.begin() + p.at, p.size, 0);
  std::shuffle(pieces.begin(), pieces.end(), rng);
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (size_t i; (i = next++) < pieces.size();) {
        const Piece& p = pieces[i];
        EXPECT_OK(p.zeros ? sf.PutZeros(p.at, p.size) : sf.Put(p.at, expect.data() + p.at, p.size));
      }
    });
  for (auto& t : threads) t.join();
  ASSERT_OK(sf.Close(pos));
  EXPECT_EQ(Slurp(f.path), expect);
}

TEST(StagedFile, CloseNamesTheBytesNeverPut) {
  TempDir d;
  std::vector<uint8_t> data(50000, 7);
  {
    // A hole inside the last, partial chunk.
    NewFile f(d / "tail");
    OPEN_OR_SKIP(sf, f, SmallChunks());
    ASSERT_OK(sf.Put(0, data.data(), 49000));
    ASSERT_OK(sf.Put(49500, data.data(), 500));
    Status st = sf.Close(50000);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find(f.path), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find("49500 bytes were put for a file of 50000 bytes") , std::string::npos) << st.ToString();
  }
  {
    // A whole chunk never touched: nothing of it is even staged.
    NewFile f(d / "middle");
    OPEN_OR_SKIP(sf, f, SmallChunks());
    ASSERT_OK(sf.Put(0, data.data(), 16384));
    ASSERT_OK(sf.Put(24576, data.data(), 50000 - 24576));
    Status st = sf.Close(50000);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("41808 bytes were put for a file of 50000 bytes"), std::string::npos)
        << st.ToString();
  }
  {
    // A chunk put only in part, followed by complete ones.
    NewFile f(d / "part");
    OPEN_OR_SKIP(sf, f, SmallChunks());
    ASSERT_OK(sf.Put(0, data.data(), 8000));
    ASSERT_OK(sf.Put(8000, data.data(), 192));   // bytes 0..8191 complete
    ASSERT_OK(sf.Put(8192, data.data(), 4000));  // 8192..16383 in part
    ASSERT_OK(sf.Put(16384, data.data(), 8192));
    ASSERT_OK(sf.PutZeros(12192, 4192 - 10));
    Status st = sf.Close(24576);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.message().find("bytes were put for a file of 24576 bytes"), std::string::npos) << st.ToString();
  }
}

// The child's side of the next test: exits 0 when the failure came back
// and stuck.
[[noreturn]] void WriteUnderAFileSizeLimit(const std::string& path, int fd) {
  ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = {65536, 65536};
  ::setrlimit(RLIMIT_FSIZE, &lim);
  auto sf = StagedFile::Open(path, fd, SmallChunks());
  if (!sf.ok()) std::_Exit(3);
  std::vector<uint8_t> data(1 << 20, 1);
  Status st;
  for (uint64_t at = 0; at < data.size() && st.ok(); at += 4096) st = sf.value()->Put(at, data.data(), 4096);
  if (st.ok()) st = sf.value()->Close(data.size());
  Status again = sf.value()->Put(data.size(), data.data(), 1);
  std::fprintf(stderr, "first: %s\nagain: %s\n", st.ToString().c_str(), again.ToString().c_str());
  std::_Exit(!st.ok() && !again.ok() && again.message() == st.message() ? 0 : 1);
}

// A write the kernel refuses (the file size limit, EFBIG) comes back from
// Put() or Close() with the path and the reason, and stays: every later
// call returns it. In a child process, whose limit does not touch the tests.
TEST(StagedFile, AFailedWriteIsReportedWithThePathAndSticks) {
  TempDir d;
  NewFile f(d / "limited");
  {
    OPEN_OR_SKIP(probe, f, SmallChunks());
    (void)probe;
  }
  EXPECT_EXIT(WriteUnderAFileSizeLimit(f.path, f.fd), ::testing::ExitedWithCode(0),
              "first: .*write .*limited: File too large");
}

// Dropped before Close (a failed or interrupted pack): the threads stop,
// nothing hangs, and only whole chunks ever reached the file.
TEST(StagedFile, DroppedUnclosedWritesOnlyWholeChunks) {
  TempDir d;
  NewFile f(d / "dropped");
  std::vector<uint8_t> data(100000, 9);
  {
    OPEN_OR_SKIP(sf, f, SmallChunks());
    ASSERT_OK(sf.Put(0, data.data(), data.size()));
  }
  const auto size = std::filesystem::file_size(f.path);
  EXPECT_EQ(size % 8192, 0u);
  EXPECT_LE(size, data.size());
}

TEST(StagedFile, DirectIoIsNotWantedOnTmpfs) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  NewFile shm("/dev/shm/imagepack-staged-test-" + std::to_string(::getpid()));
  ASSERT_GE(shm.fd, 0);
  EXPECT_FALSE(DirectIoPays(shm.fd));
  ::unlink(shm.path.c_str());
}

}  // namespace
}  // namespace imagepack::internal
