#include "storage/block_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "imagepack/files.h"
#include "storage/shared_copy.h"
#include "storage/fd_io.h"

namespace imagepack::internal {
namespace fs = std::filesystem;

namespace {

bool OfdLock(int fd, uint64_t b, short type, bool wait) {
  struct flock fl = {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(b);
  fl.l_len = 1;
  while (::fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) != 0) {
    if (errno != EINTR) return false;
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<DiskCache>> DiskCache::Open(const std::string& root, const std::string& identity,
                                                   uint64_t limit_bytes) {
  std::error_code ec;
  fs::create_directories(root, ec);  // the root itself may be shared; ours is a private folder inside
  auto mine = OpenPrivateUserDir(root, "cache");
  if (!mine.ok()) return mine.status();
  ::close(mine->fd);
  char name[32];
  std::snprintf(name, sizeof name, "obj-%016llx", static_cast<unsigned long long>(XXH3_64bits(identity.data(), identity.size())));
  const std::string dir = (fs::path(mine->path) / name).string();
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Status::FromErrno("cache: " + dir, errno);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
    return Status::InvalidArgument("cache: " + dir + " is not a folder of this user");
  const std::string lock = dir + "/claims";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("cache: " + lock, errno);
  // What the object is, for a person looking at the folder.
  const std::string about = dir + "/object";
  if (::access(about.c_str(), F_OK) != 0) (void)WriteFileAtomic(about, identity.data(), identity.size());
  RemoveStaleTemps(dir);
  std::unique_ptr<DiskCache> cache(new DiskCache(mine->path, dir, fd, limit_bytes));
  cache->Trim();  // counts what is there (and trims a cache left over its limit)
  return cache;
}

DiskCache::~DiskCache() { ::close(lock_fd_); }

std::string DiskCache::BlockPath(uint64_t b) const { return dir_ + "/b" + std::to_string(b); }

// A block file is the block's bytes then their XXH3-64 (8 bytes, little
// endian): a file of another size or checksum is not served (removed, and
// the block fetched again).
std::shared_ptr<const BlockBytes> DiskCache::Load(uint64_t b, uint64_t size) const {
  const std::string p = BlockPath(b);
  const int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st;
  std::shared_ptr<const BlockBytes> out;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) == size + 8) {
    void* map = ::mmap(nullptr, size + 8, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (map != MAP_FAILED) {
      std::shared_ptr<void> keep(map, [n = size + 8](void* m) { ::munmap(m, n); });
      const uint8_t* bytes = static_cast<const uint8_t*>(map);
      uint64_t sum = 0;
      std::memcpy(&sum, bytes + size, 8);
      if (sum == XXH3_64bits(bytes, size)) {
        out = std::make_shared<BlockBytes>(bytes, size, std::move(keep));
        // Recently used: Trim removes the oldest modification times first.
        ::futimens(fd, nullptr);
      }
    }
  }
  ::close(fd);
  if (!out) ::unlink(p.c_str());
  return out;
}

std::vector<uint64_t> DiskCache::Missing(uint64_t size, uint64_t block) const {
  std::vector<uint64_t> missing;
  const uint64_t blocks = block ? (size + block - 1) / block : 0;
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint64_t want = std::min(block, size - b * block) + 8;
    struct stat st;
    if (::lstat(BlockPath(b).c_str(), &st) != 0 || !S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != want)
      missing.push_back(b);
  }
  return missing;
}

namespace {

Result<std::string> PinPath(const std::string& root, const std::string& key) {
  std::error_code ec;
  fs::create_directories(root, ec);
  auto mine = OpenPrivateUserDir(root, "cache");
  if (!mine.ok()) return mine.status();
  ::close(mine->fd);
  char name[32];
  std::snprintf(name, sizeof name, "pin-%016llx", static_cast<unsigned long long>(XXH3_64bits(key.data(), key.size())));
  return (fs::path(mine->path) / "pins" / name).string();
}

}  // namespace

Result<std::string> DiskCache::ReadPin(const std::string& root, const std::string& key) {
  auto path = PinPath(root, key);
  if (!path.ok()) return path.status();
  auto bytes = ReadFile(*path, 0, 1 << 16);
  if (!bytes.ok()) return bytes.status();
  return std::string(bytes->begin(), bytes->end());
}

Status DiskCache::WritePin(const std::string& root, const std::string& key, const std::string& text) {
  auto path = PinPath(root, key);
  if (!path.ok()) return path.status();
  if (auto old = ReadFile(*path, 0, 1 << 16); old.ok() && std::string(old->begin(), old->end()) == text)
    return Status::Ok();
  return WriteFileAtomic(*path, text.data(), text.size());
}

bool DiskCache::TryClaim(uint64_t b) const { return OfdLock(lock_fd_, b, F_WRLCK, false); }
void DiskCache::WaitClaim(uint64_t b) const {
  if (OfdLock(lock_fd_, b, F_RDLCK, true)) OfdLock(lock_fd_, b, F_UNLCK, false);
}
void DiskCache::Release(uint64_t b) const { OfdLock(lock_fd_, b, F_UNLCK, false); }

void DiskCache::Store(uint64_t b, const uint8_t* data, uint64_t size) const {
  const std::string p = BlockPath(b);
  auto tmp = CreateTempFor(p, 0600);
  if (!tmp.ok()) return;
  // No fdatasync: a process that dies leaves a temporary (never the
  // block's name), and a block torn by a power cut fails its checksum and is
  // fetched again. Syncing each block held the fetching thread ~5-10 ms.
  const uint64_t sum = XXH3_64bits(data, size);
  const bool ok = WriteAll(tmp->fd, data, size, tmp->path).ok() && WriteAll(tmp->fd, &sum, 8, tmp->path).ok();
  ::close(tmp->fd);
  if (!ok || ::rename(tmp->path.c_str(), p.c_str()) != 0) {
    ::unlink(tmp->path.c_str());
    return;
  }
  if ((total_ += size + 8) > limit_) Trim();
}

// Removes the least recently used blocks of every object under this user's
// cache root until it holds at most 90% of the limit, once it holds more
// than the limit. Scans the folder: called only when this process's count
// (the scan at open plus what it wrote since) passes the limit (scanning
// after every block made a first epoch's writes quadratic).
void DiskCache::Trim() const {
  struct Item {
    fs::path path;
    int64_t mtime;
    uint64_t size;
  };
  std::vector<Item> items;
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() < 2 || name[0] != 'b' || !std::isdigit(static_cast<unsigned char>(name[1]))) continue;
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    items.push_back({it->path(), static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                     static_cast<uint64_t>(st.st_size)});
    total += static_cast<uint64_t>(st.st_size);
  }
  if (total <= limit_) {
    total_ = total;
    return;
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.mtime < b.mtime; });
  for (const Item& i : items) {
    if (total <= limit_ / 10 * 9) break;
    if (::unlink(i.path.c_str()) == 0) total -= i.size;
  }
  total_ = total;
}

