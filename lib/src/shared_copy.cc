#include "shared_copy.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "imagepack/byte_source.h"
#include "imagepack/files.h"
#include "fd_io.h"

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

// Copies `src` (a file: preads from 4 threads; an object: 8 MB ranged
// GETs, 8 in flight) into `dst_fd`, its room reserved first: a full tmpfs
// fails here, not in the copy.
Status CopyFromSource(const ByteSource& src, int dst_fd, uint64_t size, const std::string& dst) {
  if (size == 0) return Status::Ok();
  if (int e = ::posix_fallocate(dst_fd, 0, static_cast<off_t>(size)); e != 0)
    return Status::FromErrno("in_ram: reserve " + std::to_string(size) + " bytes for " + dst, e);
  Status st = CopyToFile(src, dst_fd, dst, uint64_t(8) << 20, src.remote() ? 8 : 4);
  return st.ok() ? st : st.WithContext("in_ram: copy " + src.Describe() + " into " + dst);
}

// Removes copies no process holds (left by a crash, or of a file that has
// changed since), so shared memory does not fill with orphans. Under the
// folder's lock: nobody is between opening a copy and taking its flock.
void RemoveOrphans(int dir_fd, const std::string& keep) {
  DIR* d = ::fdopendir(::dup(dir_fd));
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  for (const std::string& name : names) {
    if (name.rfind(kPrefix, 0) != 0 || name == keep) continue;
    // Copies are made under the lock: a temporary seen now is a dead one's.
    if (name.find(".db.tmp") != std::string::npos) {
      ::unlinkat(dir_fd, name.c_str(), 0);
      continue;
    }
    if (name.size() < 3 || name.compare(name.size() - 3, 3, ".db") != 0) continue;
    Fd df(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (df.fd >= 0 && ::flock(df.fd, LOCK_EX | LOCK_NB) == 0) ::unlinkat(dir_fd, name.c_str(), 0);
  }
}

void Warn(const std::string& what) { std::fprintf(stderr, "imagepack: warning: %s\n", what.c_str()); }

// Whether `fd` is a folder only this user can enter: ours, mode 0700 or
// narrower. Else says why in `why`.
bool IsPrivateDir(int fd, std::string* why) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
    *why = "not a folder";
    return false;
  }
  if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "owner uid %u, mode %04o", static_cast<unsigned>(st.st_uid),
                  static_cast<unsigned>(st.st_mode & 07777));
    *why = buf;
    return false;
  }
  return true;
}

// Opens `path` as this user's private folder, making it (mode 0700) if
// it is not there: an fd, or -1 with the reason in `why`.
int OpenPrivateDir(const std::string& path, bool make, std::string* why) {
  if (make && ::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    *why = std::strerror(errno);
    return -1;
  }
  Fd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.fd < 0) {
    *why = errno == ENOTDIR || errno == ELOOP ? "not a folder (a file or a link)" : std::strerror(errno);
    return -1;
  }
  return IsPrivateDir(fd.fd, why) ? fd.release() : -1;
}

}  // namespace

Result<PrivateDir> OpenPrivateShmDir(const std::string& root) {
  struct stat rst;
  if (::stat(root.c_str(), &rst) != 0) return Status::FromErrno("in_ram: shared-memory folder " + root, errno);
  if (!S_ISDIR(rst.st_mode)) return Status::InvalidArgument("in_ram: " + root + " is not a folder");
  const std::string base = (fs::path(root) / ("imagepack-" + std::to_string(::geteuid()))).string();
  std::string why;
  int fd = OpenPrivateDir(base, /*make=*/true, &why);
  if (fd >= 0) return PrivateDir{fd, base};
  // Someone else holds the usual name (or it is not private): another
  // folder of ours beside it, found again by every process of this user,
  // or a new one. The user's run goes on; the warning names the culprit.
  const std::string bad = base + " (" + why + ")";
  std::error_code ec;
  std::vector<std::string> ours;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string p = e.path().string();
    if (p.rfind(base + "-", 0) == 0) ours.push_back(p);
  }
  std::sort(ours.begin(), ours.end());
  for (const std::string& p : ours) {
    std::string ignored;
    if ((fd = OpenPrivateDir(p, /*make=*/false, &ignored)) >= 0) {
      Warn("in_ram: " + bad + " is not this user's private folder: not used; copies live in " + p);
      return PrivateDir{fd, p};
    }
  }
  std::string templ = base + "-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr)
    return Status::FromErrno("in_ram: " + bad + " is not this user's private folder, and no other can be made", errno);
  if ((fd = OpenPrivateDir(templ, /*make=*/false, &why)) < 0)
    return Status::IOError("in_ram: cannot use " + templ + ": " + why);
  Warn("in_ram: " + bad + " is not this user's private folder: not used; copies live in " + templ);
  return PrivateDir{fd, templ};
}

