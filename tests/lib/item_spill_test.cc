#include "sources/item_spill.h"

#include <gtest/gtest.h>

#include "testutil.h"

namespace imagepack::internal {
namespace {

using testing::TempDir;

SourceItem Item(int i) {
  SourceItem item;
  item.rel = "class/" + std::string(size_t(i % 13), 'x') + std::to_string(i) + ".jpg";
  item.label = i % 5 - 1;
  item.db_index = i * 3;
  item.archive = i % 2 ? 1 : -1;
  item.offset = uint64_t(i) << 33;
  item.size = uint64_t(i) * 7;
  if (i % 3 == 0) {
    SourceField f;
    f.slot = 0;
    f.file = "masks/" + std::to_string(i) + ".png";
    f.ints = {i, -i};
    f.floats = {0.5f, float(i)};
    f.boxes = {{1, 2, 3, 4, i}};
    f.text = "caption " + std::to_string(i);
    item.fields.push_back(f);
  }
  return item;
}

void ExpectSame(const SourceItem& a, const SourceItem& b) {
  EXPECT_EQ(a.rel, b.rel);
  EXPECT_EQ(a.label, b.label);
  EXPECT_EQ(a.db_index, b.db_index);
  EXPECT_EQ(a.archive, b.archive);
  EXPECT_EQ(a.offset, b.offset);
  EXPECT_EQ(a.size, b.size);
  ASSERT_EQ(a.fields.size(), b.fields.size());
  for (size_t f = 0; f < a.fields.size(); ++f) {
    EXPECT_EQ(a.fields[f].file, b.fields[f].file);
    EXPECT_EQ(a.fields[f].ints, b.fields[f].ints);
    EXPECT_EQ(a.fields[f].floats, b.fields[f].floats);
    ASSERT_EQ(a.fields[f].boxes.size(), b.fields[f].boxes.size());
    EXPECT_EQ(a.fields[f].boxes[0].label, b.fields[f].boxes[0].label);
    EXPECT_EQ(a.fields[f].boxes[0].x1, b.fields[f].boxes[0].x1);
    EXPECT_EQ(a.fields[f].text, b.fields[f].text);
  }
}

// More items than one 4 MB read holds, and one item larger than a read.
TEST(ItemSpill, ItemsComeBackInOrderWithEveryMember) {
  TempDir d;
  auto spill = ItemSpill::Create(d.path());
  ASSERT_OK(spill);
  const int n = 60000;
  for (int i = 0; i < n; ++i) ASSERT_OK(spill.value()->Add(Item(i)));
  SourceItem big = Item(1);
  big.rel = std::string(5 << 20, 'b');
  ASSERT_OK(spill.value()->Add(big));
  ASSERT_OK(spill.value()->Finish());
  EXPECT_EQ(spill.value()->size(), n + 1);
  auto reader = spill.value()->Read();
  SourceItem item;
  for (int i = 0; i < n; ++i) {
    auto more = reader.Next(&item);
    ASSERT_OK(more);
    ASSERT_TRUE(more.value());
    ExpectSame(item, Item(i));
  }
  ASSERT_TRUE(reader.Next(&item).value());
  EXPECT_EQ(item.rel, big.rel);
  EXPECT_FALSE(reader.Next(&item).value());
}

TEST(KeyedSpill, ItemsComeBackByKeyAcrossBuckets) {
  TempDir d;
  const uint64_t n = 5000;
  auto spill = KeyedSpill::Create(d.path(), n, n * 60, 4096);  // ~70 buckets
  ASSERT_OK(spill);
  for (uint64_t i = 0; i < n; ++i) ASSERT_OK(spill.value()->Add((i * 7919) % n, Item(int(i))));
  ASSERT_OK(spill.value()->Finish());
  SourceItem item;
  for (uint64_t k = 0; k < n; ++k) {
    auto more = spill.value()->Next(&item);
    ASSERT_OK(more);
    ASSERT_TRUE(more.value());
    // Item i went to key (7919 i) mod n: i = k * 7919^-1 mod n.
    EXPECT_EQ(item.db_index % 3, 0);
    EXPECT_EQ((uint64_t(item.db_index / 3) * 7919) % n, k);
  }
  EXPECT_FALSE(spill.value()->Next(&item).value());
}

TEST(ItemSpill, DamagedBytesAreAnError) {
  std::string bytes;
  EncodeItem(Item(3), &bytes);
  SourceItem item;
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  EXPECT_TRUE(DecodeItem(p, p + bytes.size(), &item));
  EXPECT_FALSE(DecodeItem(p, p + bytes.size() - 1, &item));
  bytes[0] = char(0xff);  // the path's length: past the end
  EXPECT_FALSE(DecodeItem(p, p + bytes.size(), &item));
}

}  // namespace
}  // namespace imagepack::internal
