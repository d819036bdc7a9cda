// The Hugging Face Hub as a read-only Storage: hf://datasets/ORG/NAME
// [@REVISION][/PATH], the syntax of huggingface_hub's HfFileSystem
// (hf_file_system.py: REVISION a branch, tag or commit, "%2F"-quoted or a
// special ref such as refs/convert/parquet or refs/pr/N as it is).
//
// The protocol is the Hub's own, as huggingface_hub (hf_api.py,
// file_download.py) and huggingface.js (lib/list-files.ts,
// lib/file-download-info.ts) speak it:
// - a revision becomes a commit once per process:
//   GET /api/datasets/REPO/revision/REV answers {"sha": COMMIT, ...}; every
//   listing and read after it names that commit, so a branch moved during
//   a run changes nothing of it, and the commit is in every cache key;
// - a folder is listed by GET /api/datasets/REPO/tree/COMMIT/PATH, whose
//   pages follow each other by the Link header's rel="next";
// - a file is read from /datasets/REPO/resolve/COMMIT/PATH, which answers
//   a redirect to another host (the CDN) for large files: its ranges are
//   read there, without the token, which goes to the Hub's host alone.
// The token (settings: HF_TOKEN or the token file) is never printed.
// HF_HUB_OFFLINE=1 makes no request: the commit a revision was, the
// listings and the files' blocks come from the node cache of an earlier
// run (IMAGEPACK_CACHE_DIR).
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>

#include <nlohmann/json.hpp>

#include "base/limits.h"
#include "imagepack/files.h"
#include "storage/backends.h"
#include "storage/hf_url.h"
#include "storage/http_client.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

using json = nlohmann::json;

std::string Shown(const HubPath& h) { return "hf://datasets/" + h.repo + "@" + h.revision + (h.path.empty() ? "" : "/" + h.path); }

struct Entry {
  std::string name;  // within its folder
  bool directory = false;
  uint64_t size = 0;
};
using Listing = std::vector<Entry>;

// An answer of the Hub as JSON, within the budgets of outside input: at
// most kHubAnswerBytes, nested at most kJsonDepth deep (counted before
// parsing, strings skipped); else null.
json ParseAnswer(const std::string& body) {
  if (body.size() >= limits::kHubAnswerBytes) return json();
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limits::kJsonDepth) return json();
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return json::parse(body, nullptr, false);
}

