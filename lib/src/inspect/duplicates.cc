#include "imagepack/duplicates.h"

#include <tbb/parallel_for.h>
#include <tbb/parallel_sort.h>
#include <tbb/task_arena.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>

#include "imagepack/decode.h"
#include "imagepack/record.h"
#include "imagepack/resample.h"
#include "imagepack/store.h"
#include "base/threads.h"

namespace imagepack {
namespace {

constexpr int kN = 32;   // the hash's gray image is kN x kN
constexpr int kLow = 9;  // DCT coefficients (u, v) < kLow are computed
constexpr double kWindowGate = 0.2;  // whole-image correlation below which no small crop explains a pair

// cos((2x + 1) u pi / 2N) for u < kLow, x < kN.
const std::array<std::array<float, kN>, kLow>& CosTable() {
  static const auto table = [] {
    std::array<std::array<float, kN>, kLow> t{};
    for (int u = 0; u < kLow; ++u)
      for (int x = 0; x < kN; ++x) t[u][x] = static_cast<float>(std::cos((2 * x + 1) * u * M_PI / (2 * kN)));
    return t;
  }();
  return table;
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int HashDistance(uint64_t a, uint64_t b) { return __builtin_popcountll(a ^ b); }

namespace {

// The 64-bit hash of the kN x kN gray image `p`.
uint64_t HashOf(const uint8_t* p) {
  const auto& c = CosTable();
  float rows[kN][kLow];  // rows[y][v] = sum_x p(x, y) cos_v(x)
  for (int y = 0; y < kN; ++y)
    for (int v = 0; v < kLow; ++v) {
      float acc = 0;
      for (int x = 0; x < kN; ++x) acc += p[size_t(y) * kN + x] * c[v][x];
      rows[y][v] = acc;
    }
  std::array<float, 64> coef{};
  int k = 0;
  for (int u = 0; u < 8; ++u)
    for (int v = 0; v < 8; ++v) {
      if (u == 0 && v == 0) continue;  // DC: brightness
      float acc = 0;
      for (int y = 0; y < kN; ++y) acc += rows[y][v] * c[u][y];
      coef[size_t(k++)] = acc;
    }
  float acc = 0;  // the 64th: (u, v) = (0, 8)
  for (int y = 0; y < kN; ++y) acc += rows[y][8] * c[0][y];
  coef[63] = acc;
  std::array<float, 64> sorted = coef;
  std::nth_element(sorted.begin(), sorted.begin() + 32, sorted.end());
  uint64_t h = 0;
  for (int i = 0; i < 64; ++i)
    if (coef[size_t(i)] > sorted[32]) h |= uint64_t(1) << i;
  return h;
}

// A window of a kN x kN gray image: (x, y) its corner, w its edge (square).
struct Window {
  double x = 0, y = 0, w = kN;
};

// The window resampled to n x n (one bilinear sample per output pixel,
// at its centre; n = 16: a structure thumbnail, n = 32: for detail).
template <int n>
std::array<float, n * n> Sample(const uint8_t* g, const Window& win) {
  std::array<float, n * n> t{};
  const double step = win.w / n;
  for (int ty = 0; ty < n; ++ty) {
    const double fy = std::clamp(win.y + (ty + 0.5) * step - 0.5, 0.0, kN - 1.0);
    const int y0 = std::min(int(fy), kN - 2);
    const float ay = float(fy - y0);
    for (int tx = 0; tx < n; ++tx) {
      const double fx = std::clamp(win.x + (tx + 0.5) * step - 0.5, 0.0, kN - 1.0);
      const int x0 = std::min(int(fx), kN - 2);
      const float ax = float(fx - x0);
      const uint8_t* p = g + y0 * kN + x0;
      t[size_t(ty * n + tx)] = (p[0] * (1 - ax) + p[1] * ax) * (1 - ay) + (p[kN] * (1 - ax) + p[kN + 1] * ax) * ay;
    }
  }
  return t;
}

// Zero mean, unit norm (all zeros when flat).
template <size_t m>
void Normalise(std::array<float, m>& t) {
  double mean = 0;
  for (float v : t) mean += v;
  mean /= double(m);
  double norm = 0;
  for (auto& v : t) {
    v = float(v - mean);
    norm += double(v) * v;
  }
  const float inv = norm > 1e-6 ? float(1 / std::sqrt(norm)) : 0.f;
  for (auto& v : t) v *= inv;
}

using Thumb = std::array<float, 256>;
Thumb Structure(const uint8_t* g, const Window& w) {
  Thumb t = Sample<16>(g, w);  // one bilinear sample per cell: cells are >= 1.5 px of the 32x32 image
  Normalise(t);
  return t;
}

// The windows ComparePair tries: centre fraction k (0.9, 0.8), scale
// (fraction -0.05, 0, +0.05), 3x3 positions; each as 256 bilinear taps.
struct Taps {
  Window win;
  std::array<uint16_t, 256> at;  // top-left source pixel
  std::array<float, 256> ax, ay;
};
const std::array<Taps, 54>& WindowTaps() {
  static const auto table = [] {
    std::array<Taps, 54> t{};
    size_t i = 0;
    for (double centre : {0.9, 0.8})
      for (double f : {centre - 0.05, centre, centre + 0.05}) {
        const double w = kN * f, m = kN - w;
        for (int oy = 0; oy < 3; ++oy)
          for (int ox = 0; ox < 3; ++ox, ++i) {
            Taps& tap = t[i];
            tap.win = {m * ox / 2, m * oy / 2, w};
            const double step = w / 16;
            for (int ty = 0; ty < 16; ++ty)
              for (int tx = 0; tx < 16; ++tx) {
                const double fy = std::clamp(tap.win.y + (ty + 0.5) * step - 0.5, 0.0, kN - 1.0);
                const double fx = std::clamp(tap.win.x + (tx + 0.5) * step - 0.5, 0.0, kN - 1.0);
                const int y0 = std::min(int(fy), kN - 2), x0 = std::min(int(fx), kN - 2);
                tap.at[size_t(ty * 16 + tx)] = uint16_t(y0 * kN + x0);
                tap.ax[size_t(ty * 16 + tx)] = float(fx - x0);
                tap.ay[size_t(ty * 16 + tx)] = float(fy - y0);
              }
          }
      }
    return t;
  }();
  return table;
}

// Structure(g, taps.win), from the precomputed taps.
Thumb Structure(const uint8_t* g, const Taps& tap) {
  Thumb t;
  float sum = 0;
  for (size_t i = 0; i < 256; ++i) {
    const uint8_t* p = g + tap.at[i];
    const float ax = tap.ax[i], ay = tap.ay[i];
    t[i] = (p[0] + (p[1] - p[0]) * ax) * (1 - ay) + (p[kN] + (p[kN + 1] - p[kN]) * ax) * ay;
    sum += t[i];
  }
  const float mean = sum / 256;
  float norm = 0;
  for (auto& v : t) v -= mean, norm += v * v;
  const float inv = norm > 1e-6f ? 1 / std::sqrt(norm) : 0.f;
  for (auto& v : t) v *= inv;
  return t;
}

template <size_t m>
double Dot(const std::array<float, m>& a, const std::array<float, m>& b) {
  double acc = 0;
  for (size_t i = 0; i < m; ++i) acc += double(a[i]) * b[i];
  return acc;
}

// Detail: an n x n map minus its 3x3 box blur, normalised.
template <int n>
std::array<float, n * n> BandPass(const std::array<float, n * n>& p) {
  std::array<float, n * n> d{};
  for (int y = 0; y < n; ++y)
    for (int x = 0; x < n; ++x) {
      float acc = 0;
      int k = 0;
      for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
          const int yy = y + dy, xx = x + dx;
          if (yy < 0 || yy >= n || xx < 0 || xx >= n) continue;
          acc += p[size_t(yy * n + xx)];
          ++k;
        }
      d[size_t(y * n + x)] = p[size_t(y * n + x)] - acc / k;
    }
  Normalise(d);
  return d;
}

// Two detail maps' best correlation over shifts of up to one cell.
template <int n>
double DetailMatch(const std::array<float, n * n>& a, const std::array<float, n * n>& b) {
  double best = -1;
  for (int sy = -1; sy <= 1; ++sy)
    for (int sx = -1; sx <= 1; ++sx) {
      double acc = 0;
      for (int y = std::max(0, -sy); y < std::min(n, n - sy); ++y)
        for (int x = std::max(0, -sx); x < std::min(n, n - sx); ++x)
          acc += double(a[size_t(y * n + x)]) * b[size_t((y + sy) * n + x + sx)];
      best = std::max(best, acc);
    }
  return best;
}

template <size_t m>
std::array<int8_t, m> Quantise(const std::array<float, m>& t) {
  float peak = 0;
  for (float v : t) peak = std::max(peak, std::fabs(v));
  std::array<int8_t, m> q{};
  if (peak > 0)
    for (size_t i = 0; i < m; ++i) q[i] = int8_t(std::lround(t[i] * 127.f / peak));
  return q;
}

template <size_t m>
double Cosine(const std::array<int8_t, m>& a, const std::array<int8_t, m>& b) {
  int32_t ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < m; ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return aa > 0 && bb > 0 ? ab / std::sqrt(double(aa) * double(bb)) : (aa == bb ? 1.0 : 0.0);
}

}  // namespace

ImageSignature SignatureOfPixels(const Image& img) {
  ImageSignature s;
  if (img.width < 1 || img.height < 1) return s;
  Image gray = img.channels == 1 ? img : ConvertChannels(img, 1);
  if (img.channels == 3) {
    const Image c8 = ResampleImage(img, 8, 8, ResampleFilter::kTriangle);
    for (int i = 0; i < 64; ++i) {
      const int r = c8.pixels[size_t(i) * 3], g = c8.pixels[size_t(i) * 3 + 1], b = c8.pixels[size_t(i) * 3 + 2];
      s.chroma[size_t(i)] = int8_t(std::clamp((r - g) / 2, -127, 127));
      s.chroma[size_t(64 + i)] = int8_t(std::clamp((2 * b - r - g) / 4, -127, 127));
    }
  }
  Image small = ResampleImage(gray, kN, kN, ResampleFilter::kTriangle);
  std::memcpy(s.gray.data(), small.pixels.data(), s.gray.size());
  s.phash[0] = HashOf(s.gray.data());
  s.structure = Quantise(Structure(s.gray.data(), Window{}));
  for (int k = 1; k <= 2; ++k) {  // centre 90%, 80%, from the gray image at full size
    const double f = k == 1 ? 0.9 : 0.8;
    const double cw = gray.width * f, ch = gray.height * f;
    std::vector<uint8_t> out(size_t(kN) * kN);
    ResampleRegion(gray.pixels.data(), gray.width, gray.height, gray.stride(), 1, (gray.width - cw) / 2,
                   (gray.height - ch) / 2, cw, ch, out.data(), kN, kN, kN, ResampleFilter::kTriangle);
    s.phash[size_t(k)] = HashOf(out.data());
  }
  s.ok = true;
  return s;
}

namespace {

// The chroma thumbnails' cosine; 1 when either image has (almost) no colour.
double ChromaAgreement(const ImageSignature& a, const ImageSignature& b) {
  int64_t ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.chroma.size(); ++i) {
    ab += a.chroma[i] * b.chroma[i];
    aa += a.chroma[i] * a.chroma[i];
    bb += b.chroma[i] * b.chroma[i];
  }
  const double floor = 128.0 * 4 * 4;  // rms chroma below 4 (of 127): gray
  if (double(aa) < floor && double(bb) < floor) return 1.0;
  if (double(aa) < floor || double(bb) < floor) return 0.0;  // one gray, one coloured
  return double(ab) / std::sqrt(double(aa) * double(bb));
}

}  // namespace

PairSimilarity ComparePair(const ImageSignature& a, const ImageSignature& b, double enough_similarity,
                           double enough_detail) {
  PairSimilarity r;
  const double colour = ChromaAgreement(a, b);
  if (colour < 0.5) {
    r.similarity = colour;
    return r;
  }
  const Window whole;
  const bool flat_a = std::all_of(a.structure.begin(), a.structure.end(), [](int8_t v) { return v == 0; });
  const bool flat_b = std::all_of(b.structure.begin(), b.structure.end(), [](int8_t v) { return v == 0; });
  if (flat_a || flat_b) {  // flat: alike only if both are
    r.similarity = r.detail = flat_a && flat_b ? 1.0 : 0.0;
    return r;
  }
  auto as_float = [](const std::array<int8_t, 256>& q) {
    Thumb t{};
    for (size_t i = 0; i < 256; ++i) t[i] = q[i];
    return t;
  };
  // Detail at 16x16 (a window's blur and residual misalignment are below a
  // cell there): the aligned structure maps' band-pass.
  const Thumb sa = as_float(a.structure), sb = as_float(b.structure);
  const double direct = Cosine(a.structure, b.structure);
  r.similarity = std::min(direct, colour);
  r.detail = DetailMatch<16>(BandPass<16>(sa), BandPass<16>(sb));
  // Windows only where they can decide: not when the whole images already
  // agree enough, nor when they are far apart; and only around a centre fraction whose
  // hash matches the other's whole-image hash better than the whole does.
  if ((r.similarity >= enough_similarity && r.detail >= enough_detail) || direct < kWindowGate) return r;
  double best = -1;
  int side = 0;  // 1: b lies in a window of a; 2: a in one of b
  Window at;
  const int d0 = HashDistance(a.phash[0], b.phash[0]);
  for (int k = 1; k <= 2; ++k)
    for (int s = 1; s <= 2; ++s) {
      const ImageSignature& big = s == 1 ? a : b;
      const ImageSignature& small = s == 1 ? b : a;
      if (HashDistance(big.phash[size_t(k)], small.phash[0]) >= d0) continue;
      const Thumb target = Structure(small.gray.data(), whole);
      for (size_t i = size_t(k - 1) * 27; i < size_t(k) * 27; ++i) {
        const Taps& tap = WindowTaps()[i];
        const double c = Dot(target, Structure(big.gray.data(), tap));
        if (c > best) best = c, side = s, at = tap.win;
      }
    }
  if (side == 0 || best <= direct) return r;
  const Thumb wa = side == 1 ? Structure(a.gray.data(), at) : sa;
  const Thumb wb = side == 2 ? Structure(b.gray.data(), at) : sb;
  r.similarity = std::min(best, colour);
  r.detail = DetailMatch<16>(BandPass<16>(wa), BandPass<16>(wb));
  r.windowed = true;
  return r;
}

std::vector<DuplicatePair> MatchSignatures(const std::vector<SignedRecord>& recs, int max_distance,
                                           double min_similarity, double min_detail, int64_t* candidates) {
  const size_t n = recs.size();
  std::vector<DuplicatePair> out;
  // Exact: equal payload hashes.
  std::vector<uint32_t> by_exact(n);
  for (size_t i = 0; i < n; ++i) by_exact[i] = static_cast<uint32_t>(i);
  tbb::parallel_sort(by_exact.begin(), by_exact.end(),
                     [&](uint32_t a, uint32_t b) { return recs[a].sig.exact < recs[b].sig.exact || (recs[a].sig.exact == recs[b].sig.exact && a < b); });
  std::vector<std::pair<uint32_t, uint32_t>> pairs;  // (i, j), i < j
  for (size_t lo = 0; lo < n;) {
    size_t hi = lo + 1;
    while (hi < n && recs[by_exact[hi]].sig.exact == recs[by_exact[lo]].sig.exact) ++hi;
    for (size_t x = lo; x < hi; ++x)
      for (size_t y = x + 1; y < hi; ++y) pairs.emplace_back(by_exact[x], by_exact[y]);
    lo = hi;
  }
  const size_t exact_pairs = pairs.size();
  // Near: 4 bands of 16 bits; each record probes its bands within 2 bits.
  std::array<std::vector<std::vector<uint32_t>>, 4> tables;
  for (auto& t : tables) t.assign(1 << 16, {});
  for (size_t i = 0; i < n; ++i)
    if (recs[i].sig.ok)
      for (int b = 0; b < 4; ++b) tables[size_t(b)][(recs[i].sig.phash[0] >> (16 * b)) & 0xffff].push_back(uint32_t(i));
  std::vector<uint16_t> flips{0};
  for (int a = 0; a < 16; ++a) flips.push_back(uint16_t(1u << a));
  for (int a = 0; a < 16; ++a)
    for (int b = a + 1; b < 16; ++b) flips.push_back(uint16_t((1u << a) | (1u << b)));
  std::mutex mu;
  std::vector<std::pair<uint32_t, uint32_t>> near;
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 512), [&](const tbb::blocked_range<size_t>& r) {
    std::vector<std::pair<uint32_t, uint32_t>> local;
    for (size_t i = r.begin(); i != r.end(); ++i) {
      if (!recs[i].sig.ok) continue;
      for (const uint64_t h : recs[i].sig.phash) {
        for (int b = 0; b < 4; ++b) {
          const uint16_t band = uint16_t(h >> (16 * b));
          for (uint16_t f : flips)
            for (uint32_t j : tables[size_t(b)][uint16_t(band ^ f)]) {
              if (j == i || HashDistance(h, recs[j].sig.phash[0]) > max_distance) continue;
              // Found through every band within 2 bits: keep it at the first.
              bool earlier = false;
              for (int e = 0; e < b && !earlier; ++e)
                earlier = __builtin_popcount(uint16_t(h >> (16 * e)) ^ uint16_t(recs[j].sig.phash[0] >> (16 * e))) <= 2;
              if (!earlier) local.emplace_back(std::min(uint32_t(i), j), std::max(uint32_t(i), j));
            }
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    near.insert(near.end(), local.begin(), local.end());
  });
  tbb::parallel_sort(near.begin(), near.end());  // a pair found from both ends, or by several hashes: once
  near.erase(std::unique(near.begin(), near.end()), near.end());
  *candidates = static_cast<int64_t>(near.size());
  pairs.insert(pairs.end(), near.begin(), near.end());
  std::vector<char> keep(pairs.size(), 0);
  std::vector<PairSimilarity> sim(pairs.size());
  tbb::parallel_for(tbb::blocked_range<size_t>(0, pairs.size(), 256), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t k = r.begin(); k != r.end(); ++k) {
      const auto& a = recs[pairs[k].first].sig;
      const auto& b = recs[pairs[k].second].sig;
      if (a.ok && b.ok) sim[k] = ComparePair(a, b, min_similarity, min_detail);
      keep[k] = k < exact_pairs ||
                (sim[k].similarity >= min_similarity && sim[k].detail >= min_detail);
    }
  });
  std::vector<std::pair<uint32_t, uint32_t>> seen;
  for (size_t k = 0; k < pairs.size(); ++k) {
    if (!keep[k]) continue;
    auto [i, j] = pairs[k];
    if (k >= exact_pairs && recs[i].sig.exact == recs[j].sig.exact) continue;  // already reported as exact
    DuplicatePair p;
    p.db_a = recs[i].group;
    p.a = recs[i].index;
    p.db_b = recs[j].group;
    p.b = recs[j].index;
    if (std::make_pair(p.db_b, p.b) < std::make_pair(p.db_a, p.a)) std::swap(p.db_a, p.db_b), std::swap(p.a, p.b);
    p.exact = k < exact_pairs;
    p.distance = 64;
    for (int x = 0; x < 3; ++x) {
      p.distance = std::min(p.distance, HashDistance(recs[i].sig.phash[size_t(x)], recs[j].sig.phash[0]));
      p.distance = std::min(p.distance, HashDistance(recs[i].sig.phash[0], recs[j].sig.phash[size_t(x)]));
    }
    p.similarity = sim[k].similarity;
    p.detail = sim[k].detail;
    p.windowed = sim[k].windowed;
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(), [](const DuplicatePair& x, const DuplicatePair& y) {
    if (x.exact != y.exact) return x.exact;
    if (x.similarity != y.similarity) return x.similarity > y.similarity;
    return std::tie(x.db_a, x.a, x.db_b, x.b) < std::tie(y.db_a, y.a, y.db_b, y.b);
  });
  return out;
}

