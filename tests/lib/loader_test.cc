#include "imagepack/loader.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "imagepack/mix.h"
#include "imagepack/shard.h"
#include "imagepack/store.h"
#include "image/resample_internal.h"
#include "fixtures.h"
#include "testutil.h"

namespace imagepack {
namespace {

using testing::Gradient;
using testing::TempDir;
using testing::Weighted;

// n records of distinct 48x40 images, label = index % 5; JPEG or raw.
std::string MakeDb(const TempDir& d, const std::string& name, int n, Encoding enc, bool corrupt_jpeg_at_7 = false,
                   ContainerFormat format = ContainerFormat::kLmdb) {
  auto w = CreateWriter(format, d / name);
  EXPECT_TRUE(w.ok());
  for (int i = 0; i < n; ++i) {
    Image img = Gradient(48, 40);
    for (auto& p : img.pixels) p = uint8_t(p / 2 + i * 5);  // distinct, smooth
    RecordFields f{enc, 3, i % 5, 40, 48};
    std::vector<uint8_t> payload = enc == Encoding::kRaw ? img.pixels : EncodeJpeg(img, 95).value();
    if (corrupt_jpeg_at_7 && i == 7) payload.resize(payload.size() / 3);
    EXPECT_OK(w.value()->Add(EncodeRecord(f, "img" + std::to_string(i), payload.data(), payload.size())));
  }
  DatasetMeta m;
  m.count = n;
  m.classes = {"a", "b", "c", "d", "e"};
  m.encoding = enc;
  EXPECT_OK(w.value()->Finish(m));
  return d / name;
}

TEST(Sampling, PartitionCoversEveryIndexOncePerEpoch) {
  for (int64_t n : {1, 10, 101}) {
    for (int world : {1, 2, 3, 8}) {
      for (int64_t epoch : {0, 1}) {
        std::map<int64_t, int> seen;
        size_t per_rank = 0;
        for (int r = 0; r < world; ++r) {
          auto mine = EpochIndices(n, true, 7, epoch, r, world, /*even=*/false);
          for (auto i : mine) ++seen[i];
          auto even = EpochIndices(n, true, 7, epoch, r, world, /*even=*/true);
          if (r == 0) per_rank = even.size();
          EXPECT_EQ(even.size(), per_rank) << "every rank gets the same count";
        }
        EXPECT_EQ(per_rank, size_t((n + world - 1) / world));
        ASSERT_EQ(seen.size(), size_t(n));
        for (auto& [i, c] : seen) EXPECT_EQ(c, 1) << "index " << i;
      }
    }
  }
  EXPECT_NE(EpochIndices(50, true, 7, 0, 0, 1, true), EpochIndices(50, true, 7, 1, 0, 1, true));
  EXPECT_EQ(EpochIndices(50, true, 7, 3, 0, 1, true), EpochIndices(50, true, 7, 3, 0, 1, true));
}

std::vector<std::vector<uint8_t>> Epoch(const LoaderOptions& o, int64_t epoch, std::vector<int64_t>* labels) {
  auto l = Loader::Open(o);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  const size_t sample = size_t(o.size) * o.size * l.value()->channels();
  std::vector<uint8_t> img(sample * o.batch_size);
  std::vector<int64_t> lab(o.batch_size);
  std::vector<std::vector<uint8_t>> batches;
  l.value()->StartEpoch(epoch);
  while (true) {
    auto got = l.value()->Next(img.data(), lab.data());
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (!got.ok() || got.value() == 0) break;
    batches.emplace_back(img.begin(), img.begin() + got.value() * sample);
    labels->insert(labels->end(), lab.begin(), lab.begin() + got.value());
  }
  return batches;
}

TEST(Loader, SameBatchesForTheSameSeedWhateverTheThreadCount) {
  TempDir d;
  LoaderOptions o;
  o.paths = {MakeDb(d, "db", 45, Encoding::kJpeg)};
  o.batch_size = 8;
  o.size = 32;
  o.seed = 5;
  std::vector<int64_t> l1, l3, l_other;
  o.threads = 1;
  auto a = Epoch(o, 2, &l1);
  o.threads = 3;
  o.prefetch = 4;
  auto b = Epoch(o, 2, &l3);
  EXPECT_EQ(a.size(), 6u);  // 45 / 8 -> 5 full + 1 short
  EXPECT_EQ(a.back().size(), size_t(5) * 32 * 32 * 3);
  EXPECT_EQ(a, b);
  EXPECT_EQ(l1, l3);
  o.seed = 6;
  auto c = Epoch(o, 2, &l_other);
  EXPECT_NE(a, c);
}

TEST(Loader, RawAndJpegRecordsGiveTheSameCrops) {
  TempDir d;
  LoaderOptions o;
  o.batch_size = 16;
  o.size = 24;
  o.seed = 9;
  o.paths = {MakeDb(d, "raw", 16, Encoding::kRaw)};
  std::vector<int64_t> lr, lj;
  auto raw = Epoch(o, 0, &lr);
  o.paths = {MakeDb(d, "jpeg", 16, Encoding::kJpeg)};
  auto jpeg = Epoch(o, 0, &lj);
  ASSERT_EQ(raw.size(), 1u);
  ASSERT_EQ(jpeg.size(), 1u);
  EXPECT_EQ(lr, lj);
  double diff = 0;
  for (size_t i = 0; i < raw[0].size(); ++i) diff += std::abs(int(raw[0][i]) - int(jpeg[0][i]));
  EXPECT_LT(diff / raw[0].size(), 4.0);  // JPEG error only
}

TEST(Loader, LayoutsHoldTheSamePixels) {
  // Raw records resample 3 channels, JPEG records 4 (RGBX); NCHW goes
  // through the SIMD plane split, NHWC through plain copies, so the two
  // layouts check each other. 21 px: rows that are not a multiple of 8.
  TempDir d;
  for (Encoding enc : {Encoding::kRaw, Encoding::kJpeg}) {
    SCOPED_TRACE(enc == Encoding::kRaw ? "raw" : "jpeg");
    LoaderOptions o;
    o.paths = {MakeDb(d, enc == Encoding::kRaw ? "raw" : "jpeg", 4, enc)};
    o.batch_size = 4;
    o.size = 21;
    o.seed = 3;
    std::vector<int64_t> l;
    auto nchw = Epoch(o, 0, &l);
    // The same batch with the SSE2 / plain kernels: identical bytes.
    const SimdLevel best = ResampleSimdLevel();
    SetResampleSimdLevel(SimdLevel::kScalar);
    auto plain = Epoch(o, 0, &l);
    SetResampleSimdLevel(best);
    EXPECT_EQ(nchw, plain);
    o.layout = Layout::kNHWC;
    auto nhwc = Epoch(o, 0, &l);
    const size_t plane = 21 * 21;
    for (size_t s = 0; s < 4; ++s)
      for (size_t p = 0; p < plane; ++p)
        for (size_t c = 0; c < 3; ++c)
          ASSERT_EQ(nchw[0][s * plane * 3 + c * plane + p], nhwc[0][s * plane * 3 + p * 3 + c]) << s << " " << p;
    o.channels = 1;
    auto gray = Epoch(o, 0, &l);
    EXPECT_EQ(gray[0].size(), 4 * plane);
  }
}

TEST(Loader, EvaluationVisitsEverySampleOnceAcrossRanks) {
  TempDir d;
  auto db = MakeDb(d, "raw", 23, Encoding::kRaw);
  std::multiset<int64_t> labels;
  int64_t total = 0;
  for (int r = 0; r < 3; ++r) {
    LoaderOptions o;
    o.paths = {db};
    o.batch_size = 4;
    o.size = 8;
    o.transform = TransformKind::kEval;
    o.shuffle = false;
    o.even_partition = false;
    o.rank = r;
    o.world_size = 3;
    std::vector<int64_t> l;
    Epoch(o, 0, &l);
    total += static_cast<int64_t>(l.size());
    labels.insert(l.begin(), l.end());
  }
  EXPECT_EQ(total, 23);
  for (int64_t c = 0; c < 5; ++c) EXPECT_EQ(labels.count(c), size_t(c < 3 ? 5 : 4));
}

TEST(Loader, CorruptRecordFailsNamingItOrIsSkipped) {
  TempDir d;
  LoaderOptions o;
  o.paths = {MakeDb(d, "db", 12, Encoding::kJpeg, /*corrupt_jpeg_at_7=*/true)};
  o.batch_size = 12;
  o.size = 16;
  o.shuffle = false;
  auto l = Loader::Open(o);
  ASSERT_OK(l);
  std::vector<uint8_t> img(12 * 16 * 16 * 3);
  std::vector<int64_t> lab(12);
  l.value()->StartEpoch(0);
  auto got = l.value()->Next(img.data(), lab.data());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("record 0000000007 (img7)"), std::string::npos) << got.status().ToString();
  EXPECT_NE(got.status().message().find("JPEG"), std::string::npos);
  o.on_corrupt = CorruptPolicy::kSkip;
  auto s = Loader::Open(o);
  ASSERT_OK(s);
  s.value()->StartEpoch(0);
  auto ok = s.value()->Next(img.data(), lab.data());
  ASSERT_OK(ok);
  EXPECT_EQ(ok.value(), 12);
  EXPECT_EQ(lab[7], 8 % 5);  // slot 7 took record 8
  EXPECT_EQ(s.value()->stats().skipped, 1);
}

// Found by fuzz_verify: a label outside the class list reached the batch
// (on a GPU, a device-side assert far from its cause). It is a corrupt
// record, under either policy.
TEST(Loader, LabelOutsideTheClassListIsACorruptRecord) {
  TempDir d;
  auto w = CreateWriter(ContainerFormat::kLmdb, d / "labels");
  ASSERT_OK(w);
  Image img = Gradient(8, 8);
  for (int i = 0; i < 6; ++i) {
    RecordFields f{Encoding::kRaw, 3, i == 3 ? 9 : i % 5, 8, 8};
    ASSERT_OK(w.value()->Add(EncodeRecord(f, "img" + std::to_string(i), img.pixels.data(), img.pixels.size())));
  }
  DatasetMeta m;
  m.count = 6;
  m.classes = {"a", "b", "c", "d", "e"};
  m.encoding = Encoding::kRaw;
  ASSERT_OK(w.value()->Finish(m));
  LoaderOptions o;
  o.paths = {d / "labels"};
  o.batch_size = 6;
  o.size = 8;
  o.shuffle = false;
  o.transform = TransformKind::kEval;
  std::vector<uint8_t> px(6 * 8 * 8 * 3);
  std::vector<int64_t> lab(6);
  auto l = Loader::Open(o);
  ASSERT_OK(l);
  l.value()->StartEpoch(0);
  auto got = l.value()->Next(px.data(), lab.data());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("record 0000000003 (img3): label 9 outside the 5 classes"), std::string::npos)
      << got.status().ToString();
  o.on_corrupt = CorruptPolicy::kSkip;
  auto s = Loader::Open(o);
  ASSERT_OK(s);
  s.value()->StartEpoch(0);
  auto ok = s.value()->Next(px.data(), lab.data());
  ASSERT_OK(ok);
  EXPECT_EQ(s.value()->stats().skipped, 1);
  for (int i = 0; i < ok.value(); ++i) EXPECT_LT(lab[i], 5) << i;
}

