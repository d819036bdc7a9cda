// A small S3 client on libcurl: requests are signed by libcurl itself
// (CURLOPT_AWS_SIGV4); several run in flight on one multi handle; failures
// a retry can cure (connection refused or reset, timeouts, 5xx, 429,
// SlowDown) are retried with backoff within a time budget. Messages name
// the object's URL, the endpoint, the HTTP status and the S3 error code,
// never a credential. Internal.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "imagepack/status.h"

namespace imagepack::internal {

struct S3Config {
  std::string endpoint;  // scheme://host[:port], no trailing slash
  std::string region = "us-east-1";
  std::string access_key, secret_key, session_token;
  bool virtual_hosted = false;  // bucket.host/key instead of host/bucket/key
  double retry_seconds = 60;    // budget for retrying one request
  double timeout_seconds = 30;  // a request that moves no byte for this long fails (and is retried)
  int max_in_flight = 16;       // requests in flight per call
};

// From AWS_ENDPOINT_URL (else https://s3.REGION.amazonaws.com),
// AWS_REGION / AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, IMAGEPACK_S3_ADDRESSING
// (path | virtual), IMAGEPACK_S3_RETRY_SECONDS, IMAGEPACK_S3_TIMEOUT.
Result<S3Config> S3ConfigFromEnv();

struct ObjectUrl {
  std::string bucket, key;
  std::string ToString() const { return "s3://" + bucket + "/" + key; }
};
Result<ObjectUrl> ParseObjectUrl(const std::string& url);

struct S3Request {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE
  ObjectUrl url;
  std::string query;  // sorted and encoded, "k=v&k2=v2" ("uploads=": a bare key)
  std::vector<std::string> headers;
  // GET into a caller's buffer: exactly out_size bytes expected (a range).
  uint8_t* out = nullptr;
  uint64_t out_size = 0;
  uint64_t range_offset = 0;  // with out: bytes range_offset..+out_size-1
  // PUT / POST body.
  const uint8_t* body = nullptr;
  size_t body_size = 0;
  std::string what;  // for messages, e.g. "bytes 0-99"
};

struct S3Response {
  long status = 0;
  std::string body;  // when out is null (bounded)
  std::string etag;
  uint64_t content_length = 0;
  std::string last_modified;
};

class S3Client {
 public:
  explicit S3Client(S3Config config);
  ~S3Client();
  // The process's client for the environment's configuration.
  static Result<std::shared_ptr<S3Client>> Default();

  // Runs every request, up to max_in_flight at a time, retrying those a
  // retry can cure. A request whose status is in `accept` (besides 2xx)
  // is not an error (e.g. 404 for an existence check). The first failure
  // is returned; the others still run to completion.
  Status Run(const std::vector<S3Request>& reqs, std::vector<S3Response>* resps,
             const std::vector<long>& accept = {});
  Status RunOne(const S3Request& req, S3Response* resp, const std::vector<long>& accept = {});

  const S3Config& config() const { return config_; }
  std::string HttpUrl(const ObjectUrl& url, const std::string& query) const;
  int64_t requests() const;

 private:
  struct Pool;
  S3Config config_;
  std::unique_ptr<Pool> pool_;
};

// "%XX" for every byte but unreserved ones (and '/' when keep_slash).
std::string UriEncode(const std::string& s, bool keep_slash);
// The text of the first <tag>...</tag> in xml (entities &quot; &amp; &lt;
// &gt; &apos; decoded), or "".
std::string XmlValue(const std::string& xml, const std::string& tag, size_t from = 0, size_t* end = nullptr);

}  // namespace imagepack::internal
