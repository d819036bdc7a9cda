// What the LMDB writer and reader share (docs/FORMAT.md, "LMDB container"):
// liblmdb's errors as a Status, and format 2's grouped values. Internal.
#pragma once

#include <lmdb.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "imagepack/status.h"

namespace imagepack::internal {

inline Status LmdbError(const std::string& context, int rc) {
  return Status::IOError(context + ": " + mdb_strerror(rc));
}

// Format 2 value: "IPKG", uint32 n, uint64 offsets[n + 1] (from the value's
// start; offsets[0] is the header's size, offsets[n] the value's), then the
// n records back to back (docs/FORMAT.md).
inline constexpr char kGroupMagic[4] = {'I', 'P', 'K', 'G'};
inline size_t GroupHeaderSize(size_t n) { return 8 + 8 * (n + 1); }

inline uint64_t Load64(const uint8_t* p) {
  uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}

}  // namespace imagepack::internal