// LMDB (mapped, pages released after each batch), blob (pread), both in
// RAM, and the two as shards of one dataset: the same batches.
TEST(Loader, EveryContainerAndReadModeGivesTheSameBatches) {
  TempDir d;
  for (Encoding enc : {Encoding::kRaw, Encoding::kJpeg}) {
    const std::string tag = enc == Encoding::kRaw ? "raw" : "jpeg";
    SCOPED_TRACE(tag);
    LoaderOptions o;
    o.batch_size = 7;
    o.size = 19;
    o.seed = 5;
    const std::string lmdb = MakeDb(d, tag + ".lmdb", 20, enc);
    o.paths = {lmdb};
    std::vector<int64_t> l0;
    auto ref = Epoch(o, 1, &l0);
    ASSERT_EQ(ref.size(), 3u);
    auto same = [&](const char* what) {
      std::vector<int64_t> l;
      EXPECT_EQ(Epoch(o, 1, &l), ref) << what;
      EXPECT_EQ(l, l0) << what;
    };
    o.paths = {MakeDb(d, tag + ".blob", 20, enc, false, ContainerFormat::kBlob)};
    same("blob, pread");
    o.in_ram = true;
    same("blob, in RAM");
    o.paths = {lmdb};
    same("LMDB, in RAM");
  }
  // Two shards of different containers read as one, streamed.
  LoaderOptions o;
  o.batch_size = 6;
  o.size = 16;
  o.paths = {MakeDb(d, "s0.blob", 9, Encoding::kRaw, false, ContainerFormat::kBlob), MakeDb(d, "s1.lmdb", 9, Encoding::kRaw)};
  std::vector<int64_t> l1, l2;
  auto streamed = Epoch(o, 0, &l1);
  o.in_ram = true;
  EXPECT_EQ(Epoch(o, 0, &l2), streamed);
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(l1.size(), 18u);
}

