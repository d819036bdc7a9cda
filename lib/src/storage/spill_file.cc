#include "storage/spill_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "storage/fd_io.h"

namespace fs = std::filesystem;

namespace imagepack::internal {

Result<int> CreateScratchFile(const std::string& dir) {
  const std::string where = dir.empty() ? "." : dir;
  int fd = ::open(where.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::string name = (fs::path(where) / ".imagepack-spill-XXXXXX").string();
    fd = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd >= 0) ::unlink(name.c_str());
  }
  if (fd < 0) return Status::FromErrno("cannot create a scratch file in " + where, errno);
  return fd;
}

SpillFile::SpillFile(int fd, std::string dir, size_t buffer_bytes)
    : fd_(fd), dir_(std::move(dir)), cap_(std::max<size_t>(buffer_bytes, 4096)) {}

SpillFile::~SpillFile() { ::close(fd_); }

Result<std::unique_ptr<SpillFile>> SpillFile::Create(const std::string& dir, size_t buffer_bytes) {
  auto fd = CreateScratchFile(dir);
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<SpillFile>(new SpillFile(fd.value(), dir, buffer_bytes));
}

Status SpillFile::Append(const void* data, size_t size) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  if (buf_.size() + size > cap_) IMAGEPACK_RETURN_IF_ERROR(Flush());
  if (size >= cap_) {
    IMAGEPACK_RETURN_IF_ERROR(PwriteAll(fd_, p, size, written_, "a scratch file in " + dir_));
    written_ += size;
    return Status::Ok();
  }
  if (buf_.capacity() < cap_) buf_.reserve(cap_);
  buf_.insert(buf_.end(), p, p + size);
  return Status::Ok();
}

Status SpillFile::Flush() {
  if (buf_.empty()) return Status::Ok();
  IMAGEPACK_RETURN_IF_ERROR(PwriteAll(fd_, buf_.data(), buf_.size(), written_, "a scratch file in " + dir_));
  written_ += buf_.size();
  buf_.clear();
  return Status::Ok();
}

Status SpillFile::ReadAt(uint64_t offset, size_t size, void* out) const {
  const ssize_t got = PreadFull(fd_, out, size, offset);
  if (got < 0) return Status::FromErrno("read a scratch file in " + dir_, errno);
  if (static_cast<size_t>(got) != size) return Status::IOError("a scratch file in " + dir_ + " is shorter than written");
  return Status::Ok();
}

}  // namespace imagepack::internal
