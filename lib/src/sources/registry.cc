// The registry (registry.h): one row per format of another tool, and the
// chooser that reads the rows. A new format adds its row here and its
// source file beside this one.
#include "sources/registry.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "sources/patterns.h"
#include "sources/splits.h"

namespace fs = std::filesystem;

namespace imagepack {
namespace internal {

const std::vector<RegisteredFormat>& RegisteredFormats() {
  // In any order: the chooser takes the strongest match (registry.h).
  static const std::vector<RegisteredFormat> formats = {
      {{"parquet", "Hugging Face parquet shards: .parquet files (a file, a brace pattern, a folder)", true, true,
        false},
       ParquetNameIs, nullptr, false, nullptr, OpenParquetSource},
      {{"tfrecord",
        "TFRecords of tf.train.Example, TF-slim / Inception or TFDS, plain or gzipped: .tfrecord, .tfrec or "
        "NAME-NNNNN-of-NNNNN files, else a record's CRC (a file, a brace pattern, a folder)",
        true, true, false},
       TfRecordNameIs, TfRecordBytesSay, false, nullptr, OpenTfRecordSource},
      {{"webdataset", "WebDataset shards: .tar, .tar.gz, .tgz (a file, a brace pattern, a folder)", true, true,
        false},
       WebDatasetNameIs, nullptr, true, nullptr, OpenWebDatasetSource},
      {{"folder2lmdb", "an LMDB of pickled (image bytes, label) pairs, as folder2lmdb writes it", false, false,
        true},
       nullptr, nullptr, false, PickledLmdbLooks, OpenPickledLmdbSource},
  };
  return formats;
}

std::string BaseNameOf(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

namespace {

Result<PathShape> ShapeOf(const std::string& path) {
  PathShape s;
  s.path = path;
  auto storage = OpenStorage(path);
  if (!storage.ok()) return storage.status();
  s.storage = std::move(storage.value());
  s.local = s.storage->local();
  if (IsFilePattern(path)) {
    // One that does not expand is still a pattern: its opener names the fault.
    s.kind = PathShape::Kind::kPattern;
    if (auto names = ExpandFilePattern(*s.storage, path); names.ok()) s.files = std::move(names.value());
    return s;
  }
  if (!s.local && s.storage->folders()) {  // a remote store with folders (the Hub): a folder is listed
    auto info = s.storage->Stat(path);
    if (!info.ok()) return info.status();
    if (info->directory) {
      auto names = s.storage->List(path);
      if (!names.ok()) return names.status();
      s.kind = PathShape::Kind::kFolder;
      for (const std::string& n : names.value()) {
        if (n.empty() || n[0] == '.') continue;
        if (n.back() == '/') {
          s.subfolders = true;
          s.folders.push_back(n.substr(0, n.size() - 1));
        } else {
          s.files.push_back(Storage::Join(path, n));
        }
      }
      return s;
    }
  }
  if (!s.local) {
    s.kind = !path.empty() && path.back() == '/' ? PathShape::Kind::kRemotePrefix : PathShape::Kind::kRemoteObject;
    s.files = {path};
    return s;
  }
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    s.kind = PathShape::Kind::kFile;
    s.files = {path};
  } else if (fs::is_directory(path, ec)) {
    s.kind = PathShape::Kind::kFolder;
    for (const auto& e : fs::directory_iterator(path, ec)) {
      const std::string n = e.path().filename().string();
      if (n.empty() || n[0] == '.') continue;  // hidden: .git, .DS_Store, temporaries
      if (e.is_directory(ec)) {
        s.subfolders = true;
        s.folders.push_back(n);
      } else
        s.files.push_back(e.path().string());
    }
    std::sort(s.files.begin(), s.files.end());
    std::sort(s.folders.begin(), s.folders.end());
  }
  return s;
}

// A file a dataset repository holds beside its data: the card, a licence,
// attributes, a loading script, metadata.
bool IsSideFile(const std::string& path) {
  const std::string base = BaseNameOf(path);
  for (const char* ext : {".md", ".txt", ".json", ".py", ".yaml", ".yml", ".gitattributes", ".cff"})
    if (base.size() >= std::strlen(ext) && base.compare(base.size() - std::strlen(ext), std::string::npos, ext) == 0)
      return true;
  return base.rfind("LICENSE", 0) == 0 || base.rfind("LICENCE", 0) == 0 || base.rfind("COPYING", 0) == 0;
}

// Every folder of `shape` named as a split (train, test, validation and
// their aliases), and no data file beside them.
bool HoldsSplitFolders(const PathShape& shape) {
  return !shape.folders.empty() && std::all_of(shape.files.begin(), shape.files.end(), IsSideFile) &&
         std::all_of(shape.folders.begin(), shape.folders.end(), [](const std::string& f) { return !SplitOf(f).empty(); });
}

// Where a folder laid out as a Hub dataset repository keeps its files
// (registry.h), or "" when it is no such folder.
std::string HubLayoutOf(const PathShape& shape) {
  if (shape.kind != PathShape::Kind::kFolder || !shape.subfolders) return "";
  if (!std::all_of(shape.files.begin(), shape.files.end(), IsSideFile)) return "";
  const std::string& p = shape.path;
  if (HoldsSplitFolders(shape)) return Storage::Join(p, "*/*");
  std::string inner;
  if (std::count(shape.folders.begin(), shape.folders.end(), "data")) inner = Storage::Join(p, "data");
  else if (shape.folders.size() == 1) inner = Storage::Join(p, shape.folders[0]);  // a configuration folder
  if (inner.empty()) return "";
  auto in = ShapeOf(inner);
  if (!in.ok() || in->kind != PathShape::Kind::kFolder) return "";
  if (HoldsSplitFolders(*in)) return Storage::Join(inner, "*/*");
  return in->files.empty() || in->subfolders ? "" : inner;
}

// A file's first bytes say `format`: a local file, or one ranged read of
// a remote object (kept in the block cache for the import).
bool BytesSay(const RegisteredFormat& format, const PathShape& shape, const std::string& file) {
  auto bytes = shape.storage->Open(file);
  return bytes.ok() && format.bytes_say(*bytes.value());
}

// Files (a folder's, a pattern's, or one): none foreign, then one of the
// format's names, else the first bytes of the first few whose names say
// nothing.
Likeness OfFiles(const RegisteredFormat& format, const PathShape& shape, bool names_only) {
  bool mine = false;
  std::vector<const std::string*> unknown;
  for (const std::string& f : shape.files) switch (format.name_is(BaseNameOf(f))) {
      case NameIs::kForeign: return Likeness::kNo;
      case NameIs::kMine: mine = true; break;
      case NameIs::kUnknown: unknown.push_back(&f); break;
      case NameIs::kSide: break;
    }
  if (mine) return Likeness::kName;
  if (!format.bytes_say || names_only) return Likeness::kNo;
  const size_t tries = shape.local ? 64 : 4;
  for (size_t i = 0; i < unknown.size() && i < tries; ++i)
    if (BytesSay(format, shape, *unknown[i])) return Likeness::kBytes;
  return Likeness::kNo;
}

}  // namespace

Likeness LikenessOf(const RegisteredFormat& format, const PathShape& shape, bool remote_names_only) {
  if (format.row.local_only && !shape.local) return Likeness::kNo;
  if (format.looks) return format.looks(shape);
  const bool names_only = remote_names_only && !shape.local;
  switch (shape.kind) {
    case PathShape::Kind::kMissing: return Likeness::kNo;
    case PathShape::Kind::kRemotePrefix:
      return format.any_pattern && !names_only ? Likeness::kAnyPattern : Likeness::kNo;
    case PathShape::Kind::kFolder: return shape.subfolders ? Likeness::kNo : OfFiles(format, shape, names_only);
    case PathShape::Kind::kPattern:
      return std::max(OfFiles(format, shape, false), format.any_pattern ? Likeness::kAnyPattern : Likeness::kNo);
    case PathShape::Kind::kFile:
    case PathShape::Kind::kRemoteObject: return OfFiles(format, shape, names_only);
  }
  return Likeness::kNo;
}

namespace {

Result<Choice> ChooseFor(PathShape shape, Ask ask) {
  const std::string path = shape.path;
  Choice c;
  c.shape = std::move(shape);
  Likeness best = Likeness::kNo;
  for (const RegisteredFormat& f : RegisteredFormats()) {
    if (ask.capability && !(f.row.*(ask.capability))) continue;
    const Likeness l = LikenessOf(f, c.shape, ask.remote_names_only);
    if (l == Likeness::kNo || l < best) continue;
    if (l == best)
      return Status::InvalidArgument(path + " looks as much like " + c.format->row.name + " as like " + f.row.name +
                                     " files: name the files by their format's extension");
    best = l;
    c.format = &f;
  }
  return c;
}

}  // namespace

Result<Choice> Choose(const std::string& path, Ask ask) {
  auto shape = ShapeOf(path);
  if (!shape.ok()) return shape.status();
  auto choice = ChooseFor(std::move(shape.value()), ask);
  if (!choice.ok() || choice->format) return choice;
  // A folder laid out as the Hub lays out a repository: its files where
  // they are, when a format takes them.
  const std::string inner = HubLayoutOf(choice->shape);
  if (inner.empty()) return choice;
  auto inner_shape = ShapeOf(inner);
  if (!inner_shape.ok()) return choice;
  auto in = ChooseFor(std::move(inner_shape.value()), ask);
  return in.ok() && in->format ? in : choice;
}

}  // namespace internal

const std::vector<SourceFormat>& SourceFormats() {
  static const std::vector<SourceFormat> rows = [] {
    std::vector<SourceFormat> out;
    for (const auto& f : internal::RegisteredFormats()) out.push_back(f.row);
    return out;
  }();
  return rows;
}

std::string SourceFormatOf(const std::string& path) {
  auto c = internal::Choose(path);
  return c.ok() && c->format ? c->format->row.name : "";
}

std::string SourceFormatsHelp() {
  std::string out = "Other tools' formats (SRC, --against, read in place by the loader):\n";
  for (const SourceFormat& f : SourceFormats()) {
    std::string uses = "pack_lmdb";
    if (f.verify_against) uses += ", verify_db --against";
    if (f.in_place) uses += ", in place";
    if (f.local_only) uses += "; local only";
    out += "  " + f.name + std::string(f.name.size() < 12 ? 12 - f.name.size() : 1, ' ') + f.files + " [" + uses +
           "]\n";
  }
  return out;
}

}  // namespace imagepack

