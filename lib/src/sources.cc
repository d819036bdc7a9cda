#include "sources.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "formats/labels.h"
#include "formats/limits.h"
#include "formats/text.h"
#include "imagepack/record.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Calls `fn(line, line_number)` for each non-empty line of `path`, trimmed
// (lines starting with '#' too, unless `comments`). Lines are UTF-8 and at
// most limits::kLineBytes. Stops at the first non-Ok status fn returns.
Status ForEachDataLine(const std::string& path, const char* what,
                       const std::function<Status(const std::string&, int)>& fn, bool comments = true) {
  auto bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status().WithContext(std::string("cannot read ") + what + " file");
  const std::string text(bytes->begin(), bytes->end());
  int n = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    ++n;
    std::string line = text.substr(at, end - at);
    at = end + 1;
    if (line.size() > limits::kLineBytes)
      return Status::InvalidArgument(path + ":" + std::to_string(n) + ": a line of " + std::to_string(line.size()) +
                                     " bytes (budget " + std::to_string(limits::kLineBytes) + ")");
    if (!IsUtf8(line)) return Status::InvalidArgument(path + ":" + std::to_string(n) + ": not UTF-8: " + Shown(line));
    line = Trim(line);
    if (line.empty() || (comments && line[0] == '#')) continue;
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
  std::vector<RawLabel> raw;
  std::vector<std::string> where;
  for (auto& [file, label] : pairs) {
    raw.push_back(LabelFromText(label));
    where.push_back(path + ": " + file);
  }
  std::vector<int32_t> labels;
  std::vector<std::string> why;
  const std::vector<std::string> fixed = classes;
  IMAGEPACK_RETURN_IF_ERROR(ResolveLabels(raw, where, fixed, &classes, &labels, &why));
  std::map<std::string, int32_t> label_of;
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (!why[i].empty()) return Status::InvalidArgument(where[i] + ": " + why[i]);
    label_of[pairs[i].first] = labels[i];
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
    s.items.push_back({rel, it->second, -1, {}});
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
      s.items.push_back({rel, it->second, -1, {}});
      continue;
    }
    s.unlabelled.push_back(rel);
    s.ignored.push_back(rel + (c.empty() ? " (not inside a class folder)" : " (folder not in the class list)"));
  }
}

std::string WithoutExtension(const std::string& rel) {
  const auto slash = rel.rfind('/');
  const auto dot = rel.rfind('.');
  return dot == std::string::npos || (slash != std::string::npos && dot < slash) ? rel : rel.substr(0, dot);
}

// Mask classes: a classes file, or a count N (names "0".."N-1").
Result<std::vector<std::string>> MaskClasses(const std::string& text) {
  if (text.empty()) return std::vector<std::string>{};
  if (IsIndex(text)) {
    const int n = std::stoi(text);
    if (n < 1 || n > 256) return Status::InvalidArgument("--mask-classes " + text + ": a count must be in 1..256");
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) out.push_back(std::to_string(i));
    return out;
  }
  auto c = ReadClassList(text);
  if (c.ok() && c->size() > 256) return Status::InvalidArgument(text + ": a uint8 mask holds at most 256 classes");
  return c;
}

}  // namespace

// Declares a field (unique name) and returns its slot.
Result<int> Declare(DatasetSource& s, const std::string& name, FieldKind kind, const SourceOptions& opts) {
  for (const auto& f : s.fields)
    if (f.name == name) return Status::InvalidArgument("field '" + name + "' given twice");
  if (name == "image" || name == "label")
    return Status::InvalidArgument("'" + name + "' names the record's own image or class, not a field");
  if (s.fields.size() >= 255) return Status::InvalidArgument("more than 255 fields");
  FieldSpec f;
  f.name = name;
  f.kind = kind;
  if (kind == FieldKind::kMask) {
    auto c = MaskClasses(opts.mask_classes);
    if (!c.ok()) return c.status();
    f.classes = std::move(c.value());
    f.ignore = opts.mask_ignore;
  } else if (kind == FieldKind::kBoxes && !opts.box_classes.empty()) {
    auto c = ReadClassList(opts.box_classes);
    if (!c.ok()) return c.status();
    f.classes = std::move(c.value());
  }
  s.fields.push_back(std::move(f));
  return static_cast<int>(s.fields.size() - 1);
}

