// Helpers shared by the trainer's files (trainer*.cc); not a public header.
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "imagepack/status.h"

namespace imagepack::trainer::internal {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Running value and average, as in the reference ImageNet example.
struct Meter {
  double val = 0, sum = 0;
  int64_t n = 0;
  void Add(double v, int64_t k = 1) {
    val = v;
    sum += v * k;
    n += k;
  }
  double avg() const { return n ? sum / n : 0; }
};

// The running figures of an epoch's steps.
struct EpochMeters {
  Meter batch_time, data_rate, losses;
  std::vector<Meter> figures;
};

inline bool IsSmall(const std::string& arch) { return arch == "small_cnn" || arch == "mlp"; }

template <typename T>
T Check(Result<T> r) {
  if (!r.ok()) throw std::runtime_error(r.status().ToString());
  return std::move(r.value());
}
inline void Check(const Status& st) {
  if (!st.ok()) throw std::runtime_error(st.ToString());
}

}  // namespace imagepack::trainer::internal