TEST(Loader, InRamAndShardsAndBadOptions) {
  TempDir d;
  LoaderOptions o;
  o.paths = {MakeDb(d, "a", 10, Encoding::kRaw), MakeDb(d, "b", 6, Encoding::kRaw)};
  o.batch_size = 5;
  o.size = 8;
  o.in_ram = true;
  auto l = Loader::Open(o);
  ASSERT_OK(l);
  EXPECT_EQ(l.value()->dataset_size(), 16);
  EXPECT_EQ(l.value()->batches_per_epoch(), 4);
  o.rank = 2;
  o.world_size = 2;
  EXPECT_FALSE(Loader::Open(o).ok());
}

// Restoring a state taken after k batches gives exactly batches k, k+1, ...
// of the uninterrupted epoch (augmentation included), at 50 random points,
// and reads nothing before k.
TEST(Loader, RestoredStateGivesTheSameNextBatchesWithoutReadingEarlierOnes) {
  TempDir d;
  LoaderOptions o;
  o.paths = {MakeDb(d, "db", 61, Encoding::kJpeg)};
  o.batch_size = 4;
  o.size = 24;
  o.seed = 11;
  o.threads = 2;
  o.prefetch = 1;
  std::vector<int64_t> labels;
  const auto all = Epoch(o, 3, &labels);
  ASSERT_EQ(all.size(), 16u);
  // The state after k batches, from a loader that really took them.
  std::vector<LoaderState> after(17);
  {
    auto l = Loader::Open(o);
    ASSERT_OK(l);
    const size_t sample = size_t(o.size) * o.size * 3;
    std::vector<uint8_t> img(sample * o.batch_size);
    std::vector<int64_t> lab(o.batch_size);
    l.value()->StartEpoch(3);
    for (int k = 0; k <= 16; ++k) {
      after[size_t(k)] = l.value()->state();
      if (k < 16) ASSERT_OK(l.value()->Next(img.data(), lab.data()));
    }
  }
  EXPECT_EQ(after[5].epoch, 3);
  EXPECT_EQ(after[5].position, 20);
  EXPECT_EQ(after[16].position, 61);
  const size_t sample = size_t(o.size) * o.size * 3;
  std::vector<uint8_t> img(sample * o.batch_size);
  std::vector<int64_t> lab(o.batch_size);
  SplitMix64 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const int k = int(rng.Below(17));
    auto l = Loader::Open(o);  // a fresh process's loader: nothing decoded yet
    ASSERT_OK(l);
    l.value()->Restore(after[size_t(k)]);
    EXPECT_EQ(l.value()->batches_per_epoch(), 16 - k);
    auto got = l.value()->Next(img.data(), lab.data());
    ASSERT_OK(got);
    if (k == 16) {
      EXPECT_EQ(got.value(), 0);
      continue;
    }
    ASSERT_GT(got.value(), 0);
    EXPECT_EQ(std::vector<uint8_t>(img.begin(), img.begin() + got.value() * sample), all[size_t(k)]) << "batch " << k;
    EXPECT_EQ(l.value()->state().position, after[size_t(k + 1)].position);
    // Only the batch handed out and what the producer made ahead (prefetch
    // 1, plus the one being filled) were decoded: none before k.
    EXPECT_LE(l.value()->stats().images, int64_t(o.batch_size) * 3);
  }
}

