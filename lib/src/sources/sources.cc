// Image trees (ImageFolder classes, a labels file, paired trees), class
// lists, declared fields and the choice of source for a path (sources.h).
// Manifests, COCO, WebDataset, TFRecord, parquet and folder2lmdb have files
// of their own.
#include "sources/sources.h"
#include "sources/registry.h"
#include "sources/patterns.h"
#include "sources/splits.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "formats/braces.h"
#include "formats/labels.h"
#include "base/limits.h"
#include "formats/text.h"
#include "imagepack/record.h"
#include "imagepack/storage.h"
#include "stores/store_internal.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

// Calls `fn(line, line_number)` for each non-empty line of `path`, trimmed
// (lines starting with '#' too, unless `comments`). Lines are UTF-8 and at
// most limits::kLineBytes. Stops at the first non-Ok status fn returns.
Status ForEachDataLine(const std::string& path, const char* what,
                       const std::function<Status(const std::string&, int)>& fn, bool comments = true) {
  // A list file may live in any storage (beside shards in a bucket).
  auto storage = OpenStorage(path);
  auto bytes = storage.ok() ? ReadWhole(*storage.value(), path, uint64_t(2) << 30)
                            : Result<std::vector<uint8_t>>(storage.status());
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
    line = TrimSpace(line);
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

}  // namespace

Result<LabelsFile> ReadLabelsFile(const std::string& path, const std::vector<std::string>& fixed) {
  struct Line {
    std::string file, label;
    int n;
  };
  std::vector<Line> lines;
  IMAGEPACK_RETURN_IF_ERROR(ForEachDataLine(path, "labels", [&](const std::string& line, int n) {
    std::istringstream is(line);
    std::string file, label;
    if (!(is >> file >> label))
      return Status::InvalidArgument(path + ":" + std::to_string(n) + ": expected 'FILENAME LABEL'");
    lines.push_back({file, label, n});
    return Status::Ok();
  }));
  std::vector<RawLabel> raw;
  std::vector<std::string> where;
  for (const auto& l : lines) {
    raw.push_back(LabelFromText(l.label));
    where.push_back(path + ":" + std::to_string(l.n));
  }
  LabelsFile out;
  std::vector<int32_t> labels;
  std::vector<std::string> why;
  IMAGEPACK_RETURN_IF_ERROR(ResolveLabels(raw, where, fixed, &out.classes, &labels, &why));
  std::map<std::string, size_t> first;  // file -> its first line's index
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!why[i].empty()) return Status::InvalidArgument(where[i] + ": " + lines[i].file + ": " + why[i]);
    auto [at, fresh] = first.emplace(lines[i].file, i);
    if (fresh) {
      out.entries[lines[i].file] = {lines[i].n, labels[i]};
    } else if (labels[at->second] != labels[i] && !out.twice.count(lines[i].file)) {
      // Which of two labels is true cannot be known: neither is used.
      const Line& one = lines[at->second];
      out.twice[one.file] = "listed twice in " + path + " with different labels: line " + std::to_string(one.n) +
                            " says '" + one.label + "', line " + std::to_string(lines[i].n) + " says '" +
                            lines[i].label + "'";
      out.entries.erase(one.file);
    }
  }
  return out;
}

