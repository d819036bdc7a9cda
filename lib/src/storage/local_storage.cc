// Local files as a Storage: reads through the file ByteSource, writes to
// a temporary beside the destination (files.h, "Temporaries") renamed onto
// it at Commit, locks with a lock file beside it.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "storage/fd_io.h"
#include "imagepack/files.h"
#include "storage/backends.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

class LocalWritableFile : public WritableFile {
 public:
  LocalWritableFile(TempFile tmp, std::string path) : tmp_(std::move(tmp)), path_(std::move(path)) {}
  ~LocalWritableFile() override {
    ::close(tmp_.fd);
    if (!committed_) ::unlink(tmp_.path.c_str());
  }
  int fd() const override { return tmp_.fd; }
  const std::string& staging_path() const override { return tmp_.path; }
  Status Commit() override {
    if (::rename(tmp_.path.c_str(), path_.c_str()) != 0)
      return Status::FromErrno("rename " + tmp_.path + " to " + path_, errno);
    committed_ = true;
    return SyncParentDir(path_);
  }

 private:
  TempFile tmp_;
  std::string path_;
  bool committed_ = false;
};

class PathStorageLock : public StorageLock {
 public:
  explicit PathStorageLock(std::unique_ptr<PathLock> lock) : lock_(std::move(lock)) {}

 private:
  std::unique_ptr<PathLock> lock_;
};

class LocalStorage : public Storage {
 public:
  explicit LocalStorage(const StorageSettings& s) : Storage(s) {}
  const char* name() const override { return "file"; }
  bool local() const override { return true; }
  bool writable() const override { return true; }
  bool listable() const override { return true; }

  Result<std::unique_ptr<ByteSource>> Open(const std::string& url, const ReadOptions&) override {
    return OpenFileSource(url);
  }

  Result<std::unique_ptr<WritableFile>> Create(const std::string& url, const CreateOptions& opts) override {
    IMAGEPACK_RETURN_IF_ERROR(MakeParent(url));
    std::error_code ec;
    if (fs::is_directory(url, ec)) return Status::InvalidArgument(url + " is a directory; give a file name");
    if (!opts.overwrite && fs::exists(url, ec))
      return Status::InvalidArgument(url + " already exists (use --overwrite to replace it)");
    RemoveStaleTempsFor(url);
    auto tmp = CreateTempFor(url, static_cast<mode_t>(opts.mode));
    if (!tmp.ok()) return tmp.status();
    return std::unique_ptr<WritableFile>(new LocalWritableFile(std::move(tmp.value()), url));
  }

  Result<std::vector<std::string>> List(const std::string& url) override {
    std::error_code ec;
    if (!fs::is_directory(url, ec)) return Status::NotFound(url + " is not a folder");
    std::vector<std::string> out;
    for (fs::directory_iterator it(url, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code dec;
      out.push_back(it->path().filename().string() + (it->is_directory(dec) ? "/" : ""));
    }
    if (ec) return Status::IOError(url + ": " + ec.message());
    std::sort(out.begin(), out.end());
    return out;
  }

  Status Remove(const std::string& url) override {
    if (::unlink(url.c_str()) != 0 && errno != ENOENT) return Status::FromErrno("remove " + url, errno);
    return Status::Ok();
  }

  Result<FileInfo> Stat(const std::string& url) override {
    FileInfo info;
    struct stat st;
    if (::stat(url.c_str(), &st) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return info;
      return Status::FromErrno(url, errno);
    }
    info.exists = true;
    info.directory = S_ISDIR(st.st_mode);
    info.size = static_cast<uint64_t>(st.st_size);
    info.version = std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
    return info;
  }

  // The lock file sits beside `url`: its folder is made first, as Create
  // makes it (a writer locks before it creates).
  Result<std::unique_ptr<StorageLock>> Lock(const std::string& url) override {
    IMAGEPACK_RETURN_IF_ERROR(MakeParent(url));
    auto lock = PathLock::Acquire(url);
    if (!lock.ok()) return lock.status();
    return std::unique_ptr<StorageLock>(new PathStorageLock(std::move(lock.value())));
  }

 private:
  static Status MakeParent(const std::string& url) {
    const fs::path parent = fs::path(url).parent_path();
    if (parent.empty()) return Status::Ok();
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) return Status::IOError("cannot create directory " + parent.string() + ": " + ec.message());
    return Status::Ok();
  }
};

}  // namespace

std::shared_ptr<Storage> NewLocalStorage(const StorageSettings& settings) {
  return std::make_shared<LocalStorage>(settings);
}

}  // namespace imagepack::internal