// Elastic: a state saved by 2 ranks, restored on 3 (and on 1): the rest of
// the epoch gives every unconsumed sample to exactly one rank, evenly, plus
// the documented padding (positions 0, 1, ... repeated); the next epoch
// follows the new world size's normal rule.
TEST(Loader, RestoredOnAnotherWorldSizeTheRestOfTheEpochIsCoveredOnce) {
  TempDir d;
  const int n = 61;
  LoaderOptions o;
  o.paths = {MakeDb(d, "db", n, Encoding::kRaw)};
  o.batch_size = 4;
  o.size = 8;
  o.seed = 3;
  o.threads = 1;
  std::multiset<int64_t> consumed;
  LoaderState saved;
  for (int rank = 0; rank < 2; ++rank) {
    o.rank = rank;
    o.world_size = 2;
    auto l = Loader::Open(o);
    ASSERT_OK(l);
    l.value()->StartEpoch(1);
    for (int b = 0; b < 3; ++b) {  // 3 batches each: 24 positions
      auto v = l.value()->NextView();
      ASSERT_OK(v);
      consumed.insert(v->indices, v->indices + v->count);
    }
    saved = l.value()->state();
  }
  ASSERT_EQ(saved.position, 24);
  ASSERT_EQ(consumed.size(), 24u);
  const std::vector<int64_t> order = EpochIndices(n, true, 3, 1, 0, 1, false);
  for (int world : {3, 1}) {
    std::multiset<int64_t> rest;
    std::vector<int64_t> per_rank;
    for (int rank = 0; rank < world; ++rank) {
      o.rank = rank;
      o.world_size = world;
      auto l = Loader::Open(o);
      ASSERT_OK(l);
      l.value()->Restore(saved);
      int64_t mine = 0;
      while (true) {
        auto v = l.value()->NextView();
        ASSERT_OK(v);
        if (v->count == 0) break;
        rest.insert(v->indices, v->indices + v->count);
        mine += v->count;
      }
      per_rank.push_back(mine);
      EXPECT_EQ(l.value()->state().position, n);
    }
    // 37 left: 3 ranks x 13 = 39, the 2 extra being positions 0 and 1.
    const int64_t left = n - 24, each = (left + world - 1) / world;
    for (int64_t c : per_rank) EXPECT_EQ(c, each) << "world " << world;
    std::multiset<int64_t> all = consumed;
    all.insert(rest.begin(), rest.end());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = std::find(order.begin(), order.end(), i) - order.begin();
      const size_t want = 1 + (pos < each * world - left ? 1 : 0);
      EXPECT_EQ(all.count(i), want) << "index " << i << " at position " << pos << ", world " << world;
    }
    EXPECT_EQ(all.size(), size_t(n + each * world - left));
  }
  // The next epoch: the new world size's normal rule.
  o.rank = 0;
  o.world_size = 3;
  auto l = Loader::Open(o);
  ASSERT_OK(l);
  l.value()->Restore(saved);
  l.value()->StartEpoch(2);
  EXPECT_EQ(l.value()->samples_per_epoch(), (n + 2) / 3);
}

