// File patterns: braces, then shell globs by listing (patterns.h).
#include "sources/patterns.h"

#include <fnmatch.h>

#include <algorithm>
#include <filesystem>

#include "formats/braces.h"
#include "base/limits.h"
#include "imagepack/formats.h"

namespace imagepack {
namespace internal {
namespace {

bool IsGlobChar(char c) { return c == '*' || c == '?' || c == '['; }

std::string JoinName(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : Storage::Join(dir, name);
}

// One glob's walk: the storage, what was listed, what matched.
struct Walk {
  Storage& storage;
  const std::string& glob;
  size_t listed = 0;
  std::vector<std::string> out;
};

Result<std::vector<std::string>> ListCounted(Walk& w, const std::string& dir) {
  auto names = w.storage.List(dir.empty() ? "." : dir);
  if (!names.ok()) return names.status();
  w.listed += names->size();
  if (w.listed > limits::kGlobEntries)
    return Status::InvalidArgument(w.glob + ": the glob lists more than " + std::to_string(limits::kGlobEntries) +
                                   " entries (budget); name the files more narrowly");
  return names;
}

bool Hidden(const std::string& name) { return !name.empty() && name[0] == '.'; }

// Matches components[i..] below `dir`, `depth` folders below the glob's root.
Status Descend(Walk& w, const std::string& dir, const std::vector<std::string>& comps, size_t i, size_t depth) {
  if (depth > limits::kGlobDepth)
    return Status::InvalidArgument(w.glob + ": \"**\" descends more than " + std::to_string(limits::kGlobDepth) +
                                   " folders (budget)");
  const std::string& c = comps[i];
  const bool last = i + 1 == comps.size();
  if (c == "**" && !last) IMAGEPACK_RETURN_IF_ERROR(Descend(w, dir, comps, i + 1, depth));  // no folder at all
  auto names = ListCounted(w, dir);
  if (!names.ok()) return names.status();
  for (const std::string& n : *names) {
    const bool folder = !n.empty() && n.back() == '/';
    const std::string name = folder ? n.substr(0, n.size() - 1) : n;
    if (c == "**") {
      if (Hidden(name)) continue;
      if (folder)
        IMAGEPACK_RETURN_IF_ERROR(Descend(w, JoinName(dir, name), comps, i, depth + 1));
      else if (last)
        w.out.push_back(JoinName(dir, name));
      continue;
    }
    if (::fnmatch(c.c_str(), name.c_str(), FNM_PERIOD) != 0) continue;
    if (last) {
      if (!folder) w.out.push_back(JoinName(dir, name));
    } else if (folder) {
      IMAGEPACK_RETURN_IF_ERROR(Descend(w, JoinName(dir, name), comps, i + 1, depth + 1));
    }
    if (w.out.size() > limits::kBraceExpansions)
      return Status::InvalidArgument(w.glob + ": more than " + std::to_string(limits::kBraceExpansions) +
                                     " files (budget)");
  }
  return Status::Ok();
}

// The files one glob (no braces left) names, sorted.
Result<std::vector<std::string>> ExpandGlob(Storage& storage, const std::string& glob) {
  if (!storage.listable())
    return Status::NotSupported(glob + ": a glob needs a storage that lists its files (a local folder, s3://); "
                                       "name the files with a brace pattern instead");
  // The root: the components before the first one with a glob character
  // (one in a URL's host or bucket leaves a root the storage refuses).
  const size_t first = glob.find_first_of("*?[");
  const size_t cut = glob.rfind('/', first);
  std::string root;
  std::string rest = glob;
  if (cut != std::string::npos) {
    root = glob.substr(0, cut == 0 ? 1 : cut);
    rest = glob.substr(cut + 1);
  }
  std::vector<std::string> comps;
  for (size_t at = 0; at <= rest.size();) {
    const size_t slash = rest.find('/', at);
    const std::string c = rest.substr(at, slash == std::string::npos ? std::string::npos : slash - at);
    if (!c.empty()) comps.push_back(c);
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  if (comps.empty()) return Status::InvalidArgument(glob + ": a glob that names no file");
  Walk w{storage, glob, 0, {}};
  IMAGEPACK_RETURN_IF_ERROR(Descend(w, root, comps, 0, 0));
  std::sort(w.out.begin(), w.out.end());
  w.out.erase(std::unique(w.out.begin(), w.out.end()), w.out.end());
  if (w.out.empty()) return Status::NotFound(glob + " matches no file");
  return std::move(w.out);
}

}  // namespace

bool HasGlob(const std::string& text) {
  int braces = 0;
  for (char c : text) {
    if (c == '{') ++braces;
    else if (c == '}' && braces > 0) --braces;
    else if (braces == 0 && IsGlobChar(c)) return true;
  }
  return false;
}

Result<std::vector<std::string>> ExpandFilePattern(Storage& storage, const std::string& text) {
  std::vector<std::string> names = {text};
  if (HasShardPattern(text)) {
    auto expanded = ExpandShardPattern(text);
    if (!expanded.ok()) return expanded.status();
    names = std::move(expanded.value());
  }
  std::vector<std::string> out;
  for (const std::string& n : names) {
    // A local name that exists as written is that file, glob characters and all.
    std::error_code ec;
    if (!HasGlob(n) || (storage.local() && std::filesystem::exists(n, ec))) {
      out.push_back(n);
    } else {
      auto files = ExpandGlob(storage, n);
      if (!files.ok()) return files.status();
      out.insert(out.end(), files->begin(), files->end());
    }
    if (out.size() > limits::kBraceExpansions)
      return Status::InvalidArgument(text + ": more than " + std::to_string(limits::kBraceExpansions) +
                                     " files (budget)");
  }
  return out;
}

}  // namespace internal

bool IsFilePattern(const std::string& text) { return internal::HasShardPattern(text) || internal::HasGlob(text); }

}  // namespace imagepack
