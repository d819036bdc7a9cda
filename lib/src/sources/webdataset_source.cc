// WebDataset shards (plain or gzipped) as a source (sources.h,
// OpenWebDatasetSource): members grouped into samples by webdataset's key
// rule, labels and fields from their members, every item a byte range of
// its shard read through its byte source while packing.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "formats/braces.h"
#include "formats/gzip.h"
#include "formats/labels.h"
#include "base/limits.h"
#include "formats/tar.h"
#include "formats/text.h"
#include "formats/webdataset.h"
#include "imagepack/meta.h"
#include "imagepack/storage.h"
#include "sources/registry.h"
#include "sources/sources.h"
#include "sources/patterns.h"
#include "sources/splits.h"
#include "storage/fd_io.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

// A value member (.cls, .json, .txt) read whole, within its budget.
Result<std::string> ReadValueMember(const ByteSource& shard, const TarMember& m, const std::string& shown) {
  if (m.size > limits::kValueMember)
    return Status::InvalidArgument(shown + ": member " + Shown(m.name) + " of " + std::to_string(m.size) +
                                   " bytes is over the value budget of " + std::to_string(limits::kValueMember));
  std::string s(m.size, '\0');
  Status st = shard.ReadAt(m.offset, s.size(), reinterpret_cast<uint8_t*>(s.data()));
  if (!st.ok()) return st.WithContext(shown);
  return s;
}

// The shards `src` names: a folder's (or an object prefix's, ending in
// '/') .tar, .tar.gz and .tgz files, or a brace pattern's expansion.
Result<std::vector<std::string>> ShardList(Storage& storage, const std::string& src) {
  const bool folder = !src.empty() && src.back() == '/';
  if (storage.listable()) {
    auto info = folder ? Result<FileInfo>(FileInfo{}) : storage.Stat(src);
    if (folder || (info.ok() && info->directory)) {
      auto names = storage.List(src);
      if (!names.ok()) return names.status();
      std::vector<std::string> out;
      for (const std::string& n : names.value())
        if (n.back() != '/' && IsShardName(n)) out.push_back(Storage::Join(src, n));
      if (out.empty()) return Status::NotFound(src + " holds no .tar, .tar.gz or .tgz shards");
      return out;
    }
  }
  auto list = ExpandFilePattern(storage, src);
  if (!list.ok()) return list.status();
  for (const auto& p : *list) {
    // A remote shard is checked when it is opened (one request, not two).
    if (storage.local()) {
      auto info = storage.Stat(p);
      if (!info.ok()) return info.status();
      if (!info->exists) return Status::NotFound("shard " + p + " does not exist");
      if (info->directory || !IsShardName(p))
        return Status::InvalidArgument(p + " is not a .tar, .tar.gz or .tgz shard (several sources, or a pattern, "
                                           "name WebDataset shards)");
    } else if (!IsShardName(p)) {
      return Status::InvalidArgument(p + ": expected .tar, .tar.gz or .tgz shards");
    }
  }
  return list;
}

}  // namespace

// A shard's name is WebDataset's; an image's rules it out (a folder of
// images is a tree); any other file may lie beside the shards.
NameIs WebDatasetNameIs(const std::string& base_name) {
  if (IsShardName(base_name)) return NameIs::kMine;
  return HasImageExtension(base_name) ? NameIs::kForeign : NameIs::kSide;
}

