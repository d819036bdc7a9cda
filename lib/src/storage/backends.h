// The storage backends (storage.h) and what the remote ones share: an
// object pinned by its ETag at open, read through the block cache, and
// opened from the node cache alone when its server is unreachable.
// Internal: OpenStorage is the way in.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "imagepack/storage.h"

namespace imagepack::internal {

class HttpClient;

std::shared_ptr<Storage> NewLocalStorage(const StorageSettings& settings);
Result<std::shared_ptr<Storage>> NewS3Storage(const StorageSettings& settings);
Result<std::shared_ptr<Storage>> NewHttpStorage(const StorageSettings& settings);
Result<std::shared_ptr<Storage>> NewHubStorage(const StorageSettings& settings);

// What a HEAD says of a remote object: its version and size.
struct RemoteHead {
  std::string etag;
  uint64_t size = 0;
};

// How a remote backend opens one object for OpenRemote.
struct RemoteObject {
  std::string url;  // for messages
  // Names the object across runs (endpoint and object), for its pin in
  // the node cache.
  std::string pin_key;
  // The cache identity of a version: changes whenever the bytes may.
  std::function<std::string(const RemoteHead&)> identity;
  // A HEAD retried for at most `budget` seconds (< 0: the settings').
  // *unreachable: it failed without an answer from the server (or with a
  // 5xx), so a pinned copy may stand in.
  std::function<Result<RemoteHead>(double budget, bool* unreachable)> head;
  // The object's bytes, each read pinned to `head` (If-Match; a changed
  // object is an error naming it, never a mix of versions).
  std::function<std::unique_ptr<ByteSource>(const RemoteHead&)> pinned;
};

// Opens a remote object: HEAD, then its pinned bytes, through the block
// cache when opts.cached (RAM, and the settings' cache folder, where the
// version is pinned for later runs). When the server is unreachable and
// the cache folder holds every block of the version pinned last, that
// version is served from the cache, with a warning naming its ETag; when
// it holds only some, the error says which blocks are missing.
Result<std::unique_ptr<ByteSource>> OpenRemote(const RemoteObject& object, const StorageSettings& settings,
                                               const Storage::ReadOptions& opts);

// Bytes of `http_url` (shown as `shown`), each read a ranged GET pinned to
// `head` (If-Match, and the answer's ETag checked).
std::unique_ptr<ByteSource> NewPinnedHttpSource(std::shared_ptr<HttpClient> client, std::string http_url,
                                                std::string shown, const RemoteHead& head, std::string identity);

// s3://BUCKET/KEY (a key of 1-1024 bytes; `key_optional`: a bucket alone,
// or a prefix, as List takes).
struct ObjectUrl {
  std::string bucket, key;
  std::string ToString() const { return "s3://" + bucket + "/" + key; }
};
Result<ObjectUrl> ParseObjectUrl(const std::string& url, bool key_optional = false);

// A remote WritableFile: staged in a private folder under the settings'
// staging_dir, published by `publish(staged_path)` at Commit.
Result<std::unique_ptr<WritableFile>> NewStagedRemoteFile(const StorageSettings& settings, const std::string& url,
                                                          std::function<Status(const std::string&)> publish);

}  // namespace imagepack::internal
