// NewMemoryStorage (storage.h): files held in this process's memory, by
// URL. A writer stages its bytes in a local file (as the remote backends
// do) and Commit publishes them whole; readers hold the version they
// opened, so a later commit never changes bytes being read.
#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "imagepack/storage.h"
#include "storage/backends.h"
#include "storage/fd_io.h"

namespace imagepack {
namespace {

using Bytes = std::shared_ptr<const std::vector<uint8_t>>;

class MemoryBytes : public ByteSource {
 public:
  MemoryBytes(Bytes bytes, std::string url, uint64_t version)
      : bytes_(std::move(bytes)), url_(std::move(url)), version_(version) {}
  uint64_t size() const override { return bytes_->size(); }
  Status ReadAt(uint64_t offset, uint64_t n, uint8_t* out) const override {
    if (offset > bytes_->size() || n > bytes_->size() - offset)
      return Status::IOError(url_ + ": read of " + std::to_string(n) + " bytes at " + std::to_string(offset) +
                             " past its end (" + std::to_string(bytes_->size()) + " bytes)");
    if (n) std::memcpy(out, bytes_->data() + offset, n);
    return Status::Ok();
  }
  std::string identity() const override { return url_ + ":" + std::to_string(version_) + ":" + std::to_string(size()); }
  std::string Describe() const override { return url_; }
  uint64_t CachedBytes() const override { return bytes_->size(); }

 private:
  Bytes bytes_;
  std::string url_;
  uint64_t version_;
};

class MemoryLock : public StorageLock {
 public:
  MemoryLock(std::shared_ptr<std::mutex> mu, std::shared_ptr<std::set<std::string>> held, std::string url)
      : mu_(std::move(mu)), held_(std::move(held)), url_(std::move(url)) {}
  ~MemoryLock() override {
    std::lock_guard<std::mutex> lock(*mu_);
    held_->erase(url_);
  }

 private:
  std::shared_ptr<std::mutex> mu_;
  std::shared_ptr<std::set<std::string>> held_;
  std::string url_;
};

class MemoryStorage : public Storage, public std::enable_shared_from_this<MemoryStorage> {
 public:
  MemoryStorage(const StorageSettings& settings, std::string name) : Storage(settings), name_(std::move(name)) {}
  const char* name() const override { return name_.c_str(); }
  bool local() const override { return false; }
  bool writable() const override { return true; }
  bool listable() const override { return true; }

  Result<std::unique_ptr<ByteSource>> Open(const std::string& url, const ReadOptions&) override {
    std::lock_guard<std::mutex> lock(*mu_);
    auto it = files_.find(url);
    if (it == files_.end()) return Status::NotFound(url + ": no such file in " + name_ + " storage");
    return std::unique_ptr<ByteSource>(new MemoryBytes(it->second.bytes, url, it->second.version));
  }

  Result<std::unique_ptr<WritableFile>> Create(const std::string& url, const CreateOptions& opts) override {
    {
      std::lock_guard<std::mutex> lock(*mu_);
      if (files_.count(url) && !opts.overwrite)
        return Status::InvalidArgument(url + " already exists (use --overwrite to replace it)");
    }
    const bool overwrite = opts.overwrite;
    return internal::NewStagedRemoteFile(settings(), url,
                                         [self = shared_from_this(), url, overwrite](const std::string& staged) {
                                           return self->Publish(staged, url, overwrite);
                                         });
  }

  Result<std::vector<std::string>> List(const std::string& url) override {
    std::string prefix = url;
    if (!prefix.empty() && prefix.back() != '/') prefix += '/';
    std::lock_guard<std::mutex> lock(*mu_);
    std::set<std::string> names;
    for (auto it = files_.lower_bound(prefix); it != files_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
         ++it) {
      const std::string rest = it->first.substr(prefix.size());
      const size_t slash = rest.find('/');
      names.insert(slash == std::string::npos ? rest : rest.substr(0, slash + 1));
    }
    return std::vector<std::string>(names.begin(), names.end());
  }

  Status Remove(const std::string& url) override {
    std::lock_guard<std::mutex> lock(*mu_);
    if (!files_.erase(url)) return Status::NotFound(url + ": no such file in " + name_ + " storage");
    return Status::Ok();
  }

  Result<FileInfo> Stat(const std::string& url) override {
    std::lock_guard<std::mutex> lock(*mu_);
    FileInfo info;
    if (auto it = files_.find(url); it != files_.end()) {
      info.exists = true;
      info.size = it->second.bytes->size();
      info.version = std::to_string(it->second.version);
    }
    return info;
  }

  Result<std::unique_ptr<StorageLock>> Lock(const std::string& url) override {
    std::lock_guard<std::mutex> lock(*mu_);
    if (!held_->insert(url).second) return Status::InvalidArgument(url + " is being written by another writer of this process");
    return std::unique_ptr<StorageLock>(new MemoryLock(mu_, held_, url));
  }

 private:
  struct File {
    Bytes bytes;
    uint64_t version = 0;
  };

  Status Publish(const std::string& staged, const std::string& url, bool overwrite) {
    auto opened = OpenFileSource(staged);
    if (!opened.ok()) return opened.status();
    auto bytes = std::make_shared<std::vector<uint8_t>>(opened.value()->size());
    if (!bytes->empty()) IMAGEPACK_RETURN_IF_ERROR(opened.value()->ReadAt(0, bytes->size(), bytes->data()));
    std::lock_guard<std::mutex> lock(*mu_);
    if (files_.count(url) && !overwrite) return Status::InvalidArgument(url + " already exists");
    files_[url] = File{std::move(bytes), ++versions_};
    return Status::Ok();
  }

  const std::string name_;
  std::shared_ptr<std::mutex> mu_ = std::make_shared<std::mutex>();
  std::shared_ptr<std::set<std::string>> held_ = std::make_shared<std::set<std::string>>();
  std::map<std::string, File> files_;
  uint64_t versions_ = 0;
};

}  // namespace

std::shared_ptr<Storage> NewMemoryStorage(const StorageSettings& settings, const std::string& name) {
  return std::make_shared<MemoryStorage>(settings, name);
}

}  // namespace imagepack
