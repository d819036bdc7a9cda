// Where bytes live, behind one interface (in the spirit of leveldb's Env):
// reading (ByteSource), writing with atomic publish, listing, removing,
// stat and locking. One implementation per backend: local files, S3
// object storage (s3://BUCKET/KEY), read-only HTTP(S) (https://HOST/PATH,
// http://...), the Hugging Face Hub read-only (hf://datasets/ORG/NAME,
// one commit per process). Code: lib/src/storage/. OpenStorage is the
// one place a URL's scheme is looked at; the stores, pack, verify,
// export, the caches and the loader take a
// Storage and ask it what it can do. Settings are one struct, built once
// per open from the environment and then the caller's options.
// docs/ARCHITECTURE.md "Storage"; docs/OBJECT_STORAGE.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "imagepack/byte_source.h"
#include "imagepack/status.h"

namespace imagepack {

// Every backend's settings. FromEnvironment reads the variables of
// docs/OBJECT_STORAGE.md ("Configuration"); a caller's options then
// replace fields (OpenOptions: cache_dir, ca_file, ...).
struct StorageSettings {
  // s3://: the endpoint (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else
  // https://s3.REGION.amazonaws.com), region, credentials, addressing
  // (IMAGEPACK_S3_ADDRESSING), multipart part size (IMAGEPACK_S3_PART_MB).
  std::string s3_endpoint;
  std::string s3_region = "us-east-1";
  std::string s3_access_key, s3_secret_key, s3_session_token;
  bool s3_virtual_hosted = false;
  double s3_part_mb = 16;
  // Every remote request: how long one is retried
  // (IMAGEPACK_S3_RETRY_SECONDS), how long a silent one waits
  // (IMAGEPACK_S3_TIMEOUT), which CA verifies TLS servers (CURL_CA_BUNDLE,
  // else SSL_CERT_FILE; SSL_CERT_DIR; empty: libcurl's bundle).
  double retry_seconds = 60;
  double timeout_seconds = 30;
  std::string ca_file, ca_dir;
  // Remote objects are read in blocks of fetch_block_mb
  // (IMAGEPACK_FETCH_BLOCK_MB), ram_cache_mb of them kept in RAM
  // (IMAGEPACK_RAM_CACHE_MB; 0: 256 with a cache folder, else 512), and
  // with a cache folder (IMAGEPACK_CACHE_DIR) on local disk under
  // cache_limit_mb (IMAGEPACK_CACHE_LIMIT_MB).
  std::string cache_dir;
  double cache_limit_mb = 20480;
  double fetch_block_mb = 1;
  double ram_cache_mb = 0;
  // Local folders: staging on the way to or from a remote store
  // (IMAGEPACK_STAGING_DIR, else TMPDIR, else /tmp) and shared in-RAM
  // copies (IMAGEPACK_SHM_DIR, else /dev/shm).
  std::string staging_dir = "/tmp";
  std::string shm_dir = "/dev/shm";
  // hf://, the Hugging Face Hub, as its own clients read it: the endpoint
  // (HF_ENDPOINT, else https://huggingface.co), the token (HF_TOKEN, else
  // the file HF_TOKEN_PATH, else HF_HOME/token, else
  // ~/.cache/huggingface/token; hf_token_from names where it came from,
  // for messages: the token itself is never printed) and offline mode
  // (HF_HUB_OFFLINE=1: no request; the node cache only).
  std::string hf_endpoint = "https://huggingface.co";
  std::string hf_token, hf_token_from;
  bool hf_offline = false;

  // Malformed values are errors naming the variable.
  static Result<StorageSettings> FromEnvironment();
  // The process's settings, every open's (OpenStorage(url), the stores,
  // the loader): read from the environment once, and remade whole when
  // one of its variables changes (a test, an embedding program that sets
  // them), so the opens in between see one and the same settings.
  static Result<StorageSettings> ForProcess();
};

// What Stat says of a file or object.
struct FileInfo {
  bool exists = false;
  bool directory = false;  // a local folder (remote stores have none)
  uint64_t size = 0;
  std::string version;     // an object's ETag; a file's modification time
};

// A file being written: bytes go to a local staging file (any writes,
// from any threads, O_DIRECT included) and appear under the final name
// only at Commit, whole: a rename beside it locally, a multipart upload
// completed remotely. Destroyed without Commit: nothing is published and
// the staging file is removed.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // The staging file, open read-write; the WritableFile closes it.
  virtual int fd() const = 0;
  virtual const std::string& staging_path() const = 0;
  // Publishes the staging file's bytes under the final name. The caller
  // has synced what must be durable (fdatasync); a local Commit renames and
  // syncs the folder.
  virtual Status Commit() = 0;
};

// A writer's hold on a destination, released by its destructor.
class StorageLock {
 public:
  virtual ~StorageLock() = default;
};

class Storage {
 public:
  virtual ~Storage() = default;
  // "file", "s3", "https": for messages.
  virtual const char* name() const = 0;
  // Paths are files of this machine: they can be mapped, opened by
  // liblmdb, renamed. False for object storage and HTTP.
  virtual bool local() const = 0;
  // Create, Remove and Lock work (not over plain HTTP).
  virtual bool writable() const = 0;
  // Lists a folder (or an object prefix) only where true.
  virtual bool listable() const = 0;
  // Folders are things of their own, told from files by Stat, not
  // prefixes of keys (local paths, the Hub's repositories).
  virtual bool folders() const { return local(); }

