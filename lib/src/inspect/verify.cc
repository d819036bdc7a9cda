#include "imagepack/verify.h"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "imagepack/files.h"
#include "imagepack/decode.h"
#include "base/threads.h"
#include "fields/pixel_stats.h"
#include "formats/text.h"
#include "sources/item_spill.h"
#include "sources/registry.h"
#include "sources/sources.h"

namespace fs = std::filesystem;

namespace imagepack {
namespace {

constexpr size_t kKeptProblems = 10000;
// A record problem's path where the record cannot be read.
constexpr const char* kPathUnknown = "path unknown: record unreadable";

struct Seen {
  int32_t label;
  std::string where;
};

class Collector {
 public:
  void Add(std::string where, std::string path, std::string reason) {
    std::lock_guard<std::mutex> g(mu_);
    ++total_;
    if (problems_.size() < kKeptProblems) problems_.push_back({std::move(where), std::move(path), std::move(reason)});
  }
  int64_t total() {
    std::lock_guard<std::mutex> g(mu_);
    return total_;
  }
  std::vector<VerifyProblem> problems_;
  int64_t total_ = 0;

 private:
  std::mutex mu_;
};

struct Tally {
  int64_t checked = 0, bytes = 0;
  std::vector<int64_t> class_counts;
  // --stats: records per payload size, for exact percentiles in memory that
  // grows with the distinct sizes, not the records.
  std::map<int64_t, int64_t> payloads;
  int64_t min_w = INT64_MAX, max_w = 0, min_h = INT64_MAX, max_h = 0;
  double sum_w = 0, sum_h = 0;
  internal::PixelMoments moments;
  std::vector<std::pair<std::string, Seen>> paths;  // for --against