namespace {

// A flat folder (or any tree) labelled by a labels file, read as pack reads
// it (through --classes when given); an image is found by its path below
// the root, else by its file name. With a fixed class list (verify: the
// database's) the file's classes are found in it by name. Entries naming
// no image are skipped, as are images the file labels twice differently.
Status LabelFromFile(const std::string& root, const std::vector<std::string>& images, const SourceOptions& opts,
                     DatasetSource& s) {
  std::vector<std::string> fixed;
  if (!opts.classes_file.empty()) {
    auto c = ReadClassList(opts.classes_file);
    if (!c.ok()) return c.status();
    fixed = std::move(c.value());
  }
  auto file = ReadLabelsFile(opts.labels_file, fixed);
  if (!file.ok()) return file.status();
  std::vector<int32_t> into(file->classes.size());
  const auto index_of = IndexOf(s.classes);
  for (size_t c = 0; c < into.size(); ++c) {
    auto it = index_of.find(file->classes[c]);
    into[c] = opts.classes == nullptr ? int32_t(c) : it == index_of.end() ? -1 : it->second;
  }
  if (opts.classes == nullptr) s.classes = file->classes;
  std::set<std::string> used;
  for (const auto& rel : images) {
    std::string key = rel;
    if (!file->entries.count(key) && !file->twice.count(key)) key = fs::path(rel).filename().string();
    if (auto twice = file->twice.find(key); twice != file->twice.end()) {
      used.insert(key);
      s.labels_twice.push_back({rel, twice->second});
      s.errors.push_back(s.labels_twice.back());
      continue;
    }
    auto it = file->entries.find(key);
    if (it == file->entries.end()) {
      s.unlabelled.push_back(rel);
      s.errors.push_back({rel, "no label in " + opts.labels_file});
      continue;
    }
    used.insert(key);
    const int32_t label = into[size_t(it->second.label)];
    if (label < 0) {
      const std::string& name = file->classes[size_t(it->second.label)];
      s.labels_unknown.push_back({rel, opts.labels_file + ":" + std::to_string(it->second.line) + " says '" + name +
                                           "', which is not among the database's " +
                                           std::to_string(s.classes.size()) + " classes"});
      s.errors.push_back(s.labels_unknown.back());
      continue;
    }
    s.items.push_back({rel, label, -1, {}});
  }
  std::set<std::string> names;  // every file the labels file names, sorted
  for (const auto& e : file->entries) names.insert(e.first);
  for (const auto& t : file->twice) names.insert(t.first);
  for (const auto& name : names)
    if (!used.count(name)) {
      s.labels_missing.push_back({name, "listed in " + opts.labels_file + " but not in " + root});
      s.errors.push_back(s.labels_missing.back());
    }
  return Status::Ok();
}

// ImageFolder: an image's class is its first folder. An image outside
// every class is skipped (errors) with the reason, and kept in unlabelled.
void LabelFromFolders(const std::vector<std::string>& images, const SourceOptions& opts, DatasetSource& s) {
  const bool fixed = !s.classes.empty() || opts.classes != nullptr;
  if (!fixed) {
    std::set<std::string> names;
    for (const auto& rel : images)
      if (auto c = ClassFolderOf(rel); !c.empty()) names.insert(c);
    s.classes.assign(names.begin(), names.end());
  }
  const auto index_of = IndexOf(s.classes);
  std::vector<int64_t> per_class(s.classes.size(), 0);
  for (const auto& rel : images) {
    const std::string c = ClassFolderOf(rel);
    auto it = index_of.find(c);
    if (it != index_of.end()) {
      s.items.push_back({rel, it->second, -1, {}});
      ++per_class[static_cast<size_t>(it->second)];
      continue;
    }
    s.unlabelled.push_back(rel);
    s.errors.push_back({rel, OutsideClassReason(c, opts)});
  }
  if (std::string empty = ClassesWithoutImages(s.classes, per_class, opts); !empty.empty())
    s.problems.push_back(std::move(empty));
}

std::string WithoutExtension(const std::string& rel) {
  const auto slash = rel.rfind('/');
  const auto dot = rel.rfind('.');
  return dot == std::string::npos || (slash != std::string::npos && dot < slash) ? rel : rel.substr(0, dot);
}

// Mask classes: a classes file, or a count N (names "0".."N-1"), at most
// the values a `bits`-bit mask holds.
Result<std::vector<std::string>> MaskClasses(const std::string& text, int bits) {
  if (text.empty()) return std::vector<std::string>{};
  const int most = 1 << bits;
  const std::string dtype = bits > 8 ? "uint16" : "uint8";
  if (IsIndex(text)) {
    const long n = text.size() > 6 ? -1 : std::stol(text);
    if (n < 1 || n > most)
      return Status::InvalidArgument("--mask-classes " + text + ": a count must be in 1.." + std::to_string(most) +
                                     " for a " + dtype + " mask" + (bits > 8 ? "" : " (--mask-dtype uint16: 65536)"));
    std::vector<std::string> out;
    for (long i = 0; i < n; ++i) out.push_back(std::to_string(i));
    return out;
  }
  auto c = ReadClassList(text);
  if (c.ok() && c->size() > size_t(most))
    return Status::InvalidArgument(text + ": a " + dtype + " mask holds at most " + std::to_string(most) + " classes");
  return c;
}

// A map field's own declarations from the options: a mask's dtype,
// classes and ignore value; a depth map's scale and no-reading value.
Status DeclareMap(const SourceOptions& opts, FieldSpec* f) {
  const KindInfo& info = InfoOf(f->kind);
  f->bits = info.fixed_bits > 0 ? info.fixed_bits : opts.mask_bits;
  if (f->bits != 8 && f->bits != 16) return Status::InvalidArgument("a mask is uint8 or uint16");
  const int top = f->bits > 8 ? 65535 : 255;
  if (info.classes) {
    auto c = MaskClasses(opts.mask_classes, f->bits);
    if (!c.ok()) return c.status();
    f->classes = std::move(c.value());
    f->ignore = opts.mask_ignore == SourceOptions::kMaskIgnoreTop ? top : opts.mask_ignore;
    if (f->ignore < -1 || f->ignore > top)
      return Status::InvalidArgument("--ignore-value " + std::to_string(f->ignore) + " does not fit a " +
                                     std::to_string(f->bits) + "-bit mask (-1.." + std::to_string(top) + ")");
    return Status::Ok();
  }
  // A class-less map of another kind (an instance-id map, ...) takes its
  // kind's fill value from the table; depth's options are depth's alone.
  if (f->kind != FieldKind::kDepth) {
    f->ignore = info.default_fill;
    return Status::Ok();
  }
  f->ignore = opts.depth_no_reading;
  f->scale = opts.depth_scale;
  if (f->ignore < 0 || f->ignore > top)
    return Status::InvalidArgument("--depth-no-reading " + std::to_string(f->ignore) + " is not in 0.." +
                                   std::to_string(top));
  if (f->scale < 0 || !std::isfinite(f->scale))
    return Status::InvalidArgument("--depth-scale must be a positive number");
  return Status::Ok();
}

}  // namespace

