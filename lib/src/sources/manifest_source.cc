// JSON Lines and CSV manifests: one sample per row (sources.h,
// OpenManifestSource), and the value rules a WebDataset .json shares.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include <nlohmann/json.hpp>

#include "formats/labels.h"
#include "base/limits.h"
#include "formats/manifest.h"
#include "formats/text.h"
#include "imagepack/storage.h"
#include "sources/sources.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

using nlohmann::json;

}  // namespace

// The kind of a manifest key's field by rule: its name, then its first
// value's JSON type; never what a string looks like.
FieldKind KindOfValue(const std::string& key, const json& v, bool paths) {
  if (key == "boxes") return FieldKind::kBoxes;
  if (v.is_string()) {
    const KindInfo* file = paths ? FileKindOfName(key) : nullptr;
    return file ? file->kind : FieldKind::kText;
  }
  if (v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_number(); }))
    return std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_number_integer(); }) ? FieldKind::kInts
                                                                                                : FieldKind::kFloats;
  return FieldKind::kText;
}

// One manifest value as the field of `spec`'s kind; an error says why not.
Status FillField(const FieldSpec& spec, const json& v, const fs::path& base, SourceField* f) {
  const std::string& name = spec.name;
  const KindInfo& info = InfoOf(spec.kind);
  switch (info.layout) {
    case FieldLayout::kPicture:
    case FieldLayout::kMap:
      if (!v.is_string() || v.get<std::string>().empty()) return Status::InvalidArgument(name + " is not a path");
      f->file = (base / v.get<std::string>()).string();
      return Status::Ok();
    case FieldLayout::kBoxes:
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
    case FieldLayout::kList:
      if (!v.is_array())
        return Status::InvalidArgument(name + " is not a list of " + (info.floats ? "numbers" : "integers"));
      for (const auto& e : v) {
        if (info.floats) {
          if (!e.is_number()) return Status::InvalidArgument(name + " holds " + e.dump() + ", not a number");
          f->floats.push_back(e.get<float>());
          continue;
        }
        if (!e.is_number_integer() || e.get<int64_t>() < INT32_MIN || e.get<int64_t>() > INT32_MAX)
          return Status::InvalidArgument(name + " holds " + e.dump() + ", not a 32-bit integer");
        f->ints.push_back(static_cast<int32_t>(e.get<int64_t>()));
      }
      return Status::Ok();
    case FieldLayout::kText: f->text = v.is_string() ? v.get<std::string>() : v.dump(); return Status::Ok();
  }
  return Status::Ok();
}

