// Files served over HTTP(S) as a read-only Storage (https://HOST/PATH,
// http://...): pinned by their ETag at open, read with ranged GETs through
// the block cache, TLS verified against the settings' CA. Any server that
// answers HEAD with an ETag and honours Range will do (nginx, a CDN, an
// object store's public URLs). No listing, writing or locking: there is
// no such thing in plain HTTP.
#include "storage/backends.h"
#include "storage/http_client.h"

namespace imagepack::internal {
namespace {

class HttpStorage : public Storage {
 public:
  HttpStorage(const StorageSettings& s, std::shared_ptr<HttpClient> client) : Storage(s), client_(std::move(client)) {}
  const char* name() const override { return "https"; }
  bool local() const override { return false; }
  bool writable() const override { return false; }
  bool listable() const override { return false; }

  Result<std::unique_ptr<ByteSource>> Open(const std::string& url, const ReadOptions& opts) override {
    IMAGEPACK_RETURN_IF_ERROR(CheckUrl(url));
    RemoteObject o;
    o.url = url;
    o.pin_key = "http\n" + url;
    o.identity = [url](const RemoteHead& h) { return "http:" + url + ":" + h.etag + ":" + std::to_string(h.size); };
    o.head = [this, url](double budget, bool* unreachable) -> Result<RemoteHead> {
      auto r = Head(url, false, budget, unreachable);
      if (!r.ok()) return r.status();
      if (r->accept_ranges.find("bytes") == std::string::npos)
        return Status::NotSupported(url + ": the server does not serve byte ranges (no \"Accept-Ranges: bytes\"); "
                                          "imagepack reads remote files by ranges");
      return RemoteHead{r->etag, r->content_length};
    };
    o.pinned = [this, url](const RemoteHead& h) {
      return NewPinnedHttpSource(client_, url, url, h, "http:" + url + ":" + h.etag + ":" + std::to_string(h.size));
    };
    return OpenRemote(o, settings(), opts);
  }

  Result<std::unique_ptr<WritableFile>> Create(const std::string& url, const CreateOptions&) override {
    return ReadOnly(url);
  }
  Result<std::vector<std::string>> List(const std::string& url) override {
    return Status::NotSupported(url + ": an HTTP server lists no folders; name the files (a brace pattern "
                                      "such as https://HOST/train-{000..146}.tar names shards)");
  }
  Status Remove(const std::string& url) override { return ReadOnly(url); }
  Result<FileInfo> Stat(const std::string& url) override {
    IMAGEPACK_RETURN_IF_ERROR(CheckUrl(url));
    bool unreachable = false;
    auto head = Head(url, true, -1, &unreachable);
    if (!head.ok()) return head.status();
    FileInfo info;
    if (head->status == 404) return info;
    info.exists = true;
    info.size = head->content_length;
    info.version = head->etag;
    return info;
  }
  Result<std::unique_ptr<StorageLock>> Lock(const std::string& url) override { return ReadOnly(url); }

 private:
  static Status ReadOnly(const std::string& url) {
    return Status::NotSupported(url + ": HTTP(S) storage is read-only (write to a local path or an s3:// URL)");
  }
  static Status CheckUrl(const std::string& url) {
    const size_t host = url.find("://") + 3;
    if (url.size() <= host || url.find('/', host) == std::string::npos || url.back() == '/')
      return Status::InvalidArgument(url + ": expected https://HOST[:PORT]/PATH naming a file");
    return Status::Ok();
  }
  Result<HttpResponse> Head(const std::string& url, bool missing_ok, double budget, bool* unreachable) const {
    HttpRequest q;
    q.method = "HEAD";
    q.url = url;
    q.shown = url;
    q.retry_seconds = budget;
    HttpResponse r;
    Status st = client_->RunOne(q, &r, missing_ok ? std::vector<long>{404} : std::vector<long>{});
    *unreachable = r.Unreachable(st);
    if (!st.ok()) return st;
    return r;
  }

  std::shared_ptr<HttpClient> client_;
};

}  // namespace

Result<std::shared_ptr<Storage>> NewHttpStorage(const StorageSettings& s) {
  return std::shared_ptr<Storage>(std::make_shared<HttpStorage>(s, HttpClient::Shared(HttpConfig::Of(s))));
}

}  // namespace imagepack::internal