namespace {
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
  std::string root = dir_in;
  if (root.empty()) {
    const char* env = std::getenv("IMAGEPACK_SHM_DIR");
    root = env && *env ? env : "/dev/shm";
  }
  auto private_dir = OpenPrivateShmDir(root);
  if (!private_dir.ok()) return private_dir.status();
  Fd dir(private_dir->fd);
  const std::string& dir_path = private_dir->path;
  std::unique_ptr<ByteSource> bytes;  // the file, or the object (copied straight from the bucket)
  char name[200];
  uint64_t size = 0;
  if (IsObjectUrl(source)) {
    auto b = OpenByteSource(source);
    if (!b.ok()) return b.status();
    bytes = std::move(b.value());
    size = bytes->size();
    // Named by the object's identity (endpoint, bucket, key, ETag, size).
    const std::string id = bytes->identity();
    std::snprintf(name, sizeof name, "%ss3-%016llx-%llx.db", kPrefix,
                  static_cast<unsigned long long>(XXH3_64bits(id.data(), id.size())),
                  static_cast<unsigned long long>(size));
  } else {
    auto fd = OpenRegularFile(source);
    if (!fd.ok()) return fd.status();
    struct stat st;
    const int stat_rc = ::fstat(*fd, &st), stat_errno = errno;
    auto b = AdoptFileSource(*fd, source);  // the descriptor is the source's now
    if (!b.ok()) return b.status();
    if (stat_rc != 0) return Status::FromErrno(source, stat_errno);
    bytes = std::move(b.value());
    size = static_cast<uint64_t>(st.st_size);
    // The change time too: a file written in place and given back its old
    // modification time (touch -r) still gets a new ctime, which no user
    // can set.
    std::snprintf(name, sizeof name, "%s%llx-%llx-%llx-%lld.%09ld-%lld.%09ld.db", kPrefix,
                  static_cast<unsigned long long>(st.st_dev), static_cast<unsigned long long>(st.st_ino),
                  static_cast<unsigned long long>(st.st_size), static_cast<long long>(st.st_mtim.tv_sec),
                  st.st_mtim.tv_nsec, static_cast<long long>(st.st_ctim.tv_sec), st.st_ctim.tv_nsec);
  }
  std::unique_ptr<SharedCopy> copy(new SharedCopy);
  copy->path_ = (fs::path(dir_path) / name).string();
  // One lock for the folder, held while a copy is found or made and while
  // one is let go (copies are made one at a time: they share the device).
  // In this user's own folder: no other user can hold it.
  copy->lock_path_ = (fs::path(dir_path) / (std::string(kPrefix) + "folder.lock")).string();
  copy->size_ = size;
  Fd lf(::openat(dir.fd, (std::string(kPrefix) + "folder.lock").c_str(),
                 O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (lf.fd < 0) return Status::FromErrno("in_ram: cannot create " + copy->lock_path_, errno);
  if (::flock(lf.fd, LOCK_EX) != 0) return Status::FromErrno("lock " + copy->lock_path_, errno);

  Fd db(::openat(dir.fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (db.fd >= 0) {
    struct stat cst;
    if (::fstat(db.fd, &cst) != 0 || !S_ISREG(cst.st_mode) || cst.st_uid != ::geteuid() ||
        static_cast<uint64_t>(cst.st_size) != copy->size_) {
      Warn("in_ram: " + copy->path_ + " is not a copy of " + source + " (owner, type or size differ): made again");
      ::unlinkat(dir.fd, name, 0);
      ::close(db.release());
    }
  }
  if (db.fd < 0) {
    RemoveOrphans(dir.fd, name);
    struct statvfs vfs;
    if (::fstatvfs(dir.fd, &vfs) != 0) return Status::FromErrno("in_ram: " + dir_path, errno);
    const double room = double(vfs.f_bavail) * double(vfs.f_frsize);
    const int64_t avail = MemAvailableBytes();
    const double need = double(copy->size_);
    if (need > room || (avail >= 0 && need > double(avail)))
      return Status::InvalidArgument(
          "in_ram: " + source + " is " + Gb(need) + ", more than this machine can hold in RAM (" + Gb(room) +
          " free in " + root + ", " + (avail >= 0 ? Gb(double(avail)) : std::string("?")) +
          " available): read it from its file instead (without in_ram; set IMAGEPACK_SHM_DIR for a larger "
          "shared-memory folder)");
    const std::string tmp_name = std::string(name) + ".tmp" + std::to_string(::getpid());
    const std::string tmp = (fs::path(dir_path) / tmp_name).string();
    Fd out(::openat(dir.fd, tmp_name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (out.fd < 0) return Status::FromErrno("in_ram: cannot create " + tmp, errno);
    Status s = CopyFromSource(*bytes, out.fd, copy->size_, tmp);
    if (s.ok() && ::renameat(dir.fd, tmp_name.c_str(), dir.fd, name) != 0)
      s = Status::FromErrno("rename " + tmp, errno);
    if (!s.ok()) {
      ::unlinkat(dir.fd, tmp_name.c_str(), 0);
      return s;
    }
    db.fd = ::openat(dir.fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (db.fd < 0) return Status::FromErrno(copy->path_, errno);
  }
  if (::flock(db.fd, LOCK_SH) != 0) return Status::FromErrno("lock " + copy->path_, errno);
  copy->fd_ = db.release();
  return copy;
}

void SharedCopy::Discard(const std::string& why) {
  Warn("in_ram: " + path_ + " not used: " + why + "; made again");
  Fd lf(::open(lock_path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (lf.fd >= 0) ::flock(lf.fd, LOCK_EX);
  ::unlink(path_.c_str());  // holders keep their mappings; the next open copies again
}

}  // namespace imagepack::internal
