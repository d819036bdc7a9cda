// HTTP(S) requests on libcurl for the remote backends (s3://, https://):
// several in flight on one multi handle, kept-alive connections pooled
// between calls, failures a retry can cure (connection refused or reset,
// timeouts, 5xx, 429, RequestTimeout) retried with backoff within a time
// budget, TLS verified against the settings' CA. S3 requests are signed by
// libcurl itself (CURLOPT_AWS_SIGV4). Messages name what the request is
// for (an s3:// or https:// URL), never a credential. Internal.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "imagepack/status.h"
#include "imagepack/storage.h"

namespace imagepack::internal {

struct HttpConfig {
  double retry_seconds = 60;    // budget for retrying one request
  double timeout_seconds = 30;  // a request that moves no byte for this long fails (and is retried)
  int max_in_flight = 16;       // requests in flight per call
  std::string ca_file, ca_dir;  // empty: libcurl's own bundle
  // S3: SigV4 signing (libcurl's) with these credentials; region empty:
  // requests are not signed.
  std::string sigv4_region, access_key, secret_key, session_token;
  // For messages: "at ENDPOINT" after the request (S3's endpoint; empty
  // for plain HTTP, whose URL says where).
  std::string endpoint;

  // What every remote backend takes from the settings: retries, timeout,
  // the CA.
  static HttpConfig Of(const StorageSettings& s);
};

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE
  std::string url;             // absolute, query included
  std::string shown;           // what messages call the target (s3://B/K, https://H/P)
  std::vector<std::string> headers;
  // GET into a caller's buffer: exactly out_size bytes expected (a range).
  uint8_t* out = nullptr;
  uint64_t out_size = 0;
  uint64_t range_offset = 0;  // with out: bytes range_offset..+out_size-1
  // With out: the ETag the answer must carry (a pinned object); an answer
  // with another is a changed object, not data.
  std::string expect_etag;
  // PUT / POST body.
  const uint8_t* body = nullptr;
  size_t body_size = 0;
  std::string what;           // for messages, e.g. "bytes 0-99"
  double retry_seconds = -1;  // >= 0: this request's retry budget instead of the config's
};

struct HttpResponse {
  long status = 0;     // 0: no answer (the connection failed)
  std::string body;    // when out is null (bounded)
  std::string etag, last_modified, content_range, accept_ranges;
  // Where a redirect points (Location), the next page (Link, RFC 8288),
  // the server's name for an error (X-Error-Code: the Hub's), the commit
  // an answer is of (X-Repo-Commit: the Hub's).
  std::string location, link, error_code, repo_commit;
  int64_t linked_size = -1;  // X-Linked-Size: the size of the file a Hub redirect points at
  uint64_t content_length = 0;
  double retry_after = -1;  // seconds a 429 or 503 asks to wait (Retry-After), -1: none
  bool changed = false;      // an answer with another ETag than expect_etag
  bool tls_refused = false;  // the server's certificate did not verify

  // Forgets what headers said (a new header block: a redirect, a 100
  // Continue, another attempt).
  void ClearHeaders() {
    etag.clear(), last_modified.clear(), content_range.clear(), accept_ranges.clear();
    location.clear(), link.clear(), error_code.clear(), repo_commit.clear();
    content_length = 0, retry_after = -1, linked_size = -1;
  }

  // A request that failed (`st`) without an answer from the server: no
  // connection, a timeout, a 5xx; a refused certificate is an answer.
  // Where a pinned node cache may stand in for the server.
  bool Unreachable(const Status& st) const { return !st.ok() && !tls_refused && (status == 0 || status >= 500); }
};

class HttpClient {
 public:
  explicit HttpClient(HttpConfig config);
  ~HttpClient();
  // A client shared by every caller with the same configuration (its
  // kept-alive connections too).
  static std::shared_ptr<HttpClient> Shared(const HttpConfig& config);

  // Runs every request, up to max_in_flight at a time, retrying those a
  // retry can cure. A request whose status is in `accept` (besides 2xx)
  // is not an error (e.g. 404 for an existence check). The first failure
  // is returned; the others still run to completion. A certificate that
  // does not verify is an error at once, naming the server and the CA.
  Status Run(const std::vector<HttpRequest>& reqs, std::vector<HttpResponse>* resps,
             const std::vector<long>& accept = {});
  Status RunOne(const HttpRequest& req, HttpResponse* resp, const std::vector<long>& accept = {});

  const HttpConfig& config() const { return config_; }
  int64_t requests() const;

 private:
  struct Pool;
  HttpConfig config_;
  std::unique_ptr<Pool> pool_;
};

// "%XX" for every byte but unreserved ones (and '/' when keep_slash).
std::string UriEncode(const std::string& s, bool keep_slash);
// The text of the first <tag>...</tag> in xml (entities &quot; &amp; &lt;
// &gt; &apos; decoded), or "".
std::string XmlValue(const std::string& xml, const std::string& tag, size_t from = 0, size_t* end = nullptr);
// "scheme://host[:port]" of an absolute URL.
std::string OriginOf(const std::string& url);
// The URL of `rel` in a Link header ("<URL>; rel=\"next\", ..."), or "".
std::string LinkTarget(const std::string& link, const std::string& rel);

}  // namespace imagepack::internal