// Block order: each rank's batches are its deal of EpochOrder; threads and
// read-ahead change nothing; the state names the order and the world it
// was made for, and a loader of another world (whose own order is random)
// continues it so that every record is still read once.
TEST(Loader, BlockOrderIsTheOrdersAndResumesOnAnotherWorld) {
  TempDir d;
  const int n = 70;
  for (ContainerFormat f : {ContainerFormat::kLmdb, ContainerFormat::kBlob}) {
    SCOPED_TRACE(f == ContainerFormat::kLmdb ? "lmdb" : "blob");
    LoaderOptions o;
    o.paths = {MakeDb(d, f == ContainerFormat::kLmdb ? "b.lmdb" : "b.blob", n, Encoding::kJpeg, false, f)};
    o.batch_size = 4;
    o.size = 16;
    o.seed = 9;
    o.order = Order::kBlocks;
    o.block_mb = 6.0 / 1024;  // a few records per block
    o.window_blocks = 2;
    o.world_size = 2;
    o.even_partition = false;
    std::multiset<int64_t> consumed;
    LoaderState saved;
    for (int rank = 0; rank < 2; ++rank) {
      o.rank = rank;
      o.threads = 1;
      o.io_threads = 0;
      std::vector<int64_t> l_plain, l_ahead;
      auto plain = Epoch(o, 1, &l_plain);
      o.threads = 3;
      o.io_threads = 2;
      auto ahead = Epoch(o, 1, &l_ahead);
      EXPECT_EQ(plain, ahead);
      EXPECT_EQ(l_plain, l_ahead);
      auto l = Loader::Open(o);
      ASSERT_OK(l);
      EXPECT_EQ(l.value()->order(), Order::kBlocks);
      const int64_t block = l.value()->block_records();
      EXPECT_GE(block, 2);
      EXPECT_LE(block, 10);
      OrderSpec spec;
      spec.kind = Order::kBlocks;
      spec.seed = 9;
      spec.block_records = block;
      spec.window_blocks = 2;
      spec.world = 2;
      const auto want = DealPositions(EpochOrder(n, spec, 1), rank, 2, false);
      l.value()->StartEpoch(1);
      std::vector<int64_t> got;
      for (int b = 0; b < 5; ++b) {
        auto v = l.value()->NextView();
        ASSERT_OK(v);
        got.insert(got.end(), v->indices, v->indices + v->count);
      }
      EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin()));
      consumed.insert(got.begin(), got.end());
      saved = l.value()->state();
      EXPECT_GT(l.value()->stats().read_ahead_bytes, 0);
    }
    EXPECT_EQ(saved.position, 40);
    EXPECT_EQ(saved.order, Order::kBlocks);
    EXPECT_EQ(saved.world, 2);
    o.world_size = 1;
    o.rank = 0;
    o.order = Order::kRandom;
    auto l = Loader::Open(o);
    ASSERT_OK(l);
    l.value()->Restore(saved);
    while (true) {
      auto v = l.value()->NextView();
      ASSERT_OK(v);
      if (v->count == 0) break;
      consumed.insert(v->indices, v->indices + v->count);
    }
    ASSERT_EQ(consumed.size(), size_t(n));
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(consumed.count(i), 1u) << i;
    l.value()->StartEpoch(2);  // the next epoch is the loader's own order
    EXPECT_EQ(l.value()->state().order, Order::kRandom);
  }
}

TEST(Loader, AutoOrderIsRandomForASmallOrCachedDataset) {
  TempDir d;
  LoaderOptions o;
  o.paths = {MakeDb(d, "db", 10, Encoding::kRaw)};
  o.batch_size = 4;
  o.size = 8;
  auto l = Loader::Open(o);
  ASSERT_OK(l);
  EXPECT_EQ(l.value()->order(), Order::kRandom);
  l.value()->StartEpoch(0);
  EXPECT_EQ(l.value()->state().order, Order::kRandom);
  EXPECT_EQ(l.value()->state().world, 0);
  o.shuffle = false;
  o.order = Order::kBlocks;
  auto seq = Loader::Open(o);
  ASSERT_OK(seq);
  EXPECT_EQ(seq.value()->order(), Order::kSequential);
  o.block_mb = 0;
  EXPECT_FALSE(Loader::Open(o).ok());
}

// An owned batch keeps its bytes while later batches are taken, also after
// the loader is gone; its buffer goes back to the pool when dropped.
TEST(Loader, OwnedBatchesStayValidUntilDropped) {
  TempDir d;
  LoaderOptions o;
  o.paths = {MakeDb(d, "db", 40, Encoding::kRaw)};
  o.batch_size = 8;
  o.size = 16;
  o.threads = 2;
  std::vector<int64_t> labels;
  const auto all = Epoch(o, 0, &labels);
  const size_t bytes = size_t(o.batch_size) * o.size * o.size * 3;
  OwnedBatch first;
  {
    auto l = Loader::Open(o);
    ASSERT_OK(l);
    l.value()->StartEpoch(0);
    auto a = l.value()->NextOwned();
    ASSERT_OK(a);
    first = a.value();
    for (int i = 1; i < 5; ++i) {
      auto b = l.value()->NextOwned();
      ASSERT_OK(b);
      ASSERT_EQ(b->count, o.batch_size);
      EXPECT_EQ(std::vector<uint8_t>(b->images, b->images + bytes), all[size_t(i)]);
      EXPECT_EQ(std::vector<uint8_t>(first.images, first.images + bytes), all[0]) << "after batch " << i;
    }
    auto end = l.value()->NextOwned();
    ASSERT_OK(end);
    EXPECT_EQ(end->count, 0);
  }
  EXPECT_EQ(std::vector<uint8_t>(first.images, first.images + bytes), all[0]) << "after the loader";
  EXPECT_EQ(std::vector<int64_t>(first.labels, first.labels + first.count),
            std::vector<int64_t>(labels.begin(), labels.begin() + first.count));
}

