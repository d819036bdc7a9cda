// Reading items and fields that sit inside other containers (WebDataset
// shards, folder2lmdb LMDBs): the open descriptors of DatasetSource's
// archives and pread of a byte range. Part of the sources module
// (sources.h).
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <cstring>

#include "sources.h"

namespace imagepack::internal {

ScratchFiles::~ScratchFiles() {
  for (int fd : fds) ::close(fd);
  std::error_code ec;
  if (!dir.empty()) std::filesystem::remove_all(dir, ec);
}

Status ReadExact(int fd, void* buf, size_t n, uint64_t at, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(at + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::IOError(path + ": read failed: " + std::strerror(errno));
    if (r == 0) return Status::Corruption(path + ": ends inside a member at byte " + std::to_string(at + done));
    done += static_cast<size_t>(r);
  }
  return Status::Ok();
}

Status OpenArchives(DatasetSource* s) {
  if (!s->scratch) s->scratch = std::make_shared<ScratchFiles>();
  for (const auto& file : s->archives) {
    auto fd = OpenRegularFile(file);
    if (!fd.ok()) return fd.status();
    s->scratch->fds.push_back(*fd);
  }
  return Status::Ok();
}

namespace {

// `size` bytes at `offset` of archive `archive`, after `headroom` free bytes.
Result<std::vector<uint8_t>> ReadArchiveRange(const DatasetSource& s, int archive, uint64_t offset, uint64_t size,
                                              size_t headroom, const std::string& shown) {
  std::vector<uint8_t> out(headroom + size);
  IMAGEPACK_RETURN_IF_ERROR(ReadExact(s.scratch->fds.at(size_t(archive)), out.data() + headroom, size, offset, shown));
  return out;
}

}  // namespace

Result<std::vector<uint8_t>> ReadFieldFile(const DatasetSource& s, const SourceField& f) {
  if (f.archive < 0) return ReadFile(f.file);
  return ReadArchiveRange(s, f.archive, f.offset, f.size, 0, f.file);
}

Result<std::vector<uint8_t>> ReadArchiveItem(const DatasetSource& s, const SourceItem& item, size_t headroom) {
  return ReadArchiveRange(s, item.archive, item.offset, item.size, headroom, s.archives.at(size_t(item.archive)));
}

}  // namespace imagepack::internal
