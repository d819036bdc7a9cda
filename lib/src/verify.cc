#include "imagepack/verify.h"

#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "imagepack/files.h"
#include "imagepack/image.h"
#include "threads.h"

namespace fs = std::filesystem;

namespace imagepack {
namespace {

constexpr size_t kKeptProblems = 10000;

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
  std::vector<int64_t> payloads;
  int64_t min_w = INT64_MAX, max_w = 0, min_h = INT64_MAX, max_h = 0;
  double sum_w = 0, sum_h = 0;
  double px = 0, sum[3] = {0, 0, 0}, sq[3] = {0, 0, 0};
  std::vector<std::pair<std::string, Seen>> paths;  // for --against
};

}  // namespace

Result<VerifyReport> VerifyDatabases(const VerifyOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.paths.empty()) return Status::InvalidArgument("no database given");
  VerifyReport report;
  Collector problems;
  std::vector<std::unique_ptr<RecordSource>> dbs;
  std::vector<std::string> names;
  for (const auto& p : o.paths) {
    auto db = OpenDatabase(p);
    if (!db.ok()) {
      problems.Add(p, "", db.status().message());
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
  const size_t nclasses = dbs.empty() ? 0 : dbs[0]->meta().classes.size();

  for (size_t d = 0; d < dbs.size() && !(o.cancel && o.cancel->load()); ++d) {
    const RecordSource& db = *dbs[d];
    const DatasetMeta& meta = db.meta();
    const std::string& name = names[d];
    const int64_t problems_before = problems.total();
    db.CheckLayout([&](const std::string& msg) { problems.Add(name, "", msg); });
    tbb::enumerable_thread_specific<std::unique_ptr<RecordCursor>> cursors;
    std::vector<int64_t> label_counts(meta.classes.size(), 0);
    std::mutex label_mu;
    arena.execute([&] {
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, meta.count, 256), [&](const tbb::blocked_range<int64_t>& r) {
        auto& cur = cursors.local();
        if (!cur) cur = db.NewCursor();
        Tally& t = tallies.local();
        if (t.class_counts.size() < nclasses) t.class_counts.resize(nclasses, 0);
        std::vector<int64_t> local_labels(meta.classes.size(), 0);
        for (int64_t i = r.begin(); i != r.end(); ++i) {
          if (o.cancel && o.cancel->load()) return;
          if (o.progress) ++o.progress->done;
          const std::string where = name + " record " + RecordKey(i);
          const uint8_t* data = nullptr;
          size_t size = 0;
          Status st = cur->ReadRaw(i, &data, &size);
          if (!st.ok()) {
            problems.Add(where, "", st.message());
            continue;
          }
          t.bytes += static_cast<int64_t>(size);
          auto rec = ParseRecord(data, size, true);
          ++t.checked;
          if (!rec.ok()) {
            problems.Add(where, "", rec.status().message());
            continue;
          }
          const RecordView& v = rec.value();
          const std::string path(v.path);
          if (v.fields.encoding != meta.encoding)
            problems.Add(where, path, std::string("encoding is ") + EncodingName(v.fields.encoding) +
                                          ", metadata says " + EncodingName(meta.encoding));
          if (v.fields.encoding == Encoding::kRaw && v.fields.channels != meta.channels)
            problems.Add(where, path, "raw record has " + std::to_string(v.fields.channels) +
                                          " channels, metadata says " + std::to_string(meta.channels));
          if (v.fields.label < 0 || static_cast<size_t>(v.fields.label) >= meta.classes.size()) {
            problems.Add(where, path, "label " + std::to_string(v.fields.label) + " out of range [0," +
                                          std::to_string(meta.classes.size()) + ")");
          } else {
            ++local_labels[v.fields.label];
            if (static_cast<size_t>(v.fields.label) < t.class_counts.size()) ++t.class_counts[v.fields.label];
          }
          if (v.fields.width == 0 || v.fields.height == 0) problems.Add(where, path, "zero width or height");
          t.min_w = std::min<int64_t>(t.min_w, v.fields.width);
          t.max_w = std::max<int64_t>(t.max_w, v.fields.width);
          t.min_h = std::min<int64_t>(t.min_h, v.fields.height);
          t.max_h = std::max<int64_t>(t.max_h, v.fields.height);
          t.sum_w += v.fields.width;
          t.sum_h += v.fields.height;
          if (o.stats) t.payloads.push_back(static_cast<int64_t>(v.payload_size));
          if (!o.against.empty()) t.paths.push_back({path, {v.fields.label, where}});
          Image img;
          bool have_pixels = false;
          if (v.fields.encoding == Encoding::kJpeg && (o.decode || o.stats)) {
            auto info = ProbeImage(v.payload, v.payload_size);
            if (!info.ok() || info->format != ImageFormat::kJpeg) {
              problems.Add(where, path, "payload is not a JPEG" + (info.ok() ? "" : ": " + info.status().message()));
              continue;
            }
            if (static_cast<uint32_t>(info->width) != v.fields.width ||
                static_cast<uint32_t>(info->height) != v.fields.height) {
              problems.Add(where, path, "JPEG is " + std::to_string(info->width) + "x" + std::to_string(info->height) +
                                            ", record says " + std::to_string(v.fields.width) + "x" +
                                            std::to_string(v.fields.height));
              continue;
            }
            if (o.decode) {
              DecodeOptions dopt;
              dopt.channels = meta.channels;
              dopt.apply_orientation = false;
              auto dec = DecodeImage(v.payload, v.payload_size, dopt);
              if (!dec.ok()) {
                problems.Add(where, path, dec.status().message());
                continue;
              }
              img = std::move(dec.value());
              have_pixels = true;
            }
          } else if (v.fields.encoding == Encoding::kRaw && o.stats) {
            img.width = static_cast<int>(v.fields.width);
            img.height = static_cast<int>(v.fields.height);
            img.channels = v.fields.channels;
            img.pixels.assign(v.payload, v.payload + v.payload_size);
            have_pixels = true;
          }
          if (o.stats && have_pixels) {
            const size_t n = size_t(img.width) * img.height;
            for (size_t p = 0; p < n; ++p)
              for (int c = 0; c < img.channels; ++c) {
                const double x = img.pixels[p * img.channels + c];
                t.sum[c] += x;
                t.sq[c] += x * x;
              }
            t.px += double(n);
          }
        }
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
  report.cancelled = o.cancel && o.cancel->load();

  // Merge the per-thread tallies.
  Tally all;
  all.class_counts.assign(nclasses, 0);
  for (auto& t : tallies) {
    all.checked += t.checked;
    all.bytes += t.bytes;
    for (size_t c = 0; c < t.class_counts.size() && c < nclasses; ++c) all.class_counts[c] += t.class_counts[c];
    all.payloads.insert(all.payloads.end(), t.payloads.begin(), t.payloads.end());
    all.min_w = std::min(all.min_w, t.min_w);
    all.max_w = std::max(all.max_w, t.max_w);
    all.min_h = std::min(all.min_h, t.min_h);
    all.max_h = std::max(all.max_h, t.max_h);
    all.sum_w += t.sum_w;
    all.sum_h += t.sum_h;
    all.px += t.px;
    for (int c = 0; c < 3; ++c) {
      all.sum[c] += t.sum[c];
      all.sq[c] += t.sq[c];
    }
    for (auto& p : t.paths) all.paths.push_back(std::move(p));
  }
  report.checked = all.checked;
  report.bytes = all.bytes;

  if (!o.against.empty() && !report.cancelled) {
    auto listing = ListTree(o.against);
    if (!listing.ok()) {
      problems.Add(o.against, "", listing.status().message());
    } else {
      std::unordered_map<std::string, Seen> in_db;
      for (auto& [path, seen] : all.paths) {
        auto [it, fresh] = in_db.emplace(path, seen);
        if (!fresh) problems.Add(seen.where, path, "duplicate: also in " + it->second.where);
      }
      std::map<std::string, int32_t> class_index;
      if (!dbs.empty())
        for (size_t c = 0; c < dbs[0]->meta().classes.size(); ++c) class_index[dbs[0]->meta().classes[c]] = int32_t(c);
      for (const auto& rel : listing->images) {
        auto it = in_db.find(rel);
        if (it == in_db.end()) {
          problems.Add(o.against, rel, "source image is not in the database");
          continue;
        }
        auto slash = rel.find('/');
        if (slash != std::string::npos) {
          auto ci = class_index.find(rel.substr(0, slash));
          if (ci != class_index.end() && ci->second != it->second.label)
            problems.Add(it->second.where, rel, "label " + std::to_string(it->second.label) + ", but its folder is class " +
                                                    std::to_string(ci->second));
        }
        in_db.erase(it);
      }
      for (auto& [path, seen] : in_db) problems.Add(seen.where, path, "not in the source tree " + o.against);
    }
  }

  if (o.stats) {
    report.classes = dbs.empty() ? std::vector<std::string>{} : dbs[0]->meta().classes;
    report.class_counts = all.class_counts;
    if (all.checked > 0) {
      report.min_width = all.min_w;
      report.max_width = all.max_w;
      report.min_height = all.min_h;
      report.max_height = all.max_h;
      report.mean_width = all.sum_w / all.checked;
      report.mean_height = all.sum_h / all.checked;
    }
    std::sort(all.payloads.begin(), all.payloads.end());
    if (!all.payloads.empty())
      for (int pct : {0, 10, 50, 90, 100})
        report.payload_percentiles.push_back(all.payloads[(all.payloads.size() - 1) * pct / 100]);
    const int ch = dbs.empty() ? 0 : dbs[0]->meta().channels;
    if (all.px > 0)
      for (int c = 0; c < ch; ++c) {
        const double m = all.sum[c] / all.px / 255.0;
        report.mean.push_back(m);
        report.std.push_back(std::sqrt(std::max(0.0, all.sq[c] / all.px / 65025.0 - m * m)));
      }
  }
  report.problems = std::move(problems.problems_);
  report.problems_total = problems.total_;
  std::sort(report.problems.begin(), report.problems.end(),
            [](const VerifyProblem& a, const VerifyProblem& b) { return a.where < b.where; });
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace imagepack
