// Per-channel sums of interleaved uint8 pixels, for mean/std. Internal.
#pragma once

#include <cstddef>
#include <cstdint>

namespace imagepack::internal {

// Adds the sums and the sums of squares of the bytes of `p` (`bytes` of
// them, `c` interleaved channels, 1 <= c <= 3, starting at channel 0) to
// s[k] and q[k] per channel k. Exact (integer) whatever the size. Uses AVX2
// where the CPU has it (raw packing runs this over every decoded pixel).
void AddChannelSums(const uint8_t* p, size_t bytes, int c, uint64_t s[3], uint64_t q[3]);

}  // namespace imagepack::internal
