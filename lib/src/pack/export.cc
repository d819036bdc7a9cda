#include "imagepack/export.h"
#include "imagepack/storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>

#include "imagepack/files.h"
#include "imagepack/mask.h"
#include "imagepack/record.h"
#include "imagepack/store.h"
#include "base/threads.h"
#include "formats/text.h"
#include "pack/export_internal.h"
#include "storage/fd_io.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace imagepack {

Result<ExportLayout> ParseExportLayout(const std::string& name) {
  if (name == "webdataset" || name == "wds") return ExportLayout::kWebDataset;
  if (name == "imagefolder") return ExportLayout::kImageFolder;
  if (name == "tfrecord") return ExportLayout::kTfRecord;
  return Status::InvalidArgument("unknown layout '" + name + "' (webdataset, imagefolder or tfrecord)");
}

namespace {
using internal::ClassName;
using internal::ImageBytes;

// A tar file written member by member (ustar; a pax header for long names),
// through an AsideFile: Finish renames it into place.
class TarOut {
 public:
  TarOut(std::string path, bool gzip, uint64_t mtime) : file_(std::move(path), gzip), mtime_(mtime) {}

  void Add(const std::string& name, const uint8_t* data, size_t size) {
    if (name.size() > 100) {  // pax extended header: "LEN path=NAME\n"
      const std::string body = "path=" + name + "\n";
      size_t len = body.size() + 2;
      while (std::to_string(len).size() + 1 + body.size() != len) ++len;
      const std::string rec = std::to_string(len) + " " + body;
      Header("PaxHeader", rec.size(), 'x');
      file_.Write(rec.data(), rec.size());
      Pad(rec.size());
    }
    Header(name.substr(0, 100), size, '0');
    file_.Write(data, size);
    Pad(size);
  }

  // *bytes: the file's size as stored (gzip: compressed).
  Status Finish(uint64_t* bytes) {
    static const char zeros[1024] = {};
    file_.Write(zeros, sizeof zeros);
    return file_.Finish(bytes);
  }

 private:
  void Header(const std::string& name, uint64_t size, char type) {
    char h[512] = {};
    std::memcpy(h, name.data(), std::min<size_t>(name.size(), 100));
    std::snprintf(h + 100, 8, "%07o", 0644);
    std::snprintf(h + 108, 8, "%07o", 0);
    std::snprintf(h + 116, 8, "%07o", 0);
    std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(size));
    std::snprintf(h + 136, 12, "%011llo", static_cast<unsigned long long>(mtime_));
    std::memset(h + 148, ' ', 8);
    h[156] = type;
    std::memcpy(h + 257, "ustar\0" "00", 8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);
    h[155] = ' ';
    file_.Write(h, 512);
  }
  void Pad(uint64_t size) {
    static const char zeros[512] = {};
    if (size % 512) file_.Write(zeros, 512 - size % 512);
  }

  internal::AsideFile file_;
  uint64_t mtime_;
};

// The record's path without its extension, dots in the last component made
// '_' (webdataset's key ends at the first dot); only its plain components
// are kept ("", ".", ".." dropped), so a member never names a place outside
// the shard's own tree.
// `path` with only its plain components: no leading '/', no "", "." or
// ".." (what is written from it stays below DST).
std::string PlainComponents(std::string_view path) {
  std::string p;
  for (size_t at = 0; at <= path.size();) {
    size_t end = path.find('/', at);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(at, end - at);
    if (!part.empty() && part != "." && part != "..") {
      if (!p.empty()) p += '/';
      p.append(part);
    }
    at = end + 1;
  }
  return p;
}

std::string KeyOf(std::string_view path) {
  std::string p = PlainComponents(path);
  const auto slash = p.rfind('/');
  const auto dot = p.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) p.resize(dot);
  for (size_t i = slash == std::string::npos ? 0 : slash + 1; i < p.size(); ++i)
    if (p[i] == '.') p[i] = '_';
  if (p.empty() || p.back() == '/') p += "record";
  return p;
}

