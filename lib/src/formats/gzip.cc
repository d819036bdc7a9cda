#include "formats/gzip.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "imagepack/files.h"
#include "fd_io.h"

namespace fs = std::filesystem;

namespace imagepack::internal {

Result<int> InflateToScratch(const std::string& in, const std::string& dir, const CancelFlag* cancel,
                             uint64_t budget) {
  auto in_fd = OpenRegularFile(in);
  if (!in_fd.ok()) return in_fd.status();
  gzFile g = gzdopen(*in_fd, "rb");
  if (!g) {
    ::close(*in_fd);
    return Status::IOError("cannot open " + in);
  }
  gzbuffer(g, 1 << 20);
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {  // file systems without O_TMPFILE: a private name, unlinked at once
    std::string name = (fs::path(dir) / ".imagepack-gunzip-XXXXXX").string();
    fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd >= 0) ::unlink(name.c_str());
  }
  if (fd < 0) {
    const int e = errno;
    gzclose(g);
    return Status::IOError("cannot create a scratch file in " + dir + " to inflate " + in + ": " + std::strerror(e));
  }
  std::vector<char> buf(1 << 20);
  Status st;
  uint64_t total = 0;
  for (;;) {
    if (cancel && cancel->load()) {
      st = Status::Cancelled("interrupted while inflating " + in);
      break;
    }
    const int n = gzread(g, buf.data(), static_cast<unsigned>(buf.size()));
    if (n < 0) {
      int err = 0;
      st = Status::Corruption(in + ": gzip data is damaged (" + gzerror(g, &err) + ")");
      break;
    }
    if (n == 0) {
      // A cut stream reads as a short end: zlib keeps the error aside.
      int err = Z_OK;
      const char* msg = gzerror(g, &err);
      if (err != Z_OK || !gzeof(g))
        st = Status::Corruption(in + ": gzip stream ends early (" + std::string(err != Z_OK ? msg : "no end") + ")");
      break;
    }
    total += static_cast<uint64_t>(n);
    if (total > budget) {
      st = Status::InvalidArgument(in + ": inflates past " + std::to_string(budget) +
                                   " bytes (the gzip budget of one shard)");
      break;
    }
    st = WriteAll(fd, buf.data(), static_cast<size_t>(n), in + " (inflated)");
    if (!st.ok()) break;
  }
  gzclose(g);
  if (!st.ok()) {
    ::close(fd);
    return st;
  }
  return fd;
}

}  // namespace imagepack::internal