Result<DuplicateReport> FindDuplicates(const DuplicateOptions& o) {
  if (o.max_distance < 0 || o.max_distance > 11)
    return Status::InvalidArgument("max_distance must be in 0..11 (the band probes find pairs within 11 bits)");
  DuplicateReport rep;
  std::vector<std::unique_ptr<RecordSource>> dbs;
  int64_t total = 0;
  for (const auto& path : o.dbs) {
    auto db = OpenDatabase(path);
    if (!db.ok()) return db.status();
    rep.records.push_back(db.value()->size());
    total += db.value()->size();
    dbs.push_back(std::move(db.value()));
  }
  if (o.progress) o.progress->total = total;
  std::vector<SignedRecord> recs(static_cast<size_t>(total));
  std::vector<std::string> paths(recs.size());
  std::vector<int32_t> labels(recs.size(), -1);
  std::mutex mu;
  const auto t0 = std::chrono::steady_clock::now();
  tbb::task_arena arena(std::max(internal::ResolveThreads(o.threads), 1));
  int64_t base = 0;
  for (size_t d = 0; d < dbs.size(); ++d) {
    const RecordSource& src = *dbs[d];
    arena.execute([&] {
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, src.size(), 64), [&](const tbb::blocked_range<int64_t>& r) {
        auto cur = src.NewCursor();
        DecodeOptions dec;
        dec.channels = 3;
        dec.limit = {SizeLimit::Mode::kShorterEdge, 32};
        for (int64_t i = r.begin(); i != r.end(); ++i) {
          if (o.cancel && o.cancel->load()) return;
          SignedRecord& s = recs[size_t(base + i)];
          s.group = static_cast<int>(d);
          s.index = i;
          auto rec = cur->Read(i);
          if (o.progress) ++o.progress->done;
          if (!rec.ok()) {
            std::lock_guard<std::mutex> lock(mu);
            rep.unreadable.push_back(o.dbs[d] + " record " + RecordKey(i) + ": " + rec.status().message());
            s.sig.exact = XXH3_64bits(&s, sizeof(void*)) ^ uint64_t(base + i);  // unique: never an exact pair
            continue;
          }
          paths[size_t(base + i)] = std::string(rec->path);
          labels[size_t(base + i)] = rec->fields.label;
          Image img;
          if (rec->fields.encoding == Encoding::kRaw) {
            img.width = int(rec->fields.width);
            img.height = int(rec->fields.height);
            img.channels = rec->fields.channels;
            img.pixels.assign(rec->payload, rec->payload + rec->payload_size);
          } else {
            auto decoded = DecodeImage(rec->payload, rec->payload_size, dec);
            if (decoded.ok()) img = std::move(decoded.value());
          }
          s.sig = SignatureOfPixels(img);
          s.sig.exact = XXH3_64bits(rec->payload, rec->payload_size);
          if (!s.sig.ok) {
            std::lock_guard<std::mutex> lock(mu);
            rep.unreadable.push_back(o.dbs[d] + " record " + RecordKey(i) + ": does not decode");
          }
        }
      });
    });
    base += src.size();
  }
  rep.signature_seconds = SecondsSince(t0);
  if (o.cancel && o.cancel->load()) {
    rep.cancelled = true;
    return rep;
  }
  const auto t1 = std::chrono::steady_clock::now();
  arena.execute([&] { rep.pairs = MatchSignatures(recs, o.max_distance, o.min_similarity, o.min_detail, &rep.candidates); });
  std::vector<int64_t> first(dbs.size(), 0);
  for (size_t d = 1; d < dbs.size(); ++d) first[d] = first[d - 1] + rep.records[d - 1];
  for (auto& p : rep.pairs) {
    const size_t a = size_t(first[size_t(p.db_a)] + p.a), b = size_t(first[size_t(p.db_b)] + p.b);
    p.path_a = paths[a];
    p.path_b = paths[b];
    p.label_a = labels[a];
    p.label_b = labels[b];
  }
  std::sort(rep.unreadable.begin(), rep.unreadable.end());
  rep.match_seconds = SecondsSince(t1);
  return rep;
}

}  // namespace imagepack