// `name` made unique within `taken` (and added to it): NAME, else
// NAME~INDEX, else NAME~INDEX~2, ... inserted before `ext` when given.
std::string Unique(const std::string& name, const std::string& ext, int64_t index, std::set<std::string>* taken) {
  if (taken->insert(name + ext).second) return name + ext;
  std::string candidate = name + "~" + std::to_string(index);
  for (int n = 2; !taken->insert(candidate + ext).second; ++n)
    candidate = name + "~" + std::to_string(index) + "~" + std::to_string(n);
  return candidate + ext;
}

}  // namespace

Status internal::ImageBytes(Encoding enc, int channels, uint32_t h, uint32_t w, const uint8_t* data, size_t size,
                  std::vector<uint8_t>* out, const char** ext) {
  if (enc == Encoding::kJpeg) {
    out->assign(data, data + size);
    *ext = "jpg";
    return Status::Ok();
  }
  Image img;
  img.width = static_cast<int>(w);
  img.height = static_cast<int>(h);
  img.channels = channels;
  img.pixels.assign(data, data + size);
  auto png = EncodePng(img);
  if (!png.ok()) return png.status();
  *out = std::move(png.value());
  *ext = "png";
  return Status::Ok();
}

std::string internal::ClassName(const DatasetMeta& meta, int32_t label) {
  return label >= 0 && label < static_cast<int32_t>(meta.classes.size()) ? meta.classes[size_t(label)] : "";
}

internal::AsideFile::AsideFile(std::string path, bool gzip) : path_(std::move(path)) {
  auto created = CreateTempFor(path_);
  if (!created.ok()) {
    status_ = created.status();
    return;
  }
  tmp_ = created->path;
  fd_ = created->fd;
  if (!gzip) return;
  gz_ = gzdopen(fd_, "wb1");
  if (!gz_) {
    status_ = Status::IOError("cannot create " + tmp_);
    return;
  }
  fd_ = -1;  // gzclose closes it
  gzbuffer(gz_, 1 << 20);
}