namespace {

// The manifest's rows (formats/manifest.h), read through its storage.
Result<std::vector<ManifestRow>> ReadManifestRows(const std::string& path) {
  auto storage = OpenStorage(path);
  if (!storage.ok()) return storage.status().WithContext("manifest");
  auto bytes = ReadWhole(*storage.value(), path, limits::kWholeFile);
  if (!bytes.ok()) return bytes.status().WithContext("manifest");
  const std::string_view text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  return ParseManifest(text, LowerAscii(fs::path(path).extension().string()) == ".csv", path);
}

// Each row's class label as written (raw) and its manifest line (raw_where).
void RawLabelsOf(const std::vector<ManifestRow>& rows, const std::string& manifest, std::vector<RawLabel>* raw,
                 std::vector<std::string>* raw_where) {
  raw->assign(rows.size(), RawLabel());
  raw_where->assign(rows.size(), std::string());
  for (size_t r = 0; r < rows.size(); ++r) {
    auto& [n, row] = rows[r];
    (*raw_where)[r] = manifest + ":" + std::to_string(n);
    if (!row.contains("label")) continue;
    const json& l = row["label"];
    if (l.is_number_integer()) (*raw)[r] = LabelFromIndex(l.get<int64_t>());
    else if (l.is_string()) (*raw)[r] = LabelFromText(l.get<std::string>()), (*raw)[r].present = true;
    else (*raw)[r] = RawLabel{true, true, -1, l.dump()};
  }
}

// Declares a field for each key besides image and label: its kind by --field NAME:KIND, else by rule.
Status DeclareManifestFields(const std::vector<ManifestRow>& rows, const std::string& manifest,
                             const SourceOptions& opts, DatasetSource& s) {
  std::vector<std::pair<std::string, FieldKind>> declared;
  for (const std::string& text : opts.fields) {
    auto d = ParseDeclaredField(text);
    if (!d.ok()) return d.status();
    declared.push_back(d.value());
  }
  auto declared_kind = [&](const std::string& key) -> const FieldKind* {
    for (const auto& [name, kind] : declared)
      if (name == key) return &kind;
    return nullptr;
  };
  // Fields in the order their keys first show their kind, then keys whose
  // every value is null or an empty list (an empty list is ints, nulls
  // text), then declared ones no row has. A first row without tags ([])
  // does not make a tags field text.
  std::map<std::string, int> slot_of;
  std::vector<std::pair<std::string, bool>> undecided;  // key, seen as a list
  auto says_nothing = [](const json& v) { return v.is_null() || (v.is_array() && v.empty()); };
  for (auto& [n, row] : rows)
    for (auto& [key, v] : row.items())
      if (key != "image" && key != "label" && !slot_of.count(key)) {
        const FieldKind* given = declared_kind(key);
        if (!given && key != "boxes" && says_nothing(v)) {
          const std::string& name = key;  // a structured binding cannot be captured in C++17
          auto it = std::find_if(undecided.begin(), undecided.end(), [&](const auto& u) { return u.first == name; });
          if (it == undecided.end()) undecided.emplace_back(key, v.is_array());
          else it->second = it->second || v.is_array();
          continue;
        }
        const FieldKind kind = given ? *given : KindOfValue(key, v);
        auto slot = Declare(s, key, kind, opts);
        if (!slot.ok()) return slot.status().WithContext(manifest + ":" + std::to_string(n));
        slot_of[key] = *slot;
        // A rule, not a guess, but say so where the guess would have differed.
        if (!given && kind == FieldKind::kText && v.is_string() && HasImageExtension(v.get<std::string>()))
          s.problems.push_back(manifest + ":" + std::to_string(n) + ": field '" + key + "' is text, though its \"" +
                               Shown(v.get<std::string>().substr(0, 200)) + "\" names an image file: only keys " +
                               "declared with --field " + key + ":KIND (image, mask, depth), or named image*, mask* " +
                               "or depth*, are opened as files");
      }
  for (const auto& [key, list] : undecided)
    if (!slot_of.count(key)) {
      auto slot = Declare(s, key, list ? FieldKind::kInts : FieldKind::kText, opts);
      if (!slot.ok()) return slot.status().WithContext(manifest);
      slot_of[key] = *slot;
    }
  for (const auto& [name, kind] : declared)
    if (!slot_of.count(name)) {
      auto slot = Declare(s, name, kind, opts);
      if (!slot.ok()) return slot.status().WithContext("--field " + name);
      slot_of[name] = *slot;
    }
  return Status::Ok();
}

// Fills item->fields from the row in slot order; the first value missing or misfitting says why.
Status FillRowFields(const DatasetSource& s, const json& row, const fs::path& base, const SourceOptions& opts,
                     SourceItem* item) {
  Status bad;
  for (size_t slot = 0; slot < s.fields.size() && bad.ok(); ++slot) {
    const FieldSpec& spec = s.fields[slot];
    SourceField f;
    f.slot = static_cast<int>(slot);
    if (!row.contains(spec.name) || row[spec.name].is_null()) {  // null: as absent
      if (InfoOf(spec.kind).from_file())
        bad = Status::InvalidArgument("no " + spec.name + " for " + item->rel);
    } else {
      bad = FillField(spec, row[spec.name], base, &f);
      if (bad.ok() && !f.file.empty()) bad = CheckInsideFolder(row[spec.name].get<std::string>(), opts);
    }
    item->fields.push_back(std::move(f));
  }
  return bad;
}

}  // namespace

Result<DatasetSource> OpenManifestSource(const std::string& manifest, const SourceOptions& opts) {
  auto rows = ReadManifestRows(manifest);
  if (!rows.ok()) return rows.status();
  DatasetSource s;
  const fs::path base = fs::path(manifest).parent_path();
  s.root = base.empty() ? "." : base.string();
  // Class labels: one rule for every source (formats/labels.h).
  std::vector<RawLabel> raw;
  std::vector<std::string> raw_where;
  RawLabelsOf(*rows, manifest, &raw, &raw_where);
  std::vector<int32_t> labels;
  std::vector<std::string> why;
  if (!opts.no_class) {
    std::vector<std::string> fixed;
    IMAGEPACK_RETURN_IF_ERROR(FixedClasses(opts, &fixed));
    IMAGEPACK_RETURN_IF_ERROR(ResolveLabels(raw, raw_where, fixed, &s.classes, &labels, &why));
  }
  IMAGEPACK_RETURN_IF_ERROR(DeclareManifestFields(*rows, manifest, opts, s));
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
    if (Status inside = CheckInsideFolder(item.rel, opts); !inside.ok()) {
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
    if (Status bad = FillRowFields(s, row, base, opts, &item); !bad.ok()) {
      skip(item.rel + ": " + bad.message());
      continue;
    }
    s.items.push_back(std::move(item));
  }
  std::sort(s.items.begin(), s.items.end(), [](const SourceItem& a, const SourceItem& b) { return a.rel < b.rel; });
  return s;
}

Status CheckInsideFolder(const std::string& p, const SourceOptions& opts) {
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

}  // namespace imagepack::internal
