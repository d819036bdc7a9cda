// The classes of a set of TFRecord files (tfrecord_listing.h): TF-slim's
// labels.txt, TFDS's label.labels.txt or a classes.txt beside them, else
// the names the records give; each record's label placed, and the error
// entries of each file, within its budget.
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
#include "sources/sources.h"
#include "sources/tfrecord_listing.h"
#include "storage/fd_io.h"


namespace imagepack::internal {
namespace {
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
  if (!l.names_clash.empty()) {
    s.problems.push_back(l.names_clash);
    return {};
  }
  std::vector<std::string> out;
  std::set<std::string> distinct;
  for (const auto& [i, name] : l.names) {
    if (i != int64_t(out.size()) || !distinct.insert(name).second) {
      s.problems.push_back("the records name only some of their classes, or two alike: classes are numbered");
      return {};
    }
    out.push_back(name);
  }
  return out;
}

}  // namespace

// A skipped record of file `file` into s.errors, within the file's budget
// of entries.
void AddTfError(TfListing& l, DatasetSource& s, int32_t file, int64_t record, std::string reason) {
  TfFileErrors& e = l.file_errors[size_t(file)];
  if (e.listed < limits::kTfFileErrors) {
    ++e.listed;
    s.errors.push_back({TfRecordWhere(l.files[size_t(file)], record), std::move(reason)});
    return;
  }
  if (e.folded++ == 0)
    e.first = TfRecordWhere(l.files[size_t(file)], record) + ": " + (reason.size() > 200 ? reason.substr(0, 200) + "..." : reason);
}

// The counted rest of each file's errors, one entry a file.
void FoldTfErrors(TfListing& l, DatasetSource& s) {
  for (size_t f = 0; f < l.files.size(); ++f) {
    const TfFileErrors& e = l.file_errors[f];
    if (e.folded == 0) continue;
    FileError fe{l.files[f],
                 std::to_string(e.folded) + " more records skipped (" + std::to_string(limits::kTfFileErrors) +
                     " error entries a file are listed; the first not listed: " + e.first + ")"};
    fe.count = e.folded;
    s.errors.push_back(std::move(fe));
  }
}

// The class list and each item's label (sources.h, OpenTfRecordSource);
// items whose label cannot be placed go to errors. A file none of whose
// records has a label is one entry (counting its records) naming
// --no-class, not one a record.
Status ResolveTfLabels(const std::vector<std::string>& beside, TfListing& l, const SourceOptions& opts,
                       DatasetSource& s) {
  std::vector<std::string> named = beside.empty() ? NamesFromRecords(l, s) : beside;
  std::vector<std::string> fixed;
  const bool given = opts.classes || !opts.classes_file.empty();
  if (given) IMAGEPACK_RETURN_IF_ERROR(FixedClasses(opts, &fixed));
  else fixed = named;
  std::vector<RawLabel> raw;
  raw.reserve(l.infos.size());
  // Only the first record of the largest label is named by where (the
  // error of a label far beyond the others).
  std::vector<std::string> where(l.infos.size());
  size_t first_max = SIZE_MAX;
  for (size_t i = 0; i < l.infos.size(); ++i) {
    const TfRecordInfo& r = l.infos[i];
    RawLabel x = r.labelled ? LabelFromIndex(r.label) : RawLabel{};
    // With --classes, a class is found by the name the files give it.
    if (given && x.present && x.index < int64_t(named.size())) x = {true, true, -1, named[size_t(x.index)]};
    if (r.labelled && (first_max == SIZE_MAX || r.label > l.infos[first_max].label)) first_max = i;
    raw.push_back(std::move(x));
  }
  if (first_max != SIZE_MAX) where[first_max] = l.Where(l.infos[first_max]);
  std::vector<int32_t> labels;
  std::vector<std::string> why;
  IMAGEPACK_RETURN_IF_ERROR(ResolveLabelsUnless(opts.no_class, raw, where, fixed, &s.classes, &labels, &why));
  raw.clear();
  raw.shrink_to_fit();
  where.clear();
  where.shrink_to_fit();
  // Files whose every record lacks a label: one entry each.
  std::vector<int64_t> records(l.files.size(), 0), unlabelled(l.files.size(), 0);
  if (!opts.no_class)
    for (const TfRecordInfo& r : l.infos) {
      ++records[size_t(r.file)];
      if (!r.labelled) ++unlabelled[size_t(r.file)];
    }
  for (size_t f = 0; f < l.files.size(); ++f)
    if (records[f] > 0 && unlabelled[f] == records[f]) {
      FileError e{l.files[f], "no label in any of its " + std::to_string(records[f]) +
                                  " records (no image/class/label or label feature): its records are skipped; "
                                  "pack_lmdb --no-class packs them without classes"};
      e.count = records[f];
      s.errors.push_back(std::move(e));
    }
  // Box classes follow their record's: an index as written -> ours.
  std::map<int64_t, int32_t> ours;
  for (size_t i = 0; i < l.infos.size(); ++i)
    if (why[i].empty() && l.infos[i].labelled) ours[l.infos[i].label] = labels[i];
  const auto box_slot = std::find_if(s.fields.begin(), s.fields.end(), [](const FieldSpec& f) { return f.name == "boxes"; });
  size_t w = 0;
  for (size_t i = 0; i < s.items.size(); ++i) {
    const TfRecordInfo& r = l.infos[i];
    if (!r.labelled && !opts.no_class && unlabelled[size_t(r.file)] == records[size_t(r.file)]) continue;  // the file's entry
    std::string bad = why[i].empty() ? "" : why[i] + (why[i] == "no label" ? " (image/class/label or label)" : "");
    if (box_slot != s.fields.end() && bad.empty()) {
      SourceField f;
      f.slot = int(box_slot - s.fields.begin());
      for (Box b : r.boxes) {
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
      AddTfError(l, s, r.file, r.record, std::move(bad));
      continue;
    }
    s.items[i].label = labels[i];
    if (w != i) s.items[w] = std::move(s.items[i]);
    ++w;
  }
  s.items.resize(w);
  if (box_slot != s.fields.end()) box_slot->classes = s.classes;
  return Status::Ok();
}

// The classes beside the files: TF-slim's labels.txt (which also says where
// image/class/label starts), else TFDS's label.labels.txt or a
// classes.txt (one name per line, in label order).
Status BesideTfClasses(Storage& storage, const std::string& dir, std::vector<std::string>* names, int* base) {
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
}  // namespace imagepack::internal
