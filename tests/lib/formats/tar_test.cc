// formats/tar: archives as GNU tar writes them in every format it has
// (ustar, gnu, pax), and hostile headers: each is an error naming the
// header's byte, never an exception, a hang or an allocation it sized.
#include "formats/tar.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "testutil.h"

namespace imagepack::internal {
namespace {

using testing::TempDir;

// A tar header: name, size field as given (raw bytes), type; checksum set.
std::string Header(const std::string& name, const std::string& size_field, char type) {
  std::string h(512, '\0');
  std::memcpy(&h[0], name.data(), std::min<size_t>(name.size(), 100));
  std::memcpy(&h[100], "0000644", 7);
  std::memcpy(&h[124], size_field.data(), std::min<size_t>(size_field.size(), 12));
  h[156] = type;
  std::memcpy(&h[257], "ustar\0" "00", 8);
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  char chk[8];
  std::snprintf(chk, sizeof chk, "%06o", sum);
  std::memcpy(&h[148], chk, 7);
  return h;
}

std::string Octal(uint64_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "%011llo", static_cast<unsigned long long>(v));
  return b;
}

std::string Padded(const std::string& body) { return body + std::string((512 - body.size() % 512) % 512, '\0'); }

std::string Member(const std::string& name, const std::string& body, char type = '0') {
  return Header(name, Octal(body.size()), type) + Padded(body);
}

const std::string kEnd(1024, '\0');

Result<std::vector<TarMember>> List(const std::string& tar) {
  auto read = [&](void* buf, size_t n, uint64_t at) -> Status {
    if (at > tar.size() || n > tar.size() - at) return Status::Corruption("short read");
    std::memcpy(buf, tar.data() + at, n);
    return Status::Ok();
  };
  return ListTar(read, tar.size(), "t.tar");
}

void ExpectError(const std::string& tar, const std::string& part) {
  auto r = List(tar);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("t.tar"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
}

TEST(Tar, GnuTarEveryFormatListsEveryMemberWithItsBytes) {
  TempDir d;
  const std::string long_dir(150, 'd');
  ASSERT_EQ(std::system(("mkdir -p " + d / "src/" + long_dir).c_str()), 0);
  testing::Spit(d / "src/a.jpg", {1, 2, 3});
  testing::Spit(d / ("src/" + long_dir + "/b.cls"), {'7'});
  for (const char* format : {"ustar", "gnu", "pax"}) {
    const std::string out = d / (std::string(format) + ".tar");
    const std::string cmd = "cd " + d / "src" + " && tar --format=" + format + " -cf " + out + " a.jpg " + long_dir +
                            "/b.cls 2>/dev/null";
    if (std::string(format) == "ustar") {
      // ustar splits a long name at a '/' into prefix + name.
    }
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto bytes = testing::Slurp(out);
    auto r = List(std::string(bytes.begin(), bytes.end()));
    ASSERT_OK(r);
    ASSERT_EQ(r->size(), 2u) << format;
    EXPECT_EQ((*r)[0].name, "a.jpg");
    EXPECT_EQ((*r)[0].size, 3u);
    EXPECT_EQ(bytes[(*r)[0].offset + 2], 3);
    EXPECT_EQ((*r)[1].name, long_dir + "/b.cls") << format;
    EXPECT_EQ(bytes[(*r)[1].offset], '7');
  }
}

TEST(Tar, LongNamesFromGnuAndPaxHeaders) {
  const std::string name(300, 'n');
  auto gnu = List(Member("././@LongLink", name + '\0', 'L') + Member("short", "abc") + kEnd);
  ASSERT_OK(gnu);
  EXPECT_EQ((*gnu)[0].name, name);
  const std::string rec = "path=" + name + "\n";
  const std::string len = std::to_string(rec.size() + 4);  // "NNN " + rec
  auto pax = List(Member("PaxHeader", len + " " + rec, 'x') + Member("short", "abc") + kEnd);
  ASSERT_OK(pax);
  EXPECT_EQ((*pax)[0].name, name);
  EXPECT_EQ((*pax)[0].size, 3u);
}

TEST(Tar, PaxLengthsThatAreNotNumbersAreErrors) {
  for (const std::string body : {"abc path=x\n", "-5 path=x\n", "99999999999999999999999 path=x\n",
                                 "18446744073709551617 path=x\n", "3 path=x\n", "13 path=xyz\n"}) {
    SCOPED_TRACE(body);
    ExpectError(Member("PaxHeader", body, 'x') + Member("a.jpg", "x") + kEnd, "pax");
  }
}

TEST(Tar, Base256SizeNearTwoToThe64IsAnErrorNotAnAllocation) {
  std::string size(12, '\xff');
  size[0] = '\x80';
  for (char type : {'L', 'x', '0'}) {
    SCOPED_TRACE(type);
    ExpectError(Header("big", size, type) + kEnd, "byte 0");
  }
}

TEST(Tar, MemberSizeThatWrapsTheOffsetFailsAtOnce) {
  // 2^64 - 512 in base-256: data + size wrapped to the header itself, and
  // the old reader looped on it forever.
  std::string size(12, '\0');
  size[0] = '\x80';
  const uint64_t v = ~uint64_t(0) - 511;
  for (int i = 0; i < 8; ++i) size[4 + i] = static_cast<char>(v >> (8 * (7 - i)));
  const std::clock_t t0 = std::clock();  // CPU time: a loaded machine does not stretch it
  auto r = List(Header("loop.jpg", size, '0') + std::string(4096, 'x') + kEnd);
  EXPECT_FALSE(r.ok());
  EXPECT_LT(double(std::clock() - t0) / CLOCKS_PER_SEC, 1.0);
}

TEST(Tar, TruncatedAndDamagedShardsSayWhere) {
  const std::string good = Member("a.jpg", std::string(1000, 'x')) + kEnd;
  ExpectError(good.substr(0, 700), "runs past the end");
  ExpectError(good.substr(0, 1536), "no end-of-archive");
  std::string bad = good;
  bad[10] ^= 1;
  ExpectError(bad, "checksum");
  ExpectError(Header("a", "12345678901x", '0') + kEnd, "not a number");
}

TEST(Tar, BudgetsOnHeaderBodiesAndNames) {
  ExpectError(Header("././@LongLink", Octal(2u << 20), 'L') + std::string(2u << 20, 'n') + kEnd, "budget");
  const std::string name(5000, 'n');
  ExpectError(Member("././@LongLink", name, 'L') + Member("x", "y") + kEnd, "budget");
}

TEST(Tar, DirectoriesLinksAndGlobalHeadersAreSkipped) {
  auto r = List(Member("dir/", "", '5') + Member("g", "9 a=bcd\n", 'g') + Member("l", "", '2') +
                Member("dir/a.jpg", "xy") + kEnd);
  ASSERT_OK(r);
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].name, "dir/a.jpg");
}

TEST(Tar, NumbersParseOctalAndBase256AndRefuseJunk) {
  uint64_t v = 0;
  EXPECT_TRUE(ParseTarNumber("00000000017 ", 12, &v));
  EXPECT_EQ(v, 15u);
  EXPECT_TRUE(ParseTarNumber("     17\0\0\0\0\0", 12, &v));
  EXPECT_EQ(v, 15u);
  EXPECT_FALSE(ParseTarNumber("0000008\0", 8, &v));
  const char b256[12] = {'\x80', 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2};
  EXPECT_TRUE(ParseTarNumber(b256, 12, &v));
  EXPECT_EQ(v, 258u);
  const char neg[12] = {'\xff', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  EXPECT_FALSE(ParseTarNumber(neg, 12, &v));
}

}  // namespace
}  // namespace imagepack::internal
