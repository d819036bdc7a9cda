#include "imagepack/resolution.h"

#include <gtest/gtest.h>

#include <vector>

#include "testutil.h"

namespace imagepack {
namespace {

// Epochs at each size, in order: {size, epochs}.
using Runs = std::vector<std::pair<int, int>>;

std::vector<int> Expand(const Runs& runs) {
  std::vector<int> out;
  for (const auto& [size, n] : runs) out.insert(out.end(), size_t(n), size);
  return out;
}

// FFCV's six ResNet-50 configurations (libffcv/ffcv-imagenet,
// rn50_configs/rn50_{16,24,32,40,56,88}_epochs.yaml: min_res 160, max_res
// 192, start_ramp/end_ramp as below). The expectations are FFCV's
// get_resolution worked by hand for every epoch: min_res while epoch <=
// start_ramp, max_res once epoch >= end_ramp, in between
// round((160 + 32 (e - s) / (E - s)) / 32) * 32 with numpy's round, i.e.
// 192 from the ramp's midpoint on (5.5 rounds to 6).
TEST(ResolutionSchedule, FfcvResNet50ConfigsEpochByEpoch) {
  struct Config {
    int epochs;
    int64_t start_ramp, end_ramp;
    Runs want;
  };
  const Config configs[] = {
      {16, 11, 13, {{160, 12}, {192, 4}}},   // epoch 12: 176 -> 5.5 -> 6
      {24, 17, 20, {{160, 19}, {192, 5}}},   // 18: 170.7 -> 160; 19: 181.3 -> 192
      {32, 23, 27, {{160, 25}, {192, 7}}},   // 24: 168 -> 160; 25: 176 -> 192
      {40, 29, 34, {{160, 32}, {192, 8}}},   // 31: 172.8 -> 160; 32: 179.2 -> 192
      {56, 41, 48, {{160, 45}, {192, 11}}},  // 44: 173.7 -> 160; 45: 178.3 -> 192
      {88, 65, 76, {{160, 71}, {192, 17}}},  // 70: 174.5 -> 160; 71: 177.5 -> 192
  };
  for (const Config& c : configs) {
    const ResolutionSchedule s{160, 192, c.start_ramp, c.end_ramp, 32};
    const std::vector<int> want = Expand(c.want);
    ASSERT_EQ(want.size(), size_t(c.epochs));
    std::vector<int> got;
    for (int e = 0; e < c.epochs; ++e) got.push_back(s.At(e));
    EXPECT_EQ(got, want) << c.epochs << " epochs, ramp " << c.start_ramp << ".." << c.end_ramp;
    // The same through the option's text.
    auto parsed = ParseResolutionSchedule("160,192," + std::to_string(c.start_ramp) + "," + std::to_string(c.end_ramp));
    ASSERT_OK(parsed);
    EXPECT_EQ(parsed->At(c.start_ramp + 1), s.At(c.start_ramp + 1));
    EXPECT_EQ(parsed->ToString(), "160,192," + std::to_string(c.start_ramp) + "," + std::to_string(c.end_ramp));
  }
}

// A wider ramp shows the rounding: multiples of the step, halves to the
// even multiple (numpy), and the ends themselves never rounded.
TEST(ResolutionSchedule, RoundsToTheStepWithHalvesToEven) {
  const ResolutionSchedule s{160, 224, 0, 4, 32};
  // 176 -> 5.5 -> 6 (192); 192; 208 -> 6.5 -> 6 (192), not 7.
  EXPECT_EQ(Expand({{160, 1}, {192, 3}, {224, 2}}), (std::vector<int>{s.At(0), s.At(1), s.At(2), s.At(3), s.At(4), s.At(5)}));
  const ResolutionSchedule odd{100, 300, 10, 20, 32};
  EXPECT_EQ(odd.At(10), 100);  // the ends as given
  EXPECT_EQ(odd.At(20), 300);
  for (int e = 11; e < 20; ++e) EXPECT_EQ(odd.At(e) % 32, 0) << e;
  const ResolutionSchedule small{16, 28, 2, 5, 4};  // Fashion-MNIST-sized, step 4
  EXPECT_EQ((std::vector<int>{small.At(2), small.At(3), small.At(4), small.At(5)}), (std::vector<int>{16, 20, 24, 28}));
  const ResolutionSchedule flat{192, 192, 3, 3, 32};
  for (int e = 0; e < 6; ++e) EXPECT_EQ(flat.At(e), 192);
}

TEST(ResolutionSchedule, ParseRefusesNaming) {
  auto step = ParseResolutionSchedule("16,28,2,5,4");
  ASSERT_OK(step);
  EXPECT_EQ(step->step, 4);
  EXPECT_EQ(step->ToString(), "16,28,2,5,4");
  for (const char* bad : {"", "160,192,11", "160,192,x,13", "192,160,1,2", "160,192,13,11", "0,192,1,2",
                          "160,192,1,2,0", "160,192,1,2,3,4", "160,,1,2"}) {
    auto r = ParseResolutionSchedule(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("resolution schedule '" + std::string(bad) + "'"), std::string::npos)
        << r.status().ToString();
  }
}

}  // namespace
}  // namespace imagepack
