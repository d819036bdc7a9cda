#include "imagepack/files.h"
#include "storage/fd_io.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

namespace fs = std::filesystem;

namespace imagepack {
namespace {

constexpr const char* kTmpTag = ".ipk-tmp.";

// This host's name with '.' (the name's field separator) made '_'.
const std::string& HostName() {
  static const std::string host = [] {
    char buf[256] = {0};
    if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return std::string("host");
    std::string h(buf);
    std::replace(h.begin(), h.end(), '.', '_');
    return h;
  }();
  return host;
}

// This kernel boot and PID namespace: the first 8 hex digits of the boot
// id, and where the process is not in the initial PID namespace, "n" and
// that namespace's inode in hex. A PID means something only where this
// matches.
const std::string& BootName() {
  static const std::string boot = [] {
    std::string id;
    if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
      char buf[64] = {0};
      if (std::fgets(buf, sizeof buf, f)) id = buf;
      std::fclose(f);
    }
    id.erase(std::remove(id.begin(), id.end(), '-'), id.end());
    id = id.substr(0, 8);
    if (id.size() != 8 || id.find_first_not_of("0123456789abcdef") != std::string::npos) id = "noboot00";
    struct stat ns;
    constexpr ino_t kInitPidNs = 0xEFFFFFFC;  // PROC_PID_INIT_INO
    if (::stat("/proc/self/ns/pid", &ns) == 0 && ns.st_ino != kInitPidNs) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "n%llx", static_cast<unsigned long long>(ns.st_ino));
      id += buf;
    }
    return id;
  }();
  return boot;
}

bool IsTempName(const std::string& name) {
  return !name.empty() && name[0] == '.' && name.find(kTmpTag) != std::string::npos;
}

}  // namespace

Status WriteAll(int fd, const void* data, size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("write " + path, errno);
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status PwriteAll(int fd, const void* data, size_t size, uint64_t offset, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, p + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("write " + path, errno);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

ssize_t PreadFull(int fd, void* data, size_t size, uint64_t offset) {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, p + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;  // end of file
    done += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

std::string LowerAscii(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool HasImageExtension(const std::string& path) {
  static const std::set<std::string> kExt = {".jpg", ".jpeg", ".jpe", ".png", ".gif",
                                             ".bmp", ".tif",  ".tiff", ".webp", ".ppm",
                                             ".pgm", ".pbm",  ".pnm"};
  return kExt.count(LowerAscii(fs::path(path).extension().string())) > 0;
}

namespace {

// Depth first, each folder's entries in the order that makes the whole
// listing sorted by path, so every machine lists a tree the same way
// whatever order readdir returns.
Status Walk(const fs::path& dir, const std::string& rel, std::set<std::pair<dev_t, ino_t>>& seen,
            const std::function<Status(std::string, bool)>& file, std::vector<std::string>* problems) {
  std::error_code ec;
  struct Entry {
    std::string key, name;
    bool dir;
    struct stat st;
  };
  std::vector<Entry> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    Entry e;
    e.name = it->path().filename().string();
    if (::stat((dir / e.name).c_str(), &e.st) != 0) {
      problems->push_back((rel.empty() ? e.name : rel + "/" + e.name) + ": " + std::strerror(errno) +
                          " (broken symlink?)");
      continue;
    }
    e.dir = S_ISDIR(e.st.st_mode);
    if (!e.dir && !S_ISREG(e.st.st_mode)) continue;
    e.key = e.dir ? e.name + "/" : e.name;
    entries.push_back(std::move(e));
  }
  if (ec) {
    problems->push_back((rel.empty() ? "." : rel) + ": cannot list directory: " + ec.message());
    return Status::Ok();
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.key < b.key; });
  for (Entry& e : entries) {
    std::string child_rel = rel.empty() ? e.name : rel + "/" + e.name;
    if (e.dir) {
      if (!seen.insert({e.st.st_dev, e.st.st_ino}).second) {
        problems->push_back(child_rel + ": directory already visited (symlink loop or alias), not entered");
        continue;
      }
      IMAGEPACK_RETURN_IF_ERROR(Walk(dir / e.name, child_rel, seen, file, problems));
    } else if (!IsTempName(e.name)) {
      const bool image = HasImageExtension(e.name);
      IMAGEPACK_RETURN_IF_ERROR(file(std::move(child_rel), image));
    }
  }
  return Status::Ok();
}

}  // namespace

Status WalkTree(const std::string& root, const std::function<Status(std::string rel, bool image)>& file,
                std::vector<std::string>* problems) {
  struct stat st;
  if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::NotFound("source directory " + root + " does not exist or is not a directory");
  std::set<std::pair<dev_t, ino_t>> seen{{st.st_dev, st.st_ino}};
  return Walk(fs::path(root), "", seen, file, problems);
}

Result<TreeListing> ListTree(const std::string& root) {
  TreeListing out;
  IMAGEPACK_RETURN_IF_ERROR(WalkTree(
      root,
      [&](std::string rel, bool image) {
        (image ? out.images : out.ignored).push_back(std::move(rel));
        return Status::Ok();
      },
      &out.problems));
  return out;
}

Result<int> OpenRegularFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Status::FromErrno(path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::FromErrno(path, e);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    return Status::InvalidArgument(path + ": is " + std::string(what) + ", not a regular file; refusing to read it");
  }
  // Reads block normally from here on (O_NONBLOCK means nothing for a
  // regular file, but keep the descriptor plain for whoever takes it).
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

Result<std::vector<uint8_t>> ReadFile(const std::string& path, size_t headroom, uint64_t max_bytes) {
  auto opened = OpenRegularFile(path);
  if (!opened.ok()) return opened.status();
  const int fd = *opened;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status::FromErrno(path, e);
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return Status::InvalidArgument(path + ": " + std::to_string(st.st_size) + " bytes, over the budget of " +
                                   std::to_string(max_bytes) + " for one file");
  }
  // Read until EOF rather than trusting st_size: the file may be changing.
  // One byte of room past st_size: a regular file read short of what was
  // asked is at its end, so an unchanged file takes one read(), not a
  // second one to see EOF.
  std::vector<uint8_t> buf(headroom + static_cast<size_t>(st.st_size) + 1);
  size_t used = headroom;
  uint8_t probe[1 << 14];
  while (true) {
    uint8_t* dst = used < buf.size() ? buf.data() + used : probe;
    size_t room = used < buf.size() ? buf.size() - used : sizeof(probe);
    ssize_t n = ::read(fd, dst, room);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return Status::FromErrno("read " + path, e);
    }
    if (n == 0) break;
    if (dst == probe) buf.insert(buf.end(), probe, probe + n);
    used += static_cast<size_t>(n);
    if (used - headroom > max_bytes) {  // grew while being read
      ::close(fd);
      return Status::InvalidArgument(path + ": grew past the budget of " + std::to_string(max_bytes) +
                                     " bytes for one file while being read");
    }
    if (S_ISREG(st.st_mode) && static_cast<size_t>(n) < room && used == headroom + static_cast<size_t>(st.st_size))
      break;
  }
  ::close(fd);
  buf.resize(used);
  return buf;
}