namespace imagepack {
namespace {

// The files `path` is read from with `split`, local ones made canonical;
// a tree folder or a database as itself (a folder ends with '/').
std::vector<std::string> FilesRead(const std::string& path, const std::string& split) {
  auto choice = internal::Choose(path);
  if (!choice.ok()) return {};
  const internal::PathShape& shape = choice->shape;
  std::vector<std::string> files;
  if (choice->format && !shape.files.empty() && shape.kind != internal::PathShape::Kind::kRemotePrefix) {
    auto picked = internal::SelectSplit(shape.files, split, path, internal::FindsFiles(shape.path));
    files = picked.ok() ? std::move(picked.value()) : shape.files;
  } else if (shape.kind == internal::PathShape::Kind::kFolder) {
    files = {shape.path + "/"};
  } else {
    files = {shape.path};
  }
  if (shape.local) {
    for (std::string& f : files) {
      std::error_code ec;
      const bool folder = !f.empty() && f.back() == '/';
      auto c = fs::weakly_canonical(f, ec);
      if (!ec) f = c.string() + (folder ? "/" : "");
    }
  }
  return files;
}

}  // namespace

std::string SharedFiles(const std::vector<std::string>& data, const std::string& data_split,
                        const std::vector<std::string>& val, const std::string& val_split) {
  std::vector<std::string> train, held;
  for (const std::string& p : data)
    for (std::string& f : FilesRead(p, data_split)) train.push_back(std::move(f));
  for (const std::string& p : val)
    for (std::string& f : FilesRead(p, val_split)) held.push_back(std::move(f));
  // The same file, or a folder (a tree) that holds the other's.
  auto within = [](const std::string& a, const std::string& b) {
    return a == b || (!a.empty() && a.back() == '/' && b.rfind(a, 0) == 0) ||
           (!b.empty() && b.back() == '/' && a.rfind(b, 0) == 0);
  };
  size_t shared = 0;
  std::string first;
  for (const std::string& v : held)
    for (const std::string& t : train)
      if (within(v, t)) {
        if (first.empty()) first = v.size() >= t.size() ? v : t;
        ++shared;
        break;
      }
  if (!shared) return "";
  return std::to_string(shared) + " of its " + std::to_string(held.size()) + " file(s) " +
         (shared == 1 ? "is" : "are") + " read for training too (" + first +
         "): validation inside the training data measures nothing; give --val other files, or --split and "
         "--val-split to read two splits of one folder";
}

}  // namespace imagepack
