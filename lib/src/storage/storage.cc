// The storage factory (the one place a URL's scheme is read), the
// settings from the environment, and what every backend shares: whole
// reads, publishing a folder, staging folders.
#include "imagepack/storage.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <string_view>

#include "storage/fd_io.h"
#include "imagepack/files.h"
#include "storage/backends.h"

namespace fs = std::filesystem;

namespace imagepack {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// A positive number from `name`, at most `max`; unset keeps *out.
Status EnvNumber(const char* name, double max, double* out) {
  const std::string v = Env(name);
  if (v.empty()) return Status::Ok();
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !(d > 0) || d > max)
    return Status::InvalidArgument(std::string(name) + "=" + v + ": expected a number in (0, " +
                                   std::to_string(static_cast<long long>(max)) + "]");
  *out = d;
  return Status::Ok();
}

// Every variable FromEnvironment reads: a change to any of them remakes
// the process's settings (ForProcess).
constexpr const char* kVariables[] = {
    "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "IMAGEPACK_S3_ADDRESSING", "IMAGEPACK_S3_PART_MB",
    "IMAGEPACK_S3_RETRY_SECONDS", "IMAGEPACK_S3_TIMEOUT", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR",
    "IMAGEPACK_CACHE_DIR", "IMAGEPACK_CACHE_LIMIT_MB", "IMAGEPACK_FETCH_BLOCK_MB", "IMAGEPACK_RAM_CACHE_MB",
    "IMAGEPACK_STAGING_DIR", "TMPDIR", "IMAGEPACK_SHM_DIR", "HF_ENDPOINT", "HF_TOKEN", "HF_TOKEN_PATH",
    "HF_HOME", "XDG_CACHE_HOME", "HOME", "HF_HUB_OFFLINE"};

// huggingface_hub's reading of a boolean variable (constants.py, _is_true).
bool IsTrue(const std::string& v) {
  std::string l;
  for (unsigned char c : v) l += static_cast<char>(std::tolower(c));
  return l == "1" || l == "on" || l == "yes" || l == "true";
}

// The Hub's settings, as huggingface_hub reads them (constants.py): the
// token from HF_TOKEN, else the token file (HF_TOKEN_PATH, else
// HF_HOME/token, HF_HOME defaulting to XDG_CACHE_HOME/huggingface, that to
// ~/.cache/huggingface).
Status HubFromEnvironment(StorageSettings* s) {
  s->hf_endpoint = Env("HF_ENDPOINT");
  while (!s->hf_endpoint.empty() && s->hf_endpoint.back() == '/') s->hf_endpoint.pop_back();
  if (s->hf_endpoint.empty()) s->hf_endpoint = "https://huggingface.co";
  if (s->hf_endpoint.rfind("https://", 0) != 0 && s->hf_endpoint.rfind("http://", 0) != 0)
    return Status::InvalidArgument("HF_ENDPOINT=" + s->hf_endpoint + ": expected an http:// or https:// URL");
  s->hf_offline = IsTrue(Env("HF_HUB_OFFLINE"));
  s->hf_token = Env("HF_TOKEN");
  if (!s->hf_token.empty()) {
    s->hf_token_from = "HF_TOKEN";
  } else {
    std::string file = Env("HF_TOKEN_PATH");
    if (file.empty()) {
      std::string home = Env("HF_HOME");
      if (home.empty()) {
        const std::string xdg = Env("XDG_CACHE_HOME");
        home = (xdg.empty() ? Env("HOME") + "/.cache" : xdg) + "/huggingface";
      }
      file = home + "/token";
    }
    auto bytes = ReadFile(file, 0, 4096);
    if (bytes.ok()) {
      std::string t(bytes->begin(), bytes->end());
      while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
      while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.erase(0, 1);
      s->hf_token = t;
      if (!t.empty()) s->hf_token_from = "the token file " + file;
    }
  }
  // Sent as one header line: a token holding a line break or a control
  // character would add headers of its own.
  for (unsigned char c : s->hf_token)
    if (c < 0x21 || c > 0x7e)
      return Status::InvalidArgument(s->hf_token_from + " holds a character a token cannot have (the token is not shown)");
  return Status::Ok();
}

// The variables' values as one string (unset and empty told apart).
std::string EnvironmentKey() {
  std::string key;
  for (const char* name : kVariables) {
    const char* v = std::getenv(name);
    key += v ? "=" + std::string(v) : std::string("-");
    key += '\0';
  }
  return key;
}

}  // namespace