  void Merge(Tally& t) {
    checked += t.checked;
    bytes += t.bytes;
    for (size_t c = 0; c < t.class_counts.size() && c < class_counts.size(); ++c) class_counts[c] += t.class_counts[c];
    for (const auto& [size, n] : t.payloads) payloads[size] += n;
    min_w = std::min(min_w, t.min_w);
    max_w = std::max(max_w, t.max_w);
    min_h = std::min(min_h, t.min_h);
    max_h = std::max(max_h, t.max_h);
    sum_w += t.sum_w;
    sum_h += t.sum_h;
    moments.Merge(t.moments);
    for (auto& p : t.paths) paths.push_back(std::move(p));
  }
};

// The record's fields against the metadata's declarations: one of each, in
// slot order, each holding what its kind allows (CheckFieldContent); with
// --decode, second images decode to their recorded size.
void CheckFields(const VerifyOptions& o, const DatasetMeta& meta, const std::string& where, const std::string& path,
                 const RecordView& v, Collector& problems) {
  const std::vector<FieldView> fields = RecordFieldViews(v);
  if (fields.size() != meta.fields.size()) {
    problems.Add(where, path, "holds " + std::to_string(fields.size()) + " fields, metadata declares " +
                                  std::to_string(meta.fields.size()));
    return;
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    const FieldView& f = fields[i];
    if (f.slot != i) {
      problems.Add(where, path, "field " + std::to_string(i) + " is stored for slot " + std::to_string(f.slot));
      continue;
    }
    const FieldSpec& spec = meta.fields[i];
    Status st = CheckFieldContent(f, spec, v.fields.width, v.fields.height);
    if (st.ok() && o.decode && InfoOf(f.kind).layout == FieldLayout::kPicture && f.encoding == 0) {
      DecodeOptions dopt;
      dopt.channels = meta.channels;
      dopt.apply_orientation = false;
      dopt.fast_dct = o.fast_dct;
      auto img = DecodeImage(f.data, f.size, dopt);
      if (!img.ok()) st = img.status();
      else if (uint32_t(img->width) != f.width || uint32_t(img->height) != f.height)
        st = Status::Corruption("JPEG is " + std::to_string(img->width) + "x" + std::to_string(img->height) +
                                ", field says " + std::to_string(f.width) + "x" + std::to_string(f.height));
    }
    if (!st.ok()) problems.Add(where, path, spec.name + ": " + st.message());
  }
}

// One record's checks; its label is counted in `labels` (this database's).
void CheckRecord(const VerifyOptions& o, const DatasetMeta& meta, const std::string& where, const uint8_t* data,
                 size_t size, Tally& t, std::vector<int64_t>& labels, Collector& problems) {
  t.bytes += static_cast<int64_t>(size);
  auto rec = ParseRecord(data, size, true);
  ++t.checked;
  if (!rec.ok()) {
    // The path as stored when the rest of the record holds together (a
    // checksum mismatch), so the problem names the file to pack again.
    auto unchecked = ParseRecord(data, size, false);
    problems.Add(where, unchecked.ok() ? internal::Shown(unchecked->path) : kPathUnknown, rec.status().message());
    return;
  }
  const RecordView& v = rec.value();
  const std::string path(v.path);
  if (v.fields.encoding != meta.encoding)
    problems.Add(where, path, std::string("encoding is ") + EncodingName(v.fields.encoding) + ", metadata says " +
                                  EncodingName(meta.encoding));
  if (v.fields.encoding == Encoding::kRaw && v.fields.channels != meta.channels)
    problems.Add(where, path, "raw record has " + std::to_string(v.fields.channels) + " channels, metadata says " +
                                  std::to_string(meta.channels));
  if (meta.classes.empty() && v.fields.label == -1) {
    // a dataset without classes (--no-class, COCO boxes)
  } else if (v.fields.label < 0 || static_cast<size_t>(v.fields.label) >= meta.classes.size()) {
    problems.Add(where, path, "label " + std::to_string(v.fields.label) + " out of range [0," +
                                  std::to_string(meta.classes.size()) + ")");
  } else {
    ++labels[v.fields.label];
    if (static_cast<size_t>(v.fields.label) < t.class_counts.size()) ++t.class_counts[v.fields.label];
  }
  if (v.fields.width == 0 || v.fields.height == 0) problems.Add(where, path, "zero width or height");
  t.min_w = std::min<int64_t>(t.min_w, v.fields.width);
  t.max_w = std::max<int64_t>(t.max_w, v.fields.width);
  t.min_h = std::min<int64_t>(t.min_h, v.fields.height);
  t.max_h = std::max<int64_t>(t.max_h, v.fields.height);
  t.sum_w += v.fields.width;
  t.sum_h += v.fields.height;
  if (o.stats) ++t.payloads[static_cast<int64_t>(v.payload_size)];
  CheckFields(o, meta, where, path, v, problems);
  if (!o.against.empty()) t.paths.push_back({path, {v.fields.label, where}});
  if (v.fields.encoding == Encoding::kRaw) {
    if (o.stats) t.moments.Add(v.payload, size_t(v.fields.width) * v.fields.height, v.fields.channels);
    return;
  }
  if (!o.decode && !o.stats) return;
  auto info = ProbeImage(v.payload, v.payload_size);
  if (!info.ok() || info->format != ImageFormat::kJpeg) {
    problems.Add(where, path, "payload is not a JPEG" + (info.ok() ? "" : ": " + info.status().message()));
    return;
  }
  if (static_cast<uint32_t>(info->width) != v.fields.width || static_cast<uint32_t>(info->height) != v.fields.height) {
    problems.Add(where, path, "JPEG is " + std::to_string(info->width) + "x" + std::to_string(info->height) +
                                  ", record says " + std::to_string(v.fields.width) + "x" +
                                  std::to_string(v.fields.height));
    return;
  }
  if (!o.decode) return;
  DecodeOptions dopt;
  dopt.channels = meta.channels;
  dopt.apply_orientation = false;
  dopt.fast_dct = o.fast_dct;
  auto img = DecodeImage(v.payload, v.payload_size, dopt);
  if (!img.ok()) {
    problems.Add(where, path, img.status().message());
    return;
  }
  if (o.stats) t.moments.Add(img->pixels.data(), size_t(img->width) * img->height, img->channels);
}

// Every record of one database, in parallel, then its label counts against
// its metadata.
void CheckDatabase(const VerifyOptions& o, const RecordSource& db, const std::string& name, size_t nclasses,
                   tbb::task_arena& arena, tbb::enumerable_thread_specific<Tally>& tallies, Collector& problems) {
  const DatasetMeta& meta = db.meta();
  const int64_t problems_before = problems.total();
  db.CheckLayout([&](const std::string& msg) { problems.Add(name, "", msg); });
  tbb::enumerable_thread_specific<std::unique_ptr<RecordCursor>> cursors;
  std::vector<int64_t> label_counts(meta.classes.size(), 0);
  std::mutex label_mu;
  std::atomic<uint64_t> read_bytes{0};
  arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, meta.count, 256), [&](const tbb::blocked_range<int64_t>& r) {
      auto& cur = cursors.local();
      if (!cur) cur = db.NewCursor();
      Tally& t = tallies.local();
      if (t.class_counts.size() < nclasses) t.class_counts.resize(nclasses, 0);
      std::vector<int64_t> local_labels(meta.classes.size(), 0);
      uint64_t range_bytes = 0;
      for (int64_t i = r.begin(); i != r.end(); ++i) {
        if (o.cancel && o.cancel->load()) return;
        if (o.progress) ++o.progress->done;
        const std::string where = name + " record " + RecordKey(i);
        const uint8_t* data = nullptr;
        size_t size = 0;
        Status st = cur->ReadRaw(i, &data, &size);
        range_bytes += size;
        if (st.ok()) CheckRecord(o, meta, where, data, size, t, local_labels, problems);
        else problems.Add(where, kPathUnknown, st.message());
      }
      // LMDB leaf pages (and values small enough to live in them) are
      // read through the map: unmapped every 64 MB read, like the loader's
      // (a 10^7-record LMDB kept 1.5 GB mapped when this counted ranges).
      constexpr uint64_t kRelease = uint64_t(64) << 20;
      const uint64_t before = read_bytes.fetch_add(range_bytes);
      if (before / kRelease != (before + range_bytes) / kRelease) db.ReleaseMappedPages();
      std::lock_guard<std::mutex> g(label_mu);
      for (size_t c = 0; c < local_labels.size(); ++c) label_counts[c] += local_labels[c];
    });
  });
  // Label counts only mean something when every record could be read.
  if (!meta.label_counts.empty() && !(o.cancel && o.cancel->load()) && problems.total() == problems_before) {
    for (size_t c = 0; c < label_counts.size(); ++c)
      if (label_counts[c] != meta.label_counts[c])
        problems.Add(name, "", "class " + std::to_string(c) + " (" + meta.classes[c] + ") has " +
                                   std::to_string(label_counts[c]) + " records, metadata says " +
                                   std::to_string(meta.label_counts[c]));
  }
}