std::string TempTag() {
  return std::string(kTmpTag + 1) + std::to_string(::geteuid()) + "." + HostName() + "." + BootName() + "." +
         std::to_string(::getpid());
}

bool ParseTempOwner(const std::string& name, TempOwner* out) {
  const size_t at = name.rfind(kTmpTag);
  if (at == std::string::npos) return false;
  std::vector<std::string> parts;
  for (size_t from = at + std::strlen(kTmpTag);;) {
    const size_t dot = name.find('.', from);
    parts.push_back(name.substr(from, dot == std::string::npos ? std::string::npos : dot - from));
    if (dot == std::string::npos) break;
    from = dot + 1;
  }
  if (parts.size() < 4 || parts.size() > 5) return false;
  auto number = [](const std::string& t, long long* v) {
    if (t.empty() || t.size() > 18 || t.find_first_not_of("0123456789") != std::string::npos) return false;
    *v = std::stoll(t);
    return true;
  };
  long long uid = 0, pid = 0;
  if (!number(parts[0], &uid) || !number(parts[3], &pid) || parts[1].empty() || parts[2].empty()) return false;
  out->uid = static_cast<uid_t>(uid);
  out->host = parts[1];
  out->boot = parts[2];
  out->pid = static_cast<pid_t>(pid);
  return true;
}

bool IsProvablyDeadTemp(const std::string& name, uid_t file_owner) {
  TempOwner o;
  if (!ParseTempOwner(name, &o)) return false;
  if (o.uid != ::geteuid() || file_owner != ::geteuid()) return false;  // another user's: theirs to remove
  if (o.host != HostName() || o.boot != BootName()) return false;       // its PID means nothing here
  if (o.pid <= 0 || o.pid == ::getpid()) return false;
  return ::kill(o.pid, 0) != 0 && errno == ESRCH;
}

std::string TempPathFor(const std::string& path) {
  fs::path p(path);
  return (p.parent_path() / ("." + p.filename().string() + "." + TempTag())).string();
}

