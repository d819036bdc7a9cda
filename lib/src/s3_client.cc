#include "s3_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace imagepack::internal {
namespace {

constexpr size_t kMaxBody = 1 << 20;  // error and listing bodies kept, at most

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

Result<double> EnvSeconds(const char* name, double fallback) {
  const std::string v = Env(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !(d > 0) || d > 86400)
    return Status::InvalidArgument(std::string(name) + "=" + v + ": expected seconds in (0, 86400]");
  return d;
}

void InitCurlOnce() {
  static const bool ok = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  (void)ok;
}

bool Retryable(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_COULDNT_RESOLVE_HOST:
      return true;
    default:
      return false;
  }
}

bool RetryableStatus(long status, const std::string& body) {
  if (status >= 500 || status == 429) return true;
  return status == 400 && XmlValue(body, "Code") == "RequestTimeout";
}

// One request in progress: its easy handle and what it gathers.
struct Transfer {
  const S3Request* req = nullptr;
  S3Response* resp = nullptr;
  size_t index = 0;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  uint64_t got = 0;         // bytes written into req->out
  size_t sent = 0;          // body bytes handed to libcurl
  bool overflow = false;    // more bytes than the range holds
  int attempts = 0;
  std::chrono::steady_clock::time_point deadline, not_before;
  std::string last_error;   // of the latest failed attempt
};

size_t OnData(char* p, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  long status = 0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  if (t->req->out && status >= 200 && status < 300) {
    if (t->got + bytes > t->req->out_size) {
      t->overflow = true;
      return 0;  // aborts the transfer
    }
    std::memcpy(t->req->out + t->got, p, bytes);
    t->got += bytes;
    return bytes;
  }
  const size_t keep = std::min(bytes, kMaxBody - std::min(kMaxBody, t->resp->body.size()));
  t->resp->body.append(p, keep);
  return bytes;
}

size_t OnHeader(char* p, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  std::string line(p, bytes);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return bytes;
  std::string name = line.substr(0, colon);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  size_t v = colon + 1;
  while (v < line.size() && line[v] == ' ') ++v;
  const std::string value = line.substr(v);
  if (name == "etag") t->resp->etag = value;
  else if (name == "last-modified") t->resp->last_modified = value;
  else if (name == "content-length") t->resp->content_length = std::strtoull(value.c_str(), nullptr, 10);
  return bytes;
}

size_t OnRead(char* p, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t room = size * n;
  const size_t k = std::min(room, t->req->body_size - t->sent);
  if (k) std::memcpy(p, t->req->body + t->sent, k);
  t->sent += k;
  return k;
}

}  // namespace