// Declares a field (unique name) and returns its slot.
Result<int> Declare(DatasetSource& s, const std::string& name, FieldKind kind, const SourceOptions& opts) {
  if (name.empty() || name.size() > 255) return Status::InvalidArgument("a field name must have 1 to 255 bytes");
  IMAGEPACK_RETURN_IF_ERROR(CheckName(name, "field name"));
  for (const auto& f : s.fields)
    if (f.name == name) return Status::InvalidArgument("field '" + name + "' given twice");
  if (name == "image" || name == "label")
    return Status::InvalidArgument("'" + name + "' names the record's own image or class, not a field");
  if (s.fields.size() >= 255) return Status::InvalidArgument("more than 255 fields");
  FieldSpec f;
  f.name = name;
  f.kind = kind;
  {
    std::vector<FieldSpec> all = s.fields;
    all.push_back(f);
    IMAGEPACK_RETURN_IF_ERROR(CheckBatchKeys(all));
  }
  const KindInfo& info = InfoOf(kind);
  switch (info.layout) {
    case FieldLayout::kMap: IMAGEPACK_RETURN_IF_ERROR(DeclareMap(opts, &f)); break;
    case FieldLayout::kBoxes:
      if (!opts.box_classes.empty()) {
        auto c = ReadClassList(opts.box_classes);
        if (!c.ok()) return c.status();
        f.classes = std::move(c.value());
      }
      break;
    case FieldLayout::kPicture:
    case FieldLayout::kList:
    case FieldLayout::kText: break;
  }
  s.fields.push_back(std::move(f));
  return static_cast<int>(s.fields.size() - 1);
}