// The database's class list against --classes FILE's, naming the first
// class that differs.
std::string ClassListDiffers(const std::vector<std::string>& classes, const std::vector<std::string>& given,
                             const std::string& file) {
  size_t c = 0;
  while (c < classes.size() && c < given.size() && classes[c] == given[c]) ++c;
  auto named = [](const std::vector<std::string>& list, size_t i) {
    return i < list.size() ? "'" + list[i] + "'" : std::string("missing");
  };
  return "class list differs from --classes " + file + "'s: class " + std::to_string(c) + " is " +
         named(classes, c) + ", " + file + "'s is " + named(given, c) + " (" + std::to_string(classes.size()) +
         " classes, " + std::to_string(given.size()) + " in the file)";
}

// The class of `label` as a message shows it: 'name' (label N).
std::string ClassShown(const std::vector<std::string>& classes, int32_t label) {
  const bool named = label >= 0 && size_t(label) < classes.size();
  return (named ? "'" + classes[size_t(label)] + "' " : std::string()) + "(label " + std::to_string(label) + ")";
}

// --labels FILE's images pack skips, against the database. One the file
// labels twice differently is a problem only when the database holds it
// (pack skipped it); one labelled by a class the database lacks is a
// problem either way; an entry in neither the tree nor the database is
// said in `notes` (pack skipped and listed it).
void CheckLabelsFileSkips(const VerifyOptions& o, const internal::DatasetSource& tree,
                          std::unordered_map<std::string, Seen>& in_db, Collector& problems,
                          std::vector<std::string>* notes) {
  int64_t twice = 0, neither = 0;
  for (const FileError& e : tree.labels_twice) {
    const std::string& rel = e.path;
    auto it = in_db.find(rel);
    if (it == in_db.end()) {
      ++twice;
      continue;
    }
    problems.Add(it->second.where, rel, "in the database, but " + e.reason);
    in_db.erase(it);
  }
  for (const FileError& e : tree.labels_unknown) {
    const std::string& rel = e.path;
    auto it = in_db.find(rel);
    if (it == in_db.end()) {
      problems.Add(o.against, rel, "source image is not in the database");
      continue;
    }
    problems.Add(it->second.where, rel, e.reason);
    in_db.erase(it);
  }
  for (const auto& missing : tree.labels_missing) neither += !in_db.count(missing.path);
  if (twice > 0)
    notes->push_back(std::to_string(twice) + " images labelled twice differently in --labels " + o.labels_file +
                     " not expected");
  if (neither > 0)
    notes->push_back(std::to_string(neither) + " entries of --labels " + o.labels_file + " are in neither " +
                     o.against + " nor the database");
}

