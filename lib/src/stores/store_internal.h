// Shared pieces of the container implementations. Internal.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "imagepack/files.h"
#include "imagepack/storage.h"
#include "imagepack/store.h"
#include "stores/memory_source.h"
#include "storage/fd_io.h"

namespace imagepack::internal {

// The environment's storage settings with the options' on top (cache_dir,
// ca_file, ...): every file a database or a source read in place opens.
Result<StorageSettings> SettingsFor(const OpenOptions& opts);

// A blob file's first 8 bytes (docs/FORMAT.md).
constexpr char kBlobMagic[8] = {'I', 'P', 'K', 'B', 'L', 'O', 'B', '1'};

// Writers of each container, writing to `out` (its staging file; the
// writer syncs what must be durable and commits it in Finish; destroyed
// unfinished, `out` publishes nothing).
Result<std::unique_ptr<RecordWriter>> NewLmdbWriter(std::unique_ptr<WritableFile> out, int records_per_value);
// index_chunk_shift, index_memory: WriterOptions::blob_index_chunk_shift, blob_index_memory.
Result<std::unique_ptr<RecordWriter>> NewBlobWriter(std::unique_ptr<WritableFile> out, DirectIo direct_io,
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

// A blob whose bytes cannot be mapped (a remote object, read through its
// source's block cache; docs/OBJECT_STORAGE.md). An LMDB there is refused
// with what to do instead.
Result<std::unique_ptr<RecordSource>> OpenUnmappedBlob(std::shared_ptr<const ByteSource> bytes);

// Sources read as one: records of parts[0], then parts[1], ..., with
// `meta` (count: the parts' total). Described as "N <parts_are>: ...".
// OpenDatabases joins a dataset's shards so; a mix (mix.h) its datasets.
std::unique_ptr<RecordSource> JoinSources(std::vector<std::unique_ptr<RecordSource>> parts, DatasetMeta meta,
                                          const std::string& parts_are);

// One container (LMDB or blob, by its first bytes) at `path`, on any
// storage; in_ram makes or joins the machine's shared copy. The public
// OpenDatabase (pack/in_place.cc) reads other tools' files in place first.
Result<std::unique_ptr<RecordSource>> OpenContainer(const std::string& path, const OpenOptions& opts);

// The shards of one dataset, each opened by `open_one`, joined after
// their class lists, encodings, channels and fields are checked.
using DatabaseOpener = Result<std::unique_ptr<RecordSource>> (*)(const std::string&, const OpenOptions&);
Result<std::unique_ptr<RecordSource>> OpenShards(const std::vector<std::string>& paths, const OpenOptions& opts,
                                                 DatabaseOpener open_one);

}  // namespace imagepack::internal