namespace {

// --field NAME=DIR: each item's partner is the file of DIR with the item's
// relative path and any extension. Items without one are skipped (errors).
Status AddPairedTrees(const SourceOptions& opts, DatasetSource& s) {
  for (const auto& text : opts.fields) {
    auto parsed = ParsePairedTree(text);
    if (!parsed.ok()) return parsed.status();
    const PairedTree& tree = parsed.value();
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

std::string OutsideClassReason(const std::string& folder, const SourceOptions& opts) {
  if (folder.empty())
    return "not inside a class folder (the first folder names the class; --no-class packs images without one)";
  if (opts.classes == nullptr && !opts.classes_file.empty())
    return "class '" + folder + "' is not in --classes " + opts.classes_file;
  return "folder '" + folder + "' is not in the class list";
}

std::string ClassesWithoutImages(const std::vector<std::string>& classes, const std::vector<int64_t>& counts,
                                 const SourceOptions& opts) {
  if (opts.classes != nullptr || opts.classes_file.empty() || counts.size() != classes.size()) return "";
  std::vector<std::string> empty;
  for (size_t i = 0; i < classes.size(); ++i)
    if (counts[i] == 0) empty.push_back(classes[i]);
  if (empty.empty()) return "";
  std::string names;
  for (size_t i = 0; i < empty.size() && i < 10; ++i) names += (i ? ", " : "") + empty[i];
  if (empty.size() > 10) names += ", ... (" + std::to_string(empty.size() - 10) + " more)";
  return std::to_string(empty.size()) + (empty.size() == 1 ? " class" : " classes") + " of --classes " +
         opts.classes_file + (empty.size() == 1 ? " has" : " have") + " no images: " + names;
}

Status NoClassFolders(const std::string& root, size_t ignored) {
  std::vector<std::string> folders;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) folders.push_back(it->path().filename().string());
  std::sort(folders.begin(), folders.end());
  const std::string advice = " (and no --labels file; --no-class packs images without a class)";
  std::string ignored_note;
  if (ignored > 0)
    ignored_note = "; " + std::to_string(ignored) + " files ignored for their names (images are named " +
                   "jpg jpeg jpe png gif bmp tif tiff webp ppm pgm pbm pnm)";
  if (folders.empty()) return Status::InvalidArgument(root + " has no class folders" + ignored_note + advice);
  std::string names;
  for (size_t i = 0; i < folders.size() && i < 3; ++i) names += (i ? ", " : "") + Shown(folders[i]);
  if (folders.size() > 3) names += ", ...";
  return Status::InvalidArgument(root + ": its " + std::to_string(folders.size()) + " class folder" +
                                 (folders.size() == 1 ? " (" : "s (") + names + ") hold no images" + ignored_note);
}

std::string ClassFolderOf(const std::string& rel) {
  const auto slash = rel.find('/');
  return slash == std::string::npos ? std::string() : rel.substr(0, slash);
}

Result<PairedTree> ParsePairedTree(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    return Status::InvalidArgument("--field " + text +
                                   ": expected NAME=DIR or NAME:KIND=DIR (NAME:KIND alone declares a manifest key)");
  PairedTree t;
  t.name = text.substr(0, eq);
  t.dir = text.substr(eq + 1);
  t.kind = KindOfFileField(t.name);
  if (const auto colon = t.name.find(':'); colon != std::string::npos) {
    auto kind = ParseFieldKind(t.name.substr(colon + 1));
    if (!kind.ok()) return kind.status();
    if (!InfoOf(*kind).from_file())
      return Status::InvalidArgument("--field " + text + ": a paired tree holds files of the image's size (image, "
                                     "mask, depth), not " + InfoOf(*kind).name);
    t.kind = *kind;
    t.name = t.name.substr(0, colon);
  }
  return t;
}

Result<std::pair<std::string, FieldKind>> ParseDeclaredField(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || text.find('=') != std::string::npos)
    return Status::InvalidArgument("--field " + text + ": with a manifest, expected NAME:KIND (KIND one of " +
                                   KindNames() + ")");
  auto kind = ParseFieldKind(text.substr(colon + 1));
  if (!kind.ok()) return kind.status().WithContext("--field " + text);
  return std::make_pair(text.substr(0, colon), kind.value());
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
  if (opts.labels_file.empty() && opts.fields.empty()) return OpenTreeSourceBounded(root, opts);
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
      IMAGEPACK_RETURN_IF_ERROR(LabelFromFile(root, listing->images, opts, s));
    } else {
      LabelFromFolders(listing->images, opts, s);
      if (s.classes.empty() && !opts.classes) return NoClassFolders(root, s.ignored.size());
    }
  }
  IMAGEPACK_RETURN_IF_ERROR(AddPairedTrees(opts, s));
  return s;
}

Result<int32_t> DatabaseLabel(const DatasetSource& s, int32_t stored, const SourceOptions& opts) {
  if (s.db_labels.empty() || stored < 0) return stored;
  if (size_t(stored) >= s.db_labels.size())
    return Status::InvalidArgument("label " + std::to_string(stored) + " is not a class of the " +
                                   std::to_string(s.db_labels.size()));
  if (s.db_labels[size_t(stored)] < 0)
    return Status::InvalidArgument("class '" + s.db->meta().classes[size_t(stored)] + "' is not in --classes " +
                                   opts.classes_file);
  return s.db_labels[size_t(stored)];
}