// Opens --against as pack reads it, labelled by the database's classes (*archive: another tool's files).
Result<internal::DatasetSource> OpenAgainst(const VerifyOptions& o, const std::vector<std::string>& classes,
                                            bool* archive) {
  const std::string& root = o.against;
  internal::SourceOptions so;
  so.classes = &classes;
  so.no_class = classes.empty();
  so.labels_file = o.labels_file;
  so.split = o.split;
  if (!o.labels_file.empty()) so.classes_file = o.classes_file;  // the labels file is read through it, as by pack
  // Another tool's files (parquet, TFRecords, WebDataset shards), a
  // manifest (a file) or a tree: its images, labelled as pack labels them.
  auto choice = internal::Choose(root, internal::Ask{&SourceFormat::verify_against});
  if (!choice.ok()) return choice.status();
  const internal::RegisteredFormat* other = choice->format;
  *archive = other != nullptr;
  if (other) return other->open(choice->shape.path, so);
  return choice->shape.kind == internal::PathShape::Kind::kFile ? internal::OpenManifestSource(root, so)
                                                                : internal::OpenTreeSource(root, so);
}

// Takes the record of tree image `rel` out of `in_db`, or says it is not in the database.
std::optional<Seen> TakeFromDatabase(std::unordered_map<std::string, Seen>& in_db, const std::string& root,
                                     const std::string& rel, Collector& problems) {
  auto it = in_db.find(rel);
  if (it == in_db.end()) {
    problems.Add(root, rel, "source image is not in the database");
    return std::nullopt;
  }
  Seen seen = std::move(it->second);
  in_db.erase(it);
  return seen;
}

