// What the remote backends share: an object's bytes pinned by its ETag,
// read through the block cache, and the node cache standing in for an
// unreachable server (docs/OBJECT_STORAGE.md, "The cache").
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "storage/block_cache.h"
#include "storage/fd_io.h"
#include "storage/backends.h"
#include "storage/http_client.h"

namespace imagepack::internal {
namespace {

using json = nlohmann::json;

// An object read with ranged GETs, each carrying its pin: If-Match, and
// the answer's ETag checked (a server that ignores If-Match still cannot
// hand over another version's bytes).
class PinnedHttpSource : public ByteSource {
 public:
  PinnedHttpSource(std::shared_ptr<HttpClient> client, std::string http_url, std::string shown, RemoteHead head,
                   std::string identity)
      : client_(std::move(client)), http_url_(std::move(http_url)), shown_(std::move(shown)),
        head_(std::move(head)), identity_(std::move(identity)) {}
  uint64_t size() const override { return head_.size; }
  Status ReadAt(uint64_t offset, uint64_t n, uint8_t* out) const override {
    return ReadRanges({ByteRange{offset, n}}, {out});
  }
  Status ReadRanges(const std::vector<ByteRange>& ranges, const std::vector<uint8_t*>& outs) const override {
    std::vector<HttpRequest> reqs;
    for (size_t i = 0; i < ranges.size(); ++i) {
      const ByteRange& r = ranges[i];
      if (r.offset > head_.size || r.size > head_.size - r.offset)
        return Status::Corruption(shown_ + ": read of " + std::to_string(r.size) + " bytes at " +
                                  std::to_string(r.offset) + " past the end (" + std::to_string(head_.size) +
                                  " bytes)");
      if (r.size == 0) continue;
      HttpRequest q;
      q.url = http_url_;
      q.shown = shown_;
      q.out = outs[i];
      q.out_size = r.size;
      q.range_offset = r.offset;
      q.headers.push_back("If-Match: " + head_.etag);
      q.expect_etag = head_.etag;
      q.what = "bytes " + std::to_string(r.offset) + "-" + std::to_string(r.offset + r.size - 1);
      reqs.push_back(std::move(q));
    }
    std::vector<HttpResponse> resps;
    Status st = client_->Run(reqs, &resps);
    requests_ += static_cast<int64_t>(reqs.size());
    for (const HttpRequest& q : reqs) bytes_ += static_cast<int64_t>(q.out_size);
    for (const HttpResponse& r : resps)
      if (r.changed)
        return Status::Corruption(shown_ + " changed since it was opened (its ETag was " + head_.etag +
                                  (r.etag.empty() ? "" : ", now " + r.etag) +
                                  "): it was replaced during the run; start again to read the new one");
    return st;
  }
  std::string identity() const override { return identity_; }
  std::string Describe() const override { return shown_; }
  bool remote() const override { return true; }
  int64_t requests() const override { return requests_.load(); }
  int64_t bytes_fetched() const override { return bytes_.load(); }

 private:
  std::shared_ptr<HttpClient> client_;
  std::string http_url_, shown_;
  RemoteHead head_;
  std::string identity_;
  mutable std::atomic<int64_t> requests_{1}, bytes_{0};  // the HEAD that pinned it
};

// A version pinned by an earlier run, its server unreachable: every block
// is in the node cache, so a read that reaches here is a block lost since
// (removed by the cache's limit, or damaged).
class OfflineSource : public ByteSource {
 public:
  OfflineSource(std::string url, uint64_t size, std::string identity, std::string why)
      : url_(std::move(url)), size_(size), identity_(std::move(identity)), why_(std::move(why)) {}
  uint64_t size() const override { return size_; }
  Status ReadAt(uint64_t offset, uint64_t n, uint8_t*) const override {
    return Status::IOError(url_ + ": bytes " + std::to_string(offset) + "-" + std::to_string(offset + n - 1) +
                           " are no longer in the node cache, and the server is unreachable (" + why_ + ")");
  }
  std::string identity() const override { return identity_; }
  std::string Describe() const override { return url_; }
  bool remote() const override { return true; }

