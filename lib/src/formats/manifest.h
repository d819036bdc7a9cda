// JSON Lines and CSV manifests (pack_lmdb --manifest): rows parsed into
// JSON objects within the budgets of limits.h. What the rows mean (labels,
// fields, paths) is the manifest source's (sources.h). Internal.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "imagepack/status.h"

namespace imagepack::internal {

struct ManifestRow {
  int line = 0;          // 1-based, in the manifest
  nlohmann::json value;  // a JSON object
};

// The rows of the manifest `text` (named `name` in messages): JSON Lines
// (one object per non-empty line), or with `csv` a header line then one
// row per line, cells read as the JSON they spell (numbers, lists,
// objects), else as strings, empty cells left out. Budgets: a line at most
// limits::kLineBytes, JSON (or a cell) at most limits::kJsonDepth deep, at
// most limits::kManifestRows rows; CSV lines UTF-8. Errors name the line.
Result<std::vector<ManifestRow>> ParseManifest(std::string_view text, bool csv, const std::string& name);

// Splits one CSV line (RFC 4180 quoting, no newlines inside fields).
std::vector<std::string> SplitCsv(const std::string& line);

}  // namespace imagepack::internal