std::string UriEncode(const std::string& s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string XmlValue(const std::string& xml, const std::string& tag, size_t from, size_t* end) {
  const std::string open = "<" + tag + ">", close = "</" + tag + ">";
  const size_t a = xml.find(open, from);
  if (a == std::string::npos) return "";
  const size_t b = xml.find(close, a + open.size());
  if (b == std::string::npos) return "";
  if (end) *end = b + close.size();
  std::string v = xml.substr(a + open.size(), b - a - open.size());
  static const std::pair<const char*, char> kEntities[] = {
      {"&quot;", '"'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&apos;", '\''}, {"&amp;", '&'}};
  for (const auto& [ent, ch] : kEntities) {
    for (size_t at = v.find(ent); at != std::string::npos; at = v.find(ent, at + 1))
      v.replace(at, std::strlen(ent), 1, ch);
  }
  return v;
}

Result<ObjectUrl> ParseObjectUrl(const std::string& url) {
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
  if (u.key.empty() || u.key.size() > 1024)
    return Status::InvalidArgument(url + ": expected s3://BUCKET/KEY with a key of 1-1024 bytes");
  return u;
}

Result<S3Config> S3ConfigFromEnv() {
  S3Config c;
  c.region = Env("AWS_REGION");
  if (c.region.empty()) c.region = Env("AWS_DEFAULT_REGION");
  if (c.region.empty()) c.region = "us-east-1";
  c.endpoint = Env("AWS_ENDPOINT_URL_S3");
  if (c.endpoint.empty()) c.endpoint = Env("AWS_ENDPOINT_URL");
  if (c.endpoint.empty()) c.endpoint = "https://s3." + c.region + ".amazonaws.com";
  while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  if (c.endpoint.rfind("http://", 0) != 0 && c.endpoint.rfind("https://", 0) != 0)
    return Status::InvalidArgument("AWS_ENDPOINT_URL=" + c.endpoint + ": expected http://HOST[:PORT] or https://...");
  c.access_key = Env("AWS_ACCESS_KEY_ID");
  c.secret_key = Env("AWS_SECRET_ACCESS_KEY");
  c.session_token = Env("AWS_SESSION_TOKEN");
  if (c.access_key.empty() || c.secret_key.empty())
    return Status::InvalidArgument(
        "object storage needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_ENDPOINT_URL "
        "for a server other than AWS)");
  const std::string style = Env("IMAGEPACK_S3_ADDRESSING");
  if (style == "virtual") c.virtual_hosted = true;
  else if (!style.empty() && style != "path")
    return Status::InvalidArgument("IMAGEPACK_S3_ADDRESSING=" + style + ": expected path or virtual");
  auto retry = EnvSeconds("IMAGEPACK_S3_RETRY_SECONDS", c.retry_seconds);
  if (!retry.ok()) return retry.status();
  c.retry_seconds = retry.value();
  auto timeout = EnvSeconds("IMAGEPACK_S3_TIMEOUT", c.timeout_seconds);
  if (!timeout.ok()) return timeout.status();
  c.timeout_seconds = timeout.value();
  return c;
}

// Multi handles kept between calls: each keeps its connections open, so a
// call reuses those of an earlier one (keep-alive) instead of connecting.
struct S3Client::Pool {
  std::mutex mu;
  std::vector<CURLM*> free;
  int64_t requests = 0;
  CURLM* Take() {
    std::lock_guard<std::mutex> g(mu);
    if (free.empty()) return curl_multi_init();
    CURLM* m = free.back();
    free.pop_back();
    return m;
  }
  void Put(CURLM* m) {
    std::lock_guard<std::mutex> g(mu);
    free.push_back(m);
  }
  ~Pool() {
    for (CURLM* m : free) curl_multi_cleanup(m);
  }
};

S3Client::S3Client(S3Config config) : config_(std::move(config)), pool_(std::make_unique<Pool>()) {
  InitCurlOnce();
}
S3Client::~S3Client() = default;

Result<std::shared_ptr<S3Client>> S3Client::Default() {
  static std::mutex mu;
  static std::shared_ptr<S3Client> client;
  static std::string made_for;
  auto c = S3ConfigFromEnv();
  if (!c.ok()) return c.status();
  // Made again when the environment changes (tests switch credentials).
  const std::string key = c->endpoint + '\n' + c->region + '\n' + c->access_key + '\n' + c->secret_key + '\n' +
                          c->session_token + '\n' + std::to_string(c->virtual_hosted) + '\n' +
                          std::to_string(c->retry_seconds) + '\n' + std::to_string(c->timeout_seconds);
  std::lock_guard<std::mutex> g(mu);
  if (!client || made_for != key) {
    client = std::make_shared<S3Client>(std::move(c.value()));
    made_for = key;
  }
  return client;
}

int64_t S3Client::requests() const {
  std::lock_guard<std::mutex> g(pool_->mu);
  return pool_->requests;
}

std::string S3Client::HttpUrl(const ObjectUrl& url, const std::string& query) const {
  std::string base = config_.endpoint;
  std::string path;
  if (config_.virtual_hosted) {
    const size_t host = base.find("://") + 3;
    base.insert(host, url.bucket + ".");
    path = "/" + UriEncode(url.key, true);
  } else {
    path = "/" + url.bucket + (url.key.empty() ? "" : "/" + UriEncode(url.key, true));
  }
  return base + path + (query.empty() ? "" : "?" + query);
}

namespace {

void Setup(const S3Client& client, Transfer* t) {
  const S3Config& c = client.config();
  const S3Request& r = *t->req;
  CURL* e = t->easy;
  curl_easy_reset(e);
  t->got = 0;
  t->sent = 0;
  t->overflow = false;
  t->resp->body.clear();
  t->resp->etag.clear();
  t->resp->status = 0;
  const std::string url = client.HttpUrl(r.url, r.query);
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  const std::string sigv4 = "aws:amz:" + c.region + ":s3";
  curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sigv4.c_str());
  curl_easy_setopt(e, CURLOPT_USERNAME, c.access_key.c_str());
  curl_easy_setopt(e, CURLOPT_PASSWORD, c.secret_key.c_str());
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, static_cast<long>(std::max(1.0, c.timeout_seconds)));
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, OnData);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(e, CURLOPT_PRIVATE, t);
  if (t->headers) curl_slist_free_all(t->headers);
  t->headers = nullptr;
  t->headers = curl_slist_append(t->headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  if (!c.session_token.empty())
    t->headers = curl_slist_append(t->headers, ("x-amz-security-token: " + c.session_token).c_str());
  for (const std::string& h : r.headers) t->headers = curl_slist_append(t->headers, h.c_str());
  if (r.out) {
    const std::string range = std::to_string(r.range_offset) + "-" + std::to_string(r.range_offset + r.out_size - 1);
    curl_easy_setopt(e, CURLOPT_RANGE, range.c_str());
  }
  if (r.method == "HEAD") {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else if (r.method == "PUT") {
    curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, OnRead);
    curl_easy_setopt(e, CURLOPT_READDATA, t);
    curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.body_size));
  } else if (r.method == "POST") {
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r.body ? reinterpret_cast<const char*>(r.body) : "");
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body ? r.body_size : 0));
    t->headers = curl_slist_append(t->headers, "Content-Type: application/xml");
  } else if (r.method != "GET") {
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  }
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
}

