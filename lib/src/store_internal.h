// Shared pieces of the container implementations. Internal.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "imagepack/files.h"
#include "imagepack/store.h"
#include "memory_source.h"
#include "fd_io.h"

namespace imagepack::internal {

// A blob file's first 8 bytes (docs/FORMAT.md).
constexpr char kBlobMagic[8] = {'I', 'P', 'K', 'B', 'L', 'O', 'B', '1'};

// Writers of each container, writing to the temporary `tmp` (created by
// CreateTempFor; the writer owns its fd, and renames it onto `path` in
// Finish or removes it).
Result<std::unique_ptr<RecordWriter>> NewLmdbWriter(const std::string& path, TempFile tmp, int records_per_value);
// index_chunk_shift, index_memory: WriterOptions::blob_index_chunk_shift, blob_index_memory.
Result<std::unique_ptr<RecordWriter>> NewBlobWriter(const std::string& path, TempFile tmp, DirectIo direct_io,
                                                    int index_chunk_shift, size_t index_memory);

Result<std::unique_ptr<RecordSource>> OpenLmdb(const std::string& path, const OpenOptions& opts);
// `bytes`: the blob's file, opened by OpenDatabase.
Result<std::unique_ptr<RecordSource>> OpenBlob(std::shared_ptr<const ByteSource> bytes, const OpenOptions& opts);

// A blob's layout, checked (docs/FORMAT.md): every offset against the file,
// the header's and the index's checksums, the metadata's own; the whole
// index read into memory (object storage; a local blob maps its index
// instead: blob_index.h).
struct BlobLayout {
  DatasetMeta meta;
  std::vector<uint64_t> offsets, lengths;
  uint64_t records_end = 0;  // where the index begins
};
// `read(offset, size, &p)` makes p point at those bytes of the file (valid
// until the next call).
Status ParseBlob(const std::string& path, uint64_t file_size,
                 const std::function<Status(uint64_t, uint64_t, const uint8_t**)>& read, BlobLayout* out);

// A blob in object storage (docs/OBJECT_STORAGE.md): records fetched in
// blocks, kept in RAM (opts.remote) and in the node-local cache.
Result<std::unique_ptr<RecordWriter>> NewUploadingWriter(ContainerFormat format, const std::string& url,
                                                         const WriterOptions& opts);
Result<std::unique_ptr<RecordSource>> OpenRemoteBlob(const std::string& url, const OpenOptions& opts);

// Sources read as one: records of parts[0], then parts[1], ..., with
// `meta` (count: the parts' total). Described as "N <parts_are>: ...".
// OpenDatabases joins a dataset's shards so; a mix (mix.h) its datasets.
std::unique_ptr<RecordSource> JoinSources(std::vector<std::unique_ptr<RecordSource>> parts, DatasetMeta meta,
                                          const std::string& parts_are);

}  // namespace imagepack::internal
