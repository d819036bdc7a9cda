// Where a container's bytes come from: a local file or an object in
// S3-compatible object storage (`s3://bucket/key`). In the spirit of
// leveldb's RandomAccessFile: read at an offset into a buffer, from any
// thread. Configuration of object storage: docs/OBJECT_STORAGE.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "imagepack/status.h"

namespace imagepack {

struct ByteRange {
  uint64_t offset = 0;
  uint64_t size = 0;
};

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // The size when opened; an object that changes later is an error on read.
  virtual uint64_t size() const = 0;
  // Reads exactly `n` bytes at `offset` into `out`. Thread-safe. Reading
  // past the end is an error naming the source.
  virtual Status ReadAt(uint64_t offset, uint64_t n, uint8_t* out) const = 0;
  // Reads several ranges; object storage keeps them in flight together
  // (up to its connection limit). outs[i] receives ranges[i].
  virtual Status ReadRanges(const std::vector<ByteRange>& ranges, const std::vector<uint8_t*>& outs) const;
  // Changes whenever the bytes do (file: device, inode, size, mtime, ctime;
  // object: ETag and size). For caches.
  virtual std::string identity() const = 0;
  // The path or URL, for messages. Never holds a credential.
  virtual std::string Describe() const = 0;
  virtual bool remote() const { return false; }
  // Requests made so far (object storage: GETs; files: 0). For statistics.
  virtual int64_t requests() const { return 0; }
  // Bytes received from the server so far (files: 0).
  virtual int64_t bytes_fetched() const { return 0; }

  // Hints about what will be read next (files: posix_fadvise; object
  // storage: none, its reads are explicit ranges).
  enum class Access { kNormal, kRandom, kSequential };
  virtual void Advise(Access access) const { (void)access; }
  // A file: the whole of it mapped read-only, made on the first call and
  // valid while this source lives (pages come from the page cache, shared
  // with every other reader). Object storage: NotSupported.
  virtual Result<const uint8_t*> Map() const;
  // Bytes of the source already in this machine's memory (a file: its
  // pages in the page cache, by mincore; an object: 0). For deciding
  // whether reads will be cheap.
  virtual uint64_t CachedBytes() const { return 0; }
};

// "s3://..." (case-sensitive scheme, as the AWS CLI).
bool IsObjectUrl(const std::string& path);

// A local file, or an object (its ETag and size are pinned now: a later
// read of a changed object fails naming it). Errors name the path or URL.
Result<std::unique_ptr<ByteSource>> OpenByteSource(const std::string& path);

// Writes `src` (a local file) as object `url` (multipart upload in parts
// of part_mb, several in flight; the object appears under `url` only when
// complete; an upload that fails is aborted). Earlier incomplete uploads
// to the same key (a killed run) are aborted first. `progress(bytes_done)`
// is called from the uploading thread.
struct UploadOptions {
  double part_mb = 16;  // 0: $IMAGEPACK_S3_PART_MB, else 16
  int in_flight = 8;
  bool overwrite = false;  // false: an existing object at `url` is an error
};
Status UploadFile(const std::string& src, const std::string& url, const UploadOptions& opts = {});

// Uploads every regular file below `dir` as PREFIX/RELATIVE_PATH
// (`url_prefix`: s3://BUCKET/PREFIX), replacing objects of those names.
Status UploadTree(const std::string& dir, const std::string& url_prefix, const UploadOptions& opts = {});

// Downloads object `url` to `path` (written under a temporary name, then
// renamed), with ranged GETs of 16 MB in flight together.
Status DownloadObject(const std::string& url, const std::string& path);

// A new private folder for staging files on their way to or from object
// storage: under $IMAGEPACK_STAGING_DIR, else $TMPDIR, else /tmp, named
// imagepack-WHAT-PID-XXXXXX. Such folders of this user's dead processes
// are removed first.
Result<std::string> MakeStagingDir(const std::string& what);

// True when `url` names an existing object (HEAD). Errors other than "not
// found" are returned.
Result<bool> ObjectExists(const std::string& url);

}  // namespace imagepack