// Pad-crop with a crop size of its own: the crop is taken at the stored
// scale and resized to the output size (progressive resolution on small
// images). A centre crop of 40 of a 48x40 image resized to 20 is the eval
// transform's resize to 20 and centre crop.
TEST(Loader, PadCropWithACropSizeResizesTheCropToTheOutput) {
  TempDir d;
  LoaderOptions o;
  o.paths = {MakeDb(d, "db", 6, Encoding::kRaw)};
  o.batch_size = 6;
  o.size = 20;
  o.threads = 1;
  o.shuffle = false;
  o.transform = TransformKind::kPadCropEval;
  o.crop_size = 40;
  std::vector<int64_t> l1, l2;
  const auto pad = Epoch(o, 0, &l1);
  o.transform = TransformKind::kEval;
  o.crop_size = 0;
  o.eval_resize = 20;
  EXPECT_EQ(Epoch(o, 0, &l2), pad);
  o.crop_size = -1;
  EXPECT_FALSE(Loader::Open(o).ok());
}

// The thread ids of this process and the files its descriptors name
// (/proc/self): what a loader holds besides memory.
std::set<std::string> ProcEntries(const std::string& dir, bool links) {
  std::set<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (!links) {
      out.insert(name);
      continue;
    }
    char target[4096];
    const ssize_t n = readlink((dir + "/" + name).c_str(), target, sizeof target - 1);
    const std::string t = n > 0 ? std::string(target, size_t(n)) : "?";
    if (t.rfind("/proc/", 0) != 0) out.insert(name + " -> " + t);  // not this listing's own descriptor
  }
  closedir(d);
  return out;
}

// Every batch of an epoch (images, then labels and indices), as a loader
// that is already open gives them.
struct EpochBatches {
  std::vector<std::vector<uint8_t>> images;
  std::vector<int64_t> labels, indices;
};
EpochBatches Drain(Loader& l, int64_t max_batches = -1) {
  EpochBatches out;
  while (max_batches < 0 || int64_t(out.images.size()) < max_batches) {
    auto v = l.NextView();
    EXPECT_OK(v);
    if (!v.ok() || v->count == 0) break;
    const size_t sample = size_t(l.output_size()) * l.output_size() * l.channels();
    out.images.emplace_back(v->images, v->images + sample * v->count);
    out.labels.insert(out.labels.end(), v->labels, v->labels + v->count);
    out.indices.insert(out.indices.end(), v->indices, v->indices + v->count);
  }
  return out;
}

// Progressive resolution: the size changes between epochs on one loader,
// which keeps every thread (the same ids) and every open file, and whose
// epoch at the new size is exactly a fresh loader's at that size.
TEST(Loader, SizeChangeBetweenEpochsKeepsThreadsAndOpenFiles) {
  TempDir d;
  LoaderOptions o;
  o.paths = {MakeDb(d, "db", 40, Encoding::kJpeg)};
  o.batch_size = 8;
  o.size = 16;
  o.threads = 2;
  o.seed = 4;
  auto l = Loader::Open(o);
  ASSERT_OK(l);
  Loader& loader = *l.value();
  for (int64_t e = 0; e < 2; ++e) {  // warm: every worker has joined
    loader.StartEpoch(e);
    EXPECT_EQ(Drain(loader).images.size(), 5u);
  }
  const auto threads = ProcEntries("/proc/self/task", false), files = ProcEntries("/proc/self/fd", true);
  ASSERT_GE(threads.size(), 3u);  // main, producer, releaser (and the decode workers)
  ASSERT_OK(loader.SetOutputSize(24));
  EXPECT_EQ(loader.output_size(), 16) << "until the next epoch";
  loader.StartEpoch(2);
  EXPECT_EQ(loader.output_size(), 24);
  const EpochBatches at24 = Drain(loader);
  ASSERT_EQ(at24.images.size(), 5u);
  EXPECT_EQ(at24.images[0].size(), size_t(8) * 24 * 24 * 3);
  ASSERT_OK(loader.SetOutputSize(16));
  loader.StartEpoch(3);
  const EpochBatches at16 = Drain(loader);
  EXPECT_EQ(at16.images[0].size(), size_t(8) * 16 * 16 * 3);
  EXPECT_EQ(ProcEntries("/proc/self/task", false), threads) << "the loader's threads are the same ones";
  EXPECT_EQ(ProcEntries("/proc/self/fd", true), files) << "no database reopened";
  // A fresh loader at 24 gives epoch 2 byte for byte; at 16, epoch 3.
  for (auto [size, epoch, want] : {std::tuple{24, 2, &at24}, std::tuple{16, 3, &at16}}) {
    LoaderOptions f = o;
    f.size = size;
    auto fresh = Loader::Open(f);
    ASSERT_OK(fresh);
    fresh.value()->StartEpoch(epoch);
    const EpochBatches got = Drain(*fresh.value());
    EXPECT_EQ(got.images, want->images) << "size " << size;
    EXPECT_EQ(got.indices, want->indices);
  }
  EXPECT_FALSE(loader.SetOutputSize(0).ok());
  EXPECT_FALSE(loader.SetOutputSize(20000).ok());
}