Result<StorageSettings> StorageSettings::ForProcess() {
  static std::mutex mu;
  static std::string* key = new std::string;  // never destroyed: asked from static destructors' threads too
  static Result<StorageSettings>* made = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  std::string now = EnvironmentKey();
  if (made == nullptr || now != *key) {
    delete made;
    made = new Result<StorageSettings>(FromEnvironment());
    *key = std::move(now);
  }
  return *made;
}

Result<StorageSettings> StorageSettings::FromEnvironment() {
  StorageSettings s;
  s.s3_region = Env("AWS_REGION");
  if (s.s3_region.empty()) s.s3_region = Env("AWS_DEFAULT_REGION");
  if (s.s3_region.empty()) s.s3_region = "us-east-1";
  s.s3_endpoint = Env("AWS_ENDPOINT_URL_S3");
  if (s.s3_endpoint.empty()) s.s3_endpoint = Env("AWS_ENDPOINT_URL");
  if (s.s3_endpoint.empty()) s.s3_endpoint = "https://s3." + s.s3_region + ".amazonaws.com";
  while (!s.s3_endpoint.empty() && s.s3_endpoint.back() == '/') s.s3_endpoint.pop_back();
  s.s3_access_key = Env("AWS_ACCESS_KEY_ID");
  s.s3_secret_key = Env("AWS_SECRET_ACCESS_KEY");
  s.s3_session_token = Env("AWS_SESSION_TOKEN");
  const std::string style = Env("IMAGEPACK_S3_ADDRESSING");
  if (style == "virtual") s.s3_virtual_hosted = true;
  else if (!style.empty() && style != "path")
    return Status::InvalidArgument("IMAGEPACK_S3_ADDRESSING=" + style + ": expected path or virtual");
  IMAGEPACK_RETURN_IF_ERROR(EnvNumber("IMAGEPACK_S3_PART_MB", 5000, &s.s3_part_mb));
  IMAGEPACK_RETURN_IF_ERROR(EnvNumber("IMAGEPACK_S3_RETRY_SECONDS", 86400, &s.retry_seconds));
  IMAGEPACK_RETURN_IF_ERROR(EnvNumber("IMAGEPACK_S3_TIMEOUT", 86400, &s.timeout_seconds));
  s.ca_file = Env("CURL_CA_BUNDLE");
  if (s.ca_file.empty()) s.ca_file = Env("SSL_CERT_FILE");
  s.ca_dir = Env("SSL_CERT_DIR");
  s.cache_dir = Env("IMAGEPACK_CACHE_DIR");
  IMAGEPACK_RETURN_IF_ERROR(EnvNumber("IMAGEPACK_CACHE_LIMIT_MB", 1e9, &s.cache_limit_mb));
  IMAGEPACK_RETURN_IF_ERROR(EnvNumber("IMAGEPACK_FETCH_BLOCK_MB", 1024, &s.fetch_block_mb));
  IMAGEPACK_RETURN_IF_ERROR(EnvNumber("IMAGEPACK_RAM_CACHE_MB", 1e9, &s.ram_cache_mb));
  s.staging_dir = Env("IMAGEPACK_STAGING_DIR");
  if (s.staging_dir.empty()) s.staging_dir = Env("TMPDIR");
  if (s.staging_dir.empty()) s.staging_dir = "/tmp";
  s.shm_dir = Env("IMAGEPACK_SHM_DIR");
  if (s.shm_dir.empty()) s.shm_dir = "/dev/shm";
  IMAGEPACK_RETURN_IF_ERROR(HubFromEnvironment(&s));
  return s;
}

namespace {

// A scheme: letters, digits, '+', '-', '.', starting with a letter (RFC 3986).
bool IsScheme(std::string_view s) {
  return !s.empty() && std::isalpha(static_cast<unsigned char>(s[0])) &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalnum(c) || c == '+' || c == '-' || c == '.'; });
}

// The backends by scheme: the built-in ones, then the callers'.
struct Backends {
  std::mutex mu;
  std::map<std::string, StorageFactory> by_scheme{
      {"s3", internal::NewS3Storage}, {"https", internal::NewHttpStorage}, {"http", internal::NewHttpStorage},
      {"hf", internal::NewHubStorage}};
};
Backends& Registered() {
  static Backends* b = new Backends;  // never destroyed: used from static destructors' threads too
  return *b;
}

}  // namespace