namespace {

// --field NAME=DIR: each item's partner is the file of DIR with the item's
// relative path and any extension. Items without one are skipped (errors).
Status AddPairedTrees(const SourceOptions& opts, DatasetSource& s) {
  for (const auto& tree : opts.paired) {
    auto slot = Declare(s, tree.name, tree.kind, opts);
    if (!slot.ok()) return slot.status();
    auto listing = ListTree(tree.dir);
    if (!listing.ok()) return listing.status();
    std::map<std::string, std::string> by_stem;
    for (const auto& rel : listing->images) {
      auto [it, fresh] = by_stem.emplace(WithoutExtension(rel), rel);
      if (!fresh)
        return Status::InvalidArgument(tree.dir + ": " + it->second + " and " + rel + " both pair with " +
                                       it->first + ".*");
    }
    std::vector<SourceItem> kept;
    for (auto& item : s.items) {
      auto it = by_stem.find(WithoutExtension(item.rel));
      if (it == by_stem.end()) {
        s.errors.push_back({item.rel, "no " + tree.name + " file " + WithoutExtension(item.rel) + ".* in " + tree.dir});
        continue;
      }
      SourceField f;
      f.slot = *slot;
      f.file = (fs::path(tree.dir) / it->second).string();
      item.fields.push_back(std::move(f));
      kept.push_back(std::move(item));
    }
    s.items = std::move(kept);
  }
  return Status::Ok();
}

}  // namespace

Status FixedClasses(const SourceOptions& opts, std::vector<std::string>* classes) {
  if (opts.classes) {
    *classes = *opts.classes;
  } else if (!opts.classes_file.empty()) {
    auto c = ReadClassList(opts.classes_file);
    if (!c.ok()) return c.status();
    *classes = std::move(c.value());
  }
  return Status::Ok();
}

std::string ClassFolderOf(const std::string& rel) {
  const auto slash = rel.find('/');
  return slash == std::string::npos ? std::string() : rel.substr(0, slash);
}

Result<std::vector<std::string>> ReadClassList(const std::string& path) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  IMAGEPACK_RETURN_IF_ERROR(ForEachDataLine(path, "classes", [&](const std::string& line, int n) {
    // The whole line is the name ("Ankle boot", "#hashtag"), except in
    // ImageNet's synset mapping ("n01440764 tench, Tinca tinca"), whose
    // first word, a WordNet id, names the class folder.
    std::string name = line;
    const size_t space = line.find_first_of(" \t");
    if (space == 9 && line[0] == 'n' && std::all_of(line.begin() + 1, line.begin() + 9, ::isdigit))
      name = line.substr(0, 9);
    if (out.size() >= limits::kClasses)
      return Status::InvalidArgument(path + ":" + std::to_string(n) + ": more than " + std::to_string(limits::kClasses) +
                                     " classes");
    if (!seen.insert(name).second)
      return Status::InvalidArgument(path + ":" + std::to_string(n) + ": class '" + name + "' listed twice");
    out.push_back(name);
    return Status::Ok();
  }, /*comments=*/false));
  if (out.empty()) return Status::InvalidArgument(path + " lists no classes");
  return out;
}

