// formats/gzip: shards inflated into an unnamed scratch file, within a
// budget, interruptible, and nothing left in the scratch folder.
#include "formats/gzip.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <string>

#include "storage/fd_io.h"
#include "testutil.h"

namespace imagepack::internal {
namespace {

using testing::TempDir;

void Gz(const std::string& path, const std::string& data, bool append = false) {
  gzFile g = gzopen(path.c_str(), append ? "ab" : "wb");
  gzwrite(g, data.data(), static_cast<unsigned>(data.size()));
  gzclose(g);
}

// The gzip file at `path` inflated, as a WebDataset source does it: through
// the shard's byte source.
Result<int> Inflate(const std::string& path, const std::string& dir, const CancelFlag* cancel,
                    uint64_t budget = limits::kInflatedShard) {
  auto in = OpenFileSource(path);
  if (!in.ok()) return in.status();
  return InflateToScratch(*in.value(), dir, cancel, budget);
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    at += n;
  }
  return out;
}

TEST(Gzip, InflatesEveryMemberIntoAFileWithNoName) {
  TempDir d, scratch;
  Gz(d / "s.tar.gz", std::string(100000, 'a'));
  Gz(d / "s.tar.gz", "tail", /*append=*/true);  // two gzip members: one stream, as gzip reads it
  auto fd = Inflate(d / "s.tar.gz", scratch.path(), nullptr);
  ASSERT_OK(fd);
  EXPECT_EQ(ReadAll(*fd), std::string(100000, 'a') + "tail");
  EXPECT_TRUE(std::filesystem::is_empty(scratch.path()));  // nothing to clean up, ever
  ::close(*fd);
}

TEST(Gzip, BudgetCancelDamageAndFifosAreErrorsNamingTheShard) {
  TempDir d, scratch;
  Gz(d / "big.tar.gz", std::string(3 << 20, 'z'));
  auto over = Inflate(d / "big.tar.gz", scratch.path(), nullptr, /*budget=*/1 << 20);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("big.tar.gz: inflates past 1048576 bytes"), std::string::npos)
      << over.status().message();
  CancelFlag cancel{true};
  auto stopped = Inflate(d / "big.tar.gz", scratch.path(), &cancel);
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), Status::Code::kCancelled);
  auto bytes = testing::Slurp(d / "big.tar.gz");
  bytes.resize(bytes.size() / 2);
  testing::Spit(d / "cut.tar.gz", bytes);
  auto cut = Inflate(d / "cut.tar.gz", scratch.path(), nullptr);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("cut.tar.gz"), std::string::npos) << cut.status().message();
  ASSERT_EQ(::mkfifo((d / "fifo.tar.gz").c_str(), 0600), 0);
  auto fifo = Inflate(d / "fifo.tar.gz", scratch.path(), nullptr);
  ASSERT_FALSE(fifo.ok());
  EXPECT_NE(fifo.status().message().find("FIFO"), std::string::npos) << fifo.status().message();
  EXPECT_TRUE(std::filesystem::is_empty(scratch.path()));
}

}  // namespace
}  // namespace imagepack::internal