internal::AsideFile::~AsideFile() {
  if (gz_) gzclose(gz_);
  if (fd_ >= 0) ::close(fd_);
  if (!done_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void internal::AsideFile::Write(const void* data, size_t size) {
  if (!status_.ok() || size == 0) return;
  if (gz_) {
    if (gzwrite(gz_, data, static_cast<unsigned>(size)) != static_cast<int>(size))
      status_ = Status::IOError("write " + tmp_ + " failed");
  } else {
    status_ = WriteAll(fd_, data, size, tmp_);
  }
}

Status internal::AsideFile::Finish(uint64_t* bytes) {
  if (gz_) {
    if (gzclose(gz_) != Z_OK && status_.ok()) status_ = Status::IOError("write " + tmp_ + " (gzip) failed");
    gz_ = nullptr;
  } else if (fd_ >= 0) {
    if (::close(fd_) != 0 && status_.ok()) status_ = Status::FromErrno("close " + tmp_, errno);
    fd_ = -1;
  }
  if (status_.ok() && ::rename(tmp_.c_str(), path_.c_str()) != 0)
    status_ = Status::FromErrno("rename " + tmp_ + " to " + path_, errno);
  done_ = status_.ok();
  struct stat st {};
  if (done_ && ::stat(path_.c_str(), &st) == 0) *bytes = static_cast<uint64_t>(st.st_size);
  return status_;
}

namespace {

// The members of one record (after its key).
struct Member {
  std::string suffix;  // ".jpg", ".cls", ...
  std::vector<uint8_t> bytes;
};

// `index`: the record's index in the database, written into the .json so
// that an import restores the order.
Status RecordMembers(const RecordView& r, int64_t index, const DatasetMeta& meta, std::vector<Member>* out) {
  out->clear();
  Member image;
  const char* ext = "jpg";
  IMAGEPACK_RETURN_IF_ERROR(ImageBytes(r.fields.encoding, r.fields.channels, r.fields.height, r.fields.width,
                                       r.payload, r.payload_size, &image.bytes, &ext));
  image.suffix = std::string(".") + ext;
  out->push_back(std::move(image));
  json j = {{"path", std::string(r.path)}, {"index", index}};
  if (r.fields.label >= 0) {
    j["label"] = r.fields.label;
    const std::string cls = std::to_string(r.fields.label);
    out->push_back({".cls", std::vector<uint8_t>(cls.begin(), cls.end())});
    j["class"] = ClassName(meta, r.fields.label);
  }
  for (const FieldView& f : RecordFieldViews(r)) {
    const FieldSpec& spec = meta.fields.at(f.slot);
    const KindInfo& info = InfoOf(f.kind);
    switch (info.layout) {
      case FieldLayout::kPicture: {
        Member m;
        const char* fext = "png";
        IMAGEPACK_RETURN_IF_ERROR(ImageBytes(f.encoding == 0 ? Encoding::kJpeg : Encoding::kRaw, f.channels, f.height,
                                             f.width, f.data, f.size, &m.bytes, &fext));
        m.suffix = "." + spec.name + "." + fext;
        out->push_back(std::move(m));
        break;
      }
      case FieldLayout::kMap: {  // a gray PNG of the map's own sample width, 8 or 16 bits
        Image map;
        map.width = static_cast<int>(f.width);
        map.height = static_cast<int>(f.height);
        map.channels = f.encoding;
        map.pixels.assign(f.data, f.data + f.size);
        auto png = EncodeMaskPng(map);
        if (!png.ok()) return png.status().WithContext(spec.name);
        out->push_back({"." + spec.name + ".png", std::move(png.value())});
        break;
      }
      case FieldLayout::kList:
        if (info.floats) {
          std::vector<float> v(f.count);
          std::memcpy(v.data(), f.data, v.size() * 4);
          j[spec.name] = v;
        } else {
          std::vector<int32_t> v(f.count);
          std::memcpy(v.data(), f.data, v.size() * 4);
          j[spec.name] = v;
        }
        break;
      case FieldLayout::kBoxes: {
        json boxes = json::array();
        for (const Box& b : ReadBoxes(f)) boxes.push_back({b.x0, b.y0, b.x1, b.y1, b.label});
        j[spec.name] = boxes;
        break;
      }
      case FieldLayout::kText: j[spec.name] = std::string(reinterpret_cast<const char*>(f.data), f.size); break;
    }
  }
  const std::string js = j.dump(-1, ' ', false, json::error_handler_t::replace);  // an old record's path may not be UTF-8
  out->push_back({".json", std::vector<uint8_t>(js.begin(), js.end())});
  return Status::Ok();
}

// ImageFolder: where record `r` goes below DST.
Result<std::string> ImageFolderPath(const RecordView& r, const DatasetMeta& meta, const char* ext) {
  const std::string cls = ClassName(meta, r.fields.label);
  if (cls.empty())
    return Status::InvalidArgument("record " + std::string(r.path) + " has no class (label " +
                                   std::to_string(r.fields.label) + "): an ImageFolder tree needs one per image");
  // Only the path's plain components: nothing lands outside DST/CLASS.
  std::string rel = PlainComponents(r.path);
  if (rel.rfind(cls + "/", 0) == 0) rel = rel.substr(cls.size() + 1);
  if (rel.empty()) rel = "record";
  // The extension must say the content (torchvision picks files by it).
  const std::string lower = LowerAscii(rel);
  const bool jpeg_name = lower.size() > 4 && (lower.rfind(".jpg") == lower.size() - 4 ||
                                              lower.rfind(".jpeg") == lower.size() - 5 ||
                                              lower.rfind(".jpe") == lower.size() - 4);
  const bool png_name = lower.size() > 4 && lower.rfind(".png") == lower.size() - 4;
  if ((std::strcmp(ext, "jpg") == 0 && !jpeg_name) || (std::strcmp(ext, "png") == 0 && !png_name))
    rel += std::string(".") + ext;
  std::string safe_cls = cls;
  std::replace(safe_cls.begin(), safe_cls.end(), '/', '_');
  if (safe_cls == "." || safe_cls == "..") safe_cls = "_" + safe_cls;
  return safe_cls + "/" + rel;
}

uint64_t FileMtime(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_mtime) : 0;
}

// export.json: what DST holds. A re-run must match it.
Status CheckOrWriteManifest(const ExportOptions& o, const DatasetMeta& meta, int64_t first, int64_t last,
                            int64_t per_shard) {
  json dbs = json::array();
  for (const auto& d : o.dbs) dbs.push_back(fs::absolute(d).string());
  json m = {{"databases", dbs},
            {"records", meta.count},
            {"created", meta.created},
            {"layout", o.layout == ExportLayout::kWebDataset ? "webdataset"
                       : o.layout == ExportLayout::kTfRecord ? "tfrecord" : "imagefolder"},
            {"first", first},
            {"last", last}};
  if (o.layout != ExportLayout::kImageFolder) {
    m["records_per_shard"] = per_shard;
    m["gzip"] = o.gzip;
    m["prefix"] = o.prefix;
  }
  const std::string path = (fs::path(o.dst) / "export.json").string();
  std::error_code ec;
  if (fs::exists(path, ec)) {
    auto old = ReadFile(path);
    if (old.ok()) {
      auto j = internal::ParseJsonBounded(std::string_view(reinterpret_cast<const char*>(old->data()), old->size()), path);
      if (j.ok() && *j == m) return Status::Ok();
    }
    return Status::InvalidArgument(o.dst + " holds another export (" + path +
                                   " differs): remove it or choose another folder");
  }
  if (fs::exists(o.dst, ec) && !fs::is_empty(o.dst, ec))
    return Status::InvalidArgument(o.dst + " exists and is not empty (and is not an earlier run of this export)");
  const std::string text = m.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  return WriteFileAtomic(path, text.data(), text.size(), /*sync=*/true);
}

}  // namespace

namespace {
Result<ExportSummary> ExportLocal(const ExportOptions& o);
}  // namespace

// Into a store whose files are not this machine's (object storage):
// exported into a private staging folder, then every file published under
// the prefix (docs/OBJECT_STORAGE.md).
Result<ExportSummary> ExportDatabase(const ExportOptions& o) {
  auto storage = OpenStorage(o.dst);
  if (!storage.ok()) return storage.status();
  if (storage.value()->local()) return ExportLocal(o);
  if (!storage.value()->writable())
    return Status::NotSupported(o.dst + ": " + storage.value()->name() + " storage is read-only");
  auto staging = MakeStagingDir(storage.value()->settings(), "export");
  if (!staging.ok()) return staging.status();
  ExportOptions local = o;
  local.dst = staging.value();
  auto r = ExportLocal(local);
  Status st = r.ok() ? PublishTree(local.dst, *storage.value(), o.dst) : r.status();
  std::error_code ec;
  fs::remove_all(local.dst, ec);
  if (!st.ok()) return st;
  return r;
}

namespace {

// One export into a local folder: the records first..last of the
// database, written by the arena's threads; the first failure stops them.
class ExportRun {
 public:
  ExportRun(const ExportOptions& o, const RecordSource& src, std::string shown, int64_t first, int64_t last)
      : o_(o), src_(src), meta_(src.meta()), shown_(std::move(shown)), first_(first), last_(last),
        mtime_(FileMtime(o.dbs[0])), arena_(std::max(internal::ResolveThreads(o.threads), 1)) {}

  // WebDataset: shards of `per_shard` records, each a tar (or .tar.gz)
  // renamed into place when complete; shards already there are kept.
  void WriteShards(int64_t per_shard) {
    const int64_t shards = (last_ - first_ + per_shard - 1) / per_shard;
    arena_.execute([&] {
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, shards, 1), [&](const tbb::blocked_range<int64_t>& range) {
        auto cur = src_.NewCursor();
        for (int64_t s = range.begin(); s != range.end(); ++s) {
          if (Failed() || Cancelled()) return;
          const int64_t a = first_ + s * per_shard, b = std::min(last_, a + per_shard);
          if (Status st = WriteShard(*cur, s, a, b, shards); !st.ok()) return Fail(st);
        }
      });
    });
  }

  // ImageFolder: each record's file, unique by construction: two records
  // that map to one name (a path with and without its class folder,
  // duplicates across shards) get NAME~INDEX.EXT, the later index the
  // suffixed one. One pass over the records' headers first, so the names
  // do not depend on the order threads finish in.
  void WriteFolder() {
    std::vector<std::string> names = FolderNames();
    if (Failed()) return;
    arena_.execute([&] {
      tbb::parallel_for(tbb::blocked_range<int64_t>(first_, last_, 256), [&](const tbb::blocked_range<int64_t>& range) {
        auto cur = src_.NewCursor();
        std::vector<uint8_t> out;
        for (int64_t i = range.begin(); i != range.end(); ++i) {
          if (Failed() || Cancelled()) return;
          auto r = cur->Read(i);
          if (!r.ok()) return Fail(r.status().WithContext(shown_ + " record " + RecordKey(i)));
          const char* ext = "jpg";
          const std::string path = (fs::path(o_.dst) / names[size_t(i - first_)]).string();
          if (o_.progress) ++o_.progress->done;
          if (fs::exists(path)) {
            ++kept_;
            continue;
          }
          Status st = ImageBytes(r->fields.encoding, r->fields.channels, r->fields.height, r->fields.width, r->payload,
                                 r->payload_size, &out, &ext);
          if (st.ok()) st = WriteFileAtomic(path, out.data(), out.size());
          if (!st.ok()) return Fail(st.WithContext(shown_ + " record " + RecordKey(i)));
          ++records_;
          ++files_;
          bytes_ += static_cast<int64_t>(out.size());
        }
      });
    });
  }

  Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_;
  }
  void Fill(ExportSummary* sum) const {
    sum->records = records_;
    sum->kept = kept_;
    sum->files = files_;
    sum->bytes = bytes_;
    sum->cancelled = Cancelled();
  }

 private:
  // A shard: a tar, or a TFRecord file (export_tfrecord.cc).
  Status WriteShard(RecordCursor& cur, int64_t s, int64_t a, int64_t b, int64_t shards) {
    const bool tf = o_.layout == ExportLayout::kTfRecord;
    char name[64];
    std::snprintf(name, sizeof name, "-%06lld.tar%s", static_cast<long long>(s), o_.gzip ? ".gz" : "");
    const std::string path =
        (fs::path(o_.dst) / (tf ? internal::TfRecordFileName(o_.prefix, s, shards) : o_.prefix + name)).string();
    if (fs::exists(path)) {  // complete: shards appear only by rename
      kept_ += b - a;
      if (o_.progress) o_.progress->done += b - a;
      return Status::Ok();
    }
    bool written = false;
    uint64_t bytes = 0;
    if (tf) {
      IMAGEPACK_RETURN_IF_ERROR(internal::WriteTfRecordFile(
          cur, meta_, {path, a, b, o_.gzip, shown_, o_.cancel, o_.progress}, &written, &bytes));
      if (!written) return Status::Ok();  // cancelled
    } else {
      TarOut tar(path, o_.gzip, mtime_);
      std::set<std::string> keys;
      std::vector<Member> members;
      for (int64_t i = a; i < b; ++i) {
        if (Cancelled()) return Status::Ok();  // the temporary goes with `tar`
        auto r = cur.Read(i);
        if (!r.ok()) return r.status().WithContext(shown_ + " record " + RecordKey(i));
        const std::string key = Unique(KeyOf(r->path), "", i, &keys);
        Status st = RecordMembers(r.value(), i, meta_, &members);
        if (!st.ok()) return st.WithContext(shown_ + " record " + RecordKey(i));
        for (const Member& m : members) tar.Add(key + m.suffix, m.bytes.data(), m.bytes.size());
        if (o_.progress) ++o_.progress->done;
      }
      IMAGEPACK_RETURN_IF_ERROR(tar.Finish(&bytes));
    }
    records_ += b - a;
    ++files_;
    bytes_ += static_cast<int64_t>(bytes);
    return Status::Ok();
  }

  // Every record's ImageFolder path, made unique.
  std::vector<std::string> FolderNames() {
    std::vector<std::string> names(static_cast<size_t>(last_ - first_));
    arena_.execute([&] {
      tbb::parallel_for(tbb::blocked_range<int64_t>(first_, last_, 1024), [&](const tbb::blocked_range<int64_t>& range) {
        auto cur = src_.NewCursor();
        for (int64_t i = range.begin(); i != range.end(); ++i) {
          if (Failed() || Cancelled()) return;
          auto r = cur->Read(i, /*verify_checksum=*/false);
          if (!r.ok()) return Fail(r.status().WithContext(shown_ + " record " + RecordKey(i)));
          auto rel = ImageFolderPath(r.value(), meta_, r->fields.encoding == Encoding::kJpeg ? "jpg" : "png");
          if (!rel.ok()) return Fail(rel.status());
          names[size_t(i - first_)] = std::move(rel.value());
        }
      });
    });
    std::set<std::string> taken;
    for (size_t k = 0; k < names.size(); ++k) {
      const std::string& nm = names[k];
      const auto slash = nm.rfind('/'), dot = nm.rfind('.');
      const size_t cut = dot != std::string::npos && dot > slash ? dot : nm.size();
      names[k] = Unique(nm.substr(0, cut), nm.substr(cut), first_ + static_cast<int64_t>(k), &taken);
    }
    return names;
  }

  void Fail(Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_error_.ok()) first_error_ = std::move(st);
  }
  bool Failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return !first_error_.ok();
  }
  bool Cancelled() const { return o_.cancel && o_.cancel->load(); }

  const ExportOptions& o_;
  const RecordSource& src_;
  const DatasetMeta& meta_;
  const std::string shown_;
  const int64_t first_, last_;
  const uint64_t mtime_;
  tbb::task_arena arena_;
  std::atomic<int64_t> records_{0}, kept_{0}, files_{0}, bytes_{0};
  std::mutex mu_;
  Status first_error_;
};

