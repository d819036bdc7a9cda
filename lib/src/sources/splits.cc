// Splits by the Hub's names (splits.h).
#include "sources/splits.h"

#include <cctype>
#include <map>

#include "imagepack/formats.h"
#include "sources/patterns.h"

namespace imagepack::internal {
namespace {

bool IsSeparator(char c) {
  return c == '-' || c == '_' || c == '.' || c == ' ' || std::isdigit(static_cast<unsigned char>(c));
}

// The words of a name, lower case, split at separators.
std::vector<std::string> Words(const std::string& name) {
  std::vector<std::string> out;
  std::string w;
  for (char c : name) {
    if (IsSeparator(c)) {
      if (!w.empty()) out.push_back(w);
      w.clear();
    } else {
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  if (!w.empty()) out.push_back(w);
  return out;
}

// The split a keyword names, or "".
std::string KeywordSplit(const std::string& word) {
  static const std::map<std::string, std::string> keywords = {
      {"train", "train"},      {"training", "train"}, {"validation", "validation"}, {"valid", "validation"},
      {"dev", "validation"},   {"val", "validation"}, {"test", "test"},             {"testing", "test"},
      {"eval", "test"},        {"evaluation", "test"}};
  auto it = keywords.find(word);
  return it == keywords.end() ? "" : it->second;
}

// NAME of "NAME-DDDDD-of-DDDDD..." (the Hub's and TF-slim's shards), or "".
std::string ShardedSplit(const std::string& base) {
  const auto of = base.find("-of-");
  if (of == std::string::npos || of < 6 || base.size() < of + 9 || base[of - 6] != '-') return "";
  for (size_t i = of - 5; i < of; ++i)
    if (!std::isdigit(static_cast<unsigned char>(base[i]))) return "";
  for (size_t i = of + 4; i < of + 9; ++i)
    if (!std::isdigit(static_cast<unsigned char>(base[i]))) return "";
  const std::string name = base.substr(0, of - 6);
  if (name.empty()) return "";
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return "";
  return name;
}

std::string FirstKeyword(const std::string& name) {
  for (const std::string& w : Words(name))
    if (std::string s = KeywordSplit(w); !s.empty()) return s;
  return "";
}

}  // namespace

std::string CanonicalSplit(const std::string& split) {
  const std::string k = KeywordSplit(split);
  return k.empty() ? split : k;
}

std::string SplitOf(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (std::string s = ShardedSplit(base); !s.empty()) return CanonicalSplit(s);
  if (std::string s = FirstKeyword(base); !s.empty()) return s;
  if (slash == std::string::npos || slash == 0) return "";
  const std::string dir = path.substr(0, slash);
  const auto up = dir.rfind('/');
  return FirstKeyword(up == std::string::npos ? dir : dir.substr(up + 1));
}

bool FindsFiles(const std::string& src) { return HasGlob(src) || !IsFilePattern(src); }

Result<std::vector<std::string>> SelectSplit(std::vector<std::string> files, const std::string& split,
                                             const std::string& src, bool found) {
  std::map<std::string, size_t> count;  // by split; "" for files that name none
  for (const std::string& f : files) ++count[SplitOf(f)];
  auto listed = [&] {
    std::string out;
    for (const auto& [name, n] : count) {
      if (name.empty()) continue;
      out += (out.empty() ? "" : ", ") + name + " (" + std::to_string(n) + (n == 1 ? " file)" : " files)");
    }
    return out.empty() ? std::string("none: no file names one") : out;
  };
  if (split.empty()) {
    if (found && count.size() - count.count("") >= 2)
      return Status::InvalidArgument(src + " holds several splits: " + listed() +
                                     "; read one with --split NAME (split=NAME in Python): splits are never "
                                     "merged");
    return files;
  }
  const std::string want = CanonicalSplit(split);
  std::vector<std::string> out;
  for (std::string& f : files)
    if (SplitOf(f) == want) out.push_back(std::move(f));
  if (out.empty()) return Status::NotFound(src + " holds no files of split " + want + " (its splits: " + listed() + ")");
  return out;
}

}  // namespace imagepack::internal
