// The items of a pack's source that this shard packs, in the order they
// are packed: the source's order (sorted paths; a database's, or indexed
// shards', stored order), or that order permuted by the shuffle seed: item
// k of the pack is item pi(k) of the shard's items, pi the keyed bijection
// KeyedPermutation(count, seed). Held in memory, read from a database
// record by record, or set aside in scratch files (a spilled tree: its
// shard's items, then for a shuffle one bucket of positions at a time),
// so that memory stays bounded whatever the count. Internal.
#pragma once

#include <cstdint>
#include <memory>

#include "imagepack/shard.h"
#include "imagepack/status.h"
#include "sources/sources.h"

namespace imagepack::internal {

class PackInputs {
 public:
  virtual ~PackInputs() = default;
  // Takes the source's items (source->items, its spill, or its database's
  // records: which the source holds), keeps this shard's.
  static Result<std::unique_ptr<PackInputs>> Open(DatasetSource* source, const Shard& shard, int64_t shuffle_seed,
                                                  const std::string& scratch_dir);
  virtual int64_t size() const = 0;
  // The next item: true, false after the last, or an error reading a
  // scratch file. One thread.
  virtual Result<bool> Next(SourceItem* item) = 0;
};

}  // namespace imagepack::internal
