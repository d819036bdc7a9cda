// The loader's output types (loader/output.h): the 16-bit roundings bit by
// bit, the tables against the formula, and the pinned-memory hooks, which
// a machine without CUDA exercises here with allocators that count.
#include "loader/output.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "imagepack/loader.h"
#include "imagepack/store.h"
#include "testutil.h"

namespace imagepack {
namespace {

using internal::FloatToBFloat16;
using internal::FloatToHalf;
using internal::OutputConverter;
using testing::Gradient;
using testing::TempDir;

float Bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(OutputTypes, HalfRoundsToNearestEven) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);                      // the largest half
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);                      // below the halfway point: stays
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);                      // halfway to 2^16: even is infinity
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie: to the even 1.0
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie: to the even 1 + 2^-9
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);         // the smallest normal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);         // the smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);         // tie: to the even zero
  EXPECT_EQ(FloatToHalf(3 * std::ldexp(1.0f, -25)), 0x0002);     // tie: to the even 2
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.5f, -24)), 0x0400);      // rounds up into the normals
  EXPECT_EQ(FloatToHalf(INFINITY), 0x7c00);
  EXPECT_EQ(FloatToHalf(NAN) & 0x7c00, 0x7c00);
  EXPECT_NE(FloatToHalf(NAN) & 0x03ff, 0);
}

TEST(OutputTypes, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(-1.0f), 0xbf80);
  EXPECT_EQ(FloatToBFloat16(Bits(0x3f808000)), 0x3f80);  // tie: to the even 1.0
  EXPECT_EQ(FloatToBFloat16(Bits(0x3f818000)), 0x3f82);  // tie: to the even 0x3f82
  EXPECT_EQ(FloatToBFloat16(Bits(0x3f808001)), 0x3f81);  // past the tie: up
  EXPECT_EQ(FloatToBFloat16(Bits(0x7f7fffff)), 0x7f80);  // the largest float rounds to infinity
  EXPECT_EQ(FloatToBFloat16(NAN) & 0x7f80, 0x7f80);
  EXPECT_NE(FloatToBFloat16(NAN) & 0x007f, 0);
}

TEST(OutputTypes, TablesAreTheFormulaPerChannelInBothLayouts) {
  const std::vector<float> mean{0.485f, 0.456f, 0.406f}, std{0.229f, 0.224f, 0.225f};
  auto f = OutputConverter::Make(DType::kFloat32, mean, std, 3);
  ASSERT_OK(f);
  std::vector<uint8_t> src(3 * 256);  // NCHW: plane c holds 0..255; NHWC: pixel p holds p in each channel
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v) src[size_t(c) * 256 + size_t(v)] = uint8_t(v);
  std::vector<float> out(src.size());
  f->Convert(src.data(), 256, true, reinterpret_cast<uint8_t*>(out.data()));
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v)
      ASSERT_EQ(out[size_t(c) * 256 + size_t(v)], (float(v) / 255.0f - mean[size_t(c)]) / std[size_t(c)]);
  std::vector<uint8_t> nhwc(src.size());
  for (int p = 0; p < 256; ++p)
    for (int c = 0; c < 3; ++c) nhwc[size_t(p) * 3 + size_t(c)] = uint8_t(p);
  f->Convert(nhwc.data(), 256, false, reinterpret_cast<uint8_t*>(out.data()));
  for (int p = 0; p < 256; ++p)
    for (int c = 0; c < 3; ++c)
      ASSERT_EQ(out[size_t(p) * 3 + size_t(c)], (float(p) / 255.0f - mean[size_t(c)]) / std[size_t(c)]);
  auto h = OutputConverter::Make(DType::kBFloat16, {0.5f}, {0.25f}, 3);
  ASSERT_OK(h);
  std::vector<uint16_t> b(src.size());
  h->Convert(src.data(), 256, true, reinterpret_cast<uint8_t*>(b.data()));
  for (int v = 0; v < 256; ++v) ASSERT_EQ(b[size_t(v)], FloatToBFloat16((float(v) / 255.0f - 0.5f) / 0.25f));
}

// The vector path (AVX2 where the CPU has it) in whole steps, the tail after
// them, streamed stores to a 32-byte aligned destination and plain ones to
// a misaligned one: every value is still the formula's, bit for bit.
TEST(OutputTypes, Float32IsTheFormulaAtAnyLengthAndAlignment) {
  const std::vector<float> mean{0.485f, 0.456f, 0.406f}, std{0.229f, 0.224f, 0.225f};
  auto f = OutputConverter::Make(DType::kFloat32, mean, std, 3);
  ASSERT_OK(f);
  const size_t pixels = 1001;
  std::vector<uint8_t> src(3 * pixels);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t((i * 7919u + 13u) % 256u);
  alignas(32) static float buf[3 * 1001 + 16];
  for (size_t shift : {size_t(0), size_t(1), size_t(3)}) {
    for (bool nchw : {true, false}) {
      float* out = buf + shift;
      f->Convert(src.data(), pixels, nchw, reinterpret_cast<uint8_t*>(out));
      for (size_t i = 0; i < src.size(); ++i) {
        const size_t c = nchw ? i / pixels : i % 3;
        ASSERT_EQ(out[i], (float(src[i]) / 255.0f - mean[c]) / std[c]) << "shift " << shift << " value " << i;
      }
    }
  }
  // The 16-bit types: each value the formula's float rounded by the scalar
  // conversions; std 0.001 takes half past its largest finite value.
  for (DType t : {DType::kFloat16, DType::kBFloat16}) {
    for (const std::vector<float>& sd : {std, std::vector<float>{0.001f, 0.0001f, 1e-7f}}) {
      auto g = OutputConverter::Make(t, mean, sd, 3);
      ASSERT_OK(g);
      alignas(32) static uint16_t b16[3 * 1001 + 16];
      for (size_t shift : {size_t(0), size_t(1), size_t(8)}) {
        for (bool nchw : {true, false}) {
          uint16_t* out = b16 + shift;
          g->Convert(src.data(), pixels, nchw, reinterpret_cast<uint8_t*>(out));
          for (size_t i = 0; i < src.size(); ++i) {
            const size_t c = nchw ? i / pixels : i % 3;
            const float y = (float(src[i]) / 255.0f - mean[c]) / sd[c];
            ASSERT_EQ(out[i], t == DType::kFloat16 ? FloatToHalf(y) : FloatToBFloat16(y))
                << "shift " << shift << " value " << i << " y " << y;
          }
        }
      }
    }
  }
}

