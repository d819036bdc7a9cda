#include "imagepack/pack.h"

#include "imagepack/loader.h"
#include "imagepack/storage.h"
#include "imagepack/verify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <filesystem>
#include <set>

#include "testutil.h"

namespace fs = std::filesystem;

namespace imagepack {
namespace {

using namespace testing;  // testutil.h: TempDir, Slurp, Spit, Golden, Gradient, ...

// Three classes of generated JPEGs, one broken file, one stray file.
void MakeTree(const std::string& root, int per_class = 5) {
  const char* classes[] = {"n02", "n01", "n03"};  // sorted: n01 n02 n03
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < per_class; ++i) {
      Image img = Gradient(90 + 7 * i, 70 + 5 * c);
      for (auto& p : img.pixels) p = uint8_t(p / (c + 1));
      Spit(root + "/" + classes[c] + "/" + std::to_string(i) + ".JPEG", EncodeJpeg(img, 90).value());
    }
  Spit(root + "/n01/broken.JPEG", Golden("truncated.jpg"));
  Spit(root + "/n02/cmyk.jpg", Golden("cmyk_adobe.jpg"));
  Spit(root + "/stray.JPEG", Golden("rgb.jpg"));
}

PackOptions Opts(const std::string& src, const std::string& dst) {
  PackOptions o;
  o.src = src;
  o.dst = dst;
  o.threads = 2;
  return o;
}

std::vector<std::vector<uint8_t>> AllRecords(const std::string& path) {
  auto src = OpenDatabase(path);
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  std::vector<std::vector<uint8_t>> out;
  auto cur = src.value()->NewCursor();
  for (int64_t i = 0; i < src.value()->size(); ++i) {
    const uint8_t* d;
    size_t n;
    EXPECT_OK(cur->ReadRaw(i, &d, &n));
    out.emplace_back(d, d + n);
  }
  return out;
}

TEST(Pack, ImageFolderTreeBecomesLabelledRecords) {
  TempDir src, out;
  MakeTree(src.path());
  auto r = PackDataset(Opts(src.path(), out / "db.lmdb"));
  ASSERT_OK(r);
  EXPECT_EQ(r->inputs, 17);
  EXPECT_EQ(r->written, 16);
  // An image outside every class folder is skipped with its reason, not
  // ignored as if it were no image.
  ASSERT_EQ(r->errors.size(), 2u);
  EXPECT_EQ(r->errors[0].path, "n01/broken.JPEG");
  EXPECT_EQ(r->errors[1].path, "stray.JPEG");
  EXPECT_NE(r->errors[1].reason.find("not inside a class folder"), std::string::npos);
  EXPECT_TRUE(r->ignored.empty());
  EXPECT_EQ(r->passed_through, 15);  // all but the CMYK one
  EXPECT_EQ(r->reencoded, 1);        // the CMYK one, at its own size
  EXPECT_EQ(r->resized + r->decoded + r->lossless_as_jpeg, 0);
  auto db = OpenDatabase(out / "db.lmdb");
  ASSERT_OK(db);
  const DatasetMeta& m = db.value()->meta();
  EXPECT_EQ(m.classes, (std::vector<std::string>{"n01", "n02", "n03"}));
  EXPECT_EQ(m.label_counts, (std::vector<int64_t>{5, 6, 5}));
  ASSERT_EQ(m.mean.size(), 3u);
  EXPECT_GT(m.mean[0], 0.1);
  EXPECT_LT(m.mean[0], 0.9);
  EXPECT_GT(m.std[1], 0.01);
  auto cur = db.value()->NewCursor();
  for (int64_t i = 0; i < m.count; ++i) {
    auto rec = cur->Read(i);
    ASSERT_OK(rec);
    const std::string path(rec->path);
    EXPECT_EQ(rec->fields.label, path.substr(0, 3) == "n01" ? 0 : path.substr(0, 3) == "n02" ? 1 : 2) << path;
    if (path.find("cmyk") == std::string::npos) {  // pass-through: bytes in == bytes out
      auto original = Slurp(src / path);
      EXPECT_EQ(std::vector<uint8_t>(rec->payload, rec->payload + rec->payload_size), original) << path;
    }
  }
}

// Raw records hold exactly what DecodeImage gives, whether the packer
// decodes straight into the record (plain JPEGs within the limit) or goes
// through DecodeImage (a resize, CMYK); gray and RGB; the truncated file is
// reported, not stored. 19 records of 6 sizes, shuffled: later ones are
// decoded into buffers of written ones (larger and smaller than they need).
TEST(Pack, RawRecordsHoldDecodedPixels) {
  TempDir src, out;
  MakeTree(src.path(), 6);
  struct Case {
    const char* name;
    SizeLimit limit;
    int channels;
  };
  const Case cases[] = {{"resized", {SizeLimit::Mode::kShorterEdge, 32}, 3},
                        {"as stored", {}, 3},
                        {"as stored, gray", {}, 1}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const std::string dst = out / (std::string("raw-") + std::to_string(&k - cases) + ".blob");
    auto o = Opts(src.path(), dst);
    o.format = ContainerFormat::kBlob;
    o.encoding = Encoding::kRaw;
    o.prepare.decode.limit = k.limit;
    o.prepare.decode.channels = k.channels;
    o.shuffle_seed = 5;  // sizes in no order: spare buffers both too small and too large
    auto summary = PackDataset(o);
    ASSERT_OK(summary);
    ASSERT_EQ(summary->errors.size(), 2u);  // and stray.JPEG, outside the classes
    EXPECT_EQ(summary->errors[0].path, "n01/broken.JPEG");
    EXPECT_EQ(summary->decoded + summary->resized, 19);
    auto db = OpenDatabase(dst);
    ASSERT_OK(db);
    EXPECT_EQ(db.value()->size(), 19);  // 3 x 6 generated + the CMYK file
    EXPECT_EQ(db.value()->meta().stats_images, db.value()->size());
    auto cur = db.value()->NewCursor();
    double n = 0, sum[3] = {0, 0, 0}, sq[3] = {0, 0, 0};
    for (int64_t i = 0; i < db.value()->size(); ++i) {
      auto rec = cur->Read(i);
      ASSERT_OK(rec);
      EXPECT_EQ(rec->fields.encoding, Encoding::kRaw);
      EXPECT_EQ(rec->fields.channels, k.channels);
      const std::string path(rec->path);
      auto data = Slurp(src / path);
      DecodeOptions d;
      d.limit = k.limit;
      d.channels = k.channels;
      auto img = DecodeImage(data.data(), data.size(), d);
      ASSERT_OK(img);
      EXPECT_EQ(rec->fields.width, uint32_t(img->width)) << path;
      EXPECT_EQ(std::vector<uint8_t>(rec->payload, rec->payload + rec->payload_size), img->pixels) << path;
      // Raw statistics are exact: recompute them from every stored pixel.
      for (size_t b = 0; b < rec->payload_size; ++b) {
        const double v = rec->payload[b] / 255.0;
        sum[b % k.channels] += v;
        sq[b % k.channels] += v * v;
      }
      n += double(rec->payload_size) / k.channels;
    }
    const DatasetMeta& m = db.value()->meta();
    ASSERT_EQ(m.mean.size(), size_t(k.channels));
    for (int c = 0; c < k.channels; ++c) {
      const double mean = sum[c] / n;
      EXPECT_NEAR(m.mean[c], mean, 1e-9) << c;
      EXPECT_NEAR(m.std[c], std::sqrt(sq[c] / n - mean * mean), 1e-9) << c;
    }
  }
}

TEST(Pack, SameRecordsWhateverTheThreadCountAndShuffleIsFixedBySeed) {
  TempDir src, out;
  MakeTree(src.path(), 8);
  for (int threads : {1, 3}) {
    auto o = Opts(src.path(), out / ("t" + std::to_string(threads)));
    o.threads = threads;
    o.shuffle_seed = 42;
    o.encoding = Encoding::kRaw;
    ASSERT_OK(PackDataset(o));
  }
  auto a = AllRecords(out / "t1"), b = AllRecords(out / "t3");
  EXPECT_EQ(a, b);
  auto o = Opts(src.path(), out / "unshuffled");
  o.encoding = Encoding::kRaw;
  ASSERT_OK(PackDataset(o));
  auto c = AllRecords(out / "unshuffled");
  EXPECT_NE(a, c);
  std::multiset<std::vector<uint8_t>> sa(a.begin(), a.end()), sc(c.begin(), c.end());
  EXPECT_EQ(sa, sc);  // a permutation of the same records
}

TEST(Pack, ShardsShareClassesAndCoverTheTree) {
  TempDir src, out;
  MakeTree(src.path(), 10);
  int64_t total = 0;
  std::vector<std::string> shards;
  for (int i = 0; i < 3; ++i) {
    auto o = Opts(src.path(), out / ("s" + std::to_string(i)));
    o.shard = {i, 3};
    auto r = PackDataset(o);
    ASSERT_OK(r);
    total += r->written;
    shards.push_back(out / ("s" + std::to_string(i)));
    EXPECT_EQ(r->meta.classes.size(), 3u);
    EXPECT_EQ(r->meta.shard.index, i);
  }
  EXPECT_EQ(total, 31);
  auto all = OpenDatabases(shards);
  ASSERT_OK(all);
  EXPECT_EQ(all.value()->size(), 31);
  std::set<std::string> paths;
  auto cur = all.value()->NewCursor();
  for (int64_t i = 0; i < 31; ++i) paths.insert(std::string(cur->Read(i)->path));
  EXPECT_EQ(paths.size(), 31u);
}

TEST(Pack, FlatFolderWithLabelsFileAndClassOrder) {
  TempDir src, out;
  for (int i = 0; i < 6; ++i)
    Spit(src / ("val_" + std::to_string(i) + ".JPEG"), EncodeJpeg(Gradient(40, 30), 90).value());
  Spit(out / "classes.txt", {'n', '9', '\n', 'n', '1', '\n'});
  std::string labels = "val_0.JPEG n1\nval_1.JPEG n9\nval_2.JPEG n1\nval_3.JPEG n9\nval_4.JPEG n1\n";
  Spit(out / "labels.txt", std::vector<uint8_t>(labels.begin(), labels.end()));
  auto o = Opts(src.path(), out / "val.lmdb");
  o.source.classes_file = out / "classes.txt";
  o.source.labels_file = out / "labels.txt";
  auto r = PackDataset(o);
  ASSERT_OK(r);
  EXPECT_EQ(r->written, 5);
  ASSERT_EQ(r->errors.size(), 1u);
  EXPECT_EQ(r->errors[0].path, "val_5.JPEG");
  EXPECT_NE(r->errors[0].reason.find("no label"), std::string::npos);
  EXPECT_EQ(r->meta.classes, (std::vector<std::string>{"n9", "n1"}));
  EXPECT_EQ(r->meta.label_counts, (std::vector<int64_t>{2, 3}));
  // Unknown class in the labels file: refused, naming it; nothing written.
  std::string bad = "val_0.JPEG n7\n";
  Spit(out / "bad.txt", std::vector<uint8_t>(bad.begin(), bad.end()));
  o.source.labels_file = out / "bad.txt";
  o.dst = out / "bad.lmdb";
  auto b = PackDataset(o);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("'n7'"), std::string::npos);
  EXPECT_FALSE(fs::exists(out / "bad.lmdb"));
}