BlockCache::BlockCache(const ByteSource* bytes, uint64_t end, uint64_t block_bytes, size_t ram_blocks,
                       std::unique_ptr<DiskCache> disk)
    : bytes_(bytes), end_(end), block_(block_bytes), ram_blocks_(std::max<size_t>(ram_blocks, 4)),
      disk_(std::move(disk)) {}

std::shared_ptr<BlockCache::Buffer> BlockCache::NewBuffer() {
  Buffer* v = nullptr;
  {
    std::lock_guard<std::mutex> g(pool_->mu);
    if (!pool_->free.empty()) {
      v = pool_->free.back();
      pool_->free.pop_back();
      pool_->bytes -= v->cap;
    }
  }
  if (!v) v = new Buffer();
  std::shared_ptr<Pool> pool = pool_;
  return std::shared_ptr<Buffer>(v, [pool](Buffer* p) {
    std::lock_guard<std::mutex> g(pool->mu);
    if (pool->bytes + p->cap <= Pool::kMaxBytes) {
      pool->bytes += p->cap;
      pool->free.push_back(p);
    } else {
      delete p;
    }
  });
}

void BlockCache::Publish(uint64_t b, Block data) {
  Entry& e = blocks_[b];
  e.data = std::move(data);
  e.loading = false;
  lru_.push_front(b);
  e.lru = lru_.begin();
  while (lru_.size() > ram_blocks_) {
    blocks_.erase(lru_.back());
    lru_.pop_back();
  }
}

