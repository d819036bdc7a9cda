// Gzipped WebDataset shards (.tar.gz, .tgz), inflated once into an
// unnamed scratch file so that members can be read at their offsets like a
// plain shard's. Internal.
#pragma once

#include <cstdint>
#include <string>

#include "base/limits.h"
#include "imagepack/byte_source.h"
#include "imagepack/progress.h"
#include "imagepack/status.h"

namespace imagepack::internal {

// Inflates the gzip bytes of `in` (any byte source: a file, a remote
// object read through its block cache; several members are read as one
// stream, as gzip does; bytes that are not gzip at all are taken as they
// are, as gzip -dc does with -f) into a scratch file in folder `dir`: an
// O_TMPFILE, or where the file system has none a temporary (files.h)
// unlinked at once, so nothing is left behind however the process ends.
// At most `budget` bytes; `cancel` is checked between 1 MiB chunks.
// Returns the descriptor, open for reading (the caller closes it). Errors
// name `in`.
Result<int> InflateToScratch(const ByteSource& in, const std::string& dir, const CancelFlag* cancel,
                             uint64_t budget = limits::kInflatedShard);

}  // namespace imagepack::internal