Result<DatasetSource> OpenTreeSource(const std::string& root, const SourceOptions& opts) {
  auto listing = ListTree(root);
  if (!listing.ok()) return listing.status();
  DatasetSource s;
  s.root = root;
  s.ignored = std::move(listing->ignored);
  s.problems = std::move(listing->problems);
  // Names are bytes until proven UTF-8: refused here, by name, rather than
  // where the metadata's JSON meets them at the end of a long pack.
  std::vector<std::string> named;
  for (auto& rel : listing->images) {
    if (Status ok = CheckName(rel, "file name"); !ok.ok()) s.errors.push_back({Shown(rel), ok.message()});
    else named.push_back(std::move(rel));
  }
  listing->images = std::move(named);
  if (opts.no_class) {
    for (auto& rel : listing->images) s.items.push_back({rel, -1, -1, {}});
  } else {
    IMAGEPACK_RETURN_IF_ERROR(FixedClasses(opts, &s.classes));
    if (!opts.labels_file.empty()) {
      IMAGEPACK_RETURN_IF_ERROR(LabelFromFile(listing->images, opts.labels_file, s));
    } else {
      LabelFromFolders(listing->images, opts.classes != nullptr, s);
      if (s.classes.empty() && !opts.classes)
        return Status::InvalidArgument(root + " has no class folders (and no --labels file; --no-class packs "
                                              "images without a class)");
    }
  }
  IMAGEPACK_RETURN_IF_ERROR(AddPairedTrees(opts, s));
  return s;
}

Result<DatasetSource> OpenDatabaseSource(const std::string& path) {
  auto db = OpenDatabase(path);
  if (!db.ok()) return db.status();
  DatasetSource s;
  s.db = std::move(db.value());
  s.classes = s.db->meta().classes;
  if (!s.db->meta().fields.empty())
    return Status::NotSupported(path + " holds fields beyond image and class; converting such a database is not "
                                       "supported (pack its sources again)");
  auto cur = s.db->NewCursor();
  for (int64_t i = 0; i < s.db->size(); ++i) {
    auto r = cur->Read(i, /*verify_checksum=*/false);  // checked when the record is read again to pack
    if (!r.ok()) {
      s.errors.push_back({RecordKey(i), r.status().message()});
      continue;
    }
    s.items.push_back({std::string(r->path), r->fields.label, i, {}});
  }
  return s;
}

Result<DatasetSource> OpenSource(const std::string& path, const SourceOptions& opts) {
  if (!opts.manifest.empty()) return OpenManifestSource(opts.manifest, opts);
  if (!opts.coco.empty()) return OpenCocoSource(opts.coco, path, opts);
  std::error_code ec;
  const bool shards = LooksLikeWebDataset(path);
  const bool pickled = !shards && LooksLikePickledLmdb(path);  // opens an LMDB environment: once
  if (shards || pickled || fs::is_regular_file(path, ec)) {
    if (!opts.paired.empty()) return Status::InvalidArgument("--field pairs trees; " + path + " is not a tree");
    if (shards) return OpenWebDatasetSource(path, opts);
    if (pickled) return OpenPickledLmdbSource(path, opts);
    return OpenDatabaseSource(path);
  }
  return OpenTreeSource(path, opts);
}

}  // namespace imagepack::internal

namespace imagepack::internal {
namespace {

using nlohmann::json;

// Splits one CSV line (RFC 4180 quoting, no newlines inside fields).
std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') out.back() += '"', ++i;
      else if (c == '"') quoted = false;
      else out.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  return out;
}

// A CSV cell as the JSON value it spells (numbers, lists, objects), else a
// string.
json CellValue(const std::string& cell) {
  const std::string t = Trim(cell);
  if (t.empty()) return json();
  json v = json::parse(t, nullptr, /*allow_exceptions=*/false);
  if (!v.is_discarded() && (v.is_number() || v.is_array() || v.is_object())) return v;
  return t;
}

}  // namespace

// The kind a manifest key's first value says its field is.
FieldKind KindOfValue(const std::string& key, const json& v, bool paths) {
  if (key == "boxes") return FieldKind::kBoxes;
  if (v.is_string()) {
    if (!paths) return FieldKind::kText;
    const std::string s = v.get<std::string>();
    if (HasImageExtension(s)) return key.rfind("mask", 0) == 0 ? FieldKind::kMask : FieldKind::kImage;
    return FieldKind::kText;
  }
  if (v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_number(); }))
    return std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_number_integer(); }) ? FieldKind::kInts
                                                                                                : FieldKind::kFloats;
  return FieldKind::kText;
}