// Inside a schedule (a size per epoch), a state saved mid-epoch holds the
// epoch's size: a fresh loader restored from it gives the uninterrupted
// run's remaining batches, whatever size it was opened or set to.
TEST(Loader, MidEpochResumeInsideAScheduleGivesTheUninterruptedBatches) {
  TempDir d;
  LoaderOptions o;
  o.paths = {MakeDb(d, "db", 37, Encoding::kJpeg)};
  o.batch_size = 4;
  o.size = 16;
  o.threads = 2;
  o.prefetch = 1;
  o.seed = 8;
  const int sizes[] = {16, 24, 32};
  std::vector<EpochBatches> uninterrupted;
  std::vector<std::vector<LoaderState>> states(3);
  {
    auto l = Loader::Open(o);
    ASSERT_OK(l);
    for (int64_t e = 0; e < 3; ++e) {
      ASSERT_OK(l.value()->SetOutputSize(sizes[e]));
      l.value()->StartEpoch(e);
      EpochBatches all;
      for (int k = 0;; ++k) {
        states[size_t(e)].push_back(l.value()->state());
        EpochBatches one = Drain(*l.value(), 1);
        if (one.images.empty()) break;
        all.images.push_back(one.images[0]);
      }
      EXPECT_EQ(states[size_t(e)][3].size, sizes[e]);
      uninterrupted.push_back(all);
    }
  }
  SplitMix64 rng(2);
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t e = int64_t(rng.Below(3));
    const size_t k = size_t(rng.Below(uninterrupted[size_t(e)].images.size()));
    LoaderOptions f = o;
    f.size = 40;  // another size: the state's wins for its epoch
    auto l = Loader::Open(f);
    ASSERT_OK(l);
    ASSERT_OK(l.value()->CheckState(states[size_t(e)][k]));
    l.value()->Restore(states[size_t(e)][k]);
    EXPECT_EQ(l.value()->output_size(), sizes[e]);
    const EpochBatches rest = Drain(*l.value());
    const auto& want = uninterrupted[size_t(e)].images;
    EXPECT_EQ(rest.images, std::vector<std::vector<uint8_t>>(want.begin() + std::ptrdiff_t(k), want.end()))
        << "epoch " << e << " batch " << k;
    l.value()->StartEpoch(e + 1);  // the next epoch: the loader's own size again
    EXPECT_EQ(l.value()->output_size(), 40);
  }
}

// A mix's global order at world sizes 1, 2 and 4 (global batch 8): every
// position holds the same record with the same pixels; the epoch holds
// each source's exact count.
TEST(Loader, MixHasExactCountsAndOneGlobalOrderAtEveryWorldSize) {
  TempDir d;
  LoaderOptions o;
  o.sources = {Weighted(MakeDb(d, "a", 60, Encoding::kRaw), 0.7), Weighted(MakeDb(d, "b", 25, Encoding::kJpeg), 0.3)};
  o.epoch_size = 120;
  o.size = 8;
  o.seed = 6;
  o.threads = 2;
  auto run = [&](int world, int64_t epoch, const LoaderState* from, std::map<int64_t, std::pair<int64_t, std::vector<uint8_t>>>* by_pos) {
    for (int r = 0; r < world; ++r) {
      LoaderOptions w = o;
      w.rank = r;
      w.world_size = world;
      w.batch_size = 8 / world;
      auto l = Loader::Open(w);
      ASSERT_OK(l);
      if (from) {
        ASSERT_OK(l.value()->CheckState(*from));
        l.value()->Restore(*from);
      } else {
        l.value()->StartEpoch(epoch);
      }
      const int64_t start = from ? from->position : 0;
      const EpochBatches got = Drain(*l.value());
      const size_t sample = size_t(8 * 8 * 3);
      std::vector<uint8_t> all;
      for (const auto& b : got.images) all.insert(all.end(), b.begin(), b.end());
      for (size_t j = 0; j < got.indices.size(); ++j) {
        const int64_t pos = start + int64_t(j) * world + r;
        if (pos >= 120) continue;  // padding to equal shares
        (*by_pos)[pos] = {got.indices[j], std::vector<uint8_t>(all.begin() + std::ptrdiff_t(j * sample),
                                                               all.begin() + std::ptrdiff_t((j + 1) * sample))};
      }
    }
  };
  std::map<int64_t, std::pair<int64_t, std::vector<uint8_t>>> one;
  run(1, 2, nullptr, &one);
  ASSERT_EQ(one.size(), 120u);
  int64_t from_a = 0;
  for (const auto& [pos, v] : one) from_a += v.first < 60;
  EXPECT_EQ(from_a, 84);  // 70% of 120; b's 36 from 25 records: each once or twice
  // The records are MixOrder's, position by position (whose 70/30 order
  // keeps every 1,000 samples within 3 points: mix_test.cc).
  MixSpec spec;
  spec.sizes = {60, 25};
  spec.counts = {84, 36};
  spec.seed = 6;
  const std::vector<int64_t> order = MixOrder(spec, 2);
  for (const auto& [pos, v] : one) EXPECT_EQ(v.first, order[size_t(pos)]) << "position " << pos;
  for (int world : {2, 4}) {
    std::map<int64_t, std::pair<int64_t, std::vector<uint8_t>>> w;
    run(world, 2, nullptr, &w);
    EXPECT_EQ(w, one) << "world " << world;
  }
  // Resumed at a random global batch, from each world size to each other:
  // the uninterrupted remainder, position by position.
  SplitMix64 rng(13);
  for (int saved : {1, 2, 4})
    for (int resumed : {1, 2, 4}) {
      const int64_t k = 1 + int64_t(rng.Below(14));  // global batches taken
      LoaderState state;
      for (int r = 0; r < saved; ++r) {
        LoaderOptions w = o;
        w.rank = r;
        w.world_size = saved;
        w.batch_size = 8 / saved;
        auto l = Loader::Open(w);
        ASSERT_OK(l);
        l.value()->StartEpoch(2);
        Drain(*l.value(), k);
        state = l.value()->state();
      }
      ASSERT_EQ(state.position, k * 8);
      std::map<int64_t, std::pair<int64_t, std::vector<uint8_t>>> rest;
      run(resumed, 2, &state, &rest);
      std::map<int64_t, std::pair<int64_t, std::vector<uint8_t>>> want(one.lower_bound(k * 8), one.end());
      EXPECT_EQ(rest, want) << "saved by " << saved << " ranks at batch " << k << ", resumed on " << resumed;
    }
}

