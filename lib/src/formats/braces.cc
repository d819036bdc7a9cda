#include "formats/braces.h"

#include <algorithm>
#include <charconv>

#include "base/limits.h"

namespace imagepack::internal {

bool HasShardPattern(const std::string& text) {
  if (text.find("::") != std::string::npos) return true;
  const auto open = text.find('{');
  return open != std::string::npos && text.find('}', open) != std::string::npos;
}

namespace {

// The alternatives of one group's body: "A..B" or "a,b,c".
Result<std::vector<std::string>> GroupItems(const std::string& body, const std::string& pattern, size_t budget) {
  std::vector<std::string> out;
  const auto dots = body.find("..");
  if (dots != std::string::npos && body.find(',') == std::string::npos) {
    const std::string a = body.substr(0, dots), b = body.substr(dots + 2);
    auto digits = [](const std::string& s) {
      return !s.empty() && s.size() <= 18 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (!digits(a) || !digits(b))
      return Status::InvalidArgument(pattern + ": {" + body + "} is not {FIRST..LAST} with decimal bounds");
    int64_t lo = 0, hi = 0;
    std::from_chars(a.data(), a.data() + a.size(), lo);
    std::from_chars(b.data(), b.data() + b.size(), hi);
    if (hi < lo) return Status::InvalidArgument(pattern + ": {" + body + "} runs backwards");
    if (hi - lo >= static_cast<int64_t>(budget))
      return Status::InvalidArgument(pattern + ": {" + body + "} names more than " + std::to_string(budget) +
                                     " shards");
    for (int64_t i = lo; i <= hi; ++i) {
      std::string n = std::to_string(i);
      if (n.size() < a.size()) n.insert(0, a.size() - n.size(), '0');
      out.push_back(std::move(n));
    }
    return out;
  }
  for (size_t at = 0; at <= body.size();) {
    size_t comma = body.find(',', at);
    if (comma == std::string::npos) comma = body.size();
    out.push_back(body.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

Result<std::vector<std::string>> ExpandOne(const std::string& pattern, size_t budget) {
  std::vector<std::string> names{""};
  size_t at = 0;
  while (at < pattern.size()) {
    const auto open = pattern.find('{', at);
    if (open == std::string::npos) {
      for (auto& n : names) n += pattern.substr(at);
      break;
    }
    const auto close = pattern.find('}', open);
    if (close == std::string::npos) return Status::InvalidArgument(pattern + ": '{' at " + std::to_string(open) + " is never closed");
    if (pattern.find('{', open + 1) < close)
      return Status::InvalidArgument(pattern + ": nested braces are not supported");
    auto items = GroupItems(pattern.substr(open + 1, close - open - 1), pattern, budget);
    if (!items.ok()) return items.status();
    if (names.size() * items->size() > budget)
      return Status::InvalidArgument(pattern + ": names more than " + std::to_string(budget) + " shards");
    std::vector<std::string> next;
    next.reserve(names.size() * items->size());
    const std::string literal = pattern.substr(at, open - at);
    for (const auto& n : names)
      for (const auto& item : *items) next.push_back(n + literal + item);
    names = std::move(next);
    at = close + 1;
  }
  return names;
}

}  // namespace

Result<std::vector<std::string>> ExpandShardPattern(const std::string& text, size_t budget) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= text.size();) {
    size_t sep = text.find("::", at);
    if (sep == std::string::npos) sep = text.size();
    const std::string part = text.substr(at, sep - at);
    at = sep + 2;
    if (part.empty()) continue;
    auto names = ExpandOne(part, budget);
    if (!names.ok()) return names.status();
    if (out.size() + names->size() > budget)
      return Status::InvalidArgument(text + ": names more than " + std::to_string(budget) + " shards");
    out.insert(out.end(), names->begin(), names->end());
  }
  if (out.empty()) return Status::InvalidArgument("'" + text + "' names no shard");
  return out;
}

}  // namespace imagepack::internal