TEST(Pack, ConvertsBetweenContainersAndEncodings) {
  TempDir src, out;
  MakeTree(src.path(), 3);
  ASSERT_OK(PackDataset(Opts(src.path(), out / "jpeg.lmdb")));
  auto o = Opts(out / "jpeg.lmdb", out / "jpeg.blob");
  o.format = ContainerFormat::kBlob;
  ASSERT_OK(PackDataset(o));
  EXPECT_EQ(AllRecords(out / "jpeg.lmdb"), AllRecords(out / "jpeg.blob"));  // LMDB -> blob: identical
  auto r = Opts(out / "jpeg.blob", out / "raw.lmdb");
  r.encoding = Encoding::kRaw;
  ASSERT_OK(PackDataset(r));
  auto back = Opts(out / "raw.lmdb", out / "back.lmdb");
  back.encoding = Encoding::kJpeg;
  ASSERT_OK(PackDataset(back));
  auto db = OpenDatabase(out / "back.lmdb");
  ASSERT_OK(db);
  EXPECT_EQ(db.value()->size(), 10);
  auto rec = db.value()->NewCursor()->Read(0);
  ASSERT_OK(rec);
  EXPECT_EQ(rec->fields.encoding, Encoding::kJpeg);
  EXPECT_EQ(db.value()->meta().classes, (std::vector<std::string>{"n01", "n02", "n03"}));
  // LMDB values: 64 JPEG records each, raw records alone.
  EXPECT_EQ(db.value()->meta().records_per_value, kJpegRecordsPerValue);
  EXPECT_EQ(OpenDatabase(out / "raw.lmdb").value()->meta().records_per_value, 1);
}

