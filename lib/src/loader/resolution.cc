#include "imagepack/resolution.h"

#include <charconv>
#include <cmath>
#include <vector>

namespace imagepack {

namespace {

// numpy's round: to the nearest integer, halves to the even one.
double RoundHalfEven(double x) {
  const double f = std::floor(x), d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return std::fmod(f, 2.0) == 0 ? f : f + 1;
}

}  // namespace

int ResolutionSchedule::At(int64_t epoch) const {
  if (epoch <= start_ramp) return min_res;
  if (epoch >= end_ramp) return max_res;
  // np.interp between (start_ramp, min_res) and (end_ramp, max_res), in
  // its own arithmetic: slope * (x - x0) + y0.
  const double slope = double(max_res - min_res) / double(end_ramp - start_ramp);
  const double value = slope * double(epoch - start_ramp) + double(min_res);
  return static_cast<int>(RoundHalfEven(value / step)) * step;
}

std::string ResolutionSchedule::ToString() const {
  std::string s = std::to_string(min_res) + "," + std::to_string(max_res) + "," + std::to_string(start_ramp) + "," +
                  std::to_string(end_ramp);
  if (step != 32) s += "," + std::to_string(step);
  return s;
}

Result<ResolutionSchedule> ParseResolutionSchedule(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("resolution schedule '" + text + "': " + why +
                                   " (expected MIN,MAX,START_RAMP,END_RAMP[,STEP], e.g. 160,192,11,13)");
  };
  std::vector<int64_t> v;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    const std::string part = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    int64_t x = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), x);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size())
      return bad("'" + part + "' is not a whole number");
    v.push_back(x);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (v.size() != 4 && v.size() != 5) return bad(std::to_string(v.size()) + " numbers");
  ResolutionSchedule s;
  if (v[0] < 1 || v[1] > 16384 || v[0] > v[1]) return bad("MIN and MAX must satisfy 1 <= MIN <= MAX <= 16384");
  if (v[2] < 0 || v[2] > v[3]) return bad("START_RAMP and END_RAMP must satisfy 0 <= START_RAMP <= END_RAMP");
  if (v.size() == 5 && (v[4] < 1 || v[4] > 16384)) return bad("STEP must be in 1..16384");
  s.min_res = static_cast<int>(v[0]);
  s.max_res = static_cast<int>(v[1]);
  s.start_ramp = v[2];
  s.end_ramp = v[3];
  if (v.size() == 5) s.step = static_cast<int>(v[4]);
  return s;
}

}  // namespace imagepack