 private:
  std::string url_;
  uint64_t size_;
  std::string identity_, why_;
};

// A remote object read through a BlockCache: reads copy out of cached
// blocks, views point into them, prefetches put many blocks' GETs in
// flight together.
class CachedObject : public ByteSource {
 public:
  CachedObject(std::unique_ptr<ByteSource> raw, uint64_t block, size_t ram_blocks, std::unique_ptr<DiskCache> disk)
      : raw_(std::move(raw)), cache_(raw_.get(), raw_->size(), block, ram_blocks, std::move(disk)),
        group_(std::max<size_t>(ram_blocks, 4) / 2) {}
  uint64_t size() const override { return raw_->size(); }
  Status ReadAt(uint64_t offset, uint64_t n, uint8_t* out) const override {
    if (offset > size() || n > size() - offset)
      return Status::Corruption(Describe() + ": read of " + std::to_string(n) + " bytes at " + std::to_string(offset) +
                                " past the end (" + std::to_string(size()) + " bytes)");
    if (n == 0) return Status::Ok();
    const uint64_t bb = cache_.block_bytes();
    const uint64_t b0 = offset / bb, b1 = (offset + n - 1) / bb;
    // In groups the RAM cache holds at once: their GETs in flight together,
    // then copied out before later groups can push them out.
    for (uint64_t g = b0; g <= b1; g += group_) {
      const uint64_t g1 = std::min<uint64_t>(b1, g + group_ - 1);
      if (g1 > g) {
        std::vector<uint64_t> blocks;
        for (uint64_t b = g; b <= g1; ++b) blocks.push_back(b);
        cache_.Fetch(std::move(blocks));
      }
      for (uint64_t b = g; b <= g1; ++b) {
        auto blk = cache_.Get(b);
        if (!blk.ok()) return blk.status();
        const uint64_t lo = std::max(offset, b * bb), hi = std::min(offset + n, b * bb + blk.value()->size());
        std::memcpy(out + (lo - offset), blk.value()->data() + (lo - b * bb), hi - lo);
      }
    }
    return Status::Ok();
  }
  Status View(uint64_t offset, uint64_t n, std::shared_ptr<const void>* hold, std::vector<uint8_t>* scratch,
              const uint8_t** data) const override {
    const uint64_t bb = cache_.block_bytes();
    if (n > 0 && offset / bb == (offset + n - 1) / bb && offset + n <= size()) {
      auto blk = cache_.Get(offset / bb);
      if (!blk.ok()) return blk.status();
      *data = blk.value()->data() + (offset - offset / bb * bb);
      *hold = std::move(blk.value());
      return Status::Ok();
    }
    return ByteSource::View(offset, n, hold, scratch, data);
  }
  int64_t Prefetch(const std::vector<ByteRange>& ranges) const override {
    std::vector<uint64_t> blocks;
    const uint64_t bb = cache_.block_bytes();
    for (const ByteRange& r : ranges) {
      if (r.size == 0 || r.offset >= size()) continue;
      const uint64_t hi = std::min(size(), r.offset + r.size);
      for (uint64_t b = r.offset / bb; b <= (hi - 1) / bb; ++b) blocks.push_back(b);
    }
    return cache_.Fetch(std::move(blocks));
  }
  std::string identity() const override { return raw_->identity(); }
  std::string Describe() const override { return raw_->Describe(); }
  bool remote() const override { return true; }
  int64_t requests() const override { return raw_->requests(); }
  int64_t bytes_fetched() const override { return raw_->bytes_fetched(); }

 private:
  std::unique_ptr<ByteSource> raw_;
  mutable BlockCache cache_;
  const uint64_t group_;
};

// "0-3, 7, 9-12" (at most `most` runs, then "...").
std::string BlockRuns(const std::vector<uint64_t>& blocks, size_t most = 8) {
  std::string out;
  size_t runs = 0;
  for (size_t i = 0; i < blocks.size();) {
    size_t j = i;
    while (j + 1 < blocks.size() && blocks[j + 1] == blocks[j] + 1) ++j;
    if (runs++ == most) return out + ", ...";
    out += (out.empty() ? "" : ", ") + std::to_string(blocks[i]) + (j > i ? "-" + std::to_string(blocks[j]) : "");
    i = j + 1;
  }
  return out;
}

struct Pin {
  std::string etag, identity;
  uint64_t size = 0;
};

bool ParsePin(const std::string& text, Pin* pin) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("etag") || !j.contains("identity") || !j.contains("size") ||
      !j["etag"].is_string() || !j["identity"].is_string() || !j["size"].is_number_unsigned())
    return false;
  pin->etag = j["etag"].get<std::string>();
  pin->identity = j["identity"].get<std::string>();
  pin->size = j["size"].get<uint64_t>();
  return true;
}

}  // namespace

std::unique_ptr<ByteSource> NewPinnedHttpSource(std::shared_ptr<HttpClient> client, std::string http_url,
                                                std::string shown, const RemoteHead& head, std::string identity) {
  return std::make_unique<PinnedHttpSource>(std::move(client), std::move(http_url), std::move(shown), head,
                                            std::move(identity));
}