Result<TempFile> CreateTempFor(const std::string& path, mode_t mode) {
  const std::string base = TempPathFor(path);
  for (int n = 0; n < 100; ++n) {
    TempFile t;
    t.path = n == 0 ? base : base + "." + std::to_string(n);
    t.fd = ::open(t.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (t.fd >= 0) return t;
    if (errno != EEXIST) return Status::FromErrno("create " + t.path, errno);
  }
  return Status::IOError("cannot create a temporary for " + path + ": " + base +
                         " and 99 variants exist (planted by another user?)");
}

namespace {

// "user NAME (uid N)" for messages.
std::string UserName(uid_t uid) {
  struct passwd pw, *found = nullptr;
  char buf[1024];
  std::string name = getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found ? found->pw_name : "?";
  return "user " + name + " (uid " + std::to_string(uid) + ")";
}

}  // namespace

Status WriteFileAtomic(const std::string& path, const void* data, size_t size, bool sync) {
  std::error_code ec;
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec) return Status::IOError("cannot create directory " + parent.string() + ": " + ec.message());
  }
  auto created = CreateTempFor(path);
  if (!created.ok()) return created.status();
  const int fd = created->fd;
  const std::string tmp = created->path;
  Status st = WriteAll(fd, data, size, tmp);
  if (st.ok() && sync && ::fsync(fd) != 0) st = Status::FromErrno("fsync " + tmp, errno);
  if (::close(fd) != 0 && st.ok()) st = Status::FromErrno("close " + tmp, errno);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    st = Status::FromErrno("rename " + tmp + " to " + path, errno);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  if (sync) {  // the rename itself survives a power cut only once the folder is synced
    const std::string dir = parent.empty() ? "." : parent.string();
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }
  return st;
}

namespace {

// A temporary (TempPathFor's name) whose writer is provably dead.
bool IsStaleTemp(const fs::path& path) {
  const std::string name = path.filename().string();
  if (!IsTempName(name)) return false;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return false;
  return IsProvablyDeadTemp(name, st.st_uid);
}

}  // namespace

int64_t RemoveStaleTemps(const std::string& root) {
  int64_t removed = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (!IsStaleTemp(it->path())) continue;
    std::error_code rec;
    if (fs::remove(it->path(), rec)) ++removed;
  }
  return removed;
}

int64_t RemoveStaleTempsFor(const std::string& path) {
  const fs::path p(path);
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  const std::string prefix = "." + p.filename().string() + kTmpTag;
  int64_t removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0 || !IsStaleTemp(it->path())) continue;
    std::error_code rec;
    if (fs::remove(it->path(), rec)) ++removed;
  }
  return removed;
}

Result<std::string> MakeTempDir(const std::string& root, const std::string& what) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("imagepack-", 0) != 0 || name.find(kTmpTag) == std::string::npos) continue;
    struct stat st;
    if (::lstat(e.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    std::error_code rec;
    if (IsProvablyDeadTemp(name, st.st_uid)) fs::remove_all(e.path(), rec);
  }
  std::string tmpl = (fs::path(root) / ("imagepack-" + what + "." + TempTag() + ".XXXXXX")).string();
  if (!::mkdtemp(tmpl.data())) return Status::FromErrno("temporary folder in " + root, errno);
  return tmpl;
}

Result<std::unique_ptr<PathLock>> PathLock::Acquire(const std::string& path) {
  const fs::path p(path);
  const std::string lock_path =
      (p.parent_path() / ("." + p.filename().string() + ".ipk-lock")).string();
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  // Another user's lock file left unheld: a read-only fd locks it as well.
  if (fd < 0 && errno == EACCES) fd = ::open(lock_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    struct stat st;
    std::string who;
    if (::lstat(lock_path.c_str(), &st) == 0)
      who = std::string(S_ISLNK(st.st_mode) ? ": it is a link" : ": it is not ours") + ", made by " + UserName(st.st_uid) +
            " (remove it, or write elsewhere)";
    return Status::FromErrno("cannot open lock file " + lock_path + who, e);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::IOError("lock file " + lock_path + " is not a regular file");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    ::close(fd);
    if (e == EWOULDBLOCK)
      return Status::IOError("another process is writing " + path + " (lock " + lock_path + " is held; the file is " +
                             UserName(st.st_uid) + "'s)");
    return Status::FromErrno("cannot lock " + lock_path, e);
  }
  return std::unique_ptr<PathLock>(new PathLock(fd, lock_path));
}

PathLock::~PathLock() {
  ::unlink(lock_path_.c_str());
  ::close(fd_);
}

Status SyncParentDir(const std::string& path) {
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open directory " + dir.string(), errno);
  Status st = ::fsync(fd) == 0 ? Status::Ok() : Status::FromErrno("fsync " + dir.string(), errno);
  ::close(fd);
  return st;
}

}  // namespace imagepack