Result<ExportSummary> ExportLocal(const ExportOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.dbs.empty()) return Status::InvalidArgument("no database to export");
  auto db = OpenDatabases(o.dbs);
  if (!db.ok()) return db.status();
  const std::string shown = o.dbs.size() == 1 ? o.dbs[0] : o.dbs[0] + " (and " + std::to_string(o.dbs.size() - 1) + " more shards)";
  const RecordSource& src = *db.value();
  const DatasetMeta& meta = src.meta();
  const int64_t n = src.size();
  const int64_t first = std::clamp<int64_t>(o.first, 0, n);
  const int64_t last = o.last < 0 ? n : std::clamp<int64_t>(o.last, first, n);
  int64_t per_shard = o.records_per_shard;
  if (per_shard <= 0) {
    // + an Example's other features; + tar headers, .cls, .json
    const double extra = o.layout == ExportLayout::kTfRecord ? 256 : 1536;
    const double mean = n > 0 ? double(meta.payload_bytes) / double(n) + extra : 1;
    per_shard = std::max<int64_t>(1, static_cast<int64_t>(double(o.shard_mb) * 1e6 / mean));
  }
  std::error_code ec;
  fs::create_directories(o.dst, ec);
  if (ec) return Status::IOError("cannot create " + o.dst + ": " + ec.message());
  RemoveStaleTemps(o.dst);
  IMAGEPACK_RETURN_IF_ERROR(CheckOrWriteManifest(o, meta, first, last, per_shard));
  std::string classes;
  for (const auto& c : meta.classes) classes += c + "\n";
  if (!meta.classes.empty())
    IMAGEPACK_RETURN_IF_ERROR(WriteFileAtomic((fs::path(o.dst) / "classes.txt").string(), classes.data(), classes.size()));
  if (o.layout == ExportLayout::kTfRecord && !meta.classes.empty()) {  // TF-slim's, labels from 1
    const std::string slim = internal::SlimLabelsText(meta.classes);
    IMAGEPACK_RETURN_IF_ERROR(WriteFileAtomic((fs::path(o.dst) / "labels.txt").string(), slim.data(), slim.size()));
  }
  if (o.layout == ExportLayout::kWebDataset) {  // the dataset's metadata: fields, their classes, for the way back
    const std::string mj = meta.ToJson() + "\n";
    IMAGEPACK_RETURN_IF_ERROR(WriteFileAtomic((fs::path(o.dst) / "meta.json").string(), mj.data(), mj.size()));
  }
  if (o.progress) o.progress->total = last - first;
  ExportRun run(o, src, shown, first, last);
  if (o.layout == ExportLayout::kImageFolder) run.WriteFolder();
  else run.WriteShards(per_shard);
  IMAGEPACK_RETURN_IF_ERROR(run.status());
  ExportSummary sum;
  run.Fill(&sum);
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace

}  // namespace imagepack