// 256-px JPEGs of ~20 KB: alone in an LMDB value each wastes half a 4 KB
// overflow page (over 10%); 64 to a value, the file is within 10% of the
// payload (docs/FORMAT.md).
TEST(Pack, LmdbOfSmallJpegsIsWithinTenPercentOfItsPayload) {
  TempDir src, out;
  uint32_t seed = 7;
  for (int i = 0; i < 150; ++i) {
    Image img = Gradient(256, 200 + i % 50);
    for (auto& p : img.pixels) {
      seed = seed * 1664525u + 1013904223u;
      p = uint8_t(std::min(255, p + int(seed >> 27)));
    }
    Spit(src.path() + "/c" + std::to_string(i % 2) + "/" + std::to_string(i) + ".jpg", EncodeJpeg(img, 90).value());
  }
  auto grouped = PackDataset(Opts(src.path(), out / "grouped.lmdb"));
  ASSERT_OK(grouped);
  auto single = Opts(src.path(), out / "single.lmdb");
  single.lmdb_records_per_value = 1;
  auto alone = PackDataset(single);
  ASSERT_OK(alone);
  const double payload = double(grouped->payload_bytes);
  EXPECT_GT(payload / 150, 12000);
  EXPECT_LT(payload / 150, 30000);
  EXPECT_LT(double(grouped->file_bytes), 1.10 * payload);
  EXPECT_GT(double(alone->file_bytes), 1.10 * payload);
  EXPECT_EQ(OpenDatabase(out / "grouped.lmdb").value()->meta().records_per_value, kJpegRecordsPerValue);
  EXPECT_EQ(OpenDatabase(out / "single.lmdb").value()->meta().records_per_value, 1);
  EXPECT_EQ(AllRecords(out / "grouped.lmdb"), AllRecords(out / "single.lmdb"));
}

