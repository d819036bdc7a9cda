// Names and text from other people's files: bytes until proven UTF-8, and
// JSON parsed within a nesting budget. Internal.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "imagepack/status.h"

namespace imagepack::internal {

// `s` without leading and trailing spaces, tabs, CRs and LFs.
std::string TrimSpace(std::string_view s);

// True when `s` is well-formed UTF-8 (no overlong forms, no surrogates).
bool IsUtf8(std::string_view s);

// `s` when it is UTF-8, else a quoted form with every byte outside
// printable ASCII as \xHH, for messages.
std::string Shown(std::string_view s);

// Refuses a name that is not UTF-8, or holds a NUL or a newline: "WHAT
// 'shown' is not UTF-8" (databases store names as UTF-8 JSON and paths;
// see docs/RELIABILITY.md).
Status CheckName(std::string_view s, const std::string& what);

// Parses JSON text whose nesting stays within limits::kJsonDepth (checked
// before parsing, so no recursive step ever sees a deeper value); errors
// name `where`.
Result<nlohmann::json> ParseJsonBounded(std::string_view text, const std::string& where);

// The deepest nesting of arrays and objects in `text` (strings skipped).
int JsonDepth(std::string_view text);

}  // namespace imagepack::internal
