// TFRecord files (plain or gzipped) as a source (sources.h,
// OpenTfRecordSource): each record's CRCs checked and its tf.train.Example
// read, in the TF-slim / Inception layout (image/encoded,
// image/class/label counted from 1, boxes) or TFDS's (image, label); every
// item a byte range of its file read through its byte source while
// packing.
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "formats/braces.h"
#include "formats/gzip.h"
#include "formats/labels.h"
#include "formats/limits.h"
#include "formats/text.h"
#include "formats/tfrecord.h"
#include "formats/webdataset.h"
#include "imagepack/storage.h"
#include "sources/sources.h"
#include "storage/fd_io.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

std::string BaseName(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Files beside TFRecords that are not records: DALI indexes, class lists,
// TFDS's dataset_info.json and features.json.
bool IsSideFile(const std::string& name) {
  const std::string l = LowerAscii(name);
  return EndsWith(l, ".idx") || EndsWith(l, ".txt") || EndsWith(l, ".json") || EndsWith(l, ".md");
}

// The first 12 bytes of `bytes` (inflated first when they are gzip) form
// a TFRecord header whose length CRC matches.
bool HeaderMatches(const uint8_t* bytes, size_t n) {
  uint8_t head[12];
  if (n >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) {
    z_stream z{};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return false;
    z.next_in = const_cast<uint8_t*>(bytes);
    z.avail_in = static_cast<uInt>(n);
    z.next_out = head;
    z.avail_out = sizeof head;
    const int rc = inflate(&z, Z_SYNC_FLUSH);
    const bool full = z.avail_out == 0;
    inflateEnd(&z);
    if ((rc != Z_OK && rc != Z_STREAM_END) || !full) return false;
  } else {
    if (n < 12) return false;
    std::copy(bytes, bytes + 12, head);
  }
  bool end = false;
  auto read = [&](void* buf, size_t k, uint64_t at) -> Status {
    std::copy(head + at, head + at + k, static_cast<uint8_t*>(buf));
    return Status::Ok();
  };
  // Only the header is here: its CRC decides (a length over the budget is
  // the record's error, named when the file is read).
  auto frame = ReadTfRecordHeader(read, UINT64_MAX, 0, 0, "", &end, UINT64_MAX);
  return frame.ok();
}

// A local file whose first record header is a TFRecord's.
bool SniffFile(const std::string& path) {
  auto bytes = OpenFileSource(path);
  if (!bytes.ok()) return false;
  const uint64_t n = std::min<uint64_t>(bytes.value()->size(), 64 << 10);
  std::vector<uint8_t> head(n);
  if (!bytes.value()->ReadAt(0, n, head.data()).ok()) return false;
  return HeaderMatches(head.data(), head.size());
}

// A remote object: by its name (.tfrecord, .tfrecords, .tfrec anywhere in
// it, as TFDS's "mnist-train.tfrecord-00000-of-00001"), else, unless the
// name says it is something else (a database, a shard, parquet), by its
// first bytes: one ranged read, kept in the block cache for the import
// (Inception's "train-00000-of-01024" has no extension).
bool LooksRemote(Storage& storage, const std::string& path) {
  const std::string l = LowerAscii(path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1));
  if (l.find(".tfrecord") != std::string::npos || l.find(".tfrec") != std::string::npos) return true;
  for (const char* other : {".blob", ".lmdb", ".mdb", ".parquet", ".json", ".txt"})
    if (l.size() >= std::strlen(other) && l.compare(l.size() - std::strlen(other), std::strlen(other), other) == 0)
      return false;
  if (l.empty() || IsShardName(l)) return false;
  auto bytes = storage.Open(path);
  if (!bytes.ok()) return false;
  const uint64_t n = std::min<uint64_t>(bytes.value()->size(), 64 << 10);
  std::vector<uint8_t> head(n);
  if (!bytes.value()->ReadAt(0, n, head.data()).ok()) return false;
  return HeaderMatches(head.data(), head.size());
}

}  // namespace

