#include "fields/pixel_stats.h"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define IMAGEPACK_HAVE_AVX2_KERNEL 1
#endif

namespace imagepack::internal {
namespace {

// Portable: 48 uint32 lanes, lane k holding channel k % c (48 is a multiple
// of 1 and 3), which compilers vectorise; emptied every 65536 groups of 48
// bytes (65536 * 255^2 < 2^32). Whole groups only.
void AddLanes48(const uint8_t* p, size_t bytes, int c, uint64_t s[3], uint64_t q[3]) {
  constexpr size_t kLanes = 48;
  size_t i = 0;
  while (i < bytes) {
    uint32_t ls[kLanes] = {}, lq[kLanes] = {};
    const size_t end = std::min(bytes, i + kLanes * 65536);
    for (; i < end; i += kLanes)
      for (size_t k = 0; k < kLanes; ++k) {
        const uint32_t v = p[i + k];
        ls[k] += v;
        lq[k] += v * v;
      }
    for (size_t k = 0; k < kLanes; ++k) {
      s[k % c] += ls[k];
      q[k % c] += lq[k];
    }
  }
}

void AddScalar(const uint8_t* p, size_t bytes, int c, uint64_t s[3], uint64_t q[3]) {
  for (size_t i = 0; i < bytes; ++i) {
    const uint32_t v = p[i];
    s[i % c] += v;
    q[i % c] += v * v;
  }
}

#ifdef IMAGEPACK_HAVE_AVX2_KERNEL
// Squares of 32 bytes added into eight uint32 lanes, four squares to a lane
// (at most 4 * 255^2 per lane per call).
__attribute__((target("avx2"))) inline __m256i PairSquares(__m256i v) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i lo = _mm256_unpacklo_epi8(v, zero), hi = _mm256_unpackhi_epi8(v, zero);
  return _mm256_add_epi32(_mm256_madd_epi16(lo, lo), _mm256_madd_epi16(hi, hi));
}

__attribute__((target("avx2"))) inline uint64_t HorizontalSum64(__m256i v) {
  alignas(32) uint64_t l[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), v);
  return l[0] + l[1] + l[2] + l[3];
}

// Blocks of 96 bytes per batch of uint32 square lanes, emptied into uint64
// after each batch: a lane gains at most 3 * 4 * 255^2 per block (gray: 3
// vectors a block; RGB: one per plane), and 4096 * 3 * 4 * 255^2 < 2^32.
constexpr size_t kBlock = 96;
constexpr size_t kBatchBlocks = 4096;

// Three channels: each 96-byte block (32 pixels) is split into its R, G
// and B bytes with byte shuffles (per 128-bit lane, two 48-byte groups at
// once), then each plane is summed with SAD and squared with madd.
// Whole blocks only.
__attribute__((target("avx2"))) void AddRgbAvx2(const uint8_t* p, size_t blocks, uint64_t s[3], uint64_t q[3]) {
  // mask[plane][part]: where plane `plane`'s bytes sit in part `part`
  // (bytes 16*part .. 16*part+15 of a 48-byte group), packed so that the
  // three parts fill disjoint bytes of the plane vector.
  alignas(16) int8_t masks[3][3][16];
  for (int plane = 0; plane < 3; ++plane) {
    int dst = 0;
    for (int part = 0; part < 3; ++part) {
      for (int i = 0; i < 16; ++i) masks[plane][part][i] = -128;  // 0x80: a zero byte
      for (int i = 0; i < 16; ++i)
        if ((16 * part + i) % 3 == plane) masks[plane][part][dst++] = static_cast<int8_t>(i);
    }
  }
  __m256i m[3][3];
  for (int plane = 0; plane < 3; ++plane)
    for (int part = 0; part < 3; ++part)
      m[plane][part] =
          _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(masks[plane][part])));
  const __m256i zero = _mm256_setzero_si256();
  __m256i sum[3] = {zero, zero, zero};
  while (blocks > 0) {
    const size_t n = std::min(blocks, kBatchBlocks);
    __m256i sq[3] = {zero, zero, zero};
    for (size_t b = 0; b < n; ++b, p += kBlock) {
      // Lane 0 holds the first 48-byte group, lane 1 the second.
      __m256i part[3];
      for (int k = 0; k < 3; ++k)
        part[k] = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(p + 48 + 16 * k),
                                      reinterpret_cast<const __m128i*>(p + 16 * k));
      for (int plane = 0; plane < 3; ++plane) {
        const __m256i v = _mm256_or_si256(
            _mm256_or_si256(_mm256_shuffle_epi8(part[0], m[plane][0]), _mm256_shuffle_epi8(part[1], m[plane][1])),
            _mm256_shuffle_epi8(part[2], m[plane][2]));
        sum[plane] = _mm256_add_epi64(sum[plane], _mm256_sad_epu8(v, zero));
        sq[plane] = _mm256_add_epi32(sq[plane], PairSquares(v));
      }
    }
    for (int plane = 0; plane < 3; ++plane) {
      const __m256i wide = _mm256_add_epi64(_mm256_unpacklo_epi32(sq[plane], zero),
                                            _mm256_unpackhi_epi32(sq[plane], zero));
      q[plane] += HorizontalSum64(wide);
    }
    blocks -= n;
  }
  for (int plane = 0; plane < 3; ++plane) s[plane] += HorizontalSum64(sum[plane]);
}