namespace {

// The class list for shards in folder (or prefix) `shard_dir` of
// `storage`: the options', else meta.json beside the shards (export_db
// writes the database's metadata there, its class list exact; a
// class-less database's export sets *no_class), else classes.txt beside
// them. *beside: that meta.json (its fields too), if any. *named: the
// classes the shards' indices refer to (meta.json's or classes.txt's),
// read even when the options fix the list, so that an index can be found
// by its name there.
Status ShardClasses(Storage& storage, const std::string& shard_dir, const SourceOptions& opts,
                    std::vector<std::string>* fixed, DatasetMeta* beside, bool* have_meta, bool* no_class,
                    std::vector<std::string>* named) {
  *have_meta = false;
  auto exists = [&](const std::string& name) -> Result<bool> {
    auto info = storage.Stat(Storage::Join(shard_dir, name));
    if (!info.ok()) return info.status();
    return info->exists && !info->directory;
  };
  const std::string mp = Storage::Join(shard_dir, "meta.json");
  auto meta_there = exists("meta.json");
  if (!meta_there.ok()) return meta_there.status();
  if (meta_there.value()) {
    auto bytes = ReadWhole(storage, mp, uint64_t(2) << 30);
    if (!bytes.ok()) return bytes.status();
    auto m = ParseMeta(bytes->data(), bytes->size());
    if (!m.ok()) return m.status().WithContext(mp);
    *beside = std::move(m.value());
    *have_meta = true;
  }
  *no_class = opts.no_class;
  const bool given = opts.classes || !opts.classes_file.empty();
  if (*have_meta) {
    *named = beside->classes;
  } else {
    auto txt_there = exists("classes.txt");
    if (!txt_there.ok()) return txt_there.status();
    if (txt_there.value()) {
      SourceOptions with_beside = opts;
      with_beside.classes = nullptr;
      with_beside.classes_file = Storage::Join(shard_dir, "classes.txt");
      IMAGEPACK_RETURN_IF_ERROR(FixedClasses(with_beside, named));
    }
  }
  if (given) return FixedClasses(opts, fixed);
  *fixed = *named;
  if (*have_meta) *no_class = *no_class || fixed->empty();
  return Status::Ok();
}

// Per item: its field members (NAME -> member of KEY.NAME.EXT) and the
// .json's other values, declared and filled once every shard is listed.
struct Extra {
  std::string where;
  int archive = -1;
  std::map<std::string, std::pair<std::string, TarMember>> members;  // NAME -> (member name, member)
  nlohmann::json values = nlohmann::json::object();
};

// What the shards' samples gave, in item order.
struct Listing {
  std::vector<RawLabel> raw;
  std::vector<std::string> where;
  std::vector<Extra> extras;
  std::set<std::string> seen;  // record paths
};

// One sample's members (extension -> member) in `shard`: its item, label
// and extras; the reason it is skipped otherwise.
struct Sample {
  const std::string& key;
  const std::map<std::string, TarMember>& parts;
  const ByteSource& bytes;
  const std::string& shard;
  int archive;
};

// The label members (.cls and the like) and the .json: its path, label and
// other values.
std::string SampleValues(const Sample& m, const std::string& image_ext, const SourceOptions& opts, SourceItem* item,
                         Extra* extra, RawLabel* label, std::map<std::string, int64_t>* unpacked) {
  for (const auto& [ext, member] : m.parts) {
    if (ext == image_ext) continue;
    // KEY.NAME.EXT with an image EXT: spatial field NAME.
    const auto dot = ext.rfind('.');
    if (dot != std::string::npos && dot != 0 && IsImageExtension(ext.substr(dot + 1))) {
      extra->members[ext.substr(0, dot)] = {m.key + "." + ext, member};
      continue;
    }
    const auto& labels = LabelExtensions();
    if (ext == "json" || std::find(labels.begin(), labels.end(), ext) != labels.end()) continue;
    if (std::find(opts.keep_members.begin(), opts.keep_members.end(), ext) != opts.keep_members.end()) {
      auto text = ReadValueMember(m.bytes, member, m.shard);
      if (!text.ok()) return text.status().message();
      if (!IsUtf8(*text)) return "member " + Shown(m.key + "." + ext) + " is not UTF-8 text";
      extra->values[ext] = std::move(text.value());
      continue;
    }
    ++(*unpacked)[ext];
  }
  for (const std::string& e : LabelExtensions())
    if (auto it = m.parts.find(e); it != m.parts.end()) {
      auto text = ReadValueMember(m.bytes, it->second, m.shard);
      if (!text.ok()) return text.status().message();
      *label = LabelFromText(*text);
      break;
    }
  auto it = m.parts.find("json");
  if (it == m.parts.end()) return "";
  // The .json's values are data: a string is never opened as a file.
  auto text = ReadValueMember(m.bytes, it->second, m.shard);
  Result<WdsJson> parsed = text.ok() ? ParseSampleJson(*text, m.key) : text.status();
  if (!parsed.ok()) return parsed.status().message();
  const WdsJson& j = parsed.value();
  if (!j.path.empty()) item->rel = j.path;
  // export_db's record index: the order the records come back in.
  if (j.index >= 0) item->db_index = j.index;
  if (!label->present) {
    if (!j.label_error.empty()) return j.label_error;
    if (j.label.present) *label = j.label;
  }
  extra->values.update(j.values);
  return "";
}

// One sample into `s` and `l`, or an error naming it.
void AddSample(const Sample& m, const SourceOptions& opts, DatasetSource& s, Listing& l) {
  const std::string where = m.shard + ":" + Shown(m.key);
  if (Status name_ok = CheckName(m.key, "sample key"); !name_ok.ok()) {
    s.errors.push_back({where, name_ok.message()});
    return;
  }
  const TarMember* image = nullptr;
  std::string image_ext;
  for (const std::string& e : ImageExtensions())
    if (auto it = m.parts.find(e); it != m.parts.end()) {
      image = &it->second;
      image_ext = e;
      break;
    }
  if (!image) {
    s.errors.push_back({where, "no image member (.jpg, .jpeg, .png, .webp, ...)"});
    return;
  }
  SourceItem item;
  item.archive = m.archive;
  item.offset = image->offset;
  item.size = image->size;
  item.rel = m.key + "." + image_ext;
  Extra extra;
  extra.where = where;
  extra.archive = m.archive;
  RawLabel label;
  std::string bad = SampleValues(m, image_ext, opts, &item, &extra, &label, &s.unpacked_members);
  if (bad.empty()) {
    if (Status name_ok = CheckName(item.rel, "record path"); !name_ok.ok()) bad = name_ok.message();
  }
  if (!bad.empty()) {
    s.errors.push_back({where, bad});
    return;
  }
  if (!l.seen.insert(item.rel).second) {
    s.errors.push_back({where, item.rel + " is in the shards twice"});
    return;
  }
  s.items.push_back(std::move(item));
  l.raw.push_back(label);
  l.where.push_back(where);
  l.extras.push_back(std::move(extra));
}

// Opens a shard (a .tar.gz inflated into `scratch_dir` first), keeps it in
// s.scratch, lists its members and adds its samples.
Status AddShard(Storage& storage, const std::string& shard, const std::string& scratch_dir,
                const SourceOptions& opts, DatasetSource& s, Listing& l) {
  auto opened = storage.Open(shard);
  if (opened.ok() && IsGzipName(shard)) {
    auto inflated = InflateToScratch(*opened.value(), scratch_dir, opts.cancel);
    if (!inflated.ok()) return inflated.status();
    opened = AdoptFileSource(*inflated, shard);
  }
  if (!opened.ok()) return opened.status();
  const ByteSource& bytes = *opened.value();
  s.scratch->archives.push_back(std::move(opened.value()));  // closed with the source
  auto members = ListTarFile(bytes, shard);
  if (!members.ok()) return members.status();
  const int archive = static_cast<int>(s.archives.size());
  s.archives.push_back(shard);
  // Samples in the order their first member appears (formats/webdataset.h).
  for (const WdsSample& sample : GroupSamples(members.value())) {
    if (!sample.error.empty()) {
      s.errors.push_back({shard + ":" + Shown(sample.key), sample.error});
      continue;
    }
    AddSample(Sample{sample.key, sample.parts, bytes, shard, archive}, opts, s, l);
  }
  return Status::Ok();
}

// Fields: those of meta.json beside the shards (export_db writes the
// database's metadata there: order, kinds, classes), then the others in
// the order they first appear: members (by name: a mask when NAME starts
// with "mask" or is a --mask-member, a depth map with "depth", else an
// image), then the .json's other values (kinds as for a
// manifest).
Status DeclareShardFields(const DatasetMeta& beside, const std::vector<Extra>& extras, const SourceOptions& opts,
                          DatasetSource& s) {
  std::map<std::string, int> slot_of;
  for (const FieldSpec& f : beside.fields) {
    slot_of[f.name] = static_cast<int>(s.fields.size());
    s.fields.push_back(f);
  }
  for (const Extra& x : extras) {
    for (const auto& [name, m] : x.members)
      if (!slot_of.count(name)) {
        const bool listed =
            std::find(opts.mask_members.begin(), opts.mask_members.end(), name) != opts.mask_members.end();
        auto slot = Declare(s, name, listed ? FieldKind::kMask : KindOfFileField(name), opts);
        if (!slot.ok()) return slot.status().WithContext(x.where);
        slot_of[name] = *slot;
      }
    for (auto& [k, v] : x.values.items())
      if (!slot_of.count(k)) {
        auto slot = Declare(s, k, KindOfValue(k, v, /*paths=*/false), opts);
        if (!slot.ok()) return slot.status().WithContext(x.where);
        slot_of[k] = *slot;
      }
  }
  return Status::Ok();
}

// Each item's fields in slot order; per item, why it has none ("" if it
// does).
std::vector<std::string> FillShardFields(const std::vector<Extra>& extras, const std::string& shard_dir,
                                         DatasetSource& s) {
  std::vector<std::string> field_error(s.items.size());
  for (size_t i = 0; i < s.items.size() && !s.fields.empty(); ++i) {
    const Extra& x = extras[i];
    for (size_t slot = 0; slot < s.fields.size() && field_error[i].empty(); ++slot) {
      const FieldSpec& spec = s.fields[slot];
      SourceField f;
      f.slot = static_cast<int>(slot);
      if (auto it = x.members.find(spec.name); it != x.members.end() && InfoOf(spec.kind).spatial()) {
        f.file = s.archives[size_t(x.archive)] + ":" + it->second.first;
        f.archive = x.archive;
        f.offset = it->second.second.offset;
        f.size = it->second.second.size;
      } else if (InfoOf(spec.kind).from_file()) {
        // An image or map comes only from a member of the shard itself.
        field_error[i] = "no " + spec.name + " member";
      } else if (x.values.contains(spec.name)) {
        Status st = FillField(spec, x.values[spec.name], shard_dir, &f);
        if (!st.ok()) field_error[i] = st.message();
      }
      s.items[i].fields.push_back(std::move(f));
    }
  }
  return field_error;
}

// The records' order: that of the index export_db writes into each
// .json when every sample has one and no two share it (a shuffled pack
// comes back shuffled), else sorted by path (a problem line says why when
// only some samples carry one).
void SortShardItems(DatasetSource& s) {
  std::vector<SourceItem>& items = s.items;
  const size_t indexed = static_cast<size_t>(
      std::count_if(items.begin(), items.end(), [](const SourceItem& it) { return it.db_index >= 0; }));
  if (!items.empty() && indexed == items.size()) {
    std::sort(items.begin(), items.end(),
              [](const SourceItem& a, const SourceItem& b) { return a.db_index < b.db_index; });
    const bool unique = std::adjacent_find(items.begin(), items.end(), [](const SourceItem& a, const SourceItem& b) {
                          return a.db_index == b.db_index;
                        }) == items.end();
    if (unique) {
      s.stored_order = true;
      return;
    }
    s.problems.push_back("two samples carry the same \"index\" in their .json: records in path order");
  } else if (indexed > 0) {
    s.problems.push_back(std::to_string(indexed) + " of " + std::to_string(items.size()) +
                         " samples carry an \"index\" in their .json: records in path order");
  }
  std::sort(items.begin(), items.end(), [](const SourceItem& a, const SourceItem& b) { return a.rel < b.rel; });
}

}  // namespace

