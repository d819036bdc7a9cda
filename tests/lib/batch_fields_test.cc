// FieldBatcher, the loader's field batching on its own: arrays named and
// shaped per kind, masks cropped by nearest neighbour and flipped, boxes
// mapped into the output and dropped when mostly outside, second images
// through the caller's renderer, and the list kinds padded (ints -1, floats
// 0, box labels -1) with their counts, checked against values worked out
// here by hand.
#include "loader/batch_fields.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "imagepack/record.h"
#include "testutil.h"

namespace imagepack::internal {
namespace {

// A 4x4 raw RGB record with: "seg" a mask, "depth_img" a second image,
// "boxes", "ids" ints, "w" floats, "caption" text.
std::vector<uint8_t> MakeRecord(const std::vector<uint8_t>& mask, const std::vector<Box>& boxes,
                                const std::vector<int32_t>& ids, const std::vector<float>& w, const std::string& text) {
  std::vector<uint8_t> image(4 * 4 * 3, 7), second(4 * 4 * 3, 42), bx, section;
  WriteBoxes(boxes, &bx);
  AppendField(section, {0, FieldKind::kMask, 1, 1, 4, 4, 0, mask.data(), mask.size()});
  AppendField(section, {1, FieldKind::kImage, uint8_t(Encoding::kRaw), 3, 4, 4, 0, second.data(), second.size()});
  AppendField(section, {2, FieldKind::kBoxes, 0, 0, 0, 0, uint32_t(boxes.size()), bx.data(), bx.size()});
  AppendField(section, {3, FieldKind::kInts, 0, 0, 0, 0, uint32_t(ids.size()),
                        reinterpret_cast<const uint8_t*>(ids.data()), ids.size() * 4});
  AppendField(section, {4, FieldKind::kFloats, 0, 0, 0, 0, uint32_t(w.size()),
                        reinterpret_cast<const uint8_t*>(w.data()), w.size() * 4});
  AppendField(section, {5, FieldKind::kText, 0, 0, 0, 0, 0, reinterpret_cast<const uint8_t*>(text.data()),
                        text.size()});
  RecordFields f{Encoding::kRaw, 3, 0, 4, 4};
  f.field_count = 6;
  f.fields_size = static_cast<uint32_t>(section.size());
  return EncodeRecord(f, "x.png", image.data(), image.size(), section.data());
}

std::vector<FieldSpec> Specs() {
  return {{"seg", FieldKind::kMask, {}, 255}, {"depth_img", FieldKind::kImage, {}, -1},
          {"boxes", FieldKind::kBoxes, {}, -1}, {"ids", FieldKind::kInts, {}, -1},
          {"w", FieldKind::kFloats, {}, -1},    {"caption", FieldKind::kText, {}, -1}};
}

template <typename T>
std::vector<T> As(const FieldOut& o) {
  std::vector<T> v(o.bytes.size() / sizeof(T));
  std::memcpy(v.data(), o.bytes.data(), v.size() * sizeof(T));
  return v;
}

std::map<std::string, const FieldOut*> ByName(const FieldArrays& a) {
  std::map<std::string, const FieldOut*> m;
  for (const auto& o : a.outs) m[o.name] = &o;
  return m;
}

TEST(BatchFields, EveryKindRenderedAndPadded) {
  FieldBatcher::Shape shape;
  shape.batch_size = 3;
  shape.size = 4;
  shape.channels = 3;
  shape.min_box_visible = 0.5;
  FieldBatcher fb(Specs(), shape);
  FieldArrays a;
  fb.Prepare(&a);
  std::vector<uint8_t> mask(16);
  for (int i = 0; i < 16; ++i) mask[i] = uint8_t(i);
  // Sample 0: no flip; boxes: one inside, one 3/4 outside (dropped at 0.5).
  const auto r0 = MakeRecord(mask, {{0, 0, 2, 2, 5}, {3, 0, 7, 1, 6}}, {10, 20, 30}, {0.5f}, "ab");
  // Sample 1: flipped horizontally; one box; no ints; two floats.
  const auto r1 = MakeRecord(mask, {{0, 1, 1, 3, 9}}, {}, {1.5f, 2.5f}, "");
  int renders = 0;
  RenderImageFn render = [&](Encoding enc, const uint8_t* data, size_t size, int channels, uint8_t* out) {
    EXPECT_EQ(enc, Encoding::kRaw);
    EXPECT_EQ(channels, 3);
    std::memcpy(out, data, size);
    ++renders;
    return Status::Ok();
  };
  const CropBox whole{0, 0, 4, 4};
  auto v0 = ParseRecord(r0.data(), r0.size());
  auto v1 = ParseRecord(r1.data(), r1.size());
  ASSERT_OK(v0);
  ASSERT_OK(v1);
  ASSERT_OK(fb.RenderSample(v0.value(), whole, false, false, render, &a, 0));
  ASSERT_OK(fb.RenderSample(v1.value(), whole, true, false, render, &a, 1));
  fb.Finish(&a, 2);
  EXPECT_EQ(renders, 2);
  auto m = ByName(a);
  // seg, depth_img, boxes, box_labels, num_boxes, ids, num_ids, w, num_w,
  // caption, caption_offsets, crop_box
  ASSERT_EQ(m.size(), 12u);
  // Masks: [2, 4, 4]; sample 1 mirrored left-right.
  EXPECT_EQ(m["seg"]->shape, (std::vector<int64_t>{2, 4, 4}));
  const auto seg = m["seg"]->bytes;
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) {
      EXPECT_EQ(seg[y * 4 + x], mask[y * 4 + x]);
      EXPECT_EQ(seg[16 + y * 4 + x], mask[y * 4 + (3 - x)]);
    }
  EXPECT_EQ(m["depth_img"]->shape, (std::vector<int64_t>{2, 3, 4, 4}));
  EXPECT_EQ(m["depth_img"]->bytes[0], 42);
  EXPECT_EQ(m["depth_img"]->bytes[48], 42);
  // Boxes: [2, 1, 4]; sample 0 keeps its first box only; sample 1's box
  // x in [0, 1] flipped to [3, 4].
  EXPECT_EQ(m["boxes"]->shape, (std::vector<int64_t>{2, 1, 4}));
  EXPECT_EQ(As<float>(*m["boxes"]), (std::vector<float>{0, 0, 2, 2, 3, 1, 4, 3}));
  EXPECT_EQ(As<int64_t>(*m["box_labels"]), (std::vector<int64_t>{5, 9}));
  EXPECT_EQ(As<int64_t>(*m["num_boxes"]), (std::vector<int64_t>{1, 1}));
  // Ints padded with -1, floats with 0.
  EXPECT_EQ(m["ids"]->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(As<int64_t>(*m["ids"]), (std::vector<int64_t>{10, 20, 30, -1, -1, -1}));
  EXPECT_EQ(As<int64_t>(*m["num_ids"]), (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(As<float>(*m["w"]), (std::vector<float>{0.5f, 0, 1.5f, 2.5f}));
  EXPECT_EQ(As<int64_t>(*m["num_w"]), (std::vector<int64_t>{1, 2}));
  // Text: bytes one after another, n + 1 offsets.
  EXPECT_EQ(std::string(m["caption"]->bytes.begin(), m["caption"]->bytes.end()), "ab");
  EXPECT_EQ(As<int64_t>(*m["caption_offsets"]), (std::vector<int64_t>{0, 2, 2}));
  // crop_box: x, y, w, h, flip, vflip per sample.
  EXPECT_EQ(m["crop_box"]->shape, (std::vector<int64_t>{2, 6}));
  auto crop = As<int64_t>(*m["crop_box"]);
  EXPECT_EQ(std::vector<int64_t>(crop.begin(), crop.begin() + 12),
            (std::vector<int64_t>{0, 0, 4, 4, 0, 0, 0, 0, 4, 4, 1, 0}));
  // The next batch reuses the arrays, sized again for batch_size.
  fb.Prepare(&a);
  EXPECT_EQ(ByName(a)["seg"]->shape[0], 3);
}

TEST(BatchFields, CropsMasksByNearestNeighbourAndNamesAMismatchedRecord) {
  FieldBatcher::Shape shape;
  shape.batch_size = 1;
  shape.size = 2;
  FieldBatcher fb(Specs(), shape);
  FieldArrays a;
  fb.Prepare(&a);
  std::vector<uint8_t> mask(16);
  for (int i = 0; i < 16; ++i) mask[i] = uint8_t(i);
  const auto r = MakeRecord(mask, {}, {}, {}, "");
  auto v = ParseRecord(r.data(), r.size());
  ASSERT_OK(v);
  RenderImageFn render = [](Encoding, const uint8_t*, size_t, int, uint8_t*) { return Status::Ok(); };
  // The right half, scaled 2x2 -> 2x2 from a 2x4 crop: nearest rows 0/2 of
  // columns 2 and 3 (pixel centres 0.5 -> 1, 1.5 -> 3 in the crop's rows).
  ASSERT_OK(fb.RenderSample(v.value(), CropBox{2, 0, 2, 4}, false, false, render, &a, 0));
  fb.Finish(&a, 1);
  EXPECT_EQ(a.outs[0].bytes, (std::vector<uint8_t>{mask[1 * 4 + 2], mask[1 * 4 + 3], mask[3 * 4 + 2], mask[3 * 4 + 3]}));
  // A dataset declaring other fields than the record holds: an error.
  FieldBatcher other({{"seg", FieldKind::kMask, {}, 255}}, shape);
  FieldArrays b;
  other.Prepare(&b);
  Status st = other.RenderSample(v.value(), CropBox{0, 0, 4, 4}, false, false, render, &b, 0);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("holds 6 fields, the dataset declares 1"), std::string::npos) << st.ToString();
}

// A uint16 mask and a depth map: uint16 arrays of the output size, each
// crop by nearest neighbour from the record's samples (at whatever address
// the record puts them), outside the map the field's own fill value (the
// mask's ignore value, depth's no-reading value).
TEST(BatchFields, SixteenBitMapsKeepTheirValuesAndPadWithTheirFill) {
  FieldSpec seg{"seg", FieldKind::kMask, {}, 65535};
  seg.bits = 16;
  FieldSpec depth{"depth", FieldKind::kDepth, {}, 7};
  depth.bits = 16;
  FieldBatcher::Shape shape;
  shape.batch_size = 2;
  shape.size = 3;
  FieldBatcher fb({seg, depth}, shape);
  FieldArrays a;
  fb.Prepare(&a);
  std::vector<uint16_t> ids(9), mm(9);
  for (int i = 0; i < 9; ++i) ids[i] = uint16_t(60000 - i), mm[i] = uint16_t(1000 + i);
  std::vector<uint8_t> image(3 * 3 * 3, 9), section;
  AppendField(section, {0, FieldKind::kMask, 2, 1, 3, 3, 0, reinterpret_cast<const uint8_t*>(ids.data()), 18});
  AppendField(section, {1, FieldKind::kDepth, 2, 1, 3, 3, 0, reinterpret_cast<const uint8_t*>(mm.data()), 18});
  RecordFields f{Encoding::kRaw, 3, 0, 3, 3};
  f.field_count = 2;
  f.fields_size = static_cast<uint32_t>(section.size());
  const auto r = EncodeRecord(f, "odd", image.data(), image.size(), section.data());  // odd path: odd offsets
  auto v = ParseRecord(r.data(), r.size());
  ASSERT_OK(v);
  RenderImageFn render = [](Encoding, const uint8_t*, size_t, int, uint8_t*) { return Status::Ok(); };
  ASSERT_OK(fb.RenderSample(v.value(), CropBox{0, 0, 3, 3}, false, false, render, &a, 0));
  ASSERT_OK(fb.RenderSample(v.value(), CropBox{1, -1, 3, 3}, true, false, render, &a, 1));
  fb.Finish(&a, 2);
  auto by = ByName(a);
  EXPECT_EQ(by["seg"]->dtype, DType::kUint16);
  EXPECT_EQ(by["depth"]->dtype, DType::kUint16);
  EXPECT_EQ(by["seg"]->shape, (std::vector<int64_t>{2, 3, 3}));
  const auto s = As<uint16_t>(*by["seg"]), d = As<uint16_t>(*by["depth"]);
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(s[i], ids[i]);
    EXPECT_EQ(d[i], mm[i]);
  }
  // Sample 1: source box x 1..3, y -1..1, flipped: output (x, y) takes
  // source (3 - x, y - 1); column 3 and row -1 are outside.
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 3; ++x) {
      const int sx = 3 - x, sy = y - 1;
      const bool in = sx < 3 && sy >= 0;
      EXPECT_EQ(s[9 + y * 3 + x], in ? ids[sy * 3 + sx] : 65535) << x << "," << y;
      EXPECT_EQ(d[9 + y * 3 + x], in ? mm[sy * 3 + sx] : 7) << x << "," << y;
    }
  // wide_maps_int32 (the Python package with torch): the same values as int32.
  shape.wide_maps_int32 = true;
  FieldBatcher wide({seg, depth}, shape);
  FieldArrays w;
  wide.Prepare(&w);
  ASSERT_OK(wide.RenderSample(v.value(), CropBox{0, 0, 3, 3}, false, false, render, &w, 0));
  ASSERT_OK(wide.RenderSample(v.value(), CropBox{1, -1, 3, 3}, true, false, render, &w, 1));
  wide.Finish(&w, 2);
  auto wb = ByName(w);
  EXPECT_EQ(wb["seg"]->dtype, DType::kInt32);
  EXPECT_EQ(wb["depth"]->dtype, DType::kInt32);
  const auto s32 = As<int32_t>(*wb["seg"]), d32 = As<int32_t>(*wb["depth"]);
  ASSERT_EQ(s32.size(), s.size());
  for (size_t k = 0; k < s.size(); ++k) {
    EXPECT_EQ(s32[k], int32_t(s[k]));
    EXPECT_EQ(d32[k], int32_t(d[k]));
  }
}

}  // namespace
}  // namespace imagepack::internal
