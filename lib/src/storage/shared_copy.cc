#include "storage/shared_copy.h"

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

#include "storage/fd_io.h"
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

// True when the name `name` in `dir_fd` is the file open as `fd`.
bool NameIs(int dir_fd, const char* name, int fd) {
  struct stat by_name, by_fd;
  return ::fstatat(dir_fd, name, &by_name, AT_SYMLINK_NOFOLLOW) == 0 && ::fstat(fd, &by_fd) == 0 &&
         by_name.st_dev == by_fd.st_dev && by_name.st_ino == by_fd.st_ino;
}

// Removes name `name` of `dir_fd` if it is still the file `fd`, whose
// exclusive flock the caller holds: while it does, no one else holds that
// copy, so no one can remove or replace the name in between.
void UnlinkIfStill(int dir_fd, const char* name, int fd) {
  if (NameIs(dir_fd, name, fd)) ::unlinkat(dir_fd, name, 0);
}

// Removes copies no process holds (left by a crash, or of a file that has
// changed since), so shared memory does not fill with orphans, and the
// temporaries of makers that provably died.
void RemoveOrphans(int dir_fd, const std::string& dir_path, const std::string& keep) {
  DIR* d = ::fdopendir(::dup(dir_fd));
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  for (const std::string& name : names) {
    if (name.rfind(kPrefix, 0) != 0 || name == keep) continue;
    if (name.size() < 3 || name.compare(name.size() - 3, 3, ".db") != 0) continue;
    Fd df(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (df.fd >= 0 && ::flock(df.fd, LOCK_EX | LOCK_NB) == 0) UnlinkIfStill(dir_fd, name.c_str(), df.fd);
  }
  RemoveStaleTemps(dir_path);
}

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

Result<PrivateDir> OpenPrivateUserDir(const std::string& root, const std::string& what) {
  struct stat rst;
  if (::stat(root.c_str(), &rst) != 0) return Status::FromErrno(what + (what == "in_ram" ? ": shared-memory folder " : ": folder ") + root, errno);
  if (!S_ISDIR(rst.st_mode)) return Status::InvalidArgument(what + ": " + root + " is not a folder");
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
      Warn(what + ": " + bad + " is not this user's private folder: not used; copies live in " + p);
      return PrivateDir{fd, p};
    }
  }
  std::string templ = base + "-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr)
    return Status::FromErrno(what + ": " + bad + " is not this user's private folder, and no other can be made", errno);
  if ((fd = OpenPrivateDir(templ, /*make=*/false, &why)) < 0)
    return Status::IOError(what + ": cannot use " + templ + ": " + why);
  Warn(what + ": " + bad + " is not this user's private folder: not used; copies live in " + templ);
  return PrivateDir{fd, templ};
}


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
  // The last holder removes the copy; one that is not takes no lock at all.
  // Never waits: LOCK_NB, and no folder lock.
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
    Fd dir(::open(fs::path(path_).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (dir.fd >= 0) UnlinkIfStill(dir.fd, fs::path(path_).filename().c_str(), fd_);
  }
  ::close(fd_);
}

