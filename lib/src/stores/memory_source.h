// Records in memory: a read-only mapping of a container's file (a blob, or
// its shared in-RAM copy), located by an (offset, length) index, and the
// helpers for such mappings. Internal.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stores/blob_index.h"
#include "imagepack/byte_source.h"
#include "imagepack/store.h"

namespace imagepack::internal {

// The records `index` locates in `bytes` (a blob file, or its shared
// in-RAM copy), read through its mapping (ByteSource::Map), or, with
// `pread`, with ReadAt into each cursor's own buffer (no page faults, no
// page of the file mapped: resident memory is one record per cursor).
// StoredRanges name `bytes`.
Result<std::unique_ptr<RecordSource>> NewMemorySource(DatasetMeta meta, std::string describe,
                                                      std::shared_ptr<const ByteSource> bytes,
                                                      std::unique_ptr<BlobIndex> index, bool pread);

// Appends [offset, offset + size) of `source` to `out`, merged with the
// last range when they touch (or lie less than a page apart).
void AppendRange(const ByteSource* source, uint64_t offset, uint64_t size, std::vector<StoredRange>* out);

// Unmaps the whole pages of [addr, addr + size) of a read-only file mapping
// from this process (MADV_DONTNEED); the page cache keeps the data.
void ReleasePages(const void* addr, size_t size);

// The mapping of this process (/proc/self/maps) that contains `p`.
bool FindMapping(const void* p, const void** begin, size_t* size);

}  // namespace imagepack::internal