// Adjacent blocks in one ranged GET (at most 16 blocks), all in flight,
// into buffers let go by earlier blocks where there are some; each block
// then points into its range's buffer (no copy), and goes to the disk
// cache.
Status BlockCache::Download(std::vector<uint64_t> remote, int64_t* fetched,
                            std::vector<std::pair<uint64_t, Block>>* done) {
  if (remote.empty()) return Status::Ok();
  std::sort(remote.begin(), remote.end());
  std::vector<ByteRange> ranges;
  std::vector<std::vector<uint64_t>> members;
  for (size_t i = 0; i < remote.size();) {
    size_t j = i + 1;
    while (j < remote.size() && remote[j] == remote[j - 1] + 1 && j - i < 16) ++j;
    const uint64_t lo = remote[i] * block_, hi = remote[j - 1] * block_ + BlockSize(remote[j - 1]);
    ranges.push_back({lo, hi - lo});
    members.emplace_back(remote.begin() + static_cast<std::ptrdiff_t>(i), remote.begin() + static_cast<std::ptrdiff_t>(j));
    i = j;
  }
  std::vector<std::shared_ptr<Buffer>> bufs(ranges.size());
  std::vector<uint8_t*> outs;
  for (size_t i = 0; i < ranges.size(); ++i) {
    bufs[i] = NewBuffer();
    outs.push_back(bufs[i]->Reserve(ranges[i].size));
  }
  Status st = bytes_->ReadRanges(ranges, outs);
  if (!st.ok()) return st;
  for (size_t i = 0; i < ranges.size(); ++i) {
    *fetched += static_cast<int64_t>(ranges[i].size);
    for (uint64_t b : members[i]) {
      const uint8_t* p = bufs[i]->p.get() + (b * block_ - ranges[i].offset);
      if (disk_) disk_->Store(b, p, BlockSize(b));
      done->emplace_back(b, std::make_shared<BlockBytes>(p, BlockSize(b), bufs[i]));
    }
  }
  return Status::Ok();
}

// Blocks on disk are taken from there; the others this process claims and
// downloads, releasing its claims, and only then waits for the blocks that
// other processes were downloading: a process never waits while it holds
// a claim, so two processes whose claims interleave (each waiting for a
// block the other holds) cannot block each other. A block still missing
// after its claim ended (its downloader died or failed) is downloaded
// here, claimed if it can be without waiting, else downloaded all the same
// (a second GET of it; the block file is written whole under a temporary
// name either way).
Status BlockCache::Load(const std::vector<uint64_t>& blocks, int64_t* fetched, Block* first) {
  std::vector<std::pair<uint64_t, Block>> done;
  std::vector<uint64_t> remote, claimed, waited;
  for (uint64_t b : blocks) {
    if (Block v = disk_ ? disk_->Load(b, BlockSize(b)) : nullptr) {
      done.emplace_back(b, std::move(v));
    } else if (!disk_ || disk_->TryClaim(b)) {
      remote.push_back(b);
      if (disk_) claimed.push_back(b);
    } else {
      waited.push_back(b);  // another process is downloading it
    }
  }
  Status st = Download(std::move(remote), fetched, &done);
  if (disk_)
    for (uint64_t b : claimed) disk_->Release(b);
  claimed.clear();
  remote.clear();
  if (st.ok()) {
    for (uint64_t b : waited) disk_->WaitClaim(b);  // holding no claim
    for (uint64_t b : waited) {
      if (Block v = disk_->Load(b, BlockSize(b))) {
        done.emplace_back(b, std::move(v));
        continue;
      }
      remote.push_back(b);  // its downloader died or failed: ours now
      if (disk_->TryClaim(b)) claimed.push_back(b);
    }
    st = Download(std::move(remote), fetched, &done);
  }
  if (disk_)
    for (uint64_t b : claimed) disk_->Release(b);
  std::lock_guard<std::mutex> g(mu_);
  for (auto& [b, v] : done) {
    if (first && b == blocks[0]) *first = v;
    Publish(b, std::move(v));
  }
  for (uint64_t b : blocks) {
    auto it = blocks_.find(b);
    if (it != blocks_.end() && it->second.loading) blocks_.erase(it);  // failed: a later Get tries again
  }
  cv_.notify_all();
  return st;
}

Result<BlockCache::Block> BlockCache::Get(uint64_t b) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    auto it = blocks_.find(b);
    if (it == blocks_.end()) break;
    if (it->second.data) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.data;
    }
    cv_.wait(lock);  // another thread is loading it
  }
  blocks_[b].loading = true;
  lock.unlock();
  int64_t fetched = 0;
  Block data;
  Status st = Load({b}, &fetched, &data);
  if (data) return data;
  if (!st.ok()) return st;
  return Status::IOError(bytes_->Describe() + ": block " + std::to_string(b) + " could not be loaded");
}

int64_t BlockCache::Fetch(std::vector<uint64_t> blocks) {
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  std::vector<uint64_t> mine;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (uint64_t b : blocks) {
      auto it = blocks_.find(b);
      if (it != blocks_.end()) {
        if (it->second.data) lru_.splice(lru_.begin(), lru_, it->second.lru);
        continue;
      }
      blocks_[b].loading = true;
      mine.push_back(b);
    }
  }
  int64_t fetched = 0;
  if (!mine.empty()) (void)Load(mine, &fetched, nullptr);  // a failure is reported by the reader's Get
  return fetched;
}

}  // namespace imagepack::internal