  struct ReadOptions {
    // Remote: read through the block cache (RAM, and the node-local disk
    // cache when settings name one). False: every read is a ranged GET
    // (large sequential copies).
    bool cached = true;
  };
  // The bytes of `url`. Remote objects are pinned to the version they have
  // now (their ETag): a later read of a changed object is an error naming
  // it. With a node cache that holds the whole object from an earlier run,
  // an object whose server is unreachable opens from the cache (a warning
  // names the ETag it trusts); a partial cache is an error naming what is
  // missing.
  virtual Result<std::unique_ptr<ByteSource>> Open(const std::string& url, const ReadOptions& opts) = 0;
  Result<std::unique_ptr<ByteSource>> Open(const std::string& url) { return Open(url, ReadOptions()); }

  // `url` at the version this process reads, for a checkpoint to record
  // and compare on resume: an hf:// URL with its revision replaced by the
  // commit it resolved to (hf://datasets/ORG/NAME@COMMIT/PATH); "" where
  // a storage's files have no revisions to pin.
  virtual Result<std::string> Pinned(const std::string&) { return std::string(); }

  struct CreateOptions {
    bool overwrite = false;  // false: an existing `url` is an error
    unsigned mode = 0644;    // local files
  };
  // A new file to be published as `url` (parent folders made locally).
  virtual Result<std::unique_ptr<WritableFile>> Create(const std::string& url, const CreateOptions& opts) = 0;
  // Names directly in folder (or under prefix) `url`, sorted; folders
  // marked with a trailing '/'.
  virtual Result<std::vector<std::string>> List(const std::string& url) = 0;
  virtual Status Remove(const std::string& url) = 0;
  // A missing file is exists = false, not an error.
  virtual Result<FileInfo> Stat(const std::string& url) = 0;
  // Excludes other writers of `url` while held, without waiting: a held
  // lock is an error naming its holder. Local: a lock file beside it.
  // Object storage has no locks; the multipart upload completing is the
  // atomic step, and the last to complete wins.
  virtual Result<std::unique_ptr<StorageLock>> Lock(const std::string& url) = 0;

  // `url`'s folder or prefix, with its trailing separator ("" for a bare
  // local name), and `name` joined to a folder or prefix.
  static std::string Parent(const std::string& url);
  static std::string Join(const std::string& dir, const std::string& name);

  const StorageSettings& settings() const { return settings_; }

 protected:
  explicit Storage(StorageSettings settings) : settings_(std::move(settings)) {}

 private:
  StorageSettings settings_;
};

// The storage that holds `url`: the backend registered for its scheme
// (s3:// object storage, https:// and http:// read-only, and any a caller
// registers), anything without a scheme a local path. Errors: an unknown
// scheme, a backend that cannot be set up (no credentials, a bad
// endpoint).
Result<std::shared_ptr<Storage>> OpenStorage(const std::string& url, const StorageSettings& settings);

// Backends register their URL scheme: a factory from the settings. The
// built-in ones (s3, https, http) are there from the start; a caller (a
// test, an embedding program) registers its own, e.g. an in-memory
// storage (NewMemoryStorage), and every path of imagepack that takes a
// URL (pack, the stores, verify, export, the loader) then reaches it.
// A scheme is letters, digits, '+', '-', '.', starting with a letter;
// registering one again replaces it. Thread-safe.
using StorageFactory = std::function<Result<std::shared_ptr<Storage>>(const StorageSettings&)>;
Status RegisterStorage(const std::string& scheme, StorageFactory factory);
// The schemes registered, sorted.
std::vector<std::string> StorageSchemes();

// A storage held in this process's memory, for tests and for callers
// that keep datasets in memory: NAME://ANY/PATH keys, written through a
// staging file under settings.staging_dir and published whole at Commit,
// listable by prefix, locks within the process. The returned storage is
// the one store: register a factory that returns it
// (`RegisterStorage("mem", [s](const StorageSettings&) { return s; })`).
std::shared_ptr<Storage> NewMemoryStorage(const StorageSettings& settings, const std::string& name = "mem");
// The same, with StorageSettings::ForProcess().
Result<std::shared_ptr<Storage>> OpenStorage(const std::string& url);
// Storage::Pinned of `url` (a path, URL, pattern or glob).
Result<std::string> PinnedUrl(const std::string& url);

// The whole of `url`, at most max_bytes (an error past that).
Result<std::vector<uint8_t>> ReadWhole(Storage& storage, const std::string& url, uint64_t max_bytes);

// Publishes every regular file below the local folder `dir` as
// PREFIX/RELATIVE_PATH of `storage` (each through Create and Commit),
// replacing those of the same names.
Status PublishTree(const std::string& dir, Storage& storage, const std::string& prefix);

// A new private staging folder for files on their way to or from a remote
// store: under settings.staging_dir, named
// "imagepack-WHAT.ipk-tmp.UID.HOST.BOOT.PID.XXXXXX" (files.h,
// "Temporaries"). Such folders of provably dead processes go first.
Result<std::string> MakeStagingDir(const StorageSettings& settings, const std::string& what);

}  // namespace imagepack
