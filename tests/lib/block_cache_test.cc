// The object-storage block cache shared by the processes of a node: two
// caches of one object whose download claims interleave must not wait for
// each other. Each DiskCache opens the folder's lock file for itself, so
// two of them in one process hold their OFD claims as two processes do.
#include "storage/block_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "imagepack/byte_source.h"
#include "testutil.h"

namespace imagepack::internal {
namespace {

using testing::TempDir;

// Cache X fetches blocks 0 and 1 while another "process" (a second
// DiskCache, Z) holds the claim on block 1 and then waits for block 0: the
// interleaving that left two bench_loader processes blocked on each other's
// claims for ever (each holding one block and waiting for the other's).
// X must download its own block and let go of its claim before it waits
// for Z's; it then serves both blocks with the file's bytes.
TEST(BlockCache, ProcessesWhoseClaimsInterleaveDoNotWaitForEachOther) {
  TempDir dir;
  std::vector<uint8_t> bytes(4 * 4096);
  std::mt19937 rng(5);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  const std::string path = dir / "object";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  auto src = OpenByteSource(path);
  ASSERT_OK(src);
  auto x_disk = DiskCache::Open(dir / "cache", "object-1", 1 << 30);
  auto z = DiskCache::Open(dir / "cache", "object-1", 1 << 30);
  ASSERT_OK(x_disk);
  ASSERT_OK(z);
  ASSERT_TRUE((*z)->TryClaim(1));
  BlockCache x(src->get(), bytes.size(), 4096, 16, std::move(x_disk.value()));
  std::thread fetch([&] { x.Fetch({0, 1}); });
  // Z now waits for block 0 as a process would: X must have written it and
  // let go of its claim while Z still holds block 1.
  bool block0 = false;
  for (auto t0 = std::chrono::steady_clock::now(); std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20);) {
    if ((*z)->Load(0, 4096)) {
      block0 = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(block0) << "X held its claim on block 0 while waiting for block 1";
  if (block0) (*z)->WaitClaim(0);  // returns: X holds no claim on it (else it would block for ever)
  (*z)->Release(1);                // Z's download "died": X fetches block 1 itself
  fetch.join();
  for (uint64_t b : {0, 1}) {
    auto got = x.Get(b);
    ASSERT_OK(got);
    ASSERT_EQ(got.value()->size(), 4096u);
    EXPECT_EQ(std::vector<uint8_t>(got.value()->data(), got.value()->data() + 4096),
              std::vector<uint8_t>(bytes.begin() + b * 4096, bytes.begin() + (b + 1) * 4096))
        << "block " << b;
  }
}

}  // namespace
}  // namespace imagepack::internal