// One manifest value as the field of `spec`'s kind; an error says why not.
Status FillField(const FieldSpec& spec, const json& v, const fs::path& base, SourceField* f) {
  const std::string& name = spec.name;
  switch (spec.kind) {
    case FieldKind::kImage:
    case FieldKind::kMask:
      if (!v.is_string() || v.get<std::string>().empty()) return Status::InvalidArgument(name + " is not a path");
      f->file = (base / v.get<std::string>()).string();
      return Status::Ok();
    case FieldKind::kBoxes:
      if (!v.is_array()) return Status::InvalidArgument("boxes is not a list of [x0, y0, x1, y1, class]");
      for (const auto& b : v) {
        if (!b.is_array() || b.size() != 5 || !std::all_of(b.begin(), b.end(), [](const json& e) { return e.is_number(); }))
          return Status::InvalidArgument("box " + b.dump() + " is not [x0, y0, x1, y1, class]");
        if (!b[4].is_number_integer() || b[4].get<int64_t>() < 0 || b[4].get<int64_t>() > INT32_MAX)
          return Status::InvalidArgument("box " + b.dump() + " has a class that is not an index");
        f->boxes.push_back({b[0].get<float>(), b[1].get<float>(), b[2].get<float>(), b[3].get<float>(),
                            static_cast<int32_t>(b[4].get<int64_t>())});
      }
      return Status::Ok();
    case FieldKind::kInts:
      if (!v.is_array()) return Status::InvalidArgument(name + " is not a list of integers");
      for (const auto& e : v) {
        if (!e.is_number_integer() || e.get<int64_t>() < INT32_MIN || e.get<int64_t>() > INT32_MAX)
          return Status::InvalidArgument(name + " holds " + e.dump() + ", not a 32-bit integer");
        f->ints.push_back(static_cast<int32_t>(e.get<int64_t>()));
      }
      return Status::Ok();
    case FieldKind::kFloats:
      if (!v.is_array()) return Status::InvalidArgument(name + " is not a list of numbers");
      for (const auto& e : v) {
        if (!e.is_number()) return Status::InvalidArgument(name + " holds " + e.dump() + ", not a number");
        f->floats.push_back(e.get<float>());
      }
      return Status::Ok();
    case FieldKind::kText: f->text = v.is_string() ? v.get<std::string>() : v.dump(); return Status::Ok();
  }
  return Status::Ok();
}

namespace {

// Rows (line number, object) of a JSON Lines or CSV manifest. Lines are
// at most limits::kLineBytes, rows' JSON at most limits::kJsonDepth deep,
// CSV cells UTF-8.
Result<std::vector<std::pair<int, json>>> ReadManifestRows(const std::string& path) {
  auto bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status().WithContext("manifest");
  std::vector<std::pair<int, json>> rows;
  const std::string text(bytes->begin(), bytes->end());
  bytes->clear();
  const std::string ext = LowerAscii(fs::path(path).extension().string());
  const bool csv = ext == ".csv";
  std::vector<std::string> header;
  int n = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    ++n;
    const std::string where = path + ":" + std::to_string(n);
    if (end - at > limits::kLineBytes)
      return Status::InvalidArgument(where + ": a line of " + std::to_string(end - at) + " bytes (budget " +
                                     std::to_string(limits::kLineBytes) + ")");
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    if (Trim(line).empty()) continue;
    if (csv) {
      if (!IsUtf8(line)) return Status::InvalidArgument(where + ": not UTF-8");
      auto cells = SplitCsv(line);
      if (header.empty()) {
        for (auto& c : cells) header.push_back(Trim(c));
        continue;
      }
      if (cells.size() != header.size())
        return Status::InvalidArgument(where + ": " + std::to_string(cells.size()) + " cells, the header has " +
                                       std::to_string(header.size()));
      json row = json::object();
      for (size_t i = 0; i < cells.size(); ++i) {
        const std::string t = Trim(cells[i]);
        if (t.empty()) continue;
        if (JsonDepth(t) > limits::kJsonDepth)
          return Status::InvalidArgument(where + ": a cell nested deeper than " + std::to_string(limits::kJsonDepth));
        if (auto v = CellValue(t); !v.is_null()) row[header[i]] = v;
      }
      rows.emplace_back(n, std::move(row));
      continue;
    }
    auto row = ParseJsonBounded(line, where);
    if (!row.ok()) return row.status();
    if (!row->is_object()) return Status::InvalidArgument(where + ": not a JSON object");
    rows.emplace_back(n, std::move(row.value()));
  }
  return rows;
}