// Describes a failed attempt: "HTTP 403 SignatureDoesNotMatch" or the
// transport error. Empty when the attempt succeeded. *retry: worth again.
std::string Judge(const S3Client& client, Transfer* t, CURLcode code, const std::vector<long>& accept, bool* retry) {
  *retry = false;
  if (code != CURLE_OK && !(code == CURLE_WRITE_ERROR && t->overflow)) {
    *retry = Retryable(code);
    return std::string("connection to ") + client.config().endpoint + " failed: " + curl_easy_strerror(code);
  }
  long status = 0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  t->resp->status = status;
  const bool ok = (status >= 200 && status < 300) || std::count(accept.begin(), accept.end(), status) > 0;
  if (!ok) {
    *retry = RetryableStatus(status, t->resp->body);
    std::string s3code = XmlValue(t->resp->body, "Code");
    if (s3code.empty() && status == 404) s3code = "NotFound";
    std::string msg = "HTTP " + std::to_string(status) + (s3code.empty() ? "" : " " + s3code);
    const std::string detail = XmlValue(t->resp->body, "Message");
    if (!detail.empty()) msg += " (" + detail + ")";
    return msg;
  }
  if (t->overflow || (t->req->out && status >= 200 && status < 300 && t->got != t->req->out_size)) {
    *retry = true;  // a short body: the connection broke
    return "the server sent " + std::to_string(t->got) + (t->overflow ? "+" : "") + " bytes of a range of " +
           std::to_string(t->req->out_size);
  }
  return "";
}

}  // namespace

Status S3Client::Run(const std::vector<S3Request>& reqs, std::vector<S3Response>* resps,
                     const std::vector<long>& accept) {
  using Clock = std::chrono::steady_clock;
  resps->assign(reqs.size(), S3Response());
  if (reqs.empty()) return Status::Ok();
  CURLM* multi = pool_->Take();
  std::vector<Transfer> ts(reqs.size());
  std::vector<size_t> waiting;  // not yet started (or to retry), by index
  const auto budget = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config_.retry_seconds));
  for (size_t i = 0; i < reqs.size(); ++i) {
    ts[i].req = &reqs[i];
    ts[i].resp = &(*resps)[i];
    ts[i].index = i;
    ts[i].easy = curl_easy_init();
    waiting.push_back(i);
  }
  std::reverse(waiting.begin(), waiting.end());  // pop_back takes them in order
  Status first;
  int running = 0, active = 0;
  int64_t started = 0;
  while (!waiting.empty() || active > 0) {
    const auto now = Clock::now();
    // Start what may start (a retry waits for its backoff).
    for (size_t k = waiting.size(); k-- > 0 && active < config_.max_in_flight;) {
      Transfer& t = ts[waiting[k]];
      if (t.not_before > now) continue;
      if (t.attempts == 0) t.deadline = now + budget;
      ++t.attempts;
      Setup(*this, &t);
      curl_multi_add_handle(multi, t.easy);
      ++active;
      ++started;
      waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(k));
    }
    curl_multi_perform(multi, &running);
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi, &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      Transfer* t = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
      const CURLcode code = m->data.result;
      curl_multi_remove_handle(multi, m->easy_handle);
      --active;
      bool retry = false;
      const std::string err = Judge(*this, t, code, accept, &retry);
      if (err.empty()) continue;
      const auto when = Clock::now();
      if (retry && when < t->deadline) {
        const double back = std::min(5.0, 0.1 * double(1 << std::min(t->attempts, 6)));
        t->not_before = when + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(back));
        t->last_error = err;
        waiting.push_back(t->index);
        continue;
      }
      if (first.ok()) {
        const S3Request& r = *t->req;
        std::string msg = r.method + " " + r.url.ToString() + (r.what.empty() ? "" : " (" + r.what + ")") + " at " +
                          config_.endpoint + ": " + err;
        if (t->attempts > 1) msg += " after " + std::to_string(t->attempts) + " attempts";
        const long st = t->resp->status;
        first = st == 404 ? Status::NotFound(msg)
                : (st == 403 || st == 400 || st == 412 || st == 416) ? Status::InvalidArgument(msg)
                                                                      : Status::IOError(msg);
      }
    }
    if (active > 0) {
      curl_multi_poll(multi, nullptr, 0, 100, nullptr);
    } else if (!waiting.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  for (Transfer& t : ts) {
    curl_easy_cleanup(t.easy);
    if (t.headers) curl_slist_free_all(t.headers);
  }
  pool_->Put(multi);
  {
    std::lock_guard<std::mutex> g(pool_->mu);
    pool_->requests += started;
  }
  return first;
}

Status S3Client::RunOne(const S3Request& req, S3Response* resp, const std::vector<long>& accept) {
  std::vector<S3Response> out;
  Status st = Run({req}, &out, accept);
  *resp = std::move(out[0]);
  return st;
}

}  // namespace imagepack::internal
