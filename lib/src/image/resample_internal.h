// Internals of resample.cc that tests reach: which SIMD kernels run.
#pragma once

namespace imagepack {

enum class SimdLevel { kScalar = 0, kSse2 = 1, kAvx2 = 2 };

// The level in use (detected on first use: AVX2 if the CPU has it).
SimdLevel ResampleSimdLevel();
// Forces a level, for tests that compare kernels; a level above what the CPU
// has is lowered to what it has. Returns the level now in use.
SimdLevel SetResampleSimdLevel(SimdLevel level);

}  // namespace imagepack