TEST(Pack, CancelledPackLeavesNothingAtDst) {
  TempDir src, out;
  MakeTree(src.path(), 5);
  CancelFlag cancel{true};
  auto o = Opts(src.path(), out / "db");
  o.cancel = &cancel;
  auto r = PackDataset(o);
  ASSERT_OK(r);
  EXPECT_TRUE(r->cancelled);
  EXPECT_TRUE(fs::is_empty(out.path()));
}

// --stats-sample 0 writes no statistics, for JPEG and raw records alike
// (it once wrote the first image's as the dataset's); shards read as one
// dataset have statistics only when every shard has them.
TEST(Pack, StatsSampleZeroWritesNone) {
  TempDir src, out;
  MakeTree(src.path(), 3);
  for (Encoding e : {Encoding::kJpeg, Encoding::kRaw}) {
    auto o = Opts(src.path(), out / (std::string(EncodingName(e)) + ".lmdb"));
    o.encoding = e;
    o.stats_sample = 0;
    ASSERT_OK(PackDataset(o));
    auto db = OpenDatabase(o.dst);
    ASSERT_OK(db);
    const DatasetMeta& m = db.value()->meta();
    EXPECT_TRUE(m.mean.empty() && m.std.empty()) << EncodingName(e);
    EXPECT_EQ(m.stats_images, 0) << EncodingName(e);
  }
  auto shard = [&](const std::string& name, int index, int64_t sample) {
    auto o = Opts(src.path(), out / name);
    o.shard = {index, 2};
    o.stats_sample = sample;
    EXPECT_OK(PackDataset(o));
    return o.dst;
  };
  const std::string s0 = shard("s0", 0, 1024), s1 = shard("s1", 1, 1024), s1_none = shard("s1n", 1, 0);
  auto both = OpenDatabases({s0, s1});
  ASSERT_OK(both);
  EXPECT_EQ(both.value()->meta().mean.size(), 3u);
  EXPECT_GT(both.value()->meta().stats_images, 0);
  auto partial = OpenDatabases({s0, s1_none});
  ASSERT_OK(partial);
  EXPECT_TRUE(partial.value()->meta().mean.empty() && partial.value()->meta().std.empty());
  EXPECT_EQ(partial.value()->meta().stats_images, 0);
}