bool LooksLikeTfRecord(const std::string& src) {
  auto storage = OpenStorage(src);
  if (!storage.ok()) return false;
  const bool local = storage.value()->local();
  std::error_code ec;
  if (HasShardPattern(src)) {
    auto names = ExpandShardPattern(src);
    if (!names.ok() || names->empty() || IsShardName(names->front())) return false;
    return local ? SniffFile(names->front()) : LooksRemote(*storage.value(), names->front());
  }
  if (!local) return LooksRemote(*storage.value(), src);
  if (fs::is_regular_file(src, ec)) return SniffFile(src);
  if (!fs::is_directory(src, ec)) return false;
  bool any = false;
  for (const auto& e : fs::directory_iterator(src, ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_directory(ec) || HasImageExtension(n) || IsShardName(n)) return false;
    if (IsSideFile(n)) continue;
    if (!SniffFile(e.path().string())) return false;
    any = true;
  }
  return any;
}

namespace {

// What one record gave, in item order.
struct TfRecordInfo {
  RawLabel raw;         // 0-based
  std::string name;     // its class's name as the record states it (synset, else text), if any
  std::string where;
  bool has_boxes = false;
  std::vector<Box> boxes;      // in pixels; labels 0-based as written
};

struct TfListing {
  std::vector<TfRecordInfo> infos;
  std::set<std::string> seen;                  // record paths
  std::map<std::string, int64_t> unused;       // feature keys not packed -> records
  int label_base = 1;                          // image/class/label's first class
};

const TfFeature* Find(const TfExample& ex, const char* key, TfFeature::Kind kind) {
  auto it = ex.find(key);
  return it != ex.end() && it->second.kind == kind ? &it->second : nullptr;
}

std::string BytesOf(const uint8_t* data, const TfFeature* f) {
  if (!f || f->bytes.empty()) return "";
  return std::string(reinterpret_cast<const char*>(data) + f->bytes[0].first, f->bytes[0].second);
}

// The extension of the record's image: image/format, else its magic.
std::string ImageExtOf(const std::string& format, const uint8_t* p, size_t n) {
  std::string f = LowerAscii(format);
  if (f == "jpeg" || f == "jpg") return "jpg";
  if (!f.empty() && IsImageExtension(f)) return f;
  if (n >= 2 && p[0] == 0xff && p[1] == 0xd8) return "jpg";
  if (n >= 4 && p[0] == 0x89 && p[1] == 'P') return "png";
  return "img";
}

const char* const kBoxKeys[4] = {"image/object/bbox/xmin", "image/object/bbox/ymin", "image/object/bbox/xmax",
                                 "image/object/bbox/ymax"};

// The record's boxes (normalised in TF-slim's layout) in pixels of
// image/width x image/height; "" or why not.
std::string ReadBoxes(const TfExample& ex, int label_base, int64_t label, TfRecordInfo* info) {
  const TfFeature* c[4];
  for (int k = 0; k < 4; ++k) c[k] = Find(ex, kBoxKeys[k], TfFeature::Kind::kFloat);
  if (!c[0] && !c[1] && !c[2] && !c[3]) return "";
  info->has_boxes = true;
  const size_t n = c[0] ? c[0]->floats.size() : 0;
  for (int k = 0; k < 4; ++k)
    if (!c[k] || c[k]->floats.size() != n) return "image/object/bbox/{xmin,ymin,xmax,ymax} differ in length";
  const TfFeature* w = Find(ex, "image/width", TfFeature::Kind::kInt64);
  const TfFeature* h = Find(ex, "image/height", TfFeature::Kind::kInt64);
  if (n > 0 && (!w || !h || w->ints.size() != 1 || h->ints.size() != 1 || w->ints[0] <= 0 || h->ints[0] <= 0))
    return "boxes are normalised, but image/width and image/height are missing";
  const TfFeature* bl = Find(ex, "image/object/bbox/label", TfFeature::Kind::kInt64);
  if (bl && bl->ints.size() != n) return "image/object/bbox/label has " + std::to_string(bl->ints.size()) +
                                         " values for " + std::to_string(n) + " boxes";
  for (size_t i = 0; i < n; ++i) {
    const float v[4] = {c[0]->floats[i], c[1]->floats[i], c[2]->floats[i], c[3]->floats[i]};
    for (float x : v)
      if (!std::isfinite(x) || x < 0.f || x > 1.f) return "box " + std::to_string(i) + " is not inside [0, 1]";
    if (v[0] > v[2] || v[1] > v[3]) return "box " + std::to_string(i) + " has its minimum past its maximum";
    const int64_t bl_i = bl ? bl->ints[i] - label_base : label;
    if (bl_i < 0 || bl_i > INT32_MAX) return "box " + std::to_string(i) + " has no class";
    const float W = float(w->ints[0]), H = float(h->ints[0]);
    info->boxes.push_back({v[0] * W, v[1] * H, v[2] * W, v[3] * H, int32_t(bl_i)});
  }
  return "";
}

// The record's label (0-based), its class's name, its record path; "" or
// why it is skipped.
std::string ReadLabel(const TfExample& ex, const uint8_t* data, TfListing& l, TfRecordInfo* info) {
  const TfFeature* slim = Find(ex, "image/class/label", TfFeature::Kind::kInt64);
  const TfFeature* tfds = Find(ex, "label", TfFeature::Kind::kInt64);
  const TfFeature* f = slim ? slim : tfds;
  if (f) {
    if (f->ints.size() != 1) return std::to_string(f->ints.size()) + " labels (one is read)";
    const int base = slim ? l.label_base : 0;
    if (slim && base == 1 && f->ints[0] == 0)
      return "label 0, the background class (image/class/label counts classes from 1)";
    if (f->ints[0] < base) return "label " + std::to_string(f->ints[0]) + " is negative";
    info->raw = LabelFromIndex(f->ints[0] - base);
  }
  std::string name = BytesOf(data, Find(ex, "image/class/synset", TfFeature::Kind::kBytes));
  if (name.empty()) name = BytesOf(data, Find(ex, "image/class/text", TfFeature::Kind::kBytes));
  if (!name.empty() && CheckName(name, "class name").ok()) info->name = name;
  return "";
}

const std::set<std::string>& KnownKeys() {
  static const std::set<std::string> keys = {
      "image/encoded", "image", "image/class/label", "label", "image/class/synset", "image/class/text",
      "image/format", "image/filename", "image/width", "image/height", "image/colorspace", "image/channels", "image/object/bbox/xmin",
      "image/object/bbox/ymin", "image/object/bbox/xmax", "image/object/bbox/ymax", "image/object/bbox/label"};
  return keys;
}

// One record's Example into an item of `s`; "" or why it is skipped.
std::string AddRecord(const uint8_t* data, const TfRecordFrame& frame, const std::string& file, int64_t record,
                      int archive, DatasetSource& s, TfListing& l) {
  auto ex = ParseTfExample(data, size_t(frame.size));
  if (!ex.ok()) return ex.status().message();
  const TfFeature* image = Find(*ex, "image/encoded", TfFeature::Kind::kBytes);
  if (!image) image = Find(*ex, "image", TfFeature::Kind::kBytes);
  if (!image || image->bytes.size() != 1 || image->bytes[0].second == 0)
    return image ? "the image feature holds " + std::to_string(image->bytes.size()) + " values (one is read)"
                 : "no image (an image/encoded or image bytes feature)";
  TfRecordInfo info;
  info.where = TfRecordWhere(file, record);
  if (std::string bad = ReadLabel(*ex, data, l, &info); !bad.empty()) return bad;
  const int64_t label = info.raw.present ? info.raw.index : -1;
  if (std::string bad = ReadBoxes(*ex, l.label_base, label, &info); !bad.empty()) return bad;
  const auto [at, n] = image->bytes[0];
  SourceItem item;
  item.archive = archive;
  item.offset = frame.offset + at;
  item.size = n;
  item.rel = BytesOf(data, Find(*ex, "image/filename", TfFeature::Kind::kBytes));
  if (item.rel.empty()) {
    char num[24];
    std::snprintf(num, sizeof num, "%08lld", static_cast<long long>(record));
    item.rel = BaseName(file) + "/" + num + "." +
               ImageExtOf(BytesOf(data, Find(*ex, "image/format", TfFeature::Kind::kBytes)), data + at, n);
  }
  if (Status ok = CheckName(item.rel, "record path"); !ok.ok()) return ok.message();
  if (!l.seen.insert(item.rel).second) return item.rel + " is in the records twice";
  for (const auto& [key, _] : *ex)
    if (!KnownKeys().count(key)) ++l.unused[key];
  s.items.push_back(std::move(item));
  l.infos.push_back(std::move(info));
  return "";
}

// The message of `st` without the "FILE:record N: " it starts with.
std::string Reason(const Status& st, const std::string& where) {
  const std::string& m = st.message();
  return m.compare(0, where.size() + 2, where + ": ") == 0 ? m.substr(where.size() + 2) : m;
}

// The record offsets of FILE.idx (DALI's tfrecord2idx) when there is one:
// where to go on when a record's header is damaged. Empty otherwise.
std::vector<uint64_t> IndexOffsets(Storage& storage, const std::string& file, DatasetSource& s) {
  const std::string idx = file + ".idx";
  auto info = storage.Stat(idx);
  if (!info.ok() || !info->exists || info->directory) return {};
  auto bytes = ReadWhole(storage, idx, limits::kWholeFile);
  auto parsed = bytes.ok() ? ParseTfRecordIndex(std::string(bytes->begin(), bytes->end()), idx)
                           : Result<std::vector<std::pair<uint64_t, uint64_t>>>(bytes.status());
  if (!parsed.ok()) {
    s.problems.push_back(parsed.status().message() + " (index not used)");
    return {};
  }
  std::vector<uint64_t> out;
  for (const auto& [offset, size] : *parsed) out.push_back(offset);
  std::sort(out.begin(), out.end());
  return out;
}

// Opens a file (a gzipped one inflated into `scratch_dir` first), keeps it
// in s.scratch and adds its records; a damaged record is skipped and listed
// as FILE:record N.
Status AddFile(Storage& storage, const std::string& file, const std::string& scratch_dir,
               const SourceOptions& opts, DatasetSource& s, TfListing& l) {
  auto opened = storage.Open(file);
  if (!opened.ok()) return opened.status();
  uint8_t magic[2] = {0, 0};
  if (opened.value()->size() >= 2) IMAGEPACK_RETURN_IF_ERROR(opened.value()->ReadAt(0, 2, magic));
  const bool gzipped = magic[0] == 0x1f && magic[1] == 0x8b;
  if (gzipped) {
    auto inflated = InflateToScratch(*opened.value(), scratch_dir, opts.cancel);
    if (!inflated.ok()) return inflated.status();
    opened = AdoptFileSource(*inflated, file);
    if (!opened.ok()) return opened.status();
  }
  const ByteSource& bytes = *opened.value();
  s.scratch->archives.push_back(std::move(opened.value()));  // closed with the source
  const int archive = static_cast<int>(s.archives.size());
  s.archives.push_back(file);
  // A DALI index counts the plain file's bytes.
  const std::vector<uint64_t> offsets = gzipped ? std::vector<uint64_t>() : IndexOffsets(storage, file, s);
  auto read = [&](void* buf, size_t n, uint64_t at) { return bytes.ReadAt(at, n, static_cast<uint8_t*>(buf)); };
  std::vector<uint8_t> data;
  uint64_t at = 0;
  for (int64_t record = 0;; ++record) {
    if (opts.cancel && opts.cancel->load()) return Status::Cancelled("cancelled while reading " + file);
    bool end = false;
    auto frame = ReadTfRecordHeader(read, bytes.size(), at, record, file, &end);
    if (end) break;
    const std::string where = TfRecordWhere(file, record);
    if (!frame.ok()) {
      if (frame.status().code() == Status::Code::kIOError) return frame.status();
      // Over the budget, its length checked: the next record is past it.
      uint64_t length = 0;
      if (frame.status().code() == Status::Code::kInvalidArgument && read(&length, 8, at).ok() &&
          length <= bytes.size() - at - 12 && bytes.size() - at - 12 - length >= 4) {
        s.errors.push_back({where, Reason(frame.status(), where)});
        at += 12 + length + 4;
        continue;
      }
      auto next = std::upper_bound(offsets.begin(), offsets.end(), at);
      const bool resume = next != offsets.end();
      s.errors.push_back({where, Reason(frame.status(), where) +
                                     (resume ? "; going on at the next record of " + file + ".idx"
                                             : "; the rest of the file is not read")});
      if (!resume) break;
      at = *next;
      record = int64_t(next - offsets.begin()) - 1;  // numbered as the index lists them
      continue;
    }
    data.resize(size_t(frame->size));
    IMAGEPACK_RETURN_IF_ERROR(bytes.ReadAt(frame->offset, frame->size, data.data()));
    Status crc = CheckTfRecordData(read, *frame, data.data(), record, file);
    if (crc.code() == Status::Code::kIOError) return crc;
    std::string bad = crc.ok() ? AddRecord(data.data(), *frame, file, record, archive, s, l) : Reason(crc, where);
    if (!bad.empty()) s.errors.push_back({where, bad});
    at = frame->next;
  }
  return Status::Ok();
}

// TF-slim's labels.txt ("N:name" per line, dataset_utils.write_label_file)
// beside the files: names by label as written. With "0:background" the
// labels count from 1 (the Inception ImageNet layout), else from 0
// (TF-slim's flowers, cifar10, mnist). Empty when there is none.
Status SlimLabels(Storage& storage, const std::string& dir, std::vector<std::string>* names, int* base) {
  const std::string path = Storage::Join(dir, "labels.txt");
  auto info = storage.Stat(path);
  if (!info.ok()) return info.status();
  if (!info->exists || info->directory) return Status::Ok();
  auto bytes = ReadWhole(storage, path, limits::kWholeFile);
  if (!bytes.ok()) return bytes.status();
  std::map<int64_t, std::string> by_index;
  const std::string text(bytes->begin(), bytes->end());
  int line = 0;
  for (size_t at = 0; at < text.size();) {
    size_t eol = text.find('\n', at);
    if (eol == std::string::npos) eol = text.size();
    const std::string l = TrimSpace(text.substr(at, eol - at));
    at = eol + 1;
    ++line;
    if (l.empty()) continue;
    const auto colon = l.find(':');
    RawLabel index = LabelFromText(colon == std::string::npos ? "" : l.substr(0, colon));
    const std::string name = colon == std::string::npos ? "" : TrimSpace(l.substr(colon + 1));
    if (!index.present || index.is_name || index.index > int64_t(limits::kClasses) || name.empty() ||
        !CheckName(name, "class name").ok() || !by_index.emplace(index.index, name).second)
      return Status::InvalidArgument(path + ":" + std::to_string(line) + ": expected N:NAME (TF-slim's labels file), got " +
                                     Shown(l.substr(0, 200)));
  }
  *base = by_index.count(0) && LowerAscii(by_index[0]) == "background" ? 1 : 0;
  for (const auto& [i, name] : by_index) {
    if (i < *base) continue;
    if (i - *base != int64_t(names->size()))
      return Status::InvalidArgument(path + ": class " + std::to_string(names->size() + size_t(*base)) + " is missing");
    names->push_back(name);
  }
  return Status::Ok();
}

// The names the records give their classes (synset, else text), by label,
// when every label 0..max has one and no label two; else empty (a problem
// line says why when some records name theirs).
std::vector<std::string> NamesFromRecords(const TfListing& l, DatasetSource& s) {
  std::map<int64_t, std::string> by_index;
  bool named = false;
  for (const TfRecordInfo& r : l.infos) {
    if (r.name.empty() || !r.raw.present) continue;
    named = true;
    auto [it, fresh] = by_index.emplace(r.raw.index, r.name);
    if (!fresh && it->second != r.name) {
      s.problems.push_back(r.where + ": class " + std::to_string(r.raw.index) + " is named both '" + it->second +
                           "' and '" + r.name + "': classes are numbered, not named");
      return {};
    }
  }
  std::vector<std::string> out;
  std::set<std::string> distinct;
  for (const auto& [i, name] : by_index) {
    if (i != int64_t(out.size()) || !distinct.insert(name).second) {
      s.problems.push_back("the records name only some of their classes, or two alike: classes are numbered");
      return {};
    }
    out.push_back(name);
  }
  (void)named;
  return out;
}

// The class list and each item's label (sources.h, OpenTfRecordSource);
// items whose label cannot be placed go to errors.
Status ResolveTfLabels(const std::vector<std::string>& beside, TfListing& l, const SourceOptions& opts,
                       DatasetSource& s) {
  std::vector<std::string> named = beside.empty() ? NamesFromRecords(l, s) : beside;
  std::vector<std::string> fixed;
  const bool given = opts.classes || !opts.classes_file.empty();
  if (given) IMAGEPACK_RETURN_IF_ERROR(FixedClasses(opts, &fixed));
  else fixed = named;
  std::vector<RawLabel> raw;
  std::vector<std::string> where;
  for (const TfRecordInfo& r : l.infos) {
    RawLabel x = r.raw;
    // With --classes, a class is found by the name the files give it.
    if (given && x.present && x.index < int64_t(named.size())) x = {true, true, -1, named[size_t(x.index)]};
    raw.push_back(x);
    where.push_back(r.where);
  }
  std::vector<int32_t> labels;
  std::vector<std::string> why;
  IMAGEPACK_RETURN_IF_ERROR(ResolveLabelsUnless(opts.no_class, raw, where, fixed, &s.classes, &labels, &why));
  // Box classes follow their record's: an index as written -> ours.
  std::map<int64_t, int32_t> ours;
  for (size_t i = 0; i < l.infos.size(); ++i)
    if (why[i].empty() && l.infos[i].raw.present) ours[l.infos[i].raw.index] = labels[i];
  const auto box_slot = std::find_if(s.fields.begin(), s.fields.end(), [](const FieldSpec& f) { return f.name == "boxes"; });
  std::vector<SourceItem> kept;
  for (size_t i = 0; i < s.items.size(); ++i) {
    std::string bad = why[i].empty() ? "" : why[i] + (why[i] == "no label" ? " (image/class/label or label)" : "");
    if (box_slot != s.fields.end() && bad.empty()) {
      SourceField f;
      f.slot = int(box_slot - s.fields.begin());
      for (Box b : l.infos[i].boxes) {
        auto it = ours.find(b.label);
        if (it == ours.end() || it->second < 0) {
          bad = "a box of class " + std::to_string(b.label) + ", which no record's label names";
          break;
        }
        b.label = it->second;
        f.boxes.push_back(b);
      }
      s.items[i].fields.push_back(std::move(f));
    }
    if (!bad.empty()) {
      s.errors.push_back({l.infos[i].where, bad});
      continue;
    }
    s.items[i].label = labels[i];
    kept.push_back(std::move(s.items[i]));
  }
  s.items = std::move(kept);
  if (box_slot != s.fields.end()) box_slot->classes = s.classes;
  return Status::Ok();
}

// The classes beside the files: TF-slim's labels.txt (which also says where
// image/class/label starts), else TFDS's label.labels.txt or a
// classes.txt (one name per line, in label order).
Status BesideClasses(Storage& storage, const std::string& dir, std::vector<std::string>* names, int* base) {
  IMAGEPACK_RETURN_IF_ERROR(SlimLabels(storage, dir, names, base));
  if (!names->empty()) return Status::Ok();
  for (const char* file : {"label.labels.txt", "classes.txt"}) {
    const std::string path = Storage::Join(dir, file);
    auto info = storage.Stat(path);
    if (!info.ok()) return info.status();
    if (!info->exists || info->directory) continue;
    auto list = ReadClassList(path);
    if (!list.ok()) return list.status();
    *names = std::move(list.value());
    return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace

Result<DatasetSource> OpenTfRecordSource(const std::string& src, const SourceOptions& opts) {
  auto storage = OpenStorage(src);
  if (!storage.ok()) return storage.status();
  // A folder's files, side files (labels, metadata) left out.
  auto files = ContainerFiles(
      *storage.value(), src, [](const std::string& n) { return !IsSideFile(n); }, "TFRecord files");
  if (!files.ok()) return files.status();
  DatasetSource s;
  s.root = src;
  s.scratch = std::make_shared<ScratchFiles>();
  TfListing l;
  std::vector<std::string> beside;
  if (!opts.no_class)
    IMAGEPACK_RETURN_IF_ERROR(BesideClasses(*storage.value(), Storage::Parent(files->front()), &beside, &l.label_base));
  const std::string scratch_dir = ScratchDirOf(opts);
  for (const std::string& file : *files)
    IMAGEPACK_RETURN_IF_ERROR(AddFile(*storage.value(), file, scratch_dir, opts, s, l));
  if (std::any_of(l.infos.begin(), l.infos.end(), [](const TfRecordInfo& r) { return r.has_boxes; })) {
    auto slot = Declare(s, "boxes", FieldKind::kBoxes, opts);
    if (!slot.ok()) return slot.status();
  }
  IMAGEPACK_RETURN_IF_ERROR(ResolveTfLabels(beside, l, opts, s));
  if (!l.unused.empty()) {
    std::string keys;
    size_t shown = 0;
    for (const auto& [key, n] : l.unused)
      if (shown++ < 8) keys += (keys.empty() ? "" : ", ") + key + " (" + std::to_string(n) + ")";
    if (l.unused.size() > 8) keys += ", ...";
    s.problems.push_back("features not packed: " + keys);
  }
  return s;
}

}  // namespace imagepack::internal
