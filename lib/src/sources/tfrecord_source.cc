// TFRecord files (plain or gzipped) as a source (sources.h,
// OpenTfRecordSource): each record's CRCs checked and its tf.train.Example
// read, in the TF-slim / Inception layout (image/encoded,
// image/class/label counted from 1, boxes) or TFDS's (image, label); every
// item a byte range of its file read through its byte source while
// packing.
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "formats/braces.h"
#include "formats/gzip.h"
#include "formats/labels.h"
#include "base/limits.h"
#include "formats/text.h"
#include "formats/tfrecord.h"
#include "formats/webdataset.h"
#include "imagepack/storage.h"
#include "sources/registry.h"
#include "sources/sources.h"
#include "sources/tfrecord_listing.h"
#include "storage/fd_io.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

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

// A class index as written (`value`, counted from `base`) made 0-based:
// "" or why it is no class (below the base, or past int32, where no class
// list reaches).
std::string ClassIndex(int64_t value, int base, const char* what, int64_t* out) {
  if (value < base) return std::string(what) + " " + std::to_string(value) + " is negative" +
                           (base ? " (counted from " + std::to_string(base) + ")" : "");
  if (value - base > INT32_MAX)
    return std::string(what) + " " + std::to_string(value) + " is past any class (labels are at most " +
           std::to_string(int64_t(INT32_MAX) + base) + ")";
  *out = value - base;
  return "";
}

// The record's boxes (normalised in TF-slim's layout) in pixels of
// image/width x image/height; "" or why not. A box without a label of its
// own takes the record's (`label`, 0-based; none: -1).
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
    int64_t bl_i = label;
    if (bl) {
      const std::string what = "box " + std::to_string(i) + ": image/object/bbox/label";
      if (std::string bad = ClassIndex(bl->ints[i], label_base, what.c_str(), &bl_i); !bad.empty()) return bad;
    } else if (label < 0) {
      return "box " + std::to_string(i) + " has no class (no image/object/bbox/label, and the record no label)";
    }
    const float W = float(w->ints[0]), H = float(h->ints[0]);
    info->boxes.push_back({v[0] * W, v[1] * H, v[2] * W, v[3] * H, int32_t(bl_i)});
  }
  return "";
}