Result<std::unique_ptr<ByteSource>> OpenRemote(const RemoteObject& o, const StorageSettings& s,
                                               const Storage::ReadOptions& opts) {
  if (!(s.fetch_block_mb > 0 && s.fetch_block_mb <= 1024) || s.ram_cache_mb < 0 || !(s.cache_limit_mb > 0))
    return Status::InvalidArgument(o.url + ": the fetch block must be in (0, 1024] MB, the RAM cache >= 0 and the "
                                           "cache limit positive");
  const bool disk = opts.cached && !s.cache_dir.empty();
  const uint64_t block = std::max<uint64_t>(4096, static_cast<uint64_t>(s.fetch_block_mb * (1 << 20)));
  const uint64_t limit = static_cast<uint64_t>(s.cache_limit_mb * (1 << 20));
  // With a disk cache, RAM holds the read-ahead's span (blocks let go are
  // reused: fresh memory is slow to fault in); without, it is the cache.
  const double ram_mb = s.ram_cache_mb > 0 ? s.ram_cache_mb : disk ? 256 : 512;
  const size_t ram_blocks = static_cast<size_t>(std::min(ram_mb * (1 << 20) / double(block), 1e9));
  Pin pin;
  bool pinned = false;
  if (disk) {
    auto text = DiskCache::ReadPin(s.cache_dir, o.pin_key);
    pinned = text.ok() && ParsePin(*text, &pin);
  }
  // With a pinned version in the cache, a first HEAD gets a short budget:
  // an unreachable server costs seconds, not the whole retry budget,
  // before the cache is looked at.
  const double quick = std::min(s.retry_seconds, 3.0);
  bool unreachable = false;
  auto head = o.head(pinned ? quick : -1, &unreachable);
  if (!head.ok() && unreachable && pinned) {
    auto dc = DiskCache::Open(s.cache_dir, pin.identity, limit);
    if (!dc.ok()) return head.status();
    const std::vector<uint64_t> missing = dc.value()->Missing(pin.size, block);
    if (missing.empty()) {
      Warn(o.url + ": " + head.status().message() + "; reading it from the node cache " + dc.value()->dir() +
           " instead: the version with ETag " + pin.etag + " (" + std::to_string(pin.size) +
           " bytes), as pinned by an earlier run");
      auto raw = std::make_unique<OfflineSource>(o.url, pin.size, pin.identity, head.status().message());
      return std::unique_ptr<ByteSource>(new CachedObject(std::move(raw), block, ram_blocks, std::move(dc.value())));
    }
    if (quick < s.retry_seconds) head = o.head(s.retry_seconds - quick, &unreachable);
    if (!head.ok()) {
      const uint64_t blocks = (pin.size + block - 1) / block;
      return head.status().WithMessage(
          head.status().message() + "; the node cache " + dc.value()->dir() + " holds " +
          std::to_string(blocks - missing.size()) + " of the " + std::to_string(blocks) + " blocks of ETag " +
          pin.etag + ", so it cannot stand in (missing blocks of " + std::to_string(block) + " bytes: " +
          BlockRuns(missing) + ")");
    }
  }
  if (!head.ok()) return head.status();
  if (head->etag.empty())
    return Status::NotSupported(o.url + ": the server gave no ETag; the file cannot be pinned to one version");
  const std::string identity = o.identity(*head);
  std::unique_ptr<ByteSource> raw = o.pinned(*head);
  if (!opts.cached) return raw;
  std::unique_ptr<DiskCache> dc;
  if (disk) {
    auto d = DiskCache::Open(s.cache_dir, identity, limit);
    if (!d.ok()) return d.status().WithContext(o.url);
    dc = std::move(d.value());
    const json p = {{"url", o.url}, {"etag", head->etag}, {"size", head->size}, {"identity", identity}};
    (void)DiskCache::WritePin(s.cache_dir, o.pin_key, p.dump());  // an optimisation, as the blocks are
  }
  return std::unique_ptr<ByteSource>(new CachedObject(std::move(raw), block, ram_blocks, std::move(dc)));
}

namespace {

class StagedRemoteFile : public WritableFile {
 public:
  StagedRemoteFile(std::string dir, TempFile tmp, std::function<Status(const std::string&)> publish)
      : dir_(std::move(dir)), tmp_(std::move(tmp)), publish_(std::move(publish)) {}
  ~StagedRemoteFile() override {
    ::close(tmp_.fd);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  int fd() const override { return tmp_.fd; }
  const std::string& staging_path() const override { return tmp_.path; }
  Status Commit() override { return publish_(tmp_.path); }

 private:
  std::string dir_;
  TempFile tmp_;
  std::function<Status(const std::string&)> publish_;
};

}  // namespace

Result<std::unique_ptr<WritableFile>> NewStagedRemoteFile(const StorageSettings& settings, const std::string& url,
                                                          std::function<Status(const std::string&)> publish) {
  auto staging = MakeStagingDir(settings, "upload");
  if (!staging.ok()) return staging.status();
  std::string base = url.substr(url.rfind('/') + 1);
  if (base.empty() || base == "." || base == "..") base = "object";
  auto tmp = CreateTempFor((std::filesystem::path(*staging) / base).string(), 0600);
  if (!tmp.ok()) {
    std::error_code ec;
    std::filesystem::remove_all(*staging, ec);
    return tmp.status();
  }
  return std::unique_ptr<WritableFile>(new StagedRemoteFile(*staging, std::move(tmp.value()), std::move(publish)));
}

}  // namespace imagepack::internal
