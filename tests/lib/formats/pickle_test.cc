// formats/pickle: the values Python's pickle writes for folder2lmdb
// records, shared memo entries (a reused value is never copied), nesting
// and self-reference without recursion, and code that is refused.
#include "formats/pickle.h"

#include <gtest/gtest.h>

#include <ctime>
#include <string>

namespace imagepack::internal {
namespace {

Result<Pickle> Parse(const std::string& p) {
  return Pickle::Parse(reinterpret_cast<const uint8_t*>(p.data()), p.size());
}

// pickle.dumps((b"\xff\xd8jpeg", 3), protocol=4) as Python 3.11 writes it.
const std::string kRecord("\x80\x04\x95\x0e\x00\x00\x00\x00\x00\x00\x00" "C\x06\xff\xd8jpeg\x94K\x03\x86\x94.", 25);

TEST(Pickle, ReadsAFolder2LmdbRecordAsPythonWroteIt) {
  auto p = Parse(kRecord);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->root().kind, PickleValue::kSeq);
  ASSERT_EQ(p->root().items.size(), 2u);
  EXPECT_EQ(p->text(p->at(p->root().items[0])), std::string("\xff\xd8jpeg"));
  EXPECT_EQ(p->at(p->root().items[1]).kind, PickleValue::kInt);
  EXPECT_EQ(p->at(p->root().items[1]).i, 3);
}

TEST(Pickle, MemoReuseIsSharedNotCopied) {
  // t0 = []; t(i) = (t(i-1), t(i-1)): 2^60 leaves if copied; 1.5 KB here.
  std::string p("\x80\x04]q\x00" "0", 6);
  for (int i = 1; i < 200; ++i) {
    p += 'h';
    p += static_cast<char>((i - 1) & 0xff);
    p += 'h';
    p += static_cast<char>((i - 1) & 0xff);
    p += "\x86q";
    p += static_cast<char>(i & 0xff);
    p += '0';  // POP: the value lives on in the memo
  }
  p += 'h';
  p += static_cast<char>(199);
  p += '.';
  const std::clock_t t0 = std::clock();  // CPU time: a loaded machine does not stretch it
  auto r = Parse(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LT(double(std::clock() - t0) / CLOCKS_PER_SEC, 1.0);
  EXPECT_EQ(r->root().items.size(), 2u);
  EXPECT_EQ(r->root().items[0], r->root().items[1]);  // one value, shared
}

TEST(Pickle, DeepNestingAndSelfReferenceNeedNoRecursion) {
  const int depth = 1000000;
  std::string p = "\x80\x04" + std::string(depth, ']') + std::string(depth - 1, 'a') + ".";
  auto r = Parse(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->root().items.size(), 1u);
  auto self = Parse(std::string("\x80\x04]q\x00h\x00" "a.", 9));  // l = []; l.append(l)
  ASSERT_TRUE(self.ok()) << self.status().ToString();
  EXPECT_EQ(self->root().items.size(), 1u);
}

TEST(Pickle, CodeIsRefusedAndDamageSaysWhere) {
  auto code = Parse("\x80\x04\x8c\x05posix\x8c\x06system\x93.");
  ASSERT_FALSE(code.ok());
  EXPECT_NE(code.status().message().find("refusing to call code"), std::string::npos);
  for (const std::string bad : {std::string("\x80\x04", 2), std::string("\x80\x04" "C\x09" "abc.", 8),
                                std::string("\x80\x04h\x05.", 5), std::string("\x80\x04" "a.", 4),
                                std::string("\x80\x04" "e.", 4), std::string("\x80\x04K\x01K\x02.", 7)}) {
    auto r = Parse(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("at byte"), std::string::npos) << r.status().message();
  }
}

TEST(Pickle, IntegersOfEveryWidth) {
  auto r = Parse(std::string("\x80\x04(K\xffM\x01\x02J\xff\xff\xff\xff\x8a\x02\x00\x80\x8a\x00t.", 21));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->root().items.size(), 5u);
  EXPECT_EQ(r->at(r->root().items[0]).i, 255);
  EXPECT_EQ(r->at(r->root().items[1]).i, 0x0201);
  EXPECT_EQ(r->at(r->root().items[2]).i, -1);
  EXPECT_EQ(r->at(r->root().items[3]).i, -32768);
  EXPECT_EQ(r->at(r->root().items[4]).i, 0);
}

}  // namespace
}  // namespace imagepack::internal