// SOURCE_DATE_EPOCH fixes the metadata's creation time: the same input
// packed twice (with different thread counts, a clock second apart) is the
// same file, LMDB and blob; a malformed value stops the pack before DST.
TEST(Pack, SourceDateEpochMakesThePackReproducible) {
  TempDir src, out;
  MakeTree(src.path(), 4);
  ASSERT_EQ(setenv("SOURCE_DATE_EPOCH", "1700000000", 1), 0);
  for (ContainerFormat f : {ContainerFormat::kLmdb, ContainerFormat::kBlob}) {
    std::vector<std::vector<uint8_t>> files;
    for (int threads : {1, 3}) {
      auto o = Opts(src.path(), out / ("t" + std::to_string(threads) + (f == ContainerFormat::kBlob ? ".blob" : ".lmdb")));
      o.format = f;
      o.threads = threads;
      o.shuffle_seed = 4;
      auto r = PackDataset(o);
      ASSERT_OK(r);
      EXPECT_EQ(r->meta.created, "2023-11-14T22:13:20Z");
      files.push_back(Slurp(o.dst));
      if (threads == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    }
    EXPECT_FALSE(files[0].empty());
    EXPECT_TRUE(files[0] == files[1]) << "format " << int(f);
  }
  for (const char* bad : {"", "12ab", "-1", "1e9", "99999999999999999999"}) {
    ASSERT_EQ(setenv("SOURCE_DATE_EPOCH", bad, 1), 0);
    auto r = PackDataset(Opts(src.path(), out / "bad.lmdb"));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("SOURCE_DATE_EPOCH"), std::string::npos) << r.status().message();
    EXPECT_FALSE(fs::exists(out / "bad.lmdb"));
  }
  unsetenv("SOURCE_DATE_EPOCH");
  auto now = CreationTime();
  ASSERT_OK(now);
  EXPECT_NE(now.value(), "2023-11-14T22:13:20Z");  // unset: the clock's time again
}

// Settings left open (pack_lmdb: options not given) are the source
// database's: a raw gray shuffled LMDB converted to a blob is the same
// records, still stored shuffled; given settings still convert.
TEST(Pack, ConversionKeepsTheSettingsLeftOpen) {
  TempDir src, out;
  MakeTree(src.path(), 4);
  auto raw = Opts(src.path(), out / "raw1.lmdb");
  raw.encoding = Encoding::kRaw;
  raw.prepare.decode.channels = 1;
  raw.shuffle_seed = 6;
  raw.options_json = R"({"channels":1,"encoding":"raw","quality":90,"shuffle":6})";
  ASSERT_OK(PackDataset(raw));
  auto blob = Opts(out / "raw1.lmdb", out / "raw1.blob");
  blob.format = ContainerFormat::kBlob;
  blob.from_source = {true, true, true};
  blob.options_json = R"({"channels":3,"encoding":"jpeg","quality":90,"shuffle":-1})";
  auto r = PackDataset(blob);
  ASSERT_OK(r);
  EXPECT_EQ(AllRecords(out / "raw1.lmdb"), AllRecords(out / "raw1.blob"));
  EXPECT_EQ(r->meta.encoding, Encoding::kRaw);
  EXPECT_EQ(r->meta.channels, 1);
  EXPECT_TRUE(StoredShuffled(r->meta)) << r->meta.options_json;
  auto jpeg = Opts(out / "raw1.lmdb", out / "rgb.lmdb");
  jpeg.from_source = {false, false, true};  // --encoding jpeg --channels 3 given
  ASSERT_OK(PackDataset(jpeg));
  auto db = OpenDatabase(out / "rgb.lmdb");
  ASSERT_OK(db);
  EXPECT_EQ(db.value()->meta().encoding, Encoding::kJpeg);
  EXPECT_EQ(db.value()->meta().channels, 3);
}

}  // namespace
}  // namespace imagepack