// A manifest's path: relative paths stay inside the manifest's folder
// unless the user allows otherwise (a shared manifest must not pull in a
// reader's own files).
Status CheckInside(const std::string& p, const SourceOptions& opts) {
  if (opts.allow_outside) return Status::Ok();
  const fs::path path(p);
  bool up = path.is_absolute();
  int depth = 0;
  for (const auto& part : path.relative_path()) {
    if (part == "..") up = up || --depth < 0;
    else if (part != "." && !part.empty()) ++depth;
  }
  if (up)
    return Status::InvalidArgument("path " + p + " leaves the manifest's folder (--allow-outside-paths allows it)");
  return Status::Ok();
}

}  // namespace

Result<PairedTree> ParsePairedTree(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    return Status::InvalidArgument("--field " + text + ": expected NAME=DIR or NAME:KIND=DIR");
  PairedTree t;
  t.name = text.substr(0, eq);
  t.dir = text.substr(eq + 1);
  t.kind = t.name.rfind("mask", 0) == 0 ? FieldKind::kMask : FieldKind::kImage;
  if (const auto colon = t.name.find(':'); colon != std::string::npos) {
    auto kind = ParseFieldKind(t.name.substr(colon + 1));
    if (!kind.ok()) return kind.status();
    if (!InfoOf(*kind).spatial || *kind == FieldKind::kBoxes)
      return Status::InvalidArgument("--field " + text + ": a paired tree holds images or masks");
    t.kind = *kind;
    t.name = t.name.substr(0, colon);
  }
  return t;
}

