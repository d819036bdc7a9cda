#include "formats/text.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>

#include "base/limits.h"

namespace imagepack::internal {

std::string TrimSpace(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}

bool IsUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c == 0xe0) len = 3, lo = 0xa0;
    else if (c == 0xed) len = 3, hi = 0x9f;  // no surrogates
    else if (c >= 0xe1 && c <= 0xef) len = 3;
    else if (c == 0xf0) len = 4, lo = 0x90;
    else if (c >= 0xf1 && c <= 0xf3) len = 4;
    else if (c == 0xf4) len = 4, hi = 0x8f;
    else return false;
    if (len > n - i) return false;
    if (p[i + 1] < lo || p[i + 1] > hi) return false;
    for (size_t k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xbf) return false;
    i += len;
  }
  return true;
}

std::string Shown(std::string_view s) {
  if (IsUtf8(s) && s.find('\n') == std::string_view::npos && s.find('\0') == std::string_view::npos)
    return std::string(s);
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    }
  }
  return out + "\"";
}

Status CheckName(std::string_view s, const std::string& what) {
  if (!IsUtf8(s)) return Status::InvalidArgument(what + " " + Shown(s) + " is not UTF-8");
  if (s.find('\0') != std::string_view::npos) return Status::InvalidArgument(what + " " + Shown(s) + " holds a NUL byte");
  if (s.find('\n') != std::string_view::npos || s.find('\r') != std::string_view::npos)
    return Status::InvalidArgument(what + " " + Shown(s) + " holds a line break");
  return Status::Ok();
}

int JsonDepth(std::string_view text) {
  // 64-bit counts: a 2 GiB file (limits::kWholeFile) of '[' or ']' would
  // overflow an int; the result saturates at INT_MAX.
  int64_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return int(std::min<int64_t>(deepest, INT_MAX));
}

Result<nlohmann::json> ParseJsonBounded(std::string_view text, const std::string& where) {
  if (const int d = JsonDepth(text); d > limits::kJsonDepth)
    return Status::InvalidArgument(where + ": JSON nested " + std::to_string(d) + " deep (budget " +
                                   std::to_string(limits::kJsonDepth) + ")");
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument(where + ": not valid JSON (or not UTF-8)");
  return j;
}

}  // namespace imagepack::internal
