// WebDataset shard lists as users write them: several patterns joined by
// "::" (webdataset's own separator), each with any number of brace groups,
// "{000..146}" (a zero-padded decimal range) or "{train,val}"
// (alternatives), expanded left to right like the shell and webdataset's
// braceexpand. At most limits::kBraceExpansions names. Internal.
#pragma once

#include <string>
#include <vector>

#include "base/limits.h"
#include "imagepack/status.h"

namespace imagepack::internal {

// True when `text` holds a brace group or a "::" list.
bool HasShardPattern(const std::string& text);

// The names `text` expands to, in order; an unclosed brace, a range with
// non-decimal or reversed bounds, or more than `budget` names is an error
// quoting the pattern.
Result<std::vector<std::string>> ExpandShardPattern(const std::string& text,
                                                    size_t budget = limits::kBraceExpansions);

}  // namespace imagepack::internal