TEST(OutputTypes, RefusesWhatItCannotMake) {
  EXPECT_FALSE(OutputConverter::Make(DType::kInt32, {}, {}, 3).ok());
  EXPECT_FALSE(OutputConverter::Make(DType::kUint8, {0.5f}, {}, 3).ok());
  EXPECT_FALSE(OutputConverter::Make(DType::kFloat32, {0.1f, 0.2f}, {}, 3).ok());
  EXPECT_FALSE(OutputConverter::Make(DType::kFloat32, {}, {0.0f}, 3).ok());
  EXPECT_FALSE(OutputConverter::Make(DType::kFloat32, {NAN}, {}, 3).ok());
  EXPECT_TRUE(OutputConverter::Make(DType::kFloat16, {0.5f}, {0.2f, 0.3f, 0.4f}, 3).ok());
  EXPECT_FALSE(OutputConverter::Make(DType::kUint8, {}, {}, 3)->active());
  EXPECT_TRUE(OutputConverter::Make(DType::kUint8, {}, {}, 3, /*copy=*/true)->active());
}

// Counting allocators standing in for cudaHostAlloc / cudaFreeHost.
std::atomic<int> g_allocs{0}, g_frees{0};
void* CountingAlloc(size_t n) {
  ++g_allocs;
  return std::malloc(n);
}
void CountingFree(void* p) {
  ++g_frees;
  std::free(p);
}

std::string MakeDb(const TempDir& d, int n) {
  auto w = CreateWriter(ContainerFormat::kLmdb, d / "t.lmdb");
  EXPECT_TRUE(w.ok());
  for (int i = 0; i < n; ++i) {
    Image img = Gradient(48, 40);
    for (auto& p : img.pixels) p = uint8_t(p / 2 + i * 5);
    RecordFields f{Encoding::kRaw, 3, i % 2, 40, 48};
    EXPECT_OK(w.value()->Add(EncodeRecord(f, "img" + std::to_string(i), img.pixels.data(), img.pixels.size())));
  }
  DatasetMeta m;
  m.count = n;
  m.classes = {"a", "b"};
  m.encoding = Encoding::kRaw;
  EXPECT_OK(w.value()->Finish(m));
  return d / "t.lmdb";
}

// Every batch of an epoch, as bytes (`bytes` per sample).
std::vector<std::vector<uint8_t>> Batches(const LoaderOptions& o, size_t bytes, std::vector<const uint8_t*>* where) {
  auto l = Loader::Open(o);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  std::vector<std::vector<uint8_t>> out;
  l.value()->StartEpoch(1);
  while (true) {
    auto b = l.value()->NextOwned();
    EXPECT_TRUE(b.ok());
    if (!b.ok() || b->count == 0) break;
    out.emplace_back(b->images, b->images + size_t(b->count) * bytes);
    if (where) where->push_back(b->images);
  }
  return out;
}

TEST(OutputTypes, PinnedHooksAllocateTheImagesAndFreeThem) {
  TempDir d;
  LoaderOptions o;
  o.paths = {MakeDb(d, 20)};
  o.batch_size = 6, o.size = 16, o.threads = 2;
  const auto plain = Batches(o, 16 * 16 * 3, nullptr);
  g_allocs = 0, g_frees = 0;
  o.pinned_alloc = CountingAlloc, o.pinned_free = CountingFree;
  std::vector<const uint8_t*> where;
  EXPECT_EQ(Batches(o, 16 * 16 * 3, &where), plain);  // uint8 images copied into the pinned buffers
  EXPECT_GT(g_allocs.load(), 0);
  EXPECT_EQ(g_frees.load(), g_allocs.load()) << "every pinned buffer freed with the loader";
  o.output_dtype = DType::kFloat32;
  g_allocs = 0, g_frees = 0;
  const auto f = Batches(o, 16 * 16 * 3 * 4, nullptr);
  ASSERT_EQ(f.size(), plain.size());
  for (size_t k = 0; k < f.size(); ++k)
    for (size_t i = 0; i < plain[k].size(); ++i) {
      float v;
      std::memcpy(&v, f[k].data() + 4 * i, 4);
      ASSERT_EQ(v, float(plain[k][i]) / 255.0f);
    }
  EXPECT_GT(g_allocs.load(), 0);
  EXPECT_EQ(g_frees.load(), g_allocs.load());
}

}  // namespace
}  // namespace imagepack