Result<DatasetSource> OpenManifestSource(const std::string& manifest, const SourceOptions& opts) {
  auto rows = ReadManifestRows(manifest);
  if (!rows.ok()) return rows.status();
  DatasetSource s;
  const fs::path base = fs::path(manifest).parent_path();
  s.root = base.empty() ? "." : base.string();
  // Class labels: one rule for every source (formats/labels.h).
  std::vector<RawLabel> raw(rows->size());
  std::vector<std::string> raw_where(rows->size());
  for (size_t r = 0; r < rows->size(); ++r) {
    auto& [n, row] = (*rows)[r];
    raw_where[r] = manifest + ":" + std::to_string(n);
    if (!row.contains("label")) continue;
    const json& l = row["label"];
    if (l.is_number_integer()) raw[r] = LabelFromIndex(l.get<int64_t>());
    else if (l.is_string()) raw[r] = LabelFromText(l.get<std::string>()), raw[r].present = true;
    else raw[r] = RawLabel{true, true, -1, l.dump()};
  }
  std::vector<int32_t> labels;
  std::vector<std::string> why;
  if (!opts.no_class) {
    std::vector<std::string> fixed;
    IMAGEPACK_RETURN_IF_ERROR(FixedClasses(opts, &fixed));
    IMAGEPACK_RETURN_IF_ERROR(ResolveLabels(raw, raw_where, fixed, &s.classes, &labels, &why));
  }
  // Fields in the order their keys first appear.
  std::map<std::string, int> slot_of;
  for (auto& [n, row] : rows.value())
    for (auto& [key, v] : row.items())
      if (key != "image" && key != "label" && !slot_of.count(key)) {
        auto slot = Declare(s, key, KindOfValue(key, v), opts);
        if (!slot.ok()) return slot.status();
        slot_of[key] = *slot;
      }
  std::set<std::string> seen_images;
  for (size_t r = 0; r < rows->size(); ++r) {
    auto& [n, row] = (*rows)[r];
    const std::string where = manifest + ":" + std::to_string(n);
    auto skip = [&](const std::string& why) { s.errors.push_back({where, why}); };
    if (!row.contains("image") || !row["image"].is_string() || row["image"].get<std::string>().empty()) {
      skip("no \"image\" path");
      continue;
    }
    SourceItem item;
    item.rel = row["image"].get<std::string>();
    if (Status inside = CheckInside(item.rel, opts); !inside.ok()) {
      skip(inside.message());
      continue;
    }
    if (!seen_images.insert(item.rel).second) {
      skip(item.rel + " is listed twice");
      continue;
    }
    if (!opts.no_class && raw[r].present) {
      if (!why[r].empty()) {
        skip(why[r]);
        continue;
      }
      item.label = labels[r];
    }
    Status bad;
    for (size_t slot = 0; slot < s.fields.size() && bad.ok(); ++slot) {
      const FieldSpec& spec = s.fields[slot];
      SourceField f;
      f.slot = static_cast<int>(slot);
      if (!row.contains(spec.name)) {
        if (InfoOf(spec.kind).spatial && spec.kind != FieldKind::kBoxes)
          bad = Status::InvalidArgument("no " + spec.name + " for " + item.rel);
      } else {
        bad = FillField(spec, row[spec.name], base, &f);
        if (bad.ok() && !f.file.empty()) bad = CheckInside(row[spec.name].get<std::string>(), opts);
      }
      item.fields.push_back(std::move(f));
    }
    if (!bad.ok()) {
      skip(item.rel + ": " + bad.message());
      continue;
    }
    s.items.push_back(std::move(item));
  }
  std::sort(s.items.begin(), s.items.end(), [](const SourceItem& a, const SourceItem& b) { return a.rel < b.rel; });
  return s;
}