TEST(Loader, MixRepeatsASmallPackAndRefusesAnotherMixByName) {
  TempDir d;
  const std::string small = MakeDb(d, "small", 9, Encoding::kRaw), big = MakeDb(d, "big", 40, Encoding::kRaw);
  LoaderOptions o;
  MixSource s, b;
  s.paths = {small};
  s.repeat = 3;
  b.paths = {big};
  o.sources = {s, b};
  o.size = 8;
  o.batch_size = 5;
  o.threads = 1;
  auto l = Loader::Open(o);
  ASSERT_OK(l);
  EXPECT_EQ(l.value()->epoch_length(), 67);
  EXPECT_EQ(l.value()->dataset_size(), 49);
  ASSERT_EQ(l.value()->sources().size(), 2u);
  EXPECT_EQ(l.value()->sources()[0].samples, 27);
  EXPECT_EQ(l.value()->sources()[1].name, big);
  for (int64_t epoch : {0, 1}) {
    l.value()->StartEpoch(epoch);
    std::map<int64_t, int> seen;
    for (int64_t i : Drain(*l.value()).indices) ++seen[i];
    for (int64_t i = 0; i < 49; ++i) EXPECT_EQ(seen[i], i < 9 ? 3 : 1) << "record " << i;
  }
  l.value()->StartEpoch(0);
  Drain(*l.value(), 2);
  const LoaderState state = l.value()->state();
  EXPECT_NE(state.mix.find("\"repeat\":3"), std::string::npos) << state.mix;
  LoaderOptions other = o;
  other.sources[0].repeat = 2;
  auto l2 = Loader::Open(other);
  ASSERT_OK(l2);
  const Status refused = l2.value()->CheckState(state);
  EXPECT_EQ(refused.message(), "source 1 (" + small + "): repeat 3.0 in the state, repeat 2.0 now");
  LoaderOptions single;
  single.paths = {big};
  single.size = 8;
  auto l3 = Loader::Open(single);
  ASSERT_OK(l3);
  EXPECT_NE(l3.value()->CheckState(state).message().find("this loader reads one dataset"), std::string::npos);
  EXPECT_OK(l3.value()->CheckState(l3.value()->state()));
  // Block order cannot be the same for every world size.
  o.order = Order::kBlocks;
  EXPECT_FALSE(Loader::Open(o).ok());
}

// Mixed packs with different class lists: refused, or matched by name to
// the classes given; labels come out in the given list.
TEST(Loader, MixLabelsAreTheGivenClassesMatchedByName) {
  TempDir d;
  LoaderOptions o;
  o.sources = {Weighted(MakeDb(d, "a", 10, Encoding::kRaw), 1), Weighted(MakeDb(d, "b", 10, Encoding::kRaw), 1)};
  o.size = 8;
  o.batch_size = 20;
  o.threads = 1;
  o.shuffle = false;
  ASSERT_OK(Loader::Open(o));  // the same classes a..e
  o.classes = {"e", "d", "c", "b", "a", "z"};
  auto l = Loader::Open(o);
  ASSERT_OK(l);
  EXPECT_EQ(l.value()->meta().classes, o.classes);
  l.value()->StartEpoch(0);
  const EpochBatches got = Drain(*l.value());
  ASSERT_EQ(got.labels.size(), 20u);
  for (size_t j = 0; j < got.labels.size(); ++j) EXPECT_EQ(got.labels[j], 4 - got.indices[j] % 10 % 5) << j;
  o.classes = {"a", "b", "c"};
  auto refused = Loader::Open(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("'d'"), std::string::npos) << refused.status().ToString();
}

}  // namespace
}  // namespace imagepack