// One channel: 96-byte blocks as three 32-byte vectors.
__attribute__((target("avx2"))) void AddGrayAvx2(const uint8_t* p, size_t blocks, uint64_t s[3], uint64_t q[3]) {
  const __m256i zero = _mm256_setzero_si256();
  __m256i sum = zero;
  while (blocks > 0) {
    const size_t n = std::min(blocks, kBatchBlocks);
    __m256i sq = zero;
    for (size_t b = 0; b < n; ++b, p += kBlock)
      for (int k = 0; k < 3; ++k) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * k));
        sum = _mm256_add_epi64(sum, _mm256_sad_epu8(v, zero));
        sq = _mm256_add_epi32(sq, PairSquares(v));
      }
    q[0] += HorizontalSum64(_mm256_add_epi64(_mm256_unpacklo_epi32(sq, zero), _mm256_unpackhi_epi32(sq, zero)));
    blocks -= n;
  }
  s[0] += HorizontalSum64(sum);
}
#endif

}  // namespace

void AddChannelSums(const uint8_t* p, size_t bytes, int c, uint64_t s[3], uint64_t q[3]) {
  size_t done = 0;
  if (c == 1 || c == 3) {
#ifdef IMAGEPACK_HAVE_AVX2_KERNEL
    static const bool avx2 = __builtin_cpu_supports("avx2");
    if (avx2) {
      done = bytes - bytes % kBlock;  // whole blocks start and end on channel 0
      if (c == 3) AddRgbAvx2(p, done / kBlock, s, q);
      else AddGrayAvx2(p, done / kBlock, s, q);
    }
#endif
    if (done == 0) {
      done = bytes - bytes % 48;
      AddLanes48(p, done, c, s, q);
    }
  }
  AddScalar(p + done, bytes - done, c, s, q);
}

void PixelMoments::Add(const uint8_t* p, size_t px, int c) {
  uint64_t s[3] = {0, 0, 0}, q[3] = {0, 0, 0};
  AddChannelSums(p, px * c, c, s, q);
  for (int k = 0; k < c; ++k) {
    sum[k] += double(s[k]);
    sq[k] += double(q[k]);
  }
  pixels += double(px);
  ++images;
}

void PixelMoments::Merge(const PixelMoments& o) {
  images += o.images;
  pixels += o.pixels;
  for (int k = 0; k < 3; ++k) {
    sum[k] += o.sum[k];
    sq[k] += o.sq[k];
  }
}

PixelMoments PixelMoments::FromMeanStd(const std::vector<double>& mean, const std::vector<double>& std,
                                       int64_t images) {
  PixelMoments m;
  m.images = images;
  m.pixels = double(images);
  const double weight = m.pixels;
  for (size_t k = 0; k < mean.size() && k < std.size() && k < 3; ++k) {
    m.sum[k] = mean[k] * 255.0 * weight;
    m.sq[k] = (std[k] * std[k] + mean[k] * mean[k]) * (255.0 * 255.0) * weight;
  }
  return m;
}

void PixelMoments::MeanStd(int channels, std::vector<double>* mean, std::vector<double>* std) const {
  mean->clear();
  std->clear();
  if (pixels <= 0) return;
  for (int k = 0; k < channels && k < 3; ++k) {
    const double m = sum[k] / pixels / 255.0;
    mean->push_back(m);
    std->push_back(std::sqrt(std::max(0.0, sq[k] / pixels / (255.0 * 255.0) - m * m)));
  }
}

}  // namespace imagepack::internal