Result<DatasetSource> OpenCocoSource(const std::string& coco, const std::string& images_root,
                                     const SourceOptions& opts) {
  auto bytes = ReadFile(coco);
  if (!bytes.ok()) return bytes.status().WithContext("COCO file");
  auto parsed = ParseJsonBounded(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()), coco);
  bytes->clear();
  if (!parsed.ok()) return parsed.status();
  const json& j = parsed.value();
  if (!j.is_object() || !j.contains("images") || !j["images"].is_array() || !j.contains("categories") ||
      !j["categories"].is_array())
    return Status::InvalidArgument(coco + " is not a COCO instances file (no \"images\" and \"categories\")");
  DatasetSource s;
  s.root = images_root;
  std::vector<std::pair<int64_t, std::string>> cats;
  std::set<int64_t> cat_ids;
  for (const auto& c : j["categories"]) {
    if (!c.is_object() || !c.contains("id") || !c["id"].is_number_integer() || !c.contains("name") ||
        !c["name"].is_string())
      return Status::InvalidArgument(coco + ": a category lacks an integer id or a name: " + c.dump());
    if (!cat_ids.insert(c["id"].get<int64_t>()).second)
      return Status::InvalidArgument(coco + ": category id " + c["id"].dump() + " is listed twice");
    cats.emplace_back(c["id"].get<int64_t>(), c["name"].get<std::string>());
  }
  std::sort(cats.begin(), cats.end());
  std::map<int64_t, int32_t> class_of;
  FieldSpec boxes;
  boxes.name = "boxes";
  boxes.kind = FieldKind::kBoxes;
  for (auto& [id, name] : cats) {
    class_of[id] = static_cast<int32_t>(boxes.classes.size());
    boxes.classes.push_back(name);
  }
  s.fields.push_back(boxes);
  std::map<int64_t, size_t> item_of;  // image id -> item
  std::set<std::string> names;
  std::vector<bool> dropped;
  for (const auto& im : j["images"]) {
    if (!im.is_object() || !im.contains("id") || !im["id"].is_number_integer() || !im.contains("file_name") ||
        !im["file_name"].is_string())
      return Status::InvalidArgument(coco + ": an image lacks an integer id or a file_name: " + im.dump());
    SourceItem item;
    item.rel = im["file_name"].get<std::string>();
    item.fields.resize(1);
    item.fields[0].slot = 0;
    if (!item_of.emplace(im["id"].get<int64_t>(), s.items.size()).second)
      return Status::InvalidArgument(coco + ": image id " + im["id"].dump() + " listed twice");
    std::string why;
    if (Status inside = CheckInside(item.rel, opts); !inside.ok()) why = inside.message();
    else if (!names.insert(item.rel).second) why = "file_name listed twice (image id " + im["id"].dump() + ")";
    if (!why.empty()) s.errors.push_back({coco + ": " + item.rel, why});
    dropped.push_back(!why.empty());
    s.items.push_back(std::move(item));
  }
  int64_t crowd = 0;
  if (j.contains("annotations") && j["annotations"].is_array()) {
    for (const auto& a : j["annotations"]) {
      const std::string id = a.is_object() && a.contains("id") ? a["id"].dump() : "?";
      auto report = [&](const std::string& why) { s.errors.push_back({coco + ": annotation " + id, why}); };
      if (!a.is_object() || !a.contains("image_id") || !a.contains("category_id")) {
        report("has no image_id or category_id");
        continue;
      }
      // iscrowd: 0/1 as COCO writes it; null, false or absent is 0.
      const json crowd_v = a.value("iscrowd", json(0));
      if (!(crowd_v.is_null() || crowd_v.is_boolean() || crowd_v.is_number_integer())) {
        report("iscrowd is " + crowd_v.dump() + ", not 0 or 1");
        continue;
      }
      if ((crowd_v.is_boolean() && crowd_v.get<bool>()) || (crowd_v.is_number_integer() && crowd_v.get<int64_t>() != 0)) {
        ++crowd;  // crowd regions are not instances (counted in the summary)
        continue;
      }
      auto it = item_of.find(a["image_id"].is_number_integer() ? a["image_id"].get<int64_t>() : INT64_MIN);
      auto cls = class_of.find(a["category_id"].is_number_integer() ? a["category_id"].get<int64_t>() : INT64_MIN);
      if (it == item_of.end() || cls == class_of.end()) {
        report("names no known image or category");
        continue;
      }
      if (!a.contains("bbox")) {
        report("has no bbox (keypoint- or segmentation-only annotations carry no box here)");
        continue;
      }
      const json& b = a["bbox"];
      if (!b.is_array() || b.size() != 4 || !std::all_of(b.begin(), b.end(), [](const json& e) { return e.is_number(); })) {
        report("bbox " + b.dump() + " is not [x, y, w, h]");
        continue;
      }
      const float x = b[0].get<float>(), y = b[1].get<float>();
      s.items[it->second].fields[0].boxes.push_back({x, y, x + b[2].get<float>(), y + b[3].get<float>(), cls->second});
    }
  }
  if (crowd > 0)
    s.ignored.push_back(std::to_string(crowd) + " crowd annotations (iscrowd 1) of " + coco + " not packed as boxes");
  std::vector<SourceItem> kept;
  for (size_t i = 0; i < s.items.size(); ++i)
    if (!dropped[i]) kept.push_back(std::move(s.items[i]));
  s.items = std::move(kept);
  std::sort(s.items.begin(), s.items.end(), [](const SourceItem& a, const SourceItem& b) { return a.rel < b.rel; });
  return s;
}

}  // namespace imagepack::internal
