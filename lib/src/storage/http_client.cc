#include "storage/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

namespace imagepack::internal {
namespace {

constexpr size_t kMaxBody = 1 << 20;  // error and listing bodies kept, at most

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

bool TlsRefused(CURLcode c) {
  return c == CURLE_PEER_FAILED_VERIFICATION || c == CURLE_SSL_CACERT_BADFILE || c == CURLE_SSL_CERTPROBLEM ||
         c == CURLE_SSL_ISSUER_ERROR || c == CURLE_SSL_PINNEDPUBKEYNOTMATCH;
}

// One request in progress: its easy handle and what it gathers.
struct Transfer {
  const HttpRequest* req = nullptr;
  HttpResponse* resp = nullptr;
  size_t index = 0;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  uint64_t got = 0;          // bytes written into req->out
  size_t sent = 0;           // body bytes handed to libcurl
  bool overflow = false;     // more bytes than the range holds
  bool whole = false;        // a 200 with the whole file to a ranged request
  int attempts = 0;
  std::chrono::steady_clock::time_point deadline, not_before;
  std::string last_error;    // of the latest failed attempt
  char error_buf[CURL_ERROR_SIZE] = {0};
};

size_t OnData(char* p, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  long status = 0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  if (t->req->out && status >= 200 && status < 300) {
    // A server that ignores Range answers 200 with the whole file: not a
    // short read to retry, and not data to keep.
    if (status == 200 && !(t->req->range_offset == 0 && t->resp->content_length == t->req->out_size)) {
      t->whole = true;
      return 0;
    }
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
  // A new header block (a redirect or a 100 Continue before the answer).
  if (line.rfind("HTTP/", 0) == 0) {
    t->resp->ClearHeaders();
    return bytes;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return bytes;
  std::string name = line.substr(0, colon);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  size_t v = colon + 1;
  while (v < line.size() && line[v] == ' ') ++v;
  const std::string value = line.substr(v);
  if (name == "etag") t->resp->etag = value;
  else if (name == "last-modified") t->resp->last_modified = value;
  else if (name == "content-range") t->resp->content_range = value;
  else if (name == "accept-ranges") t->resp->accept_ranges = value;
  else if (name == "content-length") t->resp->content_length = std::strtoull(value.c_str(), nullptr, 10);
  else if (name == "location") t->resp->location = value;
  else if (name == "link") t->resp->link = value;
  else if (name == "x-error-code") t->resp->error_code = value;
  else if (name == "x-repo-commit") t->resp->repo_commit = value;
  else if (name == "x-linked-size") t->resp->linked_size = static_cast<int64_t>(std::strtoull(value.c_str(), nullptr, 10));
  else if (name == "retry-after") {
    // Seconds (an HTTP date, the other form, is not read: the backoff stands).
    char* end = nullptr;
    const double s = std::strtod(value.c_str(), &end);
    if (end != value.c_str() && *end == '\0' && s >= 0) t->resp->retry_after = std::min(s, 86400.0);
  }
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

std::string OriginOf(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const size_t end = url.find_first_of("/?#", scheme + 3);
  return url.substr(0, end);
}

std::string LinkTarget(const std::string& link, const std::string& rel) {
  // Entries "<URL>; param; param", separated by commas outside <...>.
  size_t at = 0;
  while (at < link.size()) {
    const size_t open = link.find('<', at);
    if (open == std::string::npos) return "";
    const size_t close = link.find('>', open);
    if (close == std::string::npos) return "";
    size_t end = link.find('<', close);
    if (end == std::string::npos) end = link.size();
    const std::string params = link.substr(close + 1, end - close - 1);
    if (params.find("rel=\"" + rel + "\"") != std::string::npos || params.find("rel=" + rel) != std::string::npos)
      return link.substr(open + 1, close - open - 1);
    at = end;
  }
  return "";
}

// Multi handles kept between calls: each keeps its connections open, so a
// call reuses those of an earlier one (keep-alive) instead of connecting.
struct HttpClient::Pool {
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

HttpClient::HttpClient(HttpConfig config) : config_(std::move(config)), pool_(std::make_unique<Pool>()) {
  InitCurlOnce();
}
HttpClient::~HttpClient() = default;

HttpConfig HttpConfig::Of(const StorageSettings& s) {
  HttpConfig c;
  c.retry_seconds = s.retry_seconds;
  c.timeout_seconds = s.timeout_seconds;
  c.ca_file = s.ca_file;
  c.ca_dir = s.ca_dir;
  return c;
}

std::shared_ptr<HttpClient> HttpClient::Shared(const HttpConfig& c) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<HttpClient>> clients;
  const std::string key = std::to_string(c.retry_seconds) + '\n' + std::to_string(c.timeout_seconds) + '\n' +
                          std::to_string(c.max_in_flight) + '\n' + c.ca_file + '\n' + c.ca_dir + '\n' +
                          c.sigv4_region + '\n' + c.access_key + '\n' + c.secret_key + '\n' + c.session_token +
                          '\n' + c.endpoint;
  std::lock_guard<std::mutex> g(mu);
  std::shared_ptr<HttpClient>& client = clients[key];
  if (!client) client = std::make_shared<HttpClient>(c);
  return client;
}

int64_t HttpClient::requests() const {
  std::lock_guard<std::mutex> g(pool_->mu);
  return pool_->requests;
}

namespace {

void Setup(const HttpClient& client, Transfer* t) {
  const HttpConfig& c = client.config();
  const HttpRequest& r = *t->req;
  CURL* e = t->easy;
  curl_easy_reset(e);
  t->got = 0;
  t->sent = 0;
  t->overflow = false;
  t->whole = false;
  t->error_buf[0] = '\0';
  t->resp->body.clear();
  t->resp->ClearHeaders();
  t->resp->status = 0;
  t->resp->changed = false;
  t->resp->tls_refused = false;
  curl_easy_setopt(e, CURLOPT_URL, r.url.c_str());
  if (!c.sigv4_region.empty()) {
    const std::string sigv4 = "aws:amz:" + c.sigv4_region + ":s3";
    curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(e, CURLOPT_USERNAME, c.access_key.c_str());
    curl_easy_setopt(e, CURLOPT_PASSWORD, c.secret_key.c_str());
  }
  if (!c.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, c.ca_file.c_str());
  if (!c.ca_dir.empty()) curl_easy_setopt(e, CURLOPT_CAPATH, c.ca_dir.c_str());
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error_buf);
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
  if (!c.sigv4_region.empty()) {
    // libcurl 7.88 signs but does not add this header, without which S3
    // servers refuse the request.
    t->headers = curl_slist_append(t->headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (!c.session_token.empty())
      t->headers = curl_slist_append(t->headers, ("x-amz-security-token: " + c.session_token).c_str());
  }
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
std::string Judge(const HttpClient& client, Transfer* t, CURLcode code, const std::vector<long>& accept,
                  bool* retry) {
  *retry = false;
  const std::string origin = OriginOf(t->req->url);
  if (code == CURLE_WRITE_ERROR && t->whole)
    return origin + " does not serve byte ranges (it answered a Range request with the whole file)";
  if (code != CURLE_OK && !(code == CURLE_WRITE_ERROR && t->overflow)) {
    if (TlsRefused(code)) {
      t->resp->tls_refused = true;
      const HttpConfig& c = client.config();
      return "the TLS certificate of " + origin + " does not verify against " +
             (c.ca_file.empty() ? std::string("the system's CA bundle") : "CA file " + c.ca_file) +
             (c.ca_dir.empty() ? "" : " and CA folder " + c.ca_dir) + " (" +
             (t->error_buf[0] ? t->error_buf : curl_easy_strerror(code)) +
             "); refused (SSL_CERT_FILE, CURL_CA_BUNDLE or the ca_file option name another CA)";
    }
    *retry = Retryable(code);
    return "connection to " + origin + " failed: " + (t->error_buf[0] ? t->error_buf : curl_easy_strerror(code));
  }
  long status = 0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  t->resp->status = status;
  const HttpRequest& r = *t->req;
  if (status == 412 || (r.out && !r.expect_etag.empty() && status >= 200 && status < 300 &&
                        !t->resp->etag.empty() && t->resp->etag != r.expect_etag)) {
    t->resp->changed = true;
    return "HTTP " + std::to_string(status) + " (changed: ETag " + (t->resp->etag.empty() ? "?" : t->resp->etag) +
           ", pinned " + r.expect_etag + ")";
  }
  const bool ok = (status >= 200 && status < 300) || std::count(accept.begin(), accept.end(), status) > 0;
  if (!ok) {
    *retry = RetryableStatus(status, t->resp->body);
    std::string code_name = XmlValue(t->resp->body, "Code");
    if (code_name.empty() && status == 404) code_name = "NotFound";
    std::string msg = "HTTP " + std::to_string(status) + (code_name.empty() ? "" : " " + code_name);
    const std::string detail = XmlValue(t->resp->body, "Message");
    if (!detail.empty()) msg += " (" + detail + ")";
    return msg;
  }
  if (t->overflow || (r.out && status >= 200 && status < 300 && t->got != r.out_size)) {
    *retry = true;  // a short body: the connection broke
    return "the server sent " + std::to_string(t->got) + (t->overflow ? "+" : "") + " bytes of a range of " +
           std::to_string(r.out_size);
  }
  return "";
}

}  // namespace

Status HttpClient::Run(const std::vector<HttpRequest>& reqs, std::vector<HttpResponse>* resps,
                       const std::vector<long>& accept) {
  using Clock = std::chrono::steady_clock;
  resps->assign(reqs.size(), HttpResponse());
  if (reqs.empty()) return Status::Ok();
  CURLM* multi = pool_->Take();
  std::vector<Transfer> ts(reqs.size());
  std::vector<size_t> waiting;  // not yet started (or to retry), by index
  auto budget_of = [&](const HttpRequest& r) {
    const double s = r.retry_seconds >= 0 ? r.retry_seconds : config_.retry_seconds;
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
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
      if (t.attempts == 0) t.deadline = now + budget_of(*t.req);
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
      // A server's Retry-After is waited for when the budget allows it.
      const double asked = t->resp->retry_after;
      const bool can_wait =
          asked < 0 || when + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(asked)) <
                           t->deadline;
      if (retry && when < t->deadline && can_wait) {
        const double back = std::max(asked, std::min(5.0, 0.1 * double(1 << std::min(t->attempts, 6))));
        t->not_before = when + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(back));
        t->last_error = err;
        waiting.push_back(t->index);
        continue;
      }
      if (first.ok()) {
        const HttpRequest& r = *t->req;
        std::string msg = r.method + " " + r.shown + (r.what.empty() ? "" : " (" + r.what + ")") +
                          (config_.endpoint.empty() ? "" : " at " + config_.endpoint) + ": " + err;
        if (t->attempts > 1) msg += " after " + std::to_string(t->attempts) + " attempts";
        if (retry && !can_wait)
          msg += " (the server asked to wait " + std::to_string(static_cast<long long>(asked)) +
                 " s, past the retry budget)";
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

Status HttpClient::RunOne(const HttpRequest& req, HttpResponse* resp, const std::vector<long>& accept) {
  std::vector<HttpResponse> out;
  Status st = Run({req}, &out, accept);
  *resp = std::move(out[0]);
  return st;
}

}  // namespace imagepack::internal