// Checks the tree's images without a label, then says the records the tree lacks and the notes.
void CheckUnlabelled(const VerifyOptions& o, const std::vector<std::string>& classes,
                     const internal::DatasetSource& tree, std::unordered_map<std::string, Seen>& in_db,
                     Collector& problems, std::vector<std::string>* notes) {
  const std::string& root = o.against;
  std::unordered_map<std::string, bool> listed;
  if (!o.classes_file.empty())
    for (const auto& c : classes) listed.emplace(c, true);
  int64_t not_expected = 0, unchecked = 0, at_root = 0, unlisted = 0, unlabelled_skipped = 0;
  for (const auto& rel : tree.unlabelled) {
    const std::string folder = internal::ClassFolderOf(rel);
    if (!o.classes_file.empty() && !folder.empty() && !listed.count(folder)) {
      auto it = in_db.find(rel);
      if (it != in_db.end()) {
        problems.Add(it->second.where, rel, "in the database, but its folder '" + folder + "' is not in --classes " +
                                                o.classes_file);
        in_db.erase(it);
      }
      ++not_expected;
      continue;
    }
    if (!o.labels_file.empty() && !classes.empty()) {
      // Not in the labels file: pack skipped it (no label); if it is in
      // the database anyway, its label cannot be checked.
      if (in_db.count(rel)) ++unlisted, in_db.erase(rel);
      else ++unlabelled_skipped;
      continue;
    }
    if (!TakeFromDatabase(in_db, root, rel, problems) || classes.empty()) continue;
    ++unchecked;
    at_root += folder.empty();
  }
  for (auto& [path, seen] : in_db) problems.Add(seen.where, path, "not in the source tree " + root);
  if (not_expected > 0)
    notes->push_back(std::to_string(not_expected) + " images of folders outside --classes not expected");
  if (unchecked > 0 && tree.items.empty() && !tree.spilled && at_root == unchecked)
    notes->push_back("labels not checked: " + root + " is a flat folder; give --labels FILE");
  else if (unchecked > 0)
    notes->push_back("labels of " + std::to_string(unchecked) + " images not checked: not in a class folder of " +
                     root + "; give --labels FILE");
  if (unlabelled_skipped > 0)
    notes->push_back(std::to_string(unlabelled_skipped) + " images of " + root + " not in --labels " + o.labels_file +
                     " not expected");
  if (unlisted > 0)
    notes->push_back("labels of " + std::to_string(unlisted) + " images not checked: not in --labels " +
                     o.labels_file);
}

// --against: the tree as pack_lmdb lists it, labelled by the database's
// classes (through the labels file when one is given), holds exactly the
// records' paths, each with its record's label. What cannot be checked
// (labels of images outside any class folder) or is not expected (images
// of folders outside --classes) goes to `notes`.
void CheckAgainst(const VerifyOptions& o, const std::vector<std::string>& classes,
                  const std::vector<std::pair<std::string, Seen>>& paths, Collector& problems,
                  std::vector<std::string>* notes) {
  const std::string& root = o.against;
  bool archive = false;
  auto tree = OpenAgainst(o, classes, &archive);
  if (!tree.ok()) {
    problems.Add(root, "", tree.status().message());
    return;
  }
  std::unordered_map<std::string, Seen> in_db;
  for (auto& [path, seen] : paths) {
    auto [it, fresh] = in_db.emplace(path, seen);
    if (!fresh) problems.Add(seen.where, path, "duplicate: also in " + it->second.where);
  }
  const std::string says = archive ? root + " gives class "
                            : o.labels_file.empty() ? "its folder is class " : o.labels_file + " says ";
  auto check = [&](const internal::SourceItem& item) {
    auto seen = TakeFromDatabase(in_db, root, item.rel, problems);
    if (seen && seen->label != item.label)
      problems.Add(seen->where, item.rel, "stored class " + ClassShown(classes, seen->label) + ", but " + says +
                                              ClassShown(classes, item.label));
  };
  for (const auto& item : tree->items) check(item);
  // What pack_lmdb skips (and lists) is not expected in the database.
  if (!tree->errors.empty())
    notes->push_back(std::to_string(SkippedCount(tree->errors)) + " records of " + root +
                     " that pack_lmdb skips not expected (" + tree->errors[0].path + ": " +
                     tree->errors[0].reason.substr(0, 200) + (tree->errors.size() > 1 ? "; ..." : "") + ")");
  CheckLabelsFileSkips(o, *tree, in_db, problems, notes);
  if (tree->spilled) {  // a tree too large to list in memory
    auto reader = tree->spilled->Read();
    internal::SourceItem item;
    for (;;) {
      auto more = reader.Next(&item);
      if (!more.ok()) {
        problems.Add(root, "", more.status().message());
        break;
      }
      if (!more.value()) break;
      check(item);
    }
  }
  CheckUnlabelled(o, classes, *tree, in_db, problems, notes);
}

}  // namespace

