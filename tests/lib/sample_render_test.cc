// SampleRenderer, one sample of the loader on its own: a crop the size of
// the output copies the record's pixels into the batch's layout and
// channels (checked against the stored pixels here), the draws depend on
// (seed, epoch, position) only, and a record's bad label or size is an
// error naming it.
#include "loader/sample_render.h"

#include <gtest/gtest.h>

#include <set>

#include "testutil.h"

namespace imagepack::internal {
namespace {

constexpr int W = 6, H = 4;

std::vector<uint8_t> Pixels() {
  std::vector<uint8_t> px(size_t(W) * H * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 5 + 1);
  return px;
}

std::vector<uint8_t> RawRecord(int32_t label) {
  const auto px = Pixels();
  return EncodeRecord(RecordFields{Encoding::kRaw, 3, label, H, W}, "cls/img.png", px.data(), px.size());
}

SampleOptions CentreCrop(Layout layout) {
  SampleOptions o;
  o.size = 4;
  o.transform = TransformKind::kPadCropEval;  // the central 4x4: columns 1..4
  o.layout = layout;
  return o;
}

TEST(SampleRender, AnOutputSizedCropIsTheStoredPixelsInEachLayout) {
  const auto rec = RawRecord(1);
  auto v = ParseRecord(rec.data(), rec.size());
  ASSERT_OK(v);
  const auto px = Pixels();
  auto at = [&](int y, int x, int c) { return px[(size_t(y) * W + x + 1) * 3 + c]; };
  Image scratch;
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
    for (int channels : {3, 1}) {
      SCOPED_TRACE(std::string(layout == Layout::kNCHW ? "NCHW" : "NHWC") + " " + std::to_string(channels));
      SampleRenderer r(CentreCrop(layout), channels, 3, nullptr);
      std::vector<uint8_t> out(size_t(4) * 4 * channels, 0);
      ASSERT_OK(r.Render(v.value(), 0, 0, 0, out.data(), &scratch, nullptr, 0));
      for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 4; ++x)
          for (int c = 0; c < channels; ++c) {
            const uint8_t want = channels == 1 ? Luma(at(y, x, 0), at(y, x, 1), at(y, x, 2)) : at(y, x, c);
            const size_t i = layout == Layout::kNCHW ? (size_t(c) * 4 + y) * 4 + x : (size_t(y) * 4 + x) * channels + c;
            ASSERT_EQ(out[i], want) << "y " << y << " x " << x << " c " << c;
          }
    }
}

TEST(SampleRender, DrawsDependOnSeedEpochAndPositionOnly) {
  const auto rec = RawRecord(0);
  auto v = ParseRecord(rec.data(), rec.size());
  ASSERT_OK(v);
  SampleOptions o;
  o.size = 4;
  o.vflip = true;
  SampleRenderer r(o, 3, 0, nullptr);
  Image s1, s2;
  std::set<std::vector<uint8_t>> seen;
  for (uint64_t global = 0; global < 16; ++global) {
    std::vector<uint8_t> a(48), b(48);
    ASSERT_OK(r.Render(v.value(), 0, 3, global, a.data(), &s1, nullptr, 0));
    ASSERT_OK(r.Render(v.value(), 0, 3, global, b.data(), &s2, nullptr, 0));  // another scratch: another thread
    EXPECT_EQ(a, b);
    seen.insert(a);
  }
  EXPECT_GT(seen.size(), 4u);  // crops and flips differ across positions
  std::vector<uint8_t> e3(48), e4(48);
  int differ = 0;
  for (uint64_t global = 0; global < 8; ++global) {
    ASSERT_OK(r.Render(v.value(), 0, 3, global, e3.data(), &s1, nullptr, 0));
    ASSERT_OK(r.Render(v.value(), 0, 4, global, e4.data(), &s1, nullptr, 0));
    differ += e3 != e4;
  }
  EXPECT_GT(differ, 0);  // another epoch, other draws
}

TEST(SampleRender, ALabelOutsideTheClassesIsAnErrorNamingTheRecord) {
  const auto rec = RawRecord(3);
  auto v = ParseRecord(rec.data(), rec.size());
  ASSERT_OK(v);
  SampleRenderer r(CentreCrop(Layout::kNCHW), 3, 3, nullptr);
  Image scratch;
  std::vector<uint8_t> out(48);
  Status st = r.Render(v.value(), 7, 0, 0, out.data(), &scratch, nullptr, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kCorruption);
  EXPECT_NE(st.message().find("outside the 3 classes"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("record " + RecordKey(7) + " (cls/img.png)"), std::string::npos) << st.ToString();
  // Without a class list (classes 0) any label passes.
  SampleRenderer unchecked(CentreCrop(Layout::kNCHW), 3, 0, nullptr);
  EXPECT_OK(unchecked.Render(v.value(), 7, 0, 0, out.data(), &scratch, nullptr, 0));
}

}  // namespace
}  // namespace imagepack::internal