// What every HubStorage of the process shares: the commit each revision
// was when first asked (one snapshot per run), and the folders listed.
struct Snapshots {
  std::mutex mu;
  std::map<std::string, std::string> commits;
  std::map<std::string, std::shared_ptr<const Listing>> listings;
};
Snapshots& Shared() {
  static Snapshots* s = new Snapshots;  // never destroyed: asked from static destructors' threads too
  return *s;
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// The Hub as this process asks it: its settings (endpoint, token), the
// client, and what each question means. Shared by the storage and the
// byte sources it opens, which outlive it.
class Hub {
 public:
  Hub(StorageSettings s, std::shared_ptr<HttpClient> client) : settings_(std::move(s)), client_(std::move(client)) {}
  const StorageSettings& settings() const { return settings_; }
  const std::shared_ptr<HttpClient>& client() const { return client_; }

  // The commit `h`'s revision is in this process (asked once).
  Result<std::string> Commit(const HubPath& h) const;
  // The entries of `folder` at `commit` (listed once).
  Result<std::shared_ptr<const Listing>> ListFolder(const HubPath& h, const std::string& commit,
                                                    const std::string& folder) const;
  // Where the bytes of `h` at `commit` are read from (the Hub's host or
  // the host it redirects to) and their size.
  struct Resolved {
    std::string location;
    uint64_t size = 0;
  };
  Result<Resolved> Resolve(const HubPath& h, const std::string& commit, double budget, bool* unreachable) const;
  // Headers for a request to `url`: the token only to the Hub's own host.
  std::vector<std::string> HeadersFor(const std::string& url) const {
    std::vector<std::string> out;
    if (!settings_.hf_token.empty() && OriginOf(url) == OriginOf(settings_.hf_endpoint))
      out.push_back("Authorization: Bearer " + settings_.hf_token);
    return out;
  }

 private:
  std::string RepoApi(const HubPath& h) const { return settings_.hf_endpoint + "/api/datasets/" + h.repo; }
  Status Refused(const HubPath& h, const HttpResponse& r, const std::string& what) const;
  // A small file of the node cache (a revision's commit, a listing), for
  // an offline run; "" without a cache folder.
  std::string Remembered(const std::string& kind, const std::string& key) const {
    if (settings_.cache_dir.empty()) return "";
    return settings_.cache_dir + "/hub/" + kind + "-" + Hex(XXH3_64bits(key.data(), key.size()));
  }
  void Remember(const std::string& file, const std::string& text) const {
    if (file.empty()) return;
    std::error_code ec;
    fs::create_directories(fs::path(file).parent_path(), ec);
    (void)WriteFileAtomic(file, text.data(), text.size());  // an optimisation: offline runs need it
  }

  StorageSettings settings_;
  std::shared_ptr<HttpClient> client_;
};

class HubStorage : public Storage {
 public:
  HubStorage(const StorageSettings& s, std::shared_ptr<HttpClient> client)
      : Storage(s), hub_(std::make_shared<Hub>(s, std::move(client))) {}
  const char* name() const override { return "hf"; }
  bool local() const override { return false; }
  bool writable() const override { return false; }
  bool listable() const override { return true; }
  bool folders() const override { return true; }

  Result<std::unique_ptr<ByteSource>> Open(const std::string& url, const ReadOptions& opts) override;
  Result<std::vector<std::string>> List(const std::string& url) override;
  Result<FileInfo> Stat(const std::string& url) override;
  Result<std::string> Pinned(const std::string& url) override {
    auto h = ParseHubUrl(url);
    if (!h.ok()) return h.status();
    auto commit = hub_->Commit(*h);
    if (!commit.ok()) return commit.status();
    return "hf://datasets/" + h->repo + "@" + *commit + (h->path.empty() ? "" : "/" + h->path);
  }
  Result<std::unique_ptr<WritableFile>> Create(const std::string& url, const CreateOptions&) override {
    return ReadOnly(url);
  }
  Status Remove(const std::string& url) override { return ReadOnly(url); }
  Result<std::unique_ptr<StorageLock>> Lock(const std::string& url) override { return ReadOnly(url); }

 private:
  static Status ReadOnly(const std::string& url) {
    return Status::NotSupported(url + ": the Hub is read here, never written (write to a local path or an s3:// URL)");
  }
  std::shared_ptr<const Hub> hub_;
};

// A message for an answer of the Hub that is no success: what it means
// and what to do, never the token.
Status Hub::Refused(const HubPath& h, const HttpResponse& r, const std::string& what) const {
  const std::string page = settings_.hf_endpoint + "/datasets/" + h.repo;
  std::string detail;
  if (!r.body.empty()) {
    const json j = ParseAnswer(r.body);
    if (j.is_object() && j.contains("error") && j["error"].is_string()) detail = j["error"].get<std::string>();
    if (detail.size() > 300) detail = detail.substr(0, 300) + "...";
  }
  const std::string said = detail.empty() ? "" : " (the Hub says: " + detail + ")";
  const std::string token = settings_.hf_token.empty()
                                ? "no token was sent: set HF_TOKEN, or log in with `hf auth login` (it writes the "
                                  "token file ~/.cache/huggingface/token)"
                                : "the token from " + settings_.hf_token_from + " was sent";
  const std::string head = what + ": HTTP " + std::to_string(r.status);
  if (r.status == 401)
    return Status::InvalidArgument(head + ": the Hub wants a valid token for " + h.repo +
                                   " (a private or gated dataset, or none of that name); " + token + said);
  if (r.status == 403) {
    if (r.error_code == "GatedRepo" || detail.find("gated") != std::string::npos)
      return Status::InvalidArgument(head + ": " + h.repo + " is gated: accept its conditions at " + page +
                                     " with the account of your token (" + token + ")" + said);
    return Status::InvalidArgument(head + ": your token may not read " + h.repo + " (" + token +
                                   "; a fine-grained token needs read access to it)" + said);
  }
  if (r.status == 404) {
    if (r.error_code == "RevisionNotFound")
      return Status::NotFound(head + ": " + h.repo + " has no revision '" + h.revision +
                              "' (a branch, a tag or a commit)" + said);
    if (r.error_code == "EntryNotFound")
      return Status::NotFound(head + ": no file or folder '" + h.path + "' in " + h.repo + " at revision " +
                              h.revision + said);
    return Status::NotFound(head + ": no dataset " + h.repo + " at " + settings_.hf_endpoint +
                            " (or it is private and " + token + ")" + said);
  }
  return Status::IOError(head + said);
}

Result<std::string> Hub::Commit(const HubPath& h) const {
  if (IsCommit(h.revision)) return h.revision;
  const std::string key = settings_.hf_endpoint + "\n" + h.repo + "\n" + h.revision;
  Snapshots& shared = Shared();
  std::lock_guard<std::mutex> lock(shared.mu);
  if (auto it = shared.commits.find(key); it != shared.commits.end()) return it->second;
  const std::string file = Remembered("revision", key);
  auto remembered = [&]() -> std::string {
    if (file.empty()) return "";
    auto bytes = ReadFile(file, 0, 64);
    const std::string c = bytes.ok() ? std::string(bytes->begin(), bytes->end()) : "";
    return IsCommit(c) ? c : "";
  };
  std::string commit;
  if (settings_.hf_offline) {
    commit = remembered();
    if (commit.empty())
      return Status::NotFound(Shown(h) + ": HF_HUB_OFFLINE is set and no earlier run with this node cache (" +
                              (settings_.cache_dir.empty() ? std::string("none: IMAGEPACK_CACHE_DIR is unset")
                                                            : settings_.cache_dir) +
                              ") resolved revision " + h.revision + " to a commit; run once online with it");
  } else {
    HttpRequest q;
    q.url = RepoApi(h) + "/revision/" + UriEncode(h.revision, false);
    q.shown = Shown(h);
    q.what = "which commit revision " + h.revision + " is";
    q.headers = HeadersFor(q.url);
    q.headers.push_back("Accept: application/json");
    HttpResponse r;
    Status st = client_->RunOne(q, &r, {401, 403, 404});
    if (!st.ok()) {
      commit = r.Unreachable(st) ? remembered() : "";
      if (commit.empty()) return st;
      Warn(Shown(h) + ": " + st.message() + "; using commit " + commit + ", which revision " + h.revision +
           " was in an earlier run (the node cache " + settings_.cache_dir + ")");
    } else if (r.status != 200) {
      return Refused(h, r, "GET " + q.shown + " (" + q.what + ")");
    } else {
      const json j = ParseAnswer(r.body);
      if (j.is_object() && j.contains("sha") && j["sha"].is_string()) commit = j["sha"].get<std::string>();
      if (!IsCommit(commit))
        return Status::Corruption(Shown(h) + ": the Hub's answer for revision " + h.revision +
                                  " names no commit (no 40-digit \"sha\" in " + std::to_string(r.body.size()) +
                                  " bytes of JSON)");
      Remember(file, commit);
    }
  }
  shared.commits[key] = commit;
  return commit;
}

// A listing as the tree API answered it (path, type, size), for an
// offline run to read back: written entry by entry, a million entries
// cost their text and not a JSON object each.
std::string ListingJson(const std::string& folder, const Listing& listing) {
  std::string out = "[";
  for (const Entry& e : listing) {
    if (out.size() > 1) out += ",";
    out += "{\"path\":" + json(folder.empty() ? e.name : folder + "/" + e.name).dump() + ",\"type\":\"" +
           (e.directory ? "directory" : "file") + "\",\"size\":" + std::to_string(e.size) + "}";
  }
  return out + "]";
}

Result<std::shared_ptr<const Listing>> Hub::ListFolder(const HubPath& h, const std::string& commit,
                                                              const std::string& folder) const {
  const std::string key = settings_.hf_endpoint + "\n" + h.repo + "\n" + commit + "\n" + folder;
  Snapshots& shared = Shared();
  {
    std::lock_guard<std::mutex> lock(shared.mu);
    if (auto it = shared.listings.find(key); it != shared.listings.end()) return it->second;
  }
  const std::string file = Remembered("tree", key);
  const std::string where = "hf://datasets/" + h.repo + "@" + commit + (folder.empty() ? "" : "/" + folder);
  auto listing = std::make_shared<Listing>();
  auto from_json = [&](const json& j) -> Status {
    if (!j.is_array()) return Status::Corruption(where + ": the Hub's listing is not a JSON list");
    for (const json& e : j) {
      if (listing->size() >= limits::kHubFolderEntries)
        return Status::InvalidArgument(where + ": more than " + std::to_string(limits::kHubFolderEntries) +
                                       " entries in one folder (the budget of one listing)");
      if (!e.is_object() || !e.contains("path") || !e["path"].is_string() || !e.contains("type") ||
          !e["type"].is_string())
        return Status::Corruption(where + ": an entry of the Hub's listing has no path or type");
      const std::string path = e["path"].get<std::string>();
      const std::string prefix = folder.empty() ? "" : folder + "/";
      if (path.rfind(prefix, 0) != 0 || path.size() == prefix.size() ||
          path.find('/', prefix.size()) != std::string::npos || path.size() > limits::kNameBytes)
        return Status::Corruption(where + ": the Hub's listing holds '" + path.substr(0, 200) +
                                  "', not an entry of this folder");
      Entry entry;
      entry.name = path.substr(prefix.size());
      entry.directory = e["type"] == "directory";
      const json& sized = e.contains("lfs") && e["lfs"].is_object() ? e["lfs"] : e;
      if (sized.contains("size") && sized["size"].is_number_unsigned()) entry.size = sized["size"].get<uint64_t>();
      listing->push_back(std::move(entry));
    }
    return Status::Ok();
  };
  if (settings_.hf_offline) {
    auto bytes = file.empty() ? Result<std::vector<uint8_t>>(Status::NotFound("")) : ReadFile(file, 0, 256 << 20);
    if (!bytes.ok())
      return Status::NotFound(where + ": HF_HUB_OFFLINE is set and no earlier run with this node cache listed this "
                                      "folder; run once online with IMAGEPACK_CACHE_DIR set");
    IMAGEPACK_RETURN_IF_ERROR(from_json(json::parse(bytes->begin(), bytes->end(), nullptr, false)));
  } else {
    std::string url = RepoApi(h) + "/tree/" + commit + (folder.empty() ? "" : "/" + UriEncode(folder, true)) +
                      "?recursive=false&expand=false";
    for (size_t page = 0; !url.empty(); ++page) {
      HttpRequest q;
      q.url = url;
      q.shown = where;
      q.what = "listing, page " + std::to_string(page + 1);
      q.headers = HeadersFor(url);
      q.headers.push_back("Accept: application/json");
      HttpResponse r;
      IMAGEPACK_RETURN_IF_ERROR(client_->RunOne(q, &r, {401, 403, 404}));
      if (r.status != 200) {
        HubPath shown = h;
        shown.path = folder;
        return Refused(shown, r, "GET " + where + " (" + q.what + ")");
      }
      if (r.body.size() >= limits::kHubAnswerBytes)
        return Status::InvalidArgument(where + ": page " + std::to_string(page + 1) + " of the Hub's listing is " +
                                       "over " + std::to_string(limits::kHubAnswerBytes) + " bytes");
      const json j = ParseAnswer(r.body);
      const size_t before = listing->size();
      IMAGEPACK_RETURN_IF_ERROR(from_json(j));
      url = LinkTarget(r.link, "next");
      if (!url.empty() && listing->size() == before)
        return Status::Corruption(where + ": page " + std::to_string(page + 1) +
                                  " of the Hub's listing is empty yet names a next page");
      // The token goes to the Hub's host alone, a next page included.
      if (!url.empty() && OriginOf(url) != OriginOf(settings_.hf_endpoint))
        return Status::Corruption(where + ": the Hub's listing names its next page on another host (" +
                                  OriginOf(url) + ")");
    }
    Remember(file, ListingJson(folder, *listing));
  }
  std::sort(listing->begin(), listing->end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  std::lock_guard<std::mutex> lock(shared.mu);
  return shared.listings.emplace(key, std::move(listing)).first->second;
}

Result<std::vector<std::string>> HubStorage::List(const std::string& url) {
  auto h = ParseHubUrl(url);
  if (!h.ok()) return h.status();
  auto commit = hub_->Commit(*h);
  if (!commit.ok()) return commit.status();
  auto listing = hub_->ListFolder(*h, *commit, h->path);
  if (!listing.ok()) return listing.status();
  std::vector<std::string> out;
  for (const Entry& e : **listing) out.push_back(e.directory ? e.name + "/" : e.name);
  return out;
}

Result<FileInfo> HubStorage::Stat(const std::string& url) {
  auto h = ParseHubUrl(url);
  if (!h.ok()) return h.status();
  auto commit = hub_->Commit(*h);
  if (!commit.ok()) return commit.status();
  FileInfo info;
  info.version = *commit;
  if (h->path.empty()) {  // the repository's root
    info.exists = info.directory = true;
    return info;
  }
  const size_t slash = h->path.rfind('/');
  const std::string parent = slash == std::string::npos ? "" : h->path.substr(0, slash);
  const std::string base = h->path.substr(slash == std::string::npos ? 0 : slash + 1);
  auto listing = hub_->ListFolder(*h, *commit, parent);
  if (!listing.ok()) return listing.status().code() == Status::Code::kNotFound ? Result<FileInfo>(info) : listing.status();
  for (const Entry& e : **listing)
    if (e.name == base) {
      info.exists = true;
      info.directory = e.directory;
      info.size = e.size;
    }
  return info;
}

Result<Hub::Resolved> Hub::Resolve(const HubPath& h, const std::string& commit, double budget,
                                                 bool* unreachable) const {
  *unreachable = false;
  const std::string shown = "hf://datasets/" + h.repo + "@" + commit + "/" + h.path;
  std::string url =
      settings_.hf_endpoint + "/datasets/" + h.repo + "/resolve/" + commit + "/" + UriEncode(h.path, true);
  for (int hop = 0; hop <= limits::kHubRedirects; ++hop) {
    HttpRequest q;
    q.method = "HEAD";
    q.url = url;
    q.shown = shown;
    q.retry_seconds = budget;
    q.headers = HeadersFor(url);
    q.headers.push_back("Accept-Encoding: identity");  // the size of the bytes, not of a compressed answer
    HttpResponse r;
    Status st = client_->RunOne(q, &r, {301, 302, 303, 307, 308, 401, 403, 404});
    *unreachable = r.Unreachable(st);
    if (!st.ok()) return st;
    if (r.status == 401 || r.status == 403 || r.status == 404) {
      HubPath at = h;
      at.revision = commit;
      if (r.status == 404 && r.error_code.empty()) r.error_code = "EntryNotFound";
      return Refused(at, r, "HEAD " + shown);
    }
    if (r.status >= 300) {
      if (r.location.empty())
        return Status::Corruption("HEAD " + shown + ": HTTP " + std::to_string(r.status) + " without a Location");
      const bool relative = r.location.front() == '/';
      const std::string next = relative ? OriginOf(url) + r.location : r.location;
      if (relative || OriginOf(next) == OriginOf(settings_.hf_endpoint)) {
        url = next;  // still the Hub's host (a renamed repository): followed, token and all
        continue;
      }
      // Another host: the file's bytes live there, read without the token.
      Resolved out{next, 0};
      if (r.linked_size >= 0) {
        out.size = static_cast<uint64_t>(r.linked_size);
        return out;
      }
      HttpRequest size_q;
      size_q.method = "HEAD";
      size_q.url = next;
      size_q.shown = shown;
      size_q.retry_seconds = budget;
      HttpResponse sr;
      IMAGEPACK_RETURN_IF_ERROR(client_->RunOne(size_q, &sr));
      out.size = sr.content_length;
      return out;
    }
    return Resolved{url, r.linked_size >= 0 ? static_cast<uint64_t>(r.linked_size) : r.content_length};
  }
  return Status::Corruption("HEAD " + shown + ": more than " + std::to_string(limits::kHubRedirects) +
                            " redirects on the Hub's host");
}

// A file's bytes at one commit, read by ranges where the Hub sent them
// (its CDN): immutable, so no version check; a redirect that expired (the
// CDN's signed URLs do) is resolved again once per read.
class HubBytes : public ByteSource {
 public:
  HubBytes(std::shared_ptr<const Hub> hub, HubPath h, std::string commit, std::string shown, std::string location,
           uint64_t size, std::string identity)
      : hub_(std::move(hub)), h_(std::move(h)), commit_(std::move(commit)),
        shown_(std::move(shown)), location_(std::move(location)), size_(size), identity_(std::move(identity)) {}
  uint64_t size() const override { return size_; }
  Status ReadAt(uint64_t offset, uint64_t n, uint8_t* out) const override {
    return ReadRanges({ByteRange{offset, n}}, {out});
  }
  Status ReadRanges(const std::vector<ByteRange>& ranges, const std::vector<uint8_t*>& outs) const override {
    bool expired = false;
    Status st = Fetch(Location(), ranges, outs, &expired);
    if (st.ok() || !expired) return st;
    bool unreachable = false;
    auto fresh = hub_->Resolve(h_, commit_, -1, &unreachable);
    if (!fresh.ok()) return st;
    {
      std::lock_guard<std::mutex> lock(mu_);
      location_ = fresh->location;
    }
    return Fetch(fresh->location, ranges, outs, &expired);
  }
  std::string identity() const override { return identity_; }
  std::string Describe() const override { return shown_; }
  bool remote() const override { return true; }
  int64_t requests() const override { return requests_.load(); }
  int64_t bytes_fetched() const override { return bytes_.load(); }

 private:
  std::string Location() const {
    std::lock_guard<std::mutex> lock(mu_);
    return location_;
  }
  Status Fetch(const std::string& location, const std::vector<ByteRange>& ranges, const std::vector<uint8_t*>& outs,
               bool* expired) const {
    std::vector<HttpRequest> reqs;
    for (size_t i = 0; i < ranges.size(); ++i) {
      const ByteRange& r = ranges[i];
      if (r.offset > size_ || r.size > size_ - r.offset)
        return Status::Corruption(shown_ + ": read of " + std::to_string(r.size) + " bytes at " +
                                  std::to_string(r.offset) + " past the end (" + std::to_string(size_) + " bytes)");
      if (r.size == 0) continue;
      HttpRequest q;
      q.url = location;
      q.shown = shown_;
      q.headers = hub_->HeadersFor(location);
      q.out = outs[i];
      q.out_size = r.size;
      q.range_offset = r.offset;
      q.what = "bytes " + std::to_string(r.offset) + "-" + std::to_string(r.offset + r.size - 1);
      reqs.push_back(std::move(q));
    }
    std::vector<HttpResponse> resps;
    Status st = hub_->client()->Run(reqs, &resps);
    requests_ += static_cast<int64_t>(reqs.size());
    for (const HttpRequest& q : reqs) bytes_ += static_cast<int64_t>(q.out_size);
    for (const HttpResponse& r : resps)
      if (r.status == 401 || r.status == 403 || r.status == 404 || r.status == 410) *expired = true;
    return st;
  }

  std::shared_ptr<const Hub> hub_;
  HubPath h_;
  std::string commit_, shown_;
  mutable std::mutex mu_;
  mutable std::string location_;
  uint64_t size_;
  std::string identity_;
  mutable std::atomic<int64_t> requests_{1}, bytes_{0};  // the HEAD that resolved it
};

Result<std::unique_ptr<ByteSource>> HubStorage::Open(const std::string& url, const ReadOptions& opts) {
  auto parsed = ParseHubUrl(url);
  if (!parsed.ok()) return parsed.status();
  const HubPath h = std::move(parsed.value());
  if (h.path.empty()) return Status::InvalidArgument(url + " names a repository, not a file");
  auto commit = hub_->Commit(h);
  if (!commit.ok()) return commit.status();
  const std::string c = *commit;
  const std::string endpoint = settings().hf_endpoint;
  auto resolved = std::make_shared<Hub::Resolved>();
  RemoteObject o;
  o.url = url;
  o.pin_key = "hf\n" + endpoint + "\n" + h.repo + "\n" + c + "\n" + h.path;
  o.identity = [endpoint, h, c](const RemoteHead& head) {
    return "hf:" + endpoint + "/datasets/" + h.repo + "@" + c + "/" + h.path + ":" + std::to_string(head.size);
  };
  std::shared_ptr<const Hub> hub = hub_;
  o.head = [hub, h, c, url, resolved](double budget, bool* unreachable) -> Result<RemoteHead> {
    const StorageSettings& settings = hub->settings();
    if (settings.hf_offline) {
      *unreachable = true;
      return Status::NotFound(url + ": HF_HUB_OFFLINE is set and the node cache (" +
                              (settings.cache_dir.empty() ? std::string("none: IMAGEPACK_CACHE_DIR is unset")
                                                          : settings.cache_dir) +
                              ") holds no whole copy of it at commit " + c);
    }
    auto r = hub->Resolve(h, c, budget, unreachable);
    if (!r.ok()) return r.status();
    *resolved = *r;
    return RemoteHead{c, r->size};  // the commit is the version: a file at a commit never changes
  };
  o.pinned = [hub, h, c, url, resolved, endpoint](const RemoteHead& head) -> std::unique_ptr<ByteSource> {
    return std::make_unique<HubBytes>(hub, h, c, url, resolved->location, head.size,
                                      "hf:" + endpoint + "/datasets/" + h.repo + "@" + c + "/" + h.path + ":" +
                                          std::to_string(head.size));
  };
  return OpenRemote(o, settings(), opts);
}

}  // namespace

Result<std::shared_ptr<Storage>> NewHubStorage(const StorageSettings& s) {
  return std::shared_ptr<Storage>(std::make_shared<HubStorage>(s, HttpClient::Shared(HttpConfig::Of(s))));
}

}  // namespace imagepack::internal