Status RegisterStorage(const std::string& scheme, StorageFactory factory) {
  if (!IsScheme(scheme)) return Status::InvalidArgument("'" + scheme + "' is not a URL scheme");
  if (!factory) return Status::InvalidArgument(scheme + "://: no factory given");
  Backends& b = Registered();
  std::lock_guard<std::mutex> lock(b.mu);
  b.by_scheme[scheme] = std::move(factory);
  return Status::Ok();
}

std::vector<std::string> StorageSchemes() {
  Backends& b = Registered();
  std::lock_guard<std::mutex> lock(b.mu);
  std::vector<std::string> out;
  for (const auto& [scheme, f] : b.by_scheme) out.push_back(scheme);
  return out;
}

Result<std::shared_ptr<Storage>> OpenStorage(const std::string& url, const StorageSettings& settings) {
  const size_t sep = url.find("://");
  if (sep == std::string::npos || !IsScheme(std::string_view(url).substr(0, sep)))
    return internal::NewLocalStorage(settings);
  const std::string scheme = url.substr(0, sep);
  StorageFactory factory;
  {
    Backends& b = Registered();
    std::lock_guard<std::mutex> lock(b.mu);
    if (auto it = b.by_scheme.find(scheme); it != b.by_scheme.end()) factory = it->second;
  }
  if (!factory) {
    std::string known;
    for (const std::string& s : StorageSchemes()) known += ", " + s + "://";
    return Status::NotSupported(url + ": no storage for '" + scheme + "://' (imagepack reads local paths" + known + ")");
  }
  auto made = factory(settings);
  if (!made.ok()) return made.status().WithContext(url);
  return made;
}

Result<std::shared_ptr<Storage>> OpenStorage(const std::string& url) {
  auto settings = StorageSettings::ForProcess();
  if (!settings.ok()) return settings.status();
  return OpenStorage(url, settings.value());
}

Result<std::string> PinnedUrl(const std::string& url) {
  auto storage = OpenStorage(url);
  if (!storage.ok()) return storage.status();
  return storage.value()->Pinned(url);
}

Result<std::unique_ptr<ByteSource>> OpenByteSource(const std::string& path) {
  auto storage = OpenStorage(path);
  if (!storage.ok()) return storage.status();
  return storage.value()->Open(path);
}

std::string Storage::Parent(const std::string& url) {
  const size_t slash = url.rfind('/');
  return slash == std::string::npos ? std::string() : url.substr(0, slash + 1);
}

std::string Storage::Join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

Result<std::vector<uint8_t>> ReadWhole(Storage& storage, const std::string& url, uint64_t max_bytes) {
  auto bytes = storage.Open(url);
  if (!bytes.ok()) return bytes.status();
  const uint64_t size = bytes.value()->size();
  if (size > max_bytes)
    return Status::InvalidArgument(url + ": " + std::to_string(size) + " bytes, over the budget of " +
                                   std::to_string(max_bytes) + " for one file");
  std::vector<uint8_t> out(size);
  if (size) IMAGEPACK_RETURN_IF_ERROR(bytes.value()->ReadAt(0, size, out.data()));
  return out;
}

Status PublishTree(const std::string& dir, Storage& storage, const std::string& prefix) {
  std::error_code ec;
  std::vector<std::string> files;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file()) files.push_back(fs::relative(it->path(), dir).string());
  if (ec) return Status::IOError(dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  Storage::CreateOptions co;
  co.overwrite = true;
  for (const std::string& rel : files) {
    const std::string from = (fs::path(dir) / rel).string();
    auto src = OpenFileSource(from);
    if (!src.ok()) return src.status();
    auto out = storage.Create(Storage::Join(prefix, rel), co);
    if (!out.ok()) return out.status();
    IMAGEPACK_RETURN_IF_ERROR(CopyToFile(*src.value(), out.value()->fd(), out.value()->staging_path(),
                                         uint64_t(8) << 20, 2));
    IMAGEPACK_RETURN_IF_ERROR(out.value()->Commit());
  }
  return Status::Ok();
}

Result<std::string> MakeStagingDir(const StorageSettings& settings, const std::string& what) {
  return MakeTempDir(settings.staging_dir, what);
}

}  // namespace imagepack
