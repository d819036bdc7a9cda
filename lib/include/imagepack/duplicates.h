// Exact and near duplicates within and between databases (a train set
// against its val/test set above all): the library side of
// `inspect_db --duplicates`; docs/USAGE.md.
//
// Every record gets a signature from a small decode (JPEGs decoded at a
// reduced DCT scale, shorter edge >= 32): the XXH3-64 of its stored bytes
// (exact duplicates), 64-bit perceptual hashes (the signs of the 8x8
// lowest-frequency DCT coefficients, DC left out, of a 32x32 gray image,
// against their median: unchanged by re-encoding, resizing, brightness and
// contrast) of the whole image and of its centre 90% and 80% (crops), and
// the 32x32 gray image (1 KB per record). Candidates are pairs where one
// image's whole-image hash is within `max_distance` bits of one of the
// other's hashes, found through 4 tables of 16-bit bands of the
// whole-image hashes probed within 2 bits (any pair within 11 bits shares
// a band within 2): near-linear, not all pairs. A candidate is a near
// duplicate when ComparePair's similarity and detail reach
// `min_similarity` and `min_detail`.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "imagepack/pixels.h"
#include "imagepack/progress.h"
#include "imagepack/status.h"

namespace imagepack {

struct ImageSignature {
  uint64_t exact = 0;   // XXH3-64 of the record's payload
  // The hash of the whole image, and of its centre 90% and 80% (a cropped
  // copy's whole-image hash is near one of the original's centre hashes).
  std::array<uint64_t, 3> phash{};
  std::array<uint8_t, 32 * 32> gray{};  // the 32x32 gray image the hashes come from
  // The whole image's 16x16 structure map, zero mean, scaled to +-127
  // (ComparePair); 1.4 KB per record in all.
  std::array<int8_t, 16 * 16> structure{};
  // 8x8 chroma (R - G, B - (R + G) / 2), halved: the colours, which the
  // gray image does not see.
  std::array<int8_t, 2 * 64> chroma{};
  bool ok = false;
};

// The perceptual hash and thumbnail of an image (any size, 1 or 3 channels).
ImageSignature SignatureOfPixels(const Image& img);

// How alike two images are. `similarity`: the correlation of zero-mean
// 16x16 gray thumbnails, in [-1, 1] (1: the same up to brightness and
// contrast), of the whole images or, when a centre hash of one matches the
// other's whole-image hash more closely than the whole-image hashes do,
// the best of 27 windows of the larger view around that centre fraction
// (a slightly cropped copy lines up with its original); capped by the
// cosine of the chroma thumbnails (hue: unchanged by brightness and
// saturation) where both images have colour. `detail`: at that alignment,
// the correlation of the 16x16 maps' fine detail (each minus its 3x3
// blur), the best over shifts of up to a pixel: two different shirts of
// one silhouette agree in structure, not in detail. Detail is compared at
// 16x16, where a window's resampling blur and residual misalignment are
// below a cell.
struct PairSimilarity {
  double similarity = 0;
  double detail = 0;
  bool windowed = false;  // aligned through a window (a crop)
};
// Windows are searched only when the whole images correlate at least 0.2
// and are not already alike enough (both `enough_` thresholds met).
PairSimilarity ComparePair(const ImageSignature& a, const ImageSignature& b, double enough_similarity = 2,
                           double enough_detail = 2);
int HashDistance(uint64_t a, uint64_t b);

struct DuplicateOptions {
  std::vector<std::string> dbs;  // every pair within and between these
  int max_distance = 11;         // hash bits (<= 11: the band probes find all)
  double min_similarity = 0.90;  // PairSimilarity::similarity
  double min_detail = 0.5;       // PairSimilarity::detail
  int threads = 0;
  CancelFlag* cancel = nullptr;
  Progress* progress = nullptr;
};

struct DuplicatePair {
  int db_a = 0, db_b = 0;  // indices into DuplicateOptions::dbs
  int64_t a = 0, b = 0;    // record indices (db_a, a) < (db_b, b)
  bool exact = false;      // same stored bytes
  int distance = 0;        // hash bits that differ
  double similarity = 0;   // PairSimilarity
  double detail = 0;
  bool windowed = false;
  std::string path_a, path_b;
  int32_t label_a = -1, label_b = -1;
};

struct DuplicateReport {
  std::vector<int64_t> records;         // per database
  std::vector<DuplicatePair> pairs;     // exact first, then by similarity, descending
  std::vector<std::string> unreadable;  // "DB record N: reason"
  int64_t candidates = 0;               // pairs within max_distance before the thumbnail check
  double signature_seconds = 0, match_seconds = 0;
  bool cancelled = false;
};

Result<DuplicateReport> FindDuplicates(const DuplicateOptions& opts);

// The pairs among already computed signatures: (set, index) per entry.
// `group` tells the entries' database; pairs are reported within and
// between groups alike. Used by FindDuplicates; exposed for tests.
struct SignedRecord {
  int group = 0;
  int64_t index = 0;
  ImageSignature sig;
};
std::vector<DuplicatePair> MatchSignatures(const std::vector<SignedRecord>& records, int max_distance,
                                           double min_similarity, double min_detail, int64_t* candidates);

}  // namespace imagepack