namespace imagepack {
namespace {

// The loader's batches of one epoch as bytes (images, then labels).
std::vector<std::vector<uint8_t>> Batches(const std::string& path) {
  LoaderOptions lo;
  lo.paths = {path};
  lo.batch_size = 4;
  lo.size = 24;
  lo.threads = 2;
  lo.seed = 5;
  auto loader = Loader::Open(lo);
  EXPECT_TRUE(loader.ok()) << loader.status().ToString();
  std::vector<std::vector<uint8_t>> out;
  if (!loader.ok()) return out;
  loader.value()->StartEpoch(0);
  for (;;) {
    auto b = loader.value()->NextView();
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok() || b->count == 0) break;
    std::vector<uint8_t> bytes(b->images, b->images + size_t(b->count) * 3 * 24 * 24);
    bytes.insert(bytes.end(), reinterpret_cast<const uint8_t*>(b->labels),
                 reinterpret_cast<const uint8_t*>(b->labels + b->count));
    out.push_back(std::move(bytes));
  }
  return out;
}

// A storage of the caller's own (storage.h: RegisterStorage, here the
// in-memory one) is reached by every path that takes a URL: pack writes
// into it, the stores and verify read it, the loader trains from it, with
// the records and batches of the same pack into a local file.
TEST(Pack, AStorageOfTheCallersOwnServesPackStoresVerifyAndTheLoader) {
  TempDir src, out;
  MakeTree(src.path());
  auto settings = StorageSettings::FromEnvironment();
  ASSERT_OK(settings);
  settings->staging_dir = out.path();
  std::shared_ptr<Storage> mem = NewMemoryStorage(settings.value(), "memtest");
  ASSERT_OK(RegisterStorage("memtest", [mem](const StorageSettings&) -> Result<std::shared_ptr<Storage>> { return mem; }));
  const std::vector<std::string> schemes = StorageSchemes();
  for (const char* s : {"http", "https", "memtest", "s3"})
    EXPECT_TRUE(std::count(schemes.begin(), schemes.end(), s)) << s;
  EXPECT_FALSE(RegisterStorage("9bad", [mem](const StorageSettings&) -> Result<std::shared_ptr<Storage>> { return mem; }).ok());

  PackOptions o = Opts(src.path(), "memtest://bucket/train.blob");
  o.format = ContainerFormat::kBlob;
  auto packed = PackDataset(o);
  ASSERT_OK(packed);
  const std::string local_blob = out / "train.blob";
  o.dst = local_blob;
  ASSERT_OK(PackDataset(o));
  EXPECT_EQ(packed->meta.count, 15 + 1);  // 5 a class, the CMYK one; the broken one skipped
  auto listed = mem->List("memtest://bucket");
  ASSERT_OK(listed);
  EXPECT_EQ(listed.value(), std::vector<std::string>{"train.blob"});  // no temporary left behind
  EXPECT_EQ(AllRecords("memtest://bucket/train.blob"), AllRecords(local_blob));

  VerifyOptions vo;
  vo.paths = {"memtest://bucket/train.blob"};
  vo.against = src.path();
  auto report = VerifyDatabases(vo);
  ASSERT_OK(report);
  EXPECT_EQ(report->checked, packed->meta.count);
  // what it finds is what it finds in the local file: the two images pack skipped
  vo.paths = {local_blob};
  auto local_report = VerifyDatabases(vo);
  ASSERT_OK(local_report);
  auto found = [](const VerifyReport& r) {
    std::set<std::string> out;
    for (const auto& p : r.problems) out.insert(p.path + ": " + p.reason);
    return out;
  };
  EXPECT_EQ(found(report.value()), found(local_report.value()));
  EXPECT_EQ(found(report.value()).size(), 2u);

  const auto local = Batches(local_blob);
  EXPECT_EQ(local.size(), 4u);
  EXPECT_EQ(Batches("memtest://bucket/train.blob"), local);
  // A pack that would replace it is refused by name, unless asked.
  o.dst = "memtest://bucket/train.blob";
  auto again = PackDataset(o);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("memtest://bucket/train.blob"), std::string::npos);
}

}  // namespace
}  // namespace imagepack
