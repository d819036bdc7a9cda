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

#include "descriptor_source.h"
#include "fd_io.h"
#include "imagepack/files.h"
#include "s3_client.h"

namespace imagepack {

using internal::ObjectUrl;
using internal::S3Client;
using internal::S3Request;
using internal::S3Response;

Result<const uint8_t*> ByteSource::Map() const {
  return Status::NotSupported(Describe() + ": cannot be mapped into memory (object storage is read by ranges)");
}

Status ByteSource::ReadRanges(const std::vector<ByteRange>& ranges, const std::vector<uint8_t*>& outs) const {
  for (size_t i = 0; i < ranges.size(); ++i)
    IMAGEPACK_RETURN_IF_ERROR(ReadAt(ranges[i].offset, ranges[i].size, outs[i]));
  return Status::Ok();
}

bool IsObjectUrl(const std::string& path) { return path.rfind("s3://", 0) == 0; }

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

// An object, pinned to the ETag it had when opened: every GET says
// If-Match, so a replaced object fails (412) instead of mixing versions.
class ObjectByteSource : public ByteSource {
 public:
  ObjectByteSource(std::shared_ptr<S3Client> client, ObjectUrl url, uint64_t size, std::string etag)
      : client_(std::move(client)), url_(std::move(url)), size_(size), etag_(std::move(etag)) {}
  uint64_t size() const override { return size_; }
  Status ReadAt(uint64_t offset, uint64_t n, uint8_t* out) const override {
    return ReadRanges({ByteRange{offset, n}}, {out});
  }
  Status ReadRanges(const std::vector<ByteRange>& ranges, const std::vector<uint8_t*>& outs) const override {
    std::vector<S3Request> reqs;
    for (size_t i = 0; i < ranges.size(); ++i) {
      const ByteRange& r = ranges[i];
      if (r.offset > size_ || r.size > size_ - r.offset)
        return Status::Corruption(url_.ToString() + ": read of " + std::to_string(r.size) + " bytes at " +
                                  std::to_string(r.offset) + " past the end (" + std::to_string(size_) + " bytes)");
      if (r.size == 0) continue;
      S3Request q;
      q.url = url_;
      q.out = outs[i];
      q.out_size = r.size;
      q.range_offset = r.offset;
      q.headers.push_back("If-Match: " + etag_);
      q.what = "bytes " + std::to_string(r.offset) + "-" + std::to_string(r.offset + r.size - 1);
      reqs.push_back(std::move(q));
    }
    std::vector<S3Response> resps;
    Status st = client_->Run(reqs, &resps);
    requests_ += static_cast<int64_t>(reqs.size());
    for (const S3Request& q : reqs) bytes_ += static_cast<int64_t>(q.out_size);
    for (const S3Response& r : resps)
      if (r.status == 412)
        return Status::Corruption(url_.ToString() + " changed since it was opened (its ETag was " + etag_ +
                                  "): the object was replaced during the run; start again to read the new one");
    return st;
  }
  std::string identity() const override {
    return "s3:" + client_->config().endpoint + "/" + url_.bucket + "/" + url_.key + ":" + etag_ + ":" +
           std::to_string(size_);
  }
  std::string Describe() const override { return url_.ToString(); }
  bool remote() const override { return true; }
  int64_t requests() const override { return requests_.load(); }
  int64_t bytes_fetched() const override { return bytes_.load(); }

 private:
  std::shared_ptr<S3Client> client_;
  ObjectUrl url_;
  uint64_t size_;
  std::string etag_;
  mutable std::atomic<int64_t> requests_{0}, bytes_{0};
};

Result<S3Response> Head(S3Client& client, const ObjectUrl& url, bool missing_ok) {
  S3Request q;
  q.method = "HEAD";
  q.url = url;
  S3Response r;
  Status st = client.RunOne(q, &r, missing_ok ? std::vector<long>{404} : std::vector<long>{});
  if (!st.ok() && r.status >= 400 && r.status < 500) {
    // A HEAD answer has no body, so no S3 error code: a GET of one byte
    // says which (SignatureDoesNotMatch, NoSuchBucket, ...).
    S3Request g;
    g.url = url;
    g.headers.push_back("Range: bytes=0-0");
    S3Response gr;
    Status why = client.RunOne(g, &gr);
    if (!why.ok() && gr.status == r.status) return why;
  }
  if (!st.ok()) return st;
  return r;
}

}  // namespace

