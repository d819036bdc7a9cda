#include "sources.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "imagepack/record.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Calls `fn(line, line_number)` for each non-empty line of `path` that does
// not start with '#', trimmed. Stops at the first non-Ok status fn returns.
Status ForEachDataLine(const std::string& path, const char* what,
                       const std::function<Status(const std::string&, int)>& fn) {
  std::ifstream f(path);
  if (!f) return Status::NotFound(std::string("cannot read ") + what + " file " + path);
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    ++n;
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    IMAGEPACK_RETURN_IF_ERROR(fn(line, n));
  }
  return Status::Ok();
}

bool IsIndex(const std::string& s) {
  return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), ::isdigit);
}

std::map<std::string, int32_t> IndexOf(const std::vector<std::string>& classes) {
  std::map<std::string, int32_t> index;
  for (size_t i = 0; i < classes.size(); ++i) index[classes[i]] = static_cast<int32_t>(i);
  return index;
}

// file name (as written in the labels file) -> label. Labels are class
// names (mapped through `classes`, or sorted unique names when it is empty)
// or indices; fills `classes` when empty.
Result<std::map<std::string, int32_t>> ReadLabelsFile(const std::string& path, std::vector<std::string>& classes) {
  std::vector<std::pair<std::string, std::string>> pairs;
  IMAGEPACK_RETURN_IF_ERROR(ForEachDataLine(path, "labels", [&](const std::string& line, int n) {
    std::istringstream is(line);
    std::string file, label;
    if (!(is >> file >> label))
      return Status::InvalidArgument(path + ":" + std::to_string(n) + ": expected 'FILENAME LABEL'");
    pairs.emplace_back(file, label);
    return Status::Ok();
  }));
  const bool all_index = std::all_of(pairs.begin(), pairs.end(), [](auto& p) { return IsIndex(p.second); });
  if (classes.empty()) {
    std::set<std::string> names;
    int max_index = -1;
    for (auto& p : pairs) {
      if (all_index) max_index = std::max(max_index, std::stoi(p.second));
      else names.insert(p.second);
    }
    if (all_index)
      for (int i = 0; i <= max_index; ++i) classes.push_back(std::to_string(i));
    else
      classes.assign(names.begin(), names.end());
  }
  const auto index_of = IndexOf(classes);
  std::map<std::string, int32_t> label_of;
  for (auto& [file, label] : pairs) {
    int32_t l;
    if (all_index) {
      l = std::stoi(label);
      if (l >= static_cast<int32_t>(classes.size()))
        return Status::InvalidArgument(path + ": label " + label + " of " + file + " out of range [0," +
                                       std::to_string(classes.size()) + ")");
    } else {
      auto it = index_of.find(label);
      if (it == index_of.end())
        return Status::InvalidArgument(path + ": class '" + label + "' of " + file + " is not in the class list");
      l = it->second;
    }
    label_of[file] = l;
  }
  return label_of;
}

// A flat folder (or any tree) labelled by a labels file: an image is found
// by its path below the root, else by its file name.
Status LabelFromFile(const std::vector<std::string>& images, const std::string& labels_file, DatasetSource& s) {
  auto label_of = ReadLabelsFile(labels_file, s.classes);
  if (!label_of.ok()) return label_of.status();
  for (const auto& rel : images) {
    auto it = label_of->find(rel);
    if (it == label_of->end()) it = label_of->find(fs::path(rel).filename().string());
    if (it == label_of->end()) {
      s.unlabelled.push_back(rel);
      s.errors.push_back({rel, "no label in " + labels_file});
      continue;
    }
    s.items.push_back({rel, it->second, -1});
  }
  return Status::Ok();
}

// ImageFolder: an image's class is its first folder.
void LabelFromFolders(const std::vector<std::string>& images, bool fixed_classes, DatasetSource& s) {
  if (s.classes.empty() && !fixed_classes) {
    std::set<std::string> names;
    for (const auto& rel : images)
      if (auto c = ClassFolderOf(rel); !c.empty()) names.insert(c);
    s.classes.assign(names.begin(), names.end());
  }
  const auto index_of = IndexOf(s.classes);
  for (const auto& rel : images) {
    const std::string c = ClassFolderOf(rel);
    auto it = index_of.find(c);
    if (it != index_of.end()) {
      s.items.push_back({rel, it->second, -1});
      continue;
    }
    s.unlabelled.push_back(rel);
    s.ignored.push_back(rel + (c.empty() ? " (not inside a class folder)" : " (folder not in the class list)"));
  }
}

}  // namespace

std::string ClassFolderOf(const std::string& rel) {
  const auto slash = rel.find('/');
  return slash == std::string::npos ? std::string() : rel.substr(0, slash);
}

Result<std::vector<std::string>> ReadClassList(const std::string& path) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  IMAGEPACK_RETURN_IF_ERROR(ForEachDataLine(path, "classes", [&](const std::string& line, int n) {
    std::string name = line.substr(0, line.find_first_of(" \t"));
    if (!seen.insert(name).second)
      return Status::InvalidArgument(path + ":" + std::to_string(n) + ": class '" + name + "' listed twice");
    out.push_back(name);
    return Status::Ok();
  }));
  if (out.empty()) return Status::InvalidArgument(path + " lists no classes");
  return out;
}

Result<DatasetSource> OpenTreeSource(const std::string& root, const SourceLabels& labels) {
  auto listing = ListTree(root);
  if (!listing.ok()) return listing.status();
  DatasetSource s;
  s.ignored = std::move(listing->ignored);
  s.problems = std::move(listing->problems);
  if (labels.classes) {
    s.classes = *labels.classes;
  } else if (!labels.classes_file.empty()) {
    auto c = ReadClassList(labels.classes_file);
    if (!c.ok()) return c.status();
    s.classes = std::move(c.value());
  }
  if (!labels.labels_file.empty()) {
    IMAGEPACK_RETURN_IF_ERROR(LabelFromFile(listing->images, labels.labels_file, s));
    return s;
  }
  LabelFromFolders(listing->images, labels.classes != nullptr, s);
  if (s.classes.empty() && !labels.classes)
    return Status::InvalidArgument(root + " has no class folders (and no --labels file)");
  return s;
}

Result<DatasetSource> OpenDatabaseSource(const std::string& path) {
  auto db = OpenDatabase(path);
  if (!db.ok()) return db.status();
  DatasetSource s;
  s.db = std::move(db.value());
  s.classes = s.db->meta().classes;
  auto cur = s.db->NewCursor();
  for (int64_t i = 0; i < s.db->size(); ++i) {
    auto r = cur->Read(i, /*verify_checksum=*/false);  // checked when the record is read again to pack
    if (!r.ok()) {
      s.errors.push_back({RecordKey(i), r.status().message()});
      continue;
    }
    s.items.push_back({std::string(r->path), r->fields.label, i});
  }
  return s;
}

Result<DatasetSource> OpenSource(const std::string& path, const SourceLabels& labels) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return OpenDatabaseSource(path);
  return OpenTreeSource(path, labels);
}

}  // namespace imagepack::internal