// The record's label (0-based) and its class's name; "" or why it is
// skipped.
std::string ReadLabel(const TfExample& ex, const uint8_t* data, const TfListing& l, TfRecordInfo* info,
                      std::string* name) {
  const TfFeature* slim = Find(ex, "image/class/label", TfFeature::Kind::kInt64);
  const TfFeature* tfds = Find(ex, "label", TfFeature::Kind::kInt64);
  const TfFeature* f = slim ? slim : tfds;
  if (f) {
    const char* key = slim ? "image/class/label" : "label";
    if (f->ints.size() != 1)
      return std::string(key) + " holds " + std::to_string(f->ints.size()) + " values (one label is read)";
    const int base = slim ? l.label_base : 0;
    if (slim && base == 1 && f->ints[0] == 0)
      return "label 0, the background class (image/class/label counts classes from 1)";
    if (std::string bad = ClassIndex(f->ints[0], base, "label", &info->label); !bad.empty()) return bad;
    info->labelled = true;
  }
  *name = BytesOf(data, Find(ex, "image/class/synset", TfFeature::Kind::kBytes));
  if (name->empty()) *name = BytesOf(data, Find(ex, "image/class/text", TfFeature::Kind::kBytes));
  if (!name->empty() && !CheckName(*name, "class name").ok()) name->clear();
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
std::string AddRecord(const uint8_t* data, const TfRecordFrame& frame, int32_t file, int64_t record, int archive,
                      DatasetSource& s, TfListing& l) {
  auto ex = ParseTfExample(data, size_t(frame.size));
  if (!ex.ok()) return ex.status().message();
  const char* image_key = "image/encoded";
  const TfFeature* image = Find(*ex, image_key, TfFeature::Kind::kBytes);
  if (!image) image = Find(*ex, image_key = "image", TfFeature::Kind::kBytes);
  if (!image) {
    auto it = ex->find("image/encoded");
    if (it == ex->end()) it = ex->find("image");
    if (it != ex->end() && it->second.kind != TfFeature::Kind::kBytes)
      return "no image: " + it->first + " is a " +
             (it->second.kind == TfFeature::Kind::kInt64 ? "list of integers"
              : it->second.kind == TfFeature::Kind::kFloat ? "list of floats"
                                                          : "feature of no kind") + ", not image bytes";
    return "no image (an image/encoded or image bytes feature)";
  }
  if (image->bytes.empty()) return std::string("no image: ") + image_key + " is an empty list";
  if (image->bytes.size() != 1)
    return std::string(image_key) + " holds " + std::to_string(image->bytes.size()) +
           " images (one is read a record)";
  if (image->bytes[0].second == 0) return std::string("empty image bytes: ") + image_key + " holds 0 bytes";
  TfRecordInfo info;
  info.file = file;
  info.record = record;
  std::string name;
  if (std::string bad = ReadLabel(*ex, data, l, &info, &name); !bad.empty()) return bad;
  if (std::string bad = ReadBoxes(*ex, l.label_base, info.labelled ? info.label : -1, &info); !bad.empty())
    return bad;
  const auto [at, n] = image->bytes[0];
  SourceItem item;
  item.archive = archive;
  item.offset = frame.offset + at;
  item.size = n;
  item.rel = BytesOf(data, Find(*ex, "image/filename", TfFeature::Kind::kBytes));
  if (item.rel.empty()) {
    char num[24];
    std::snprintf(num, sizeof num, "%08lld", static_cast<long long>(record));
    item.rel = BaseNameOf(l.files[size_t(file)]) + "/" + num + "." +
               ImageExtOf(BytesOf(data, Find(*ex, "image/format", TfFeature::Kind::kBytes)), data + at, n);
  }
  if (Status ok = CheckName(item.rel, "record path"); !ok.ok()) return ok.message();
  if (item.rel.size() > 65535) return "a record path of " + std::to_string(item.rel.size()) + " bytes (at most 65535)";
  for (const auto& [key, _] : *ex) {
    if (KnownKeys().count(key)) continue;
    auto it = l.unused.find(key);
    if (it != l.unused.end()) ++it->second;
    else if (l.unused.size() < 64) l.unused.emplace(key, 1);
    else ++l.unused_other;
  }
  if (!name.empty() && info.labelled && l.names_clash.empty()) {
    auto [it, fresh] = l.names.emplace(info.label, name);
    if (!fresh && it->second != name)
      l.names_clash = l.Where(info) + ": class " + std::to_string(info.label) + " is named both '" + it->second +
                      "' and '" + name + "': classes are numbered, not named";
  }
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
// where to go on when a record's header is damaged. Read 64 KiB at a time
// and bounded by the data file's size (ReadTfRecordIndex): at most
// data_size / 16 offsets, 8 bytes each. Empty otherwise.
std::vector<uint64_t> IndexOffsets(Storage& storage, const std::string& file, uint64_t data_size, DatasetSource& s) {
  const std::string idx = file + ".idx";
  auto info = storage.Stat(idx);
  if (!info.ok() || !info->exists || info->directory) return {};
  auto opened = storage.Open(idx);
  std::vector<uint64_t> out;
  Status st = opened.status();
  if (opened.ok()) {
    const ByteSource& b = *opened.value();
    auto read = [&](void* buf, size_t n, uint64_t at) { return b.ReadAt(at, n, static_cast<uint8_t*>(buf)); };
    st = ReadTfRecordIndex(read, b.size(), data_size, idx, [&](uint64_t offset, uint64_t) { out.push_back(offset); });
  }
  if (!st.ok()) {
    s.problems.push_back(st.message() + " (index not used)");
    return {};
  }
  return out;  // increasing: ReadTfRecordIndex refuses records out of order
}

// One file's bytes read through a window of up to 1 MiB read ahead: a
// record's header, data and CRC cost no read of their own each (a file of
// millions of empty records is read a MiB at a time, not 3 reads a record).
class Window {
 public:
  explicit Window(const ByteSource& bytes) : bytes_(bytes) {}
  Status Read(void* out, size_t n, uint64_t at) {
    if (at >= start_ && at - start_ <= buf_.size() && n <= buf_.size() - (at - start_)) {
      if (n) std::memcpy(out, buf_.data() + (at - start_), n);
      return Status::Ok();
    }
    constexpr uint64_t kWindow = 1 << 20;
    if (n >= kWindow || at > bytes_.size() || bytes_.size() - at < n)
      return bytes_.ReadAt(at, n, static_cast<uint8_t*>(out));
    buf_.resize(size_t(std::min<uint64_t>(kWindow, bytes_.size() - at)));
    start_ = at;
    Status st = bytes_.ReadAt(at, buf_.size(), buf_.data());
    if (!st.ok()) {
      buf_.clear();
      return st;
    }
    if (n) std::memcpy(out, buf_.data(), n);
    return Status::Ok();
  }

 private:
  const ByteSource& bytes_;
  std::vector<uint8_t> buf_;
  uint64_t start_ = 0;
};

// Opens a file (a gzipped one inflated into `scratch_dir` first), keeps it
// in s.scratch and adds its records; a damaged record is skipped and listed
// as FILE:record N (within the file's budget of entries, AddError). At
// most limits::kTfFileRecords records a file.
Status AddFile(Storage& storage, const std::string& file, const std::string& scratch_dir,
               const SourceOptions& opts, DatasetSource& s, TfListing& l) {
  const int32_t fi = int32_t(l.files.size());
  l.files.push_back(file);
  l.file_errors.emplace_back();
  auto opened = storage.Open(file);
  if (!opened.ok()) return opened.status();
  uint8_t magic[2] = {0, 0};
  if (opened.value()->size() >= 2) IMAGEPACK_RETURN_IF_ERROR(opened.value()->ReadAt(0, 2, magic));
  const bool gzipped = magic[0] == 0x1f && magic[1] == 0x8b;
  if (gzipped) {
    auto inflated = InflateToScratch(*opened.value(), scratch_dir, opts.cancel);
    if (!inflated.ok()) {
      const Status::Code c = inflated.status().code();
      if (c == Status::Code::kCancelled || c == Status::Code::kIOError) return inflated.status();
      s.errors.push_back({file, inflated.status().message() + "; the file is skipped"});
      return Status::Ok();
    }
    opened = AdoptFileSource(*inflated, file);
    if (!opened.ok()) return opened.status();
  }
  const ByteSource& bytes = *opened.value();
  s.scratch->archives.push_back(std::move(opened.value()));  // closed with the source
  const int archive = static_cast<int>(s.archives.size());
  s.archives.push_back(file);
  // A DALI index counts the plain file's bytes.
  const std::vector<uint64_t> offsets =
      gzipped ? std::vector<uint64_t>() : IndexOffsets(storage, file, bytes.size(), s);
  Window window(bytes);
  auto read = [&](void* buf, size_t n, uint64_t at) { return window.Read(buf, n, at); };
  std::vector<uint8_t> data;
  uint64_t at = 0;
  int64_t visited = 0;
  for (int64_t record = 0;; ++record) {
    if (opts.cancel && opts.cancel->load()) return Status::Cancelled("cancelled while reading " + file);
    bool end = false;
    auto frame = ReadTfRecordHeader(read, bytes.size(), at, record, file, &end);
    if (end) break;
    if (++visited > limits::kTfFileRecords) {
      AddTfError(l, s, fi, record,
               "more than " + std::to_string(limits::kTfFileRecords) +
                   " records in one file (budget); the rest of the file is not read");
      break;
    }
    if (!frame.ok()) {
      const std::string where = TfRecordWhere(file, record);
      if (frame.status().code() == Status::Code::kIOError) return frame.status();
      // Over the budget, its length checked: the next record is past it.
      uint64_t length = 0;
      if (frame.status().code() == Status::Code::kInvalidArgument && read(&length, 8, at).ok() &&
          length <= bytes.size() - at - 12 && bytes.size() - at - 12 - length >= 4) {
        AddTfError(l, s, fi, record, Reason(frame.status(), where));
        at += 12 + length + 4;
        continue;
      }
      auto next = std::upper_bound(offsets.begin(), offsets.end(), at);
      if (next != offsets.end()) {
        AddTfError(l, s, fi, record,
                 Reason(frame.status(), where) + "; going on at the next record of " + file + ".idx");
        at = *next;
        record = int64_t(next - offsets.begin()) - 1;  // numbered as the index lists them
        continue;
      }
      // A damaged length (its CRC does not match): on at the next byte
      // where a header's CRC does, numbering on from this record. A length
      // whose CRC matches runs past the end: the file is cut short.
      uint8_t h[12];
      const bool damaged = bytes.size() - at >= 12 && read(h, 12, at).ok() &&
                           MaskCrc(Crc32c(h, 8)) != (uint32_t(h[8]) | uint32_t(h[9]) << 8 |
                                                     uint32_t(h[10]) << 16 | uint32_t(h[11]) << 24);
      auto found = damaged ? FindTfRecordHeader(read, bytes.size(), at + 1) : Result<uint64_t>(bytes.size());
      if (!found.ok()) return found.status();
      if (*found >= bytes.size()) {
        AddTfError(l, s, fi, record, Reason(frame.status(), where) + "; the rest of the file is not read" +
                                       (damaged ? " (no record header after it)" : ""));
        break;
      }
      AddTfError(l, s, fi, record,
               Reason(frame.status(), where) + "; going on at byte " + std::to_string(*found) +
                   ", the next record header (" + std::to_string(*found - at) + " bytes skipped)");
      at = *found;
      continue;
    }
    data.resize(size_t(frame->size));
    IMAGEPACK_RETURN_IF_ERROR(read(data.data(), size_t(frame->size), frame->offset));
    Status crc = CheckTfRecordData(read, *frame, data.data(), record, file);
    if (crc.code() == Status::Code::kIOError) return crc;
    std::string bad = crc.ok() ? AddRecord(data.data(), *frame, fi, record, archive, s, l)
                               : Reason(crc, TfRecordWhere(file, record));
    if (!bad.empty()) AddTfError(l, s, fi, record, std::move(bad));
    at = frame->next;
  }
  return Status::Ok();
}

// Records named alike (image/filename given twice, or a name as one file's
// records are named by number): the first keeps it, the later ones are
// skipped. One sort of the items' indices, no set of names beside them.
void DropTwice(TfListing& l, DatasetSource& s) {
  std::vector<size_t> order(s.items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int c = s.items[a].rel.compare(s.items[b].rel);
    return c != 0 ? c < 0 : a < b;
  });
  std::vector<bool> drop(s.items.size(), false);
  bool any = false;
  for (size_t k = 1; k < order.size(); ++k)
    if (s.items[order[k]].rel == s.items[order[k - 1]].rel) drop[order[k]] = any = true;
  if (!any) return;
  size_t w = 0;
  for (size_t i = 0; i < s.items.size(); ++i) {
    if (drop[i]) {
      AddTfError(l, s, l.infos[i].file, l.infos[i].record, s.items[i].rel.substr(0, 200) + " is in the records twice");
      continue;
    }
    if (w != i) {
      s.items[w] = std::move(s.items[i]);
      l.infos[w] = std::move(l.infos[i]);
    }
    ++w;
  }
  s.items.resize(w);
  l.infos.resize(w);
}

}  // namespace

