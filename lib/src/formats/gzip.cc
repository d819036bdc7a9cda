#include "formats/gzip.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "storage/fd_io.h"
#include "imagepack/files.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

constexpr size_t kChunk = 1 << 20;

int ScratchFile(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  // File systems without O_TMPFILE: a temporary of ours, unlinked at once.
  auto tmp = CreateTempFor((fs::path(dir) / "imagepack-gunzip").string(), 0600);
  if (!tmp.ok()) return -1;
  ::unlink(tmp->path.c_str());
  return tmp->fd;
}

}  // namespace

Result<int> InflateToScratch(const ByteSource& in, const std::string& dir, const CancelFlag* cancel,
                             uint64_t budget) {
  const std::string name = in.Describe();
  const int fd = ScratchFile(dir);
  if (fd < 0)
    return Status::IOError("cannot create a scratch file in " + dir + " to inflate " + name + ": " +
                           std::strerror(errno));
  const uint64_t size = in.size();
  std::vector<uint8_t> src(kChunk), dst(kChunk);
  uint64_t read_at = 0, total = 0;
  z_stream z = {};
  bool gzip = true, in_member = false;
  Status st;
  // Refills the input when it is used up; false at the end of `in`.
  auto refill = [&]() -> bool {
    if (z.avail_in > 0) return true;
    if (read_at >= size) return false;
    const uint64_t n = std::min<uint64_t>(kChunk, size - read_at);
    st = in.ReadAt(read_at, n, src.data());
    if (!st.ok()) return false;
    read_at += n;
    z.next_in = src.data();
    z.avail_in = static_cast<uInt>(n);
    return true;
  };
  auto emit = [&](const uint8_t* p, size_t n) {
    total += n;
    if (total > budget)
      return Status::InvalidArgument(name + ": inflates past " + std::to_string(budget) +
                                     " bytes (the gzip budget of one shard)");
    return WriteAll(fd, p, n, name + " (inflated)");
  };
  if (inflateInit2(&z, 15 + 16) != Z_OK) {
    ::close(fd);
    return Status::IOError(name + ": cannot start zlib");
  }
  if (refill() && !(z.avail_in >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b)) gzip = false;
  while (st.ok()) {
    if (cancel && cancel->load()) {
      st = Status::Cancelled("interrupted while inflating " + name);
      break;
    }
    if (!refill()) {
      if (st.ok() && in_member) st = Status::Corruption(name + ": gzip stream ends early (no end)");
      break;
    }
    if (!gzip) {  // not gzip: the bytes as they are
      st = emit(z.next_in, z.avail_in);
      z.avail_in = 0;
      continue;
    }
    if (!in_member) {
      // Another member follows only where the gzip magic does; anything
      // else after a member is trailing data, ignored as gzip does.
      if (z.avail_in < 2 && read_at < size) {
        std::memmove(src.data(), z.next_in, z.avail_in);
        const uint64_t n = std::min<uint64_t>(kChunk - z.avail_in, size - read_at);
        st = in.ReadAt(read_at, n, src.data() + z.avail_in);
        if (!st.ok()) break;
        read_at += n;
        z.next_in = src.data();
        z.avail_in += static_cast<uInt>(n);
      }
      if (!(z.avail_in >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b)) break;
      in_member = true;
    }
    z.next_out = dst.data();
    z.avail_out = static_cast<uInt>(dst.size());
    const int rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      st = Status::Corruption(name + ": gzip data is damaged (" + (z.msg ? z.msg : "inflate failed") + ")");
      break;
    }
    st = emit(dst.data(), dst.size() - z.avail_out);
    if (rc == Z_STREAM_END) {
      in_member = false;
      inflateReset(&z);
    }
  }
  inflateEnd(&z);
  if (!st.ok()) {
    ::close(fd);
    return st;
  }
  return fd;
}

}  // namespace imagepack::internal
