#include "imagepack/status.h"

#include <gtest/gtest.h>

#include <string>

namespace imagepack {
namespace {

TEST(Status, CarriesCodeAndMessageWithContext) {
  const Status st = Status::Corruption("checksum mismatch").WithContext("record 0000000007");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kCorruption);
  EXPECT_EQ(st.message(), "record 0000000007: checksum mismatch");
  EXPECT_EQ(st.ToString(), "Corruption: record 0000000007: checksum mismatch");
  EXPECT_EQ(Status::Ok().ToString(), "OK");
}

TEST(Result, HoldsAValueOrAnError) {
  Result<int> v = 7;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v.value(), 7);
  EXPECT_TRUE(v.status().ok());
  Result<int> e = Status::NotFound("/data/train.lmdb: no such file");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Status::Code::kNotFound);
}

// A Result built from an Ok status has no value: it must not claim to be
// an error while its status() says OK (callers would report "OK" as the
// failure).
TEST(Result, BuiltFromAnOkStatusIsAnErrorThatSaysSo) {
  Result<std::string> r = Status::Ok();
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.status().ok());
  EXPECT_NE(r.status().message().find("OK status"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace imagepack
