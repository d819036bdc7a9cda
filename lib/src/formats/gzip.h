// Gzipped WebDataset shards (.tar.gz, .tgz), inflated once into an
// unnamed scratch file so that members can be read at their offsets like a
// plain shard's. Internal.
#pragma once

#include <cstdint>
#include <string>

#include "formats/limits.h"
#include "imagepack/progress.h"
#include "imagepack/status.h"

namespace imagepack::internal {

// Inflates the gzip file `in` (a regular file; several members are read
// as one stream, as gzip does) into a scratch file in folder `dir`: an
// O_TMPFILE, or where the file system has none a private name unlinked at
// once, so nothing is left behind however the process ends. At most
// `budget` bytes; `cancel` is checked between 1 MiB chunks. Returns the
// descriptor, open for reading (the caller closes it). Errors name `in`.
Result<int> InflateToScratch(const std::string& in, const std::string& dir, const CancelFlag* cancel,
                             uint64_t budget = limits::kInflatedShard);

}  // namespace imagepack::internal
