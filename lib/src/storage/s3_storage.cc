// S3-compatible object storage as a Storage (s3://BUCKET/KEY;
// docs/OBJECT_STORAGE.md): objects pinned by their ETag and read through
// the block cache, written by a multipart upload of a staged file
// (visible under the key only when complete), listed with ListObjectsV2.
#include <algorithm>
#include <cctype>
#include <memory>

#include "imagepack/files.h"
#include "storage/backends.h"
#include "storage/http_client.h"

namespace imagepack::internal {

Result<ObjectUrl> ParseObjectUrl(const std::string& url, bool key_optional) {
  if (url.rfind("s3://", 0) != 0) return Status::InvalidArgument(url + ": not an s3:// URL");
  const std::string rest = url.substr(5);
  const size_t slash = rest.find('/');
  ObjectUrl u;
  u.bucket = rest.substr(0, slash);
  if (slash != std::string::npos) u.key = rest.substr(slash + 1);
  if (u.bucket.size() < 3 || u.bucket.size() > 63 ||
      !std::all_of(u.bucket.begin(), u.bucket.end(),
                   [](unsigned char c) { return std::islower(c) || std::isdigit(c) || c == '-' || c == '.'; }))
    return Status::InvalidArgument(url + ": bucket name must be 3-63 characters of a-z, 0-9, '-' and '.'");
  if ((u.key.empty() && !key_optional) || u.key.size() > 1024)
    return Status::InvalidArgument(url + ": expected s3://BUCKET/KEY with a key of 1-1024 bytes");
  return u;
}

namespace {

class S3Storage : public Storage, public std::enable_shared_from_this<S3Storage> {
 public:
  S3Storage(const StorageSettings& s, std::shared_ptr<HttpClient> client) : Storage(s), client_(std::move(client)) {}
  const char* name() const override { return "s3"; }
  bool local() const override { return false; }
  bool writable() const override { return true; }
  bool listable() const override { return true; }

  Result<std::unique_ptr<ByteSource>> Open(const std::string& url, const ReadOptions& opts) override {
    auto u = ParseObjectUrl(url);
    if (!u.ok()) return u.status();
    const std::string endpoint = settings().s3_endpoint;
    RemoteObject o;
    o.url = url;
    o.pin_key = "s3\n" + endpoint + "\n" + url;
    o.identity = [=](const RemoteHead& h) {
      return "s3:" + endpoint + "/" + u->bucket + "/" + u->key + ":" + h.etag + ":" + std::to_string(h.size);
    };
    o.head = [this, u = u.value()](double budget, bool* unreachable) -> Result<RemoteHead> {
      auto r = Head(u, false, budget, unreachable);
      if (!r.ok()) return r.status();
      return RemoteHead{r->etag, r->content_length};
    };
    o.pinned = [this, u = u.value(), url](const RemoteHead& h) {
      return NewPinnedHttpSource(client_, HttpUrl(u, ""), url, h,
                                 "s3:" + settings().s3_endpoint + "/" + u.bucket + "/" + u.key + ":" + h.etag + ":" +
                                     std::to_string(h.size));
    };
    return OpenRemote(o, settings(), opts);
  }

  Result<std::unique_ptr<WritableFile>> Create(const std::string& url, const CreateOptions& opts) override {
    auto u = ParseObjectUrl(url);
    if (!u.ok()) return u.status();
    // Fails early (credentials, bucket, an existing object) rather than
    // after the file is written.
    bool unreachable = false;
    auto head = Head(u.value(), true, -1, &unreachable);
    if (!head.ok()) return head.status();
    if (head->status != 404 && !opts.overwrite)
      return Status::InvalidArgument(url + " already exists (use --overwrite to replace it)");
    const bool overwrite = opts.overwrite;
    // The file may be committed after this storage's last other owner is
    // gone: the publishing step holds it.
    return NewStagedRemoteFile(settings(), url,
                               [self = shared_from_this(), u = u.value(), url, overwrite](const std::string& staged) {
                                 return self->Upload(staged, u, url, overwrite);
                               });
  }

