// Containers of records: writing (LMDB or blob) and reading (one or several
// shards as one dataset). Layouts in docs/FORMAT.md. Code: stores/ (the
// containers); OpenDatabase and OpenDatabases in pack/in_place.cc, the top
// room, as they read other tools' files in place before containers (no
// room below pack/ calls them: test_rooms.py).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "imagepack/meta.h"
#include "imagepack/record.h"
#include "imagepack/status.h"

namespace imagepack {

enum class ContainerFormat { kLmdb, kBlob };
const char* ContainerFormatName(ContainerFormat f);
Result<ContainerFormat> ParseContainerFormat(const std::string& name);

class StorageLock;
class ParallelRecordWriter;
struct WriterOptions;

// Appends records 0, 1, 2, ... then the metadata. Everything is written under
// a temporary name beside `path` and renamed onto `path` by Finish(), so
// `path` only ever holds a complete container. Destroying a writer that has
// not finished deletes the temporary. Status is sticky: after the first
// failure Add() does nothing and Finish() returns that failure.
// Not thread-safe: one writer thread (but see parallel()).
class RecordWriter {
 public:
  virtual ~RecordWriter();
  // Takes the buffer, saving a copy where the container batches records.
  virtual Status Add(std::vector<uint8_t>&& record) = 0;
  Status Add(const uint8_t* record, size_t size) { return Add(std::vector<uint8_t>(record, record + size)); }
  Status Add(const std::vector<uint8_t>& record) { return Add(record.data(), record.size()); }
  // Writes `meta` (its count must equal the records added), syncs, renames.
  virtual Status Finish(const DatasetMeta& meta) = 0;
  virtual int64_t count() const = 0;
  // The first failure so far (sticky), including a failed WriteReserved().
  virtual Status status() const = 0;
  // A buffer of a record already written (LMDB: once its batch is
  // committed), for the caller to fill with another record instead of
  // allocating and zero-filling a new one. False when there is none. Writer
  // thread only.
  virtual bool TakeSpareBuffer(std::vector<uint8_t>* buffer) {
    (void)buffer;
    return false;
  }
  // The second write protocol, for containers that take record bytes from
  // several threads (blob); null for those with one writer (LMDB).
  virtual ParallelRecordWriter* parallel() { return nullptr; }

 private:
  // The destination's lock (CreateWriter): released by this destructor,
  // after the container's own destructor has removed its temporary.
  friend Result<std::unique_ptr<RecordWriter>> CreateWriter(ContainerFormat, const std::string&,
                                                            const WriterOptions&);
  std::unique_ptr<StorageLock> lock_;
};

// A capability of the blob writer: Reserve() adds the next record (writer
// thread, in record order, interleaved with Add() as needed) and returns
// where its bytes go; WriteReserved() writes them there, from any thread,
// each reservation once. Every WriteReserved() must have returned before
// Finish(). A failed WriteReserved() fails Finish() too.
class ParallelRecordWriter {
 public:
  virtual Result<uint64_t> Reserve(size_t size) = 0;
  virtual Status WriteReserved(uint64_t at, const uint8_t* record, size_t size) = 0;
  // True when records go to the device with O_DIRECT (WriterOptions).
  virtual bool direct_io() const = 0;