Result<std::unique_ptr<SharedCopy>> SharedCopy::Acquire(const ByteSource& source, const std::string& shm_dir) {
  const std::string& root = shm_dir;
  auto private_dir = OpenPrivateUserDir(root, "in_ram");
  if (!private_dir.ok()) return private_dir.status();
  Fd dir(private_dir->fd);
  const std::string& dir_path = private_dir->path;
  const uint64_t size = source.size();
  // Named by the source's identity: another version of the file (or
  // object) is another copy.
  const std::string id = source.identity();
  char name[96];
  std::snprintf(name, sizeof name, "%s%016llx-%llx.db", kPrefix,
                static_cast<unsigned long long>(XXH3_64bits(id.data(), id.size())),
                static_cast<unsigned long long>(size));
  std::unique_ptr<SharedCopy> copy(new SharedCopy);
  copy->path_ = (fs::path(dir_path) / name).string();
  // One lock for the folder, held while a copy is made and put in place
  // (copies are made one at a time: they share the device), and while one
  // is discarded. In this user's own folder: no other user can hold it.
  // Destructors never take it.
  copy->lock_path_ = (fs::path(dir_path) / (std::string(kPrefix) + "folder.lock")).string();
  copy->size_ = size;
  for (int round = 0;; ++round) {
    if (round > 100) return Status::IOError("in_ram: " + copy->path_ + " keeps vanishing while it is opened");
    Fd db(::openat(dir.fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (db.fd >= 0) {
      struct stat cst;
      if (::fstat(db.fd, &cst) != 0 || !S_ISREG(cst.st_mode) || cst.st_uid != ::geteuid() ||
          static_cast<uint64_t>(cst.st_size) != copy->size_) {
        Warn("in_ram: " + copy->path_ + " is not a copy of " + source.Describe() +
             " (owner, type or size differ): made again");
        Fd lf(::openat(dir.fd, (std::string(kPrefix) + "folder.lock").c_str(),
                       O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
        if (lf.fd >= 0 && ::flock(lf.fd, LOCK_EX) == 0 && NameIs(dir.fd, name, db.fd)) ::unlinkat(dir.fd, name, 0);
        continue;
      }
      if (::flock(db.fd, LOCK_SH) != 0) return Status::FromErrno("lock " + copy->path_, errno);
      // Its last holder removed it between our open and our lock: look again.
      if (::fstat(db.fd, &cst) != 0 || cst.st_nlink == 0) continue;
      copy->fd_ = db.release();
      return copy;
    }
    Fd lf(::openat(dir.fd, (std::string(kPrefix) + "folder.lock").c_str(),
                   O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (lf.fd < 0) return Status::FromErrno("in_ram: cannot create " + copy->lock_path_, errno);
    if (::flock(lf.fd, LOCK_EX) != 0) return Status::FromErrno("lock " + copy->lock_path_, errno);
    if (::faccessat(dir.fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0) continue;  // made while we waited
    RemoveOrphans(dir.fd, dir_path, name);
    struct statvfs vfs;
    if (::fstatvfs(dir.fd, &vfs) != 0) return Status::FromErrno("in_ram: " + dir_path, errno);
    const double room = double(vfs.f_bavail) * double(vfs.f_frsize);
    const int64_t avail = MemAvailableBytes();
    const double need = double(copy->size_);
    if (need > room || (avail >= 0 && need > double(avail)))
      return Status::InvalidArgument(
          "in_ram: " + source.Describe() + " is " + Gb(need) + ", more than this machine can hold in RAM (" +
          Gb(room) + " free in " + root + ", " + (avail >= 0 ? Gb(double(avail)) : std::string("?")) +
          " available): read it from its file instead (without in_ram; set IMAGEPACK_SHM_DIR for a larger "
          "shared-memory folder)");
    auto tmp = CreateTempFor(copy->path_, 0600);
    if (!tmp.ok()) return tmp.status().WithContext("in_ram");
    Fd out(tmp->fd);
    Status s = CopyFromSource(source, out.fd, copy->size_, tmp->path);
    if (s.ok() && ::rename(tmp->path.c_str(), copy->path_.c_str()) != 0)
      s = Status::FromErrno("rename " + tmp->path, errno);
    if (!s.ok()) {
      ::unlink(tmp->path.c_str());
      return s;
    }
    // Held before the folder lock goes, so that no one removes it as an
    // orphan first.
    Fd made(::openat(dir.fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (made.fd < 0) return Status::FromErrno(copy->path_, errno);
    if (::flock(made.fd, LOCK_SH) != 0) return Status::FromErrno("lock " + copy->path_, errno);
    copy->fd_ = made.release();
    return copy;
  }
}

void SharedCopy::Discard(const std::string& why) {
  Warn("in_ram: " + path_ + " not used: " + why + "; made again");
  Fd lf(::open(lock_path_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (lf.fd >= 0) ::flock(lf.fd, LOCK_EX);
  Fd dir(::open(fs::path(path_).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  // Holders keep their mappings; the next Acquire copies again.
  if (dir.fd >= 0 && NameIs(dir.fd, fs::path(path_).filename().c_str(), fd_))
    ::unlinkat(dir.fd, fs::path(path_).filename().c_str(), 0);
}

}  // namespace imagepack::internal