Result<std::unique_ptr<ByteSource>> OpenByteSource(const std::string& path) {
  if (IsObjectUrl(path)) {
    auto url = internal::ParseObjectUrl(path);
    if (!url.ok()) return url.status();
    auto client = S3Client::Default();
    if (!client.ok()) return client.status().WithContext(path);
    auto head = Head(*client.value(), url.value(), false);
    if (!head.ok()) return head.status();
    if (head->etag.empty()) return Status::NotSupported(path + ": the server gave no ETag; cannot pin the object");
    return std::unique_ptr<ByteSource>(
        new ObjectByteSource(client.value(), url.value(), head->content_length, head->etag));
  }
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

Result<bool> ObjectExists(const std::string& path) {
  auto url = internal::ParseObjectUrl(path);
  if (!url.ok()) return url.status();
  auto client = S3Client::Default();
  if (!client.ok()) return client.status().WithContext(path);
  auto head = Head(*client.value(), url.value(), true);
  if (!head.ok()) return head.status();
  return head->status != 404;
}

namespace {

// Aborts every incomplete multipart upload to exactly `url`'s key.
Status AbortDangling(S3Client& client, const ObjectUrl& url, int* aborted) {
  *aborted = 0;
  S3Request list;
  list.url = ObjectUrl{url.bucket, ""};
  list.query = "prefix=" + internal::UriEncode(url.key, false) + "&uploads=";
  list.what = "list incomplete uploads";
  S3Response r;
  IMAGEPACK_RETURN_IF_ERROR(client.RunOne(list, &r));
  std::vector<S3Request> aborts;
  size_t at = 0, end = 0;
  while (true) {
    const std::string up = internal::XmlValue(r.body, "Upload", at, &end);
    if (up.empty()) break;
    at = end;
    if (internal::XmlValue(up, "Key") != url.key) continue;
    S3Request a;
    a.method = "DELETE";
    a.url = url;
    a.query = "uploadId=" + internal::UriEncode(internal::XmlValue(up, "UploadId"), false);
    a.what = "abort an incomplete upload";
    aborts.push_back(std::move(a));
  }
  std::vector<S3Response> rs;
  *aborted = static_cast<int>(aborts.size());
  return client.Run(aborts, &rs, {404});
}

}  // namespace

Status UploadFile(const std::string& src, const std::string& dest, const UploadOptions& opts) {
  auto url = internal::ParseObjectUrl(dest);
  if (!url.ok()) return url.status();
  auto cl = S3Client::Default();
  if (!cl.ok()) return cl.status().WithContext(dest);
  S3Client& client = *cl.value();
  if (!opts.overwrite) {
    auto head = Head(client, url.value(), true);
    if (!head.ok()) return head.status();
    if (head->status != 404) return Status::InvalidArgument(dest + " exists (overwrite it with --overwrite)");
  }
  int aborted = 0;
  IMAGEPACK_RETURN_IF_ERROR(AbortDangling(client, url.value(), &aborted));
  auto in = OpenByteSource(src);
  if (!in.ok()) return in.status();
  const uint64_t size = in.value()->size();
  double part_mb = opts.part_mb;
  if (const char* e = std::getenv("IMAGEPACK_S3_PART_MB"); e && std::atof(e) > 0) part_mb = std::atof(e);
  // S3's smallest part (but the last) is 5 MiB.
  const uint64_t part = std::max<uint64_t>(5 << 20, static_cast<uint64_t>(part_mb * (1 << 20)));
  const uint64_t parts = std::max<uint64_t>(1, (size + part - 1) / part);
  if (parts > 10000) return Status::InvalidArgument(dest + ": more than 10,000 parts; use a larger part size");
  S3Request create;
  create.method = "POST";
  create.url = url.value();
  create.query = "uploads=";
  create.what = "start a multipart upload";
  S3Response cr;
  IMAGEPACK_RETURN_IF_ERROR(client.RunOne(create, &cr));
  const std::string id = internal::XmlValue(cr.body, "UploadId");
  if (id.empty()) return Status::IOError(dest + ": the server started an upload but gave no UploadId");
  const std::string qid = "uploadId=" + internal::UriEncode(id, false);
  auto abort = [&](Status why) {
    S3Request a;
    a.method = "DELETE";
    a.url = url.value();
    a.query = qid;
    S3Response ar;
    (void)client.RunOne(a, &ar, {404});
    return why;
  };
  std::vector<std::string> etags(parts);
  const int inflight = std::max(1, opts.in_flight);
  std::vector<std::vector<uint8_t>> bufs(static_cast<size_t>(inflight));
  for (uint64_t first = 0; first < parts; first += static_cast<uint64_t>(inflight)) {
    const uint64_t last = std::min(parts, first + static_cast<uint64_t>(inflight));
    std::vector<S3Request> reqs;
    for (uint64_t p = first; p < last; ++p) {
      const uint64_t at = p * part, n = std::min(part, size - at);
      std::vector<uint8_t>& b = bufs[p - first];
      b.resize(n);
      Status rs = in.value()->ReadAt(at, n, b.data());
      if (!rs.ok()) return abort(rs);
      S3Request q;
      q.method = "PUT";
      q.url = url.value();
      q.query = "partNumber=" + std::to_string(p + 1) + "&" + qid;
      q.body = b.data();
      q.body_size = n;
      q.what = "part " + std::to_string(p + 1) + " of " + std::to_string(parts);
      reqs.push_back(std::move(q));
    }
    std::vector<S3Response> rs;
    Status st = client.Run(reqs, &rs);
    if (!st.ok()) return abort(st);
    for (uint64_t p = first; p < last; ++p) etags[p] = rs[p - first].etag;
  }
  std::string xml = "<CompleteMultipartUpload>";
  for (uint64_t p = 0; p < parts; ++p)
    xml += "<Part><PartNumber>" + std::to_string(p + 1) + "</PartNumber><ETag>" + etags[p] + "</ETag></Part>";
  xml += "</CompleteMultipartUpload>";
  S3Request done;
  done.method = "POST";
  done.url = url.value();
  done.query = qid;
  done.body = reinterpret_cast<const uint8_t*>(xml.data());
  done.body_size = xml.size();
  done.what = "complete the multipart upload";
  S3Response dr;
  Status st = client.RunOne(done, &dr);
  // S3 may answer 200 with an <Error> body when completing fails late.
  if (st.ok() && !internal::XmlValue(dr.body, "Code").empty())
    st = Status::IOError("POST " + dest + " (complete the multipart upload): " + internal::XmlValue(dr.body, "Code"));
  if (!st.ok()) return abort(st);
  return Status::Ok();
}

Status UploadTree(const std::string& dir, const std::string& url_prefix, const UploadOptions& opts) {
  namespace fs = std::filesystem;
  std::string prefix = url_prefix;
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  std::error_code ec;
  std::vector<std::string> files;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file()) files.push_back(fs::relative(it->path(), dir).string());
  if (ec) return Status::IOError(dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  UploadOptions o = opts;
  o.overwrite = true;
  for (const std::string& rel : files)
    IMAGEPACK_RETURN_IF_ERROR(UploadFile((fs::path(dir) / rel).string(), prefix + "/" + rel, o));
  return Status::Ok();
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

Status DownloadObject(const std::string& url, const std::string& path) {
  auto src = OpenByteSource(url);
  if (!src.ok()) return src.status();
  auto tmp = CreateTempFor(path, 0600);
  if (!tmp.ok()) return tmp.status();
  Status st = CopyToFile(*src.value(), tmp->fd, tmp->path, uint64_t(16) << 20, 8);
  ::close(tmp->fd);
  if (st.ok() && ::rename(tmp->path.c_str(), path.c_str()) != 0) st = Status::FromErrno("rename to " + path, errno);
  if (!st.ok()) ::unlink(tmp->path.c_str());
  return st;
}

Result<std::string> MakeStagingDir(const std::string& what) {
  std::string root;
  if (const char* e = std::getenv("IMAGEPACK_STAGING_DIR"); e && *e) root = e;
  else if (const char* t = std::getenv("TMPDIR"); t && *t) root = t;
  else root = "/tmp";
  // Folders of this user's dead processes (a killed pack_lmdb) go first:
  // "imagepack-WHAT-PID-XXXXXX".
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("imagepack-", 0) != 0) continue;
    const size_t last = name.rfind('-'), before = last == std::string::npos ? last : name.rfind('-', last - 1);
    if (before == std::string::npos || before < 10) continue;
    const std::string pid_text = name.substr(before + 1, last - before - 1);
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    struct stat st;
    if (::lstat(e.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
    if (::kill(static_cast<pid_t>(std::stoll(pid_text)), 0) != 0 && errno == ESRCH) fs::remove_all(e.path(), ec);
  }
  std::string tmpl = root + "/imagepack-" + what + "-" + std::to_string(::getpid()) + "-XXXXXX";
  if (!::mkdtemp(tmpl.data())) return Status::FromErrno("staging folder in " + root, errno);
  return tmpl;
}

}  // namespace imagepack
