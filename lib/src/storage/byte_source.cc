#include "imagepack/byte_source.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <atomic>
#include <cstdlib>
#include <cerrno>
#include <mutex>
#include <thread>

#include "storage/descriptor_source.h"
#include "storage/fd_io.h"
#include "imagepack/files.h"

namespace imagepack {

Result<const uint8_t*> ByteSource::Map() const {
  return Status::NotSupported(Describe() + ": cannot be mapped into memory (a remote file is read by ranges)");
}

Status ByteSource::View(uint64_t offset, uint64_t n, std::shared_ptr<const void>* hold,
                        std::vector<uint8_t>* scratch, const uint8_t** data) const {
  hold->reset();
  scratch->resize(n);
  IMAGEPACK_RETURN_IF_ERROR(ReadAt(offset, n, scratch->data()));
  *data = scratch->data();
  return Status::Ok();
}

Status ByteSource::ReadRanges(const std::vector<ByteRange>& ranges, const std::vector<uint8_t*>& outs) const {
  for (size_t i = 0; i < ranges.size(); ++i)
    IMAGEPACK_RETURN_IF_ERROR(ReadAt(ranges[i].offset, ranges[i].size, outs[i]));
  return Status::Ok();
}

namespace internal {

Status DescriptorSource::ReadAt(uint64_t offset, uint64_t n, uint8_t* out) const {
  if (offset > size() || n > size() - offset)
    return Status::Corruption(path_ + ": read of " + std::to_string(n) + " bytes at " + std::to_string(offset) +
                              " past the end (" + std::to_string(size()) + " bytes)");
  const ssize_t got = PreadFull(fd_, out, n, offset);
  if (got < 0) return Status::FromErrno(path_, errno);
  if (static_cast<uint64_t>(got) != n)
    return Status::Corruption(path_ + ": ends at byte " + std::to_string(offset + uint64_t(got)) +
                              ", inside a read of " + std::to_string(n) + " bytes at " + std::to_string(offset) +
                              " (the file shrank while read)");
  return Status::Ok();
}

std::string DescriptorSource::identity() const {
  return "file:" + std::to_string(st_.st_dev) + ":" + std::to_string(st_.st_ino) + ":" +
         std::to_string(st_.st_size) + ":" + std::to_string(st_.st_mtim.tv_sec) + "." +
         std::to_string(st_.st_mtim.tv_nsec) + ":" + std::to_string(st_.st_ctim.tv_sec) + "." +
         std::to_string(st_.st_ctim.tv_nsec);
}

void DescriptorSource::Advise(Access access) const {
  ::posix_fadvise(fd_, 0, 0,
                  access == Access::kRandom       ? POSIX_FADV_RANDOM
                  : access == Access::kSequential ? POSIX_FADV_SEQUENTIAL
                                                  : POSIX_FADV_NORMAL);
}

uint64_t DescriptorSource::CachedBytes() const {
  if (size() == 0) return 0;
  // A mapping of its own: mincore() of a Map()'s would need it made first.
  void* m = ::mmap(nullptr, size(), PROT_READ, MAP_SHARED, fd_, 0);
  if (m == MAP_FAILED) return 0;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((size() + page - 1) / page);
  uint64_t cached = 0;
  if (::mincore(m, size(), in.data()) == 0)
    for (unsigned char c : in) cached += (c & 1) * page;
  ::munmap(m, size());
  return std::min(cached, size());
}

}  // namespace internal

namespace {

class FileByteSource : public internal::DescriptorSource {
 public:
  FileByteSource(std::string path, int fd, const struct stat& st) : DescriptorSource(fd, std::move(path), st) {}
  ~FileByteSource() override {
    if (map_ != MAP_FAILED) ::munmap(map_, size());
    ::close(fd_);
  }
  Result<const uint8_t*> Map() const override {
    std::call_once(map_once_, [&] {
      if (size() == 0) return;  // nothing to map; Map() answers a non-null empty range
      map_ = ::mmap(nullptr, size(), PROT_READ, MAP_SHARED, fd_, 0);
      if (map_ == MAP_FAILED) map_errno_ = errno;
    });
    if (size() == 0) return reinterpret_cast<const uint8_t*>("");
    if (map_ == MAP_FAILED) return Status::FromErrno("mmap " + path_, map_errno_);
    return static_cast<const uint8_t*>(map_);
  }

 private:
  mutable std::once_flag map_once_;
  mutable void* map_ = MAP_FAILED;
  mutable int map_errno_ = 0;
};

}  // namespace

Result<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path) {
  auto fd = OpenRegularFile(path);  // a FIFO or device is refused before any read
  if (!fd.ok()) return fd.status();
  return AdoptFileSource(*fd, path);
}

Result<std::unique_ptr<ByteSource>> AdoptFileSource(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::FromErrno(path, e);
  }
  return std::unique_ptr<ByteSource>(new FileByteSource(path, fd, st));
}

Status CopyToFile(const ByteSource& src, int fd, const std::string& dst, uint64_t chunk, int workers) {
  const uint64_t size = src.size();
  if (size == 0) return Status::Ok();
  chunk = std::max<uint64_t>(chunk, 1);
  src.Advise(ByteSource::Access::kSequential);
  const uint64_t chunks = (size + chunk - 1) / chunk;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first;
  // Each worker reads a chunk and writes it where it belongs: reads stay
  // in flight while others write (through its own buffer: a mapping of
  // the destination would count the whole copy in the peak RSS).
  auto work = [&] {
    std::vector<uint8_t> buf;
    for (uint64_t c; !failed.load() && (c = next.fetch_add(1)) < chunks;) {
      const uint64_t at = c * chunk, n = std::min(chunk, size - at);
      buf.resize(n);
      Status st = src.ReadAt(at, n, buf.data());
      if (st.ok()) st = PwriteAll(fd, buf.data(), n, at, dst);
      if (!st.ok()) {
        std::lock_guard<std::mutex> g(mu);
        if (!failed.exchange(true)) first = st;
      }
    }
  };
  std::vector<std::thread> threads;
  const uint64_t n_threads = std::min<uint64_t>(std::max(workers, 1), chunks);
  for (uint64_t t = 1; t < n_threads; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  src.Advise(ByteSource::Access::kNormal);
  return first;
}

}  // namespace imagepack