Result<VerifyReport> VerifyDatabases(const VerifyOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.paths.empty()) return Status::InvalidArgument("no database given");
  // The files the options name are read first: a missing one ends the run
  // before any record is read.
  std::vector<std::string> classes_given;
  if (!o.classes_file.empty()) {
    auto c = internal::ReadClassList(o.classes_file);
    if (!c.ok()) return c.status();
    classes_given = std::move(c.value());
  }
  if (!o.labels_file.empty() && !fs::is_regular_file(o.labels_file))
    return Status::NotFound("--labels " + o.labels_file + ": no such file");
  // A labels file pack would refuse (a bad line, an unresolvable label)
  // ends the run too: read the one way pack reads it (ReadLabelsFile).
  if (!o.labels_file.empty())
    if (auto file = internal::ReadLabelsFile(o.labels_file, classes_given); !file.ok()) return file.status();
  VerifyReport report;
  Collector problems;
  std::vector<std::unique_ptr<RecordSource>> dbs;
  std::vector<std::string> names;
  for (const auto& p : o.paths) {
    // Records are read with pread: resident memory stays a record per
    // thread whatever the database's size (through the map it grew to the
    // whole file).
    OpenOptions oo;
    oo.pread_records = true;
    auto db = OpenDatabase(p, oo);
    if (!db.ok()) {
      // Open errors name the file already: "DB: reason" is shown once.
      std::string reason = db.status().message();
      if (reason.rfind(p + ": ", 0) == 0) reason.erase(0, p.size() + 2);
      problems.Add(p, "", reason);
      continue;
    }
    if (!dbs.empty() && db.value()->meta().classes != dbs[0]->meta().classes)
      problems.Add(p, "", "class list differs from " + names[0] + "'s: not shards of one dataset");
    report.records += db.value()->size();
    dbs.push_back(std::move(db.value()));
    names.push_back(p);
  }
  if (o.progress) o.progress->total = report.records;
  const int threads = internal::ResolveThreads(o.threads);
  tbb::task_arena arena(std::max(threads, 1));
  tbb::enumerable_thread_specific<Tally> tallies;
  const std::vector<std::string> classes = dbs.empty() ? std::vector<std::string>{} : dbs[0]->meta().classes;
  for (size_t d = 0; d < dbs.size() && !(o.cancel && o.cancel->load()); ++d)
    CheckDatabase(o, *dbs[d], names[d], classes.size(), arena, tallies, problems);
  report.cancelled = o.cancel && o.cancel->load();

  Tally all;
  all.class_counts.assign(classes.size(), 0);
  for (auto& t : tallies) all.Merge(t);
  report.checked = all.checked;
  report.bytes = all.bytes;
  if (!o.classes_file.empty() && !dbs.empty() && classes_given != classes)
    problems.Add(names[0], "", ClassListDiffers(classes, classes_given, o.classes_file));
  if (!o.against.empty() && !report.cancelled) CheckAgainst(o, classes, all.paths, problems, &report.notes);

  if (o.stats) {
    report.classes = classes;
    report.class_counts = all.class_counts;
    if (all.checked > 0) {
      report.min_width = all.min_w;
      report.max_width = all.max_w;
      report.min_height = all.min_h;
      report.max_height = all.max_h;
      report.mean_width = all.sum_w / all.checked;
      report.mean_height = all.sum_h / all.checked;
    }
    int64_t payloads = 0;
    for (const auto& [size, n] : all.payloads) payloads += n;
    if (payloads > 0)
      for (int pct : {0, 10, 50, 90, 100}) {
        // The size at rank (payloads - 1) * pct / 100 of the sorted sizes.
        int64_t rank = (payloads - 1) * pct / 100;
        for (const auto& [size, n] : all.payloads) {
          if (rank < n) {
            report.payload_percentiles.push_back(size);
            break;
          }
          rank -= n;
        }
      }
    all.moments.MeanStd(dbs.empty() ? 0 : dbs[0]->meta().channels, &report.mean, &report.std);
  }
  report.problems = std::move(problems.problems_);
  report.problems_total = problems.total_;
  std::sort(report.problems.begin(), report.problems.end(),
            [](const VerifyProblem& a, const VerifyProblem& b) { return a.where < b.where; });
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace imagepack