Result<DatasetSource> OpenWebDatasetSource(const std::string& src, const SourceOptions& opts) {
  auto storage = SourceStorage(src, opts);
  if (!storage.ok()) return storage.status();
  auto shards = ShardList(*storage.value(), src);
  if (shards.ok()) shards = SelectSplit(std::move(shards.value()), opts.split, src, FindsFiles(src));
  if (!shards.ok()) return shards.status();
  DatasetSource s;
  s.root = src;
  s.scratch = std::make_shared<ScratchFiles>();
  const std::string shard_dir = Storage::Parent(shards->front());
  std::vector<std::string> fixed;
  DatasetMeta beside;
  bool have_meta = false, no_class = false;
  std::vector<std::string> named;
  IMAGEPACK_RETURN_IF_ERROR(
      ShardClasses(*storage.value(), shard_dir, opts, &fixed, &beside, &have_meta, &no_class, &named));
  const std::string scratch_dir = ScratchDirOf(opts);
  Listing l;
  for (const std::string& shard : *shards)
    IMAGEPACK_RETURN_IF_ERROR(AddShard(*storage.value(), shard, scratch_dir, opts, s, l));
  IMAGEPACK_RETURN_IF_ERROR(DeclareShardFields(beside, l.extras, opts, s));
  const std::vector<std::string> field_error = FillShardFields(l.extras, shard_dir, s);
  if (have_meta) s.packed_as = beside;
  // Class indices refer to the list beside the shards (export_db's
  // meta.json, a classes.txt): with --classes, a sample's class is found
  // by its name there.
  if (opts.classes || !opts.classes_file.empty())
    for (RawLabel& r : l.raw)
      if (r.present && !r.is_name && r.index >= 0 && r.index < int64_t(named.size())) {
        r.is_name = true;
        r.name = named[size_t(r.index)];
      }
  std::vector<int32_t> labels;
  std::vector<std::string> why;
  IMAGEPACK_RETURN_IF_ERROR(ResolveLabelsUnless(no_class, l.raw, l.where, fixed, &s.classes, &labels, &why));
  std::vector<SourceItem> kept;
  for (size_t i = 0; i < s.items.size(); ++i) {
    if (!field_error[i].empty()) {
      s.errors.push_back({l.extras[i].where, field_error[i]});
      continue;
    }
    if (!why[i].empty()) {
      s.errors.push_back({l.extras[i].where, why[i] + (why[i] == "no label" ? " (.cls member or .json \"label\")" : "")});
      continue;
    }
    s.items[i].label = labels[i];
    kept.push_back(std::move(s.items[i]));
  }
  s.items = std::move(kept);
  SortShardItems(s);
  return s;
}

}  // namespace imagepack::internal