Result<DatasetSource> OpenDatabaseSource(const std::string& path, bool records, const SourceOptions& opts) {
  // Records read with pread into each thread's cursor: through the file's
  // mapping, a conversion's resident set grew to the size of its source.
  OpenOptions oo;
  oo.pread_records = true;
  // A container (stores/): files of other tools are sources of their own,
  // not databases (OpenDatabase, in the top room, reads those in place).
  auto db = OpenContainer(path, oo);
  if (!db.ok()) return db.status();
  DatasetSource s;
  s.db = std::move(db.value());
  s.classes = s.db->meta().classes;
  s.packed_as = s.db->meta();
  s.stored_order = true;
  if (!s.db->meta().fields.empty())
    return Status::NotSupported(path + " holds fields beyond image and class; converting such a database is not "
                                       "supported (pack its sources again)");
  // --classes: each record's class is found by name in the given list.
  std::vector<std::string> fixed;
  if (!opts.no_class) IMAGEPACK_RETURN_IF_ERROR(FixedClasses(opts, &fixed));
  if (!fixed.empty()) {
    if (s.classes.empty())
      return Status::InvalidArgument(path + " holds records without classes; --classes cannot name them");
    const auto index_of = IndexOf(fixed);
    for (const auto& c : s.classes) {
      auto it = index_of.find(c);
      s.db_labels.push_back(it == index_of.end() ? -1 : it->second);
    }
    s.classes = std::move(fixed);
  }
  if (records) {
    s.db_records = true;
    return s;
  }
  auto cur = s.db->NewCursor();
  for (int64_t i = 0; i < s.db->size(); ++i) {
    auto r = cur->Read(i, /*verify_checksum=*/false);  // checked when the record is read again to pack
    auto label = r.ok() ? DatabaseLabel(s, r->fields.label, opts) : Result<int32_t>(r.status());
    if (!label.ok()) {
      s.errors.push_back({r.ok() ? std::string(r->path) : RecordKey(i), label.status().message()});
      continue;
    }
    s.items.push_back({std::string(r->path), label.value(), i, {}});
  }
  return s;
}

Result<DatasetSource> OpenSource(const std::string& path, const SourceOptions& opts) {
  if (!opts.manifest.empty()) return OpenManifestSource(opts.manifest, opts);
  if (!opts.coco.empty()) return OpenCocoSource(opts.coco, path, opts);
  auto choice = Choose(path);
  if (!choice.ok()) return choice.status();
  // Another tool's files; else a folder is a tree (a missing path too:
  // the tree's error names it), a file or any remote object a database
  // (a blob), read or refused by name.
  const PathShape::Kind kind = choice->shape.kind;
  if (!choice->format && (kind == PathShape::Kind::kFolder || kind == PathShape::Kind::kMissing))
    return OpenTreeSource(path, opts);
  if (!opts.fields.empty()) return Status::InvalidArgument("--field pairs trees; " + path + " is not a tree");
  if (choice->format) return choice->format->open(choice->shape.path, opts);
  return OpenDatabaseSource(path, opts.database_records, opts);
}

namespace {

Result<std::vector<std::string>> ListContainerFiles(Storage& storage, const std::string& src,
                                                    bool (*keep)(const std::string& name), const char* what) {
  if (IsFilePattern(src)) return ExpandFilePattern(storage, src);
  if (storage.listable()) {
    auto info = storage.Stat(src);
    if (info.ok() && info->directory) {
      auto names = storage.List(src);
      if (!names.ok()) return names.status();
      std::vector<std::string> out;
      for (const std::string& n : names.value())
        if (n.back() != '/' && keep(n)) out.push_back(Storage::Join(src, n));
      std::sort(out.begin(), out.end());
      if (out.empty()) return Status::NotFound(src + " holds no " + what);
      return out;
    }
  }
  return std::vector<std::string>{src};
}

}  // namespace

Result<std::vector<std::string>> ContainerFiles(Storage& storage, const std::string& src,
                                                bool (*keep)(const std::string& name), const char* what,
                                                const SourceOptions& opts) {
  auto files = ListContainerFiles(storage, src, keep, what);
  if (!files.ok()) return files.status();
  return SelectSplit(std::move(files.value()), opts.split, src, FindsFiles(src));
}

Result<std::shared_ptr<Storage>> SourceStorage(const std::string& url, const SourceOptions& opts) {
  return opts.storage ? OpenStorage(url, *opts.storage) : OpenStorage(url);
}

std::string ScratchDirOf(const SourceOptions& opts) {
  return opts.scratch_dir.empty() ? std::filesystem::temp_directory_path().string() : opts.scratch_dir;
}

}  // namespace imagepack::internal
