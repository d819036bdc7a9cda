#include "shared_copy.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "imagepack/files.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

constexpr char kPrefix[] = "imagepack-copy-";

// An fd closed on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int release() {
    int f = fd;
    fd = -1;
    return f;
  }
};

int64_t MemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return -1;
}

std::string Gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  return buf;
}

// Copies `size` bytes of `src_fd` into `dst_fd` with large reads from
// several threads (the source is read at the device's speed with enough
// requests in flight), each through its own 8 MB buffer: writing through
// a mapping instead would count the whole copy in this process's peak RSS.
Status ParallelCopy(int src_fd, int dst_fd, uint64_t size, const std::string& src, const std::string& dst) {
  if (size == 0) return Status::Ok();
  // Reserves every page now: a full tmpfs fails here, not in the copy.
  if (int e = ::posix_fallocate(dst_fd, 0, static_cast<off_t>(size)); e != 0)
    return Status::FromErrno("in_ram: reserve " + std::to_string(size) + " bytes for " + dst, e);
  ::posix_fadvise(src_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  constexpr uint64_t kChunk = 8 << 20;
  const uint64_t chunks = (size + kChunk - 1) / kChunk;
  std::atomic<uint64_t> next{0};
  std::atomic<int> error{0};
  auto work = [&] {
    std::vector<uint8_t> buf(kChunk);
    for (uint64_t c; !error.load() && (c = next.fetch_add(1)) < chunks;) {
      const uint64_t at = c * kChunk, n = std::min(kChunk, size - at);
      const ssize_t got = PreadFull(src_fd, buf.data(), n, at);
      // A short read: the file shrank while being copied.
      if (got != static_cast<ssize_t>(n)) {
        error = got < 0 ? errno : EIO;
        break;
      }
      if (!PwriteAll(dst_fd, buf.data(), n, at, dst).ok()) error = errno ? errno : EIO;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  if (error) return Status::FromErrno("copy " + src + " into " + dst, error.load());
  return Status::Ok();
}

// Removes copies no process holds (left by a crash, or of a file that has
// changed since), so shared memory does not fill with orphans. Under the
// folder's lock: nobody is between opening a copy and taking its flock.
void RemoveOrphans(const fs::path& dir, const std::string& keep) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0 || e.path().string() == keep) continue;
    // Copies are made under the lock: a temporary seen now is a dead one's.
    if (name.find(".db.tmp") != std::string::npos) {
      ::unlink(e.path().c_str());
      continue;
    }
    if (e.path().extension() != ".db") continue;
    Fd df(::open(e.path().c_str(), O_RDONLY | O_CLOEXEC));
    if (df.fd >= 0 && ::flock(df.fd, LOCK_EX | LOCK_NB) == 0) ::unlink(e.path().c_str());
  }
}

}  // namespace

Status SharedCopy::Lock() {
  if (size_ == 0) return Status::Ok();
  locked_ = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
  if (locked_ == MAP_FAILED) {
    locked_ = nullptr;
    return Status::FromErrno("mmap " + path_, errno);
  }
  if (::mlock(locked_, size_) != 0)
    return Status::FromErrno("in_ram: cannot lock " + Gb(double(size_)) + " of " + path_ +
                                 " in memory (raise the memlock limit, ulimit -l, or run without locking)",
                             errno);
  return Status::Ok();
}

SharedCopy::~SharedCopy() {
  if (locked_) ::munmap(locked_, size_);
  if (fd_ < 0) return;
  // Under the folder's lock, so no process is between opening the copy and
  // taking its shared flock: if no other holder is left, the copy goes.
  Fd lf(::open(lock_path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (lf.fd >= 0) ::flock(lf.fd, LOCK_EX);
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) ::unlink(path_.c_str());
  ::close(fd_);
}

Result<std::unique_ptr<SharedCopy>> SharedCopy::Acquire(const std::string& source, const std::string& dir_in) {
  std::string dir = dir_in;
  if (dir.empty()) {
    const char* env = std::getenv("IMAGEPACK_SHM_DIR");
    dir = env && *env ? env : "/dev/shm";
  }
  Fd src(::open(source.c_str(), O_RDONLY | O_CLOEXEC));
  if (src.fd < 0) return Status::FromErrno(source, errno);
  struct stat st;
  if (::fstat(src.fd, &st) != 0) return Status::FromErrno(source, errno);
  char name[160];
  std::snprintf(name, sizeof name, "%s%llx-%llx-%llx-%lld.%09ld.db", kPrefix,
                static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(st.st_ino),
                static_cast<unsigned long long>(st.st_size), static_cast<long long>(st.st_mtim.tv_sec),
                st.st_mtim.tv_nsec);
  std::unique_ptr<SharedCopy> copy(new SharedCopy);
  copy->path_ = (fs::path(dir) / name).string();
  // One lock for the folder, held while a copy is found or made and while
  // one is let go (copies are made one at a time: they share the device).
  copy->lock_path_ = (fs::path(dir) / (std::string(kPrefix) + "folder.lock")).string();
  copy->size_ = static_cast<uint64_t>(st.st_size);
  Fd lf(::open(copy->lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
  if (lf.fd < 0) return Status::FromErrno("in_ram: cannot create " + copy->lock_path_, errno);
  if (::flock(lf.fd, LOCK_EX) != 0) return Status::FromErrno("lock " + copy->lock_path_, errno);

  Fd db(::open(copy->path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (db.fd < 0) {
    RemoveOrphans(dir, copy->path_);
    struct statvfs vfs;
    if (::statvfs(dir.c_str(), &vfs) != 0) return Status::FromErrno("in_ram: " + dir, errno);
    const double room = double(vfs.f_bavail) * double(vfs.f_frsize);
    const int64_t avail = MemAvailableBytes();
    const double need = double(copy->size_);
    if (need > room || (avail >= 0 && need > double(avail)))
      return Status::InvalidArgument(
          "in_ram: " + source + " is " + Gb(need) + ", more than this machine can hold in RAM (" + Gb(room) +
          " free in " + dir + ", " + (avail >= 0 ? Gb(double(avail)) : std::string("?")) +
          " available): read it from its file instead (without in_ram; set IMAGEPACK_SHM_DIR for a larger "
          "shared-memory folder)");
    const std::string tmp = copy->path_ + ".tmp" + std::to_string(::getpid());
    Fd out(::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (out.fd < 0) return Status::FromErrno("in_ram: cannot create " + tmp, errno);
    Status s = ParallelCopy(src.fd, out.fd, copy->size_, source, tmp);
    if (s.ok() && ::rename(tmp.c_str(), copy->path_.c_str()) != 0) s = Status::FromErrno("rename " + tmp, errno);
    if (!s.ok()) {
      ::unlink(tmp.c_str());
      return s;
    }
    db.fd = ::open(copy->path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (db.fd < 0) return Status::FromErrno(copy->path_, errno);
  }
  struct stat cst;
  if (::fstat(db.fd, &cst) != 0 || static_cast<uint64_t>(cst.st_size) != copy->size_)
    return Status::Corruption("in_ram: shared copy " + copy->path_ + " is not the size of " + source +
                              "; remove it and retry");
  if (::flock(db.fd, LOCK_SH) != 0) return Status::FromErrno("lock " + copy->path_, errno);
  copy->fd_ = db.release();
  return copy;
}

}  // namespace imagepack::internal
