#include "storage/hf_url.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <string_view>

namespace imagepack::internal {
namespace {

std::string Unquote(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// huggingface_hub's validate_repo_id: letters, digits, '-', '_', '.', no
// "--" or "..", not starting or ending with '-' or '.', at most 96.
bool ValidRepoPart(const std::string& s) {
  if (s.empty() || s.size() > 96 || s.find("--") != std::string::npos || s.find("..") != std::string::npos)
    return false;
  if (s.front() == '-' || s.front() == '.' || s.back() == '-' || s.back() == '.') return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.'; });
}

}  // namespace

bool IsCommit(const std::string& r) {
  return r.size() == 40 && std::all_of(r.begin(), r.end(), [](unsigned char c) { return std::isxdigit(c) && !std::isupper(c); });
}

Result<HubPath> ParseHubUrl(const std::string& url) {
  const std::string usage = ": expected hf://datasets/ORG/NAME[@REVISION][/PATH]";
  constexpr std::string_view kPrefix = "hf://datasets/";
  if (url.rfind("hf://", 0) == 0 && url.rfind(kPrefix, 0) != 0)
    return Status::InvalidArgument(url + ": hf:// reads dataset repositories" + usage);
  if (url.rfind(kPrefix, 0) != 0) return Status::InvalidArgument(url + usage);
  const std::string rest = url.substr(kPrefix.size());
  const size_t s1 = rest.find('/');
  if (s1 == std::string::npos) return Status::InvalidArgument(url + usage + " (ORG/NAME: both parts)");
  const std::string org = rest.substr(0, s1), after = rest.substr(s1 + 1);
  HubPath h;
  h.revision = "main";
  std::string name, tail;
  const size_t at = after.find('@'), slash = after.find('/');
  if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
    name = after.substr(0, at);
    const std::string r = after.substr(at + 1);
    // Revisions holding '/' as they are (huggingface_hub's
    // SPECIAL_REFS_REVISION_REGEX), any other up to the next '/', unquoted.
    static const std::regex special("^(refs/convert/\\w+|refs/pr/\\d+)(?:/|$)");
    std::smatch m;
    if (std::regex_search(r, m, special)) {
      h.revision = m[1].str();
      tail = r.substr(h.revision.size());
    } else {
      const size_t e = r.find('/');
      h.revision = Unquote(r.substr(0, e));
      tail = e == std::string::npos ? "" : r.substr(e);
    }
    if (h.revision.empty() || h.revision.size() > 256)
      return Status::InvalidArgument(url + usage + " (an empty or over-long REVISION)");
    for (unsigned char c : h.revision)
      if (c < 0x20 || c == 0x7f) return Status::InvalidArgument(url + usage + " (a control character in REVISION)");
  } else {
    name = after.substr(0, slash);
    tail = slash == std::string::npos ? "" : after.substr(slash);
  }
  if (!ValidRepoPart(org) || !ValidRepoPart(name))
    return Status::InvalidArgument(url + usage + " (ORG and NAME: letters, digits, '-', '_', '.')");
  h.repo = org + "/" + name;
  while (!tail.empty() && tail.front() == '/') tail.erase(0, 1);
  while (!tail.empty() && tail.back() == '/') tail.pop_back();
  for (size_t b = 0; b <= tail.size() && !tail.empty();) {
    const size_t e = std::min(tail.find('/', b), tail.size());
    const std::string part = tail.substr(b, e - b);
    if (part.empty() || part == "." || part == "..")
      return Status::InvalidArgument(url + ": an empty, '.' or '..' component in the path");
    b = e + 1;
  }
  h.path = tail;
  return h;
}

}  // namespace imagepack::internal
