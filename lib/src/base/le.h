// Little-endian loads and stores for the on-disk format (docs/FORMAT.md).
// The format is little-endian; so is every machine this builds for, and the
// static_assert keeps it that way. Internal.
#pragma once

#include <cstdint>
#include <cstring>

namespace imagepack::internal {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "imagepack assumes a little-endian host");

template <typename T>
inline void Put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
inline T Get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace imagepack::internal