Result<DatasetSource> OpenTfRecordSource(const std::string& src, const SourceOptions& opts) {
  auto storage = SourceStorage(src, opts);
  if (!storage.ok()) return storage.status();
  // A folder's files, side files (labels, metadata) left out: the
  // registry row's names (registry.h).
  auto files = ContainerFiles(
      *storage.value(), src,
      [](const std::string& n) { return TfRecordNameIs(BaseNameOf(n)) != NameIs::kSide; }, "TFRecord files", opts);
  if (!files.ok()) return files.status();
  DatasetSource s;
  s.root = src;
  s.scratch = std::make_shared<ScratchFiles>();
  TfListing l;
  std::vector<std::string> beside;
  if (!opts.no_class)
    IMAGEPACK_RETURN_IF_ERROR(BesideTfClasses(*storage.value(), Storage::Parent(files->front()), &beside, &l.label_base));
  const std::string scratch_dir = ScratchDirOf(opts);
  for (const std::string& file : *files)
    IMAGEPACK_RETURN_IF_ERROR(AddFile(*storage.value(), file, scratch_dir, opts, s, l));
  if (std::any_of(l.infos.begin(), l.infos.end(), [](const TfRecordInfo& r) { return r.has_boxes; })) {
    auto slot = Declare(s, "boxes", FieldKind::kBoxes, opts);
    if (!slot.ok()) return slot.status();
  }
  DropTwice(l, s);
  IMAGEPACK_RETURN_IF_ERROR(ResolveTfLabels(beside, l, opts, s));
  FoldTfErrors(l, s);
  if (!l.unused.empty()) {
    std::string keys;
    size_t shown = 0;
    for (const auto& [key, n] : l.unused)
      if (shown++ < 8) keys += (keys.empty() ? "" : ", ") + Shown(key.substr(0, 100)) + " (" + std::to_string(n) + ")";
    if (l.unused.size() > 8 || l.unused_other > 0) keys += ", ...";
    s.problems.push_back("features not packed: " + keys);
  }
  return s;
}

}  // namespace imagepack::internal
