// Per-channel pixel moments (mean/std) of interleaved uint8 pixels: pack
// sums them while writing, verify --stats while reading, and shards pool
// theirs when opened as one dataset. Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace imagepack::internal {

// Adds the sums and the sums of squares of the bytes of `p` (`bytes` of
// them, `c` interleaved channels, 1 <= c <= 3, starting at channel 0) to
// s[k] and q[k] per channel k. Exact (integer) whatever the size. Uses AVX2
// where the CPU has it (raw packing runs this over every decoded pixel).
void AddChannelSums(const uint8_t* p, size_t bytes, int c, uint64_t s[3], uint64_t q[3]);

// Sums of pixel values and of their squares per channel, over `pixels`
// pixels of `images` images.
struct PixelMoments {
  int64_t images = 0;
  double pixels = 0;
  double sum[3] = {0, 0, 0};
  double sq[3] = {0, 0, 0};

  // One image: `px` pixels of `c` interleaved channels.
  void Add(const uint8_t* p, size_t px, int c);
  void Merge(const PixelMoments& other);
  // Moments that give `mean` and `std` (per channel, in [0, 1]) over
  // `images` images weighted alike (one unit of `pixels` each): for pooling
  // the statistics of shards, whose pixel counts are not stored.
  static PixelMoments FromMeanStd(const std::vector<double>& mean, const std::vector<double>& std, int64_t images);
  // Per channel (the first `channels`), in [0, 1]: the mean and the
  // population standard deviation. Empty when there are no pixels.
  void MeanStd(int channels, std::vector<double>* mean, std::vector<double>* std) const;
};

}  // namespace imagepack::internal
