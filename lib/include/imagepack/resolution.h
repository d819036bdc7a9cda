// Progressive resolution: the training output size as a function of the
// epoch, with FFCV's meaning (ffcv-imagenet, train_imagenet.py,
// get_resolution): `min_res` up to and including epoch `start_ramp`,
// `max_res` from epoch `end_ramp` on, and in between the linear
// interpolation from min_res to max_res rounded to a multiple of `step`
// (32), halves to the even multiple as numpy's round does. The trainer's
// --res-schedule and Python's size_schedule= take it; the loader changes
// its output size between epochs (Loader::SetOutputSize). Pure; no I/O.
#pragma once

#include <cstdint>
#include <string>

#include "imagepack/status.h"

namespace imagepack {

struct ResolutionSchedule {
  int min_res = 160, max_res = 160;
  int64_t start_ramp = 0, end_ramp = 0;
  int step = 32;

  // The output size of epoch `epoch` (0-based, as FFCV counts).
  int At(int64_t epoch) const;
  // "MIN,MAX,START_RAMP,END_RAMP", with ",STEP" when step is not 32:
  // what ParseResolutionSchedule reads back.
  std::string ToString() const;
};

// "MIN,MAX,START_RAMP,END_RAMP[,STEP]". Requires 1 <= MIN <= MAX <= 16384,
// 0 <= START_RAMP <= END_RAMP, STEP >= 1; errors quote the text and say
// which part is wrong.
Result<ResolutionSchedule> ParseResolutionSchedule(const std::string& text);

}  // namespace imagepack