 protected:
  ~ParallelRecordWriter() = default;  // owned as the RecordWriter it is part of
};

// How a blob is written: kOn, with O_DIRECT from aligned staging chunks (no
// copy into the page cache: on a disk, raw packs are several times faster
// and a big pack does not evict everyone else's cached files; an error if
// the file system refuses it); kOff, through the page cache; kAuto, O_DIRECT
// except on tmpfs/ramfs (where the page cache is the file) or where refused.
enum class DirectIo { kAuto, kOn, kOff };
// "auto", "on", "off".
Result<DirectIo> ParseDirectIo(const std::string& name);

struct WriterOptions {
  bool overwrite = false;  // replace an existing container at path (atomically)
  // LMDB: records stored together in one value, 1..kMaxRecordsPerValue
  // (docs/FORMAT.md). Values hold whole 4 KB overflow pages, so grouping
  // small records (JPEGs of a few tens of KB) saves the half page each
  // would waste alone. Blob: not used.
  int lmdb_records_per_value = 1;
  DirectIo direct_io = DirectIo::kAuto;  // blob only; liblmdb does its own writing
  // Blob: index entries per checksummed chunk, 2^blob_index_chunk_shift
  // (1..40), in blob layout 2 (docs/FORMAT.md: a reader checks each chunk
  // when it first uses it, not the whole index at open). 0: layout 2 with
  // 2^16-entry chunks from 2^22 records on, layout 1 (one checksum, read
  // by every earlier build) below.
  int blob_index_chunk_shift = 0;
  // Blob: index bytes kept in memory while writing (16 bytes a record);
  // the rest waits in a scratch file beside the blob, so memory stays
  // bounded whatever the count.
  size_t blob_index_memory = size_t(16) << 20;
};

// Creates a writer for `path`. Refuses when `path` exists (unless
// overwrite) or when another process is writing the same path (a lock file
// `.NAME.ipk-lock` beside it). Removes temporaries of dead earlier runs.
Result<std::unique_ptr<RecordWriter>> CreateWriter(ContainerFormat format, const std::string& path,
                                                   const WriterOptions& opts = {});

// Reads records by index. One cursor per thread; the bytes it returns stay
// valid until that cursor's next call.
class RecordCursor {
 public:
  virtual ~RecordCursor() = default;
  // The stored bytes of record `index`, unparsed. Errors name the key.
  virtual Status ReadRaw(int64_t index, const uint8_t** data, size_t* size) = 0;
  // ReadRaw + ParseRecord; errors name the record key.
  Result<RecordView> Read(int64_t index, bool verify_checksum = true);
};

class ByteSource;

// A byte range of a container's bytes (a file, or an object): where
// records lie on the device.
struct StoredRange {
  const ByteSource* source = nullptr;  // owned by the record source; valid while it lives
  uint64_t offset = 0;
  uint64_t size = 0;
};

class RecordSource {
 public:
  virtual ~RecordSource() = default;
  virtual const DatasetMeta& meta() const = 0;
  int64_t size() const { return meta().count; }
  virtual std::unique_ptr<RecordCursor> NewCursor() const = 0;
  virtual std::string Describe() const = 0;  // path(s) and format, for messages
  // Bytes held in RAM by this source (in_ram copies), 0 when mmapped/LMDB.
  virtual int64_t resident_bytes() const { return 0; }
  // Container-level checks beyond the records themselves (LMDB: the keys
  // are exactly 0..count-1 then __meta__). Each problem goes to `report`.
  virtual void CheckLayout(const std::function<void(const std::string&)>& report) const { (void)report; }
  // For a memory-mapped source (blob, LMDB): unmaps the file's pages from
  // this process (MADV_DONTNEED). The page cache keeps the data and the next
  // read maps a page back with the same bytes, so this is safe at any time,
  // also while other threads read; it keeps a long streaming pass from
  // growing the resident set to the size of the file. No-op in RAM.
  virtual void ReleaseMappedPages() const {}
  // The parts of the containers' bytes that hold records first..last
  // (inclusive), appended to `out` in order, adjacent parts merged; nothing
  // for a source held in RAM. For reading ahead: a read of these ranges
  // brings the records into the page cache (a file) or the block cache (a
  // remote object: ByteSource::Prefetch). Thread-safe.
  virtual void StoredRanges(int64_t first, int64_t last, std::vector<StoredRange>* out) const {
    (void)first, (void)last, (void)out;
  }
  // The byte sources the records are read from, each once (a file, an
  // object; the shards' of several). Where the bytes live is asked of
  // them: the figures below are theirs.
  virtual void ByteSources(std::vector<const ByteSource*>* out) const { (void)out; }
  // One of them is remote (object storage, HTTP): reads cost requests.
  bool remote() const;
  // Bytes of the stored container(s): files' or objects' sizes.
  int64_t stored_bytes() const;
  // Of those, bytes already in this machine's memory (files: pages in the
  // page cache; in RAM: all; object storage: 0). For the loader's `auto`
  // order: reads of a mostly cached dataset are cheap in any order.
  int64_t cached_bytes() const;
  // Object storage: requests made to the server so far (GETs and HEADs),
  // and bytes received; blocks served from the caches cost none.
  int64_t remote_requests() const;
  int64_t remote_bytes() const;
  // Frees the metadata every shard of a dataset repeats (class names, label
  // counts, options), once OpenDatabases has checked and merged it into the
  // dataset's: 10,000 shards of 1,000 classes would otherwise hold 10,000
  // copies of the names. meta() keeps its count, encoding, channels and
  // fields.
  virtual void DropSharedMeta() {}
};

// The part of DropSharedMeta that every source does to its own metadata.
void DropSharedMeta(DatasetMeta* meta);

struct OpenOptions {
  // Hold the database in RAM, one copy per machine: the file is copied
  // with large parallel reads into shared memory (a file in shm_dir named
  // by the database's identity: device, inode, size, modification time)
  // and read from there through a shared mapping (or with pread, below).
  // Every process that opens the same file this way uses the same copy; the last one to close it
  // removes it. Refused, naming the sizes, when the copy would not fit in
  // shm_dir or in the RAM available. Otherwise blobs are mmapped and LMDB
  // is read through its own memory map.
  bool in_ram = false;
  // in_ram: also mlock() the copy, so this machine never pages it out
  // (needs RLIMIT_MEMLOCK or root; refused otherwise).
  bool lock_in_ram = false;
  // in_ram: where the shared copies live. Empty: $IMAGEPACK_SHM_DIR, else
  // /dev/shm.
  std::string shm_dir;
  // Read each record with pread() into the cursor's own buffer (blob: the
  // record; LMDB: its value; in RAM: from the shared copy) instead of
  // through the file mapping. The pointer a cursor returns is then valid until that
  // cursor's next read. No page faults, and resident memory is one record
  // (value) per cursor, whatever the size of the file.
  bool pread_records = false;
  // Remote files (s3://, https://; docs/OBJECT_STORAGE.md): these replace
  // the environment's settings (StorageSettings, storage.h) where set.
  // Records are fetched in blocks of fetch_block_mb (adjacent missing
  // blocks in one ranged GET), up to ram_cache_mb of them kept in RAM,
  // and, where a cache folder is given, kept on local disk under
  // cache_limit_mb (least recently used dropped first), shared by every
  // process of this user on the machine and kept across runs. cache_dir
  // empty: $IMAGEPACK_CACHE_DIR, else none. Numbers 0: the environment's
  // (IMAGEPACK_CACHE_LIMIT_MB, else 20480; IMAGEPACK_FETCH_BLOCK_MB, else
  // 1; IMAGEPACK_RAM_CACHE_MB, else 256 with a cache folder, 512 without).
  // ca_file: the CA that verifies HTTPS servers (empty: CURL_CA_BUNDLE,
  // else SSL_CERT_FILE, else libcurl's bundle).
  std::string cache_dir;
  double cache_limit_mb = 0;
  // Another tool's files read in place: only this split's (SourceOptions::
  // split); empty: all, unless they hold several (an error). Parquet's
  // image and label columns where the metadata does not say, and files
  // without labels read as such (SourceOptions::image_column,
  // label_column, no_class).
  std::string split;
  std::string image_column, label_column;
  bool no_class = false;
  // Read in place: the records an import would skip (a damaged row, a CRC
  // that does not match) are left out, with one warning naming their
  // count and the first three, instead of failing the open (the loader's
  // on_corrupt = kSkip).
  bool skip_unreadable = false;
  double fetch_block_mb = 0;
  double ram_cache_mb = 0;
  std::string ca_file;
};

// Opens one database: files of an input format read in place (parquet,
// TFRecord, ...: pack/in_place.cc), else one container, LMDB or blob by
// the file's first bytes. `path` may name any storage (storage.h): a local
// file, s3://, https://.
Result<std::unique_ptr<RecordSource>> OpenDatabase(const std::string& path, const OpenOptions& opts = {});

// Opens several shards as one dataset (records of shard 0, then shard 1, ...).
// Their class lists, encodings and channels must agree.
Result<std::unique_ptr<RecordSource>> OpenDatabases(const std::vector<std::string>& paths,
                                                    const OpenOptions& opts = {});

}  // namespace imagepack