  Result<std::vector<std::string>> List(const std::string& url) override {
    auto u = ParseObjectUrl(url, true);
    if (!u.ok()) return u.status();
    std::string prefix = u->key;
    if (!prefix.empty() && prefix.back() != '/') prefix += '/';
    std::vector<std::string> out;
    std::string token;
    for (int page = 0; page < 100000; ++page) {
      // Parameters sorted and encoded: libcurl's SigV4 signs the query as given.
      std::string q = std::string(token.empty() ? "" : "continuation-token=" + UriEncode(token, false) + "&") +
                      "delimiter=%2F&list-type=2&prefix=" + UriEncode(prefix, false);
      HttpRequest r = Request("GET", ObjectUrl{u->bucket, ""}, q, "list " + prefix);
      HttpResponse resp;
      IMAGEPACK_RETURN_IF_ERROR(client_->RunOne(r, &resp));
      size_t at = 0, end = 0;
      for (std::string c; !(c = XmlValue(resp.body, "Contents", at, &end)).empty(); at = end)
        out.push_back(XmlValue(c, "Key").substr(prefix.size()));
      at = 0;
      for (std::string c; !(c = XmlValue(resp.body, "CommonPrefixes", at, &end)).empty(); at = end)
        out.push_back(XmlValue(c, "Prefix").substr(prefix.size()));
      token = XmlValue(resp.body, "NextContinuationToken");
      if (XmlValue(resp.body, "IsTruncated") != "true" || token.empty()) break;
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  Status Remove(const std::string& url) override {
    auto u = ParseObjectUrl(url);
    if (!u.ok()) return u.status();
    HttpResponse resp;
    return client_->RunOne(Request("DELETE", u.value(), "", "remove"), &resp, {404});
  }

  Result<FileInfo> Stat(const std::string& url) override {
    auto u = ParseObjectUrl(url);
    if (!u.ok()) return u.status();
    bool unreachable = false;
    auto head = Head(u.value(), true, -1, &unreachable);
    if (!head.ok()) return head.status();
    FileInfo info;
    if (head->status == 404) return info;
    info.exists = true;
    info.size = head->content_length;
    info.version = head->etag;
    return info;
  }

  Result<std::unique_ptr<StorageLock>> Lock(const std::string& url) override {
    (void)url;  // no locks in object storage: completing the upload is the atomic step
    return std::unique_ptr<StorageLock>(new StorageLock());
  }

 private:
  std::string HttpUrl(const ObjectUrl& url, const std::string& query) const {
    std::string base = settings().s3_endpoint;
    std::string path;
    if (settings().s3_virtual_hosted) {
      const size_t host = base.find("://") + 3;
      base.insert(host, url.bucket + ".");
      path = "/" + UriEncode(url.key, true);
    } else {
      path = "/" + url.bucket + (url.key.empty() ? "" : "/" + UriEncode(url.key, true));
    }
    return base + path + (query.empty() ? "" : "?" + query);
  }

  HttpRequest Request(const std::string& method, const ObjectUrl& url, const std::string& query,
                      const std::string& what) const {
    HttpRequest r;
    r.method = method;
    r.url = HttpUrl(url, query);
    r.shown = url.ToString();
    r.what = what;
    return r;
  }

  // A HEAD; with missing_ok a 404 is an answer (status 404), not an error.
  // A HEAD answer has no body, so no S3 error code: after a 4xx a GET of
  // one byte says which (SignatureDoesNotMatch, NoSuchBucket, ...).
  Result<HttpResponse> Head(const ObjectUrl& url, bool missing_ok, double budget, bool* unreachable) const {
    HttpRequest q = Request("HEAD", url, "", "");
    q.retry_seconds = budget;
    HttpResponse r;
    Status st = client_->RunOne(q, &r, missing_ok ? std::vector<long>{404} : std::vector<long>{});
    *unreachable = r.Unreachable(st);
    if (!st.ok() && r.status >= 400 && r.status < 500) {
      HttpRequest g = Request("GET", url, "", "");
      g.headers.push_back("Range: bytes=0-0");
      g.retry_seconds = budget;
      HttpResponse gr;
      Status why = client_->RunOne(g, &gr);
      if (!why.ok() && gr.status == r.status) return why;
    }
    if (!st.ok()) return st;
    return r;
  }

  // Aborts every incomplete multipart upload to exactly `url`'s key (a
  // killed run's, invisible but stored).
  Status AbortDangling(const ObjectUrl& url) {
    HttpResponse r;
    IMAGEPACK_RETURN_IF_ERROR(client_->RunOne(
        Request("GET", ObjectUrl{url.bucket, ""}, "prefix=" + UriEncode(url.key, false) + "&uploads=",
                "list incomplete uploads"),
        &r));
    std::vector<HttpRequest> aborts;
    size_t at = 0, end = 0;
    for (std::string up; !(up = XmlValue(r.body, "Upload", at, &end)).empty(); at = end) {
      if (XmlValue(up, "Key") != url.key) continue;
      aborts.push_back(Request("DELETE", url, "uploadId=" + UriEncode(XmlValue(up, "UploadId"), false),
                               "abort an incomplete upload"));
    }
    std::vector<HttpResponse> rs;
    return client_->Run(aborts, &rs, {404});
  }

  // The staged file `src` as object `u` (`url`): one multipart upload in
  // parts of s3_part_mb, 8 in flight; aborted when it fails.
  Status Upload(const std::string& src, const ObjectUrl& u, const std::string& url, bool overwrite) {
    if (!overwrite) {
      bool unreachable = false;
      auto head = Head(u, true, -1, &unreachable);
      if (!head.ok()) return head.status();
      if (head->status != 404) return Status::InvalidArgument(url + " exists (overwrite it with --overwrite)");
    }
    IMAGEPACK_RETURN_IF_ERROR(AbortDangling(u));
    auto in = OpenByteSource(src);
    if (!in.ok()) return in.status();
    const uint64_t size = in.value()->size();
    // S3's smallest part (but the last) is 5 MiB.
    const uint64_t part = std::max<uint64_t>(5 << 20, static_cast<uint64_t>(settings().s3_part_mb * (1 << 20)));
    const uint64_t parts = std::max<uint64_t>(1, (size + part - 1) / part);
    if (parts > 10000) return Status::InvalidArgument(url + ": more than 10,000 parts; use a larger part size");
    HttpResponse cr;
    IMAGEPACK_RETURN_IF_ERROR(client_->RunOne(Request("POST", u, "uploads=", "start a multipart upload"), &cr));
    const std::string id = XmlValue(cr.body, "UploadId");
    if (id.empty()) return Status::IOError(url + ": the server started an upload but gave no UploadId");
    const std::string qid = "uploadId=" + UriEncode(id, false);
    auto abort = [&](Status why) {
      HttpResponse ar;
      (void)client_->RunOne(Request("DELETE", u, qid, "abort the upload"), &ar, {404});
      return why;
    };
    std::vector<std::string> etags(parts);
    constexpr uint64_t kInFlight = 8;
    std::vector<std::vector<uint8_t>> bufs(kInFlight);
    for (uint64_t first = 0; first < parts; first += kInFlight) {
      const uint64_t last = std::min(parts, first + kInFlight);
      std::vector<HttpRequest> reqs;
      for (uint64_t p = first; p < last; ++p) {
        const uint64_t at = p * part, n = std::min(part, size - at);
        std::vector<uint8_t>& b = bufs[p - first];
        b.resize(n);
        Status rs = in.value()->ReadAt(at, n, b.data());
        if (!rs.ok()) return abort(rs);
        HttpRequest q = Request("PUT", u, "partNumber=" + std::to_string(p + 1) + "&" + qid,
                                "part " + std::to_string(p + 1) + " of " + std::to_string(parts));
        q.body = b.data();
        q.body_size = n;
        reqs.push_back(std::move(q));
      }
      std::vector<HttpResponse> rs;
      Status st = client_->Run(reqs, &rs);
      if (!st.ok()) return abort(st);
      for (uint64_t p = first; p < last; ++p) etags[p] = rs[p - first].etag;
    }
    std::string xml = "<CompleteMultipartUpload>";
    for (uint64_t p = 0; p < parts; ++p)
      xml += "<Part><PartNumber>" + std::to_string(p + 1) + "</PartNumber><ETag>" + etags[p] + "</ETag></Part>";
    xml += "</CompleteMultipartUpload>";
    HttpRequest done = Request("POST", u, qid, "complete the multipart upload");
    done.body = reinterpret_cast<const uint8_t*>(xml.data());
    done.body_size = xml.size();
    HttpResponse dr;
    Status st = client_->RunOne(done, &dr);
    // S3 may answer 200 with an <Error> body when completing fails late.
    if (st.ok() && !XmlValue(dr.body, "Code").empty())
      st = Status::IOError("POST " + url + " (complete the multipart upload): " + XmlValue(dr.body, "Code"));
    if (!st.ok()) return abort(st);
    return Status::Ok();
  }

  std::shared_ptr<HttpClient> client_;
};

}  // namespace

Result<std::shared_ptr<Storage>> NewS3Storage(const StorageSettings& s) {
  if (s.s3_endpoint.rfind("http://", 0) != 0 && s.s3_endpoint.rfind("https://", 0) != 0)
    return Status::InvalidArgument("AWS_ENDPOINT_URL=" + s.s3_endpoint +
                                   ": expected http://HOST[:PORT] or https://...");
  if (s.s3_access_key.empty() || s.s3_secret_key.empty())
    return Status::InvalidArgument(
        "object storage needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL "
        "for a server other than AWS)");
  HttpConfig c = HttpConfig::Of(s);
  c.sigv4_region = s.s3_region;
  c.access_key = s.s3_access_key;
  c.secret_key = s.s3_secret_key;
  c.session_token = s.s3_session_token;
  c.endpoint = s.s3_endpoint;
  return std::shared_ptr<Storage>(std::make_shared<S3Storage>(s, HttpClient::Shared(c)));
}

}  // namespace imagepack::internal
