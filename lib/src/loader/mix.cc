#include "imagepack/mix.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "imagepack/shard.h"
#include "fields/pixel_stats.h"
#include "base/limits.h"
#include "formats/text.h"
#include "stores/store_internal.h"

namespace imagepack {

std::string MixSourceName(const MixSource& source) {
  std::string out;
  for (const auto& p : source.paths) out += (out.empty() ? "" : ",") + p;
  return out;
}

Result<std::vector<int64_t>> MixCounts(const std::vector<MixSource>& sources, const std::vector<int64_t>& sizes,
                                       int64_t epoch_size) {
  if (sources.empty()) return Status::InvalidArgument("a mix needs at least one source");
  if (sizes.size() != sources.size()) return Status::InvalidArgument("a mix needs one size per source");
  auto name = [&](size_t i) { return "source " + std::to_string(i + 1) + " (" + MixSourceName(sources[i]) + ")"; };
  bool weighted = false;
  for (size_t i = 0; i < sources.size(); ++i) {
    const MixSource& s = sources[i];
    if (!std::isfinite(s.weight) || !std::isfinite(s.repeat) || s.weight < 0 || s.repeat < 0 || s.choose < 0)
      return Status::InvalidArgument(name(i) + ": weight, repeat and choose must be finite and not negative");
    if (sizes[i] <= 0) return Status::InvalidArgument(name(i) + " holds no records");
    if (s.weight > 0 && (s.repeat > 0 || s.choose > 0))
      return Status::InvalidArgument(name(i) + " has a weight and a repeat or choose: weights are relative "
                                     "shares of the epoch, repeat and choose absolute counts; give one kind for all "
                                     "sources");
    if (s.repeat > 0 && s.choose > 0) return Status::InvalidArgument(name(i) + " has both a repeat and a choose");
    weighted |= s.weight > 0;
  }
  std::vector<int64_t> counts(sources.size(), 0);
  if (weighted) {
    int64_t total = epoch_size;
    if (total <= 0)
      for (int64_t n : sizes) total += n;
    double sum = 0;
    for (size_t i = 0; i < sources.size(); ++i) {
      if (sources[i].weight <= 0)
        return Status::InvalidArgument(name(i) + " has no weight while others have: give every source a weight");
      sum += sources[i].weight;
    }
    // Largest remainder: each source its quota's whole part, then the
    // samples left one each to the largest fractional parts.
    std::vector<double> frac(sources.size());
    int64_t given = 0;
    for (size_t i = 0; i < sources.size(); ++i) {
      const double quota = double(total) * (sources[i].weight / sum);
      counts[i] = static_cast<int64_t>(std::floor(quota));
      frac[i] = quota - std::floor(quota);
      given += counts[i];
    }
    std::vector<size_t> by(sources.size());
    for (size_t i = 0; i < by.size(); ++i) by[i] = i;
    std::stable_sort(by.begin(), by.end(), [&](size_t a, size_t b) { return frac[a] > frac[b]; });
    for (size_t k = 0; given < total; k = (k + 1) % by.size(), ++given) ++counts[by[k]];
    // A quota a rounding error put just above a whole number: the
    // smallest fractional parts give the surplus back.
    for (size_t k = by.size(); given > total; --given) {
      k = k == 0 ? by.size() - 1 : k - 1;
      if (counts[by[k]] > 0) --counts[by[k]];
      else ++given;
    }
    return counts;
  }
  if (epoch_size > 0)
    return Status::InvalidArgument("an epoch size applies to a mix by weights; with repeat or choose each source's "
                                   "count is absolute");
  int64_t total = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const MixSource& s = sources[i];
    counts[i] = s.choose > 0 ? s.choose : std::llround((s.repeat > 0 ? s.repeat : 1.0) * double(sizes[i]));
    total += counts[i];
  }
  if (total <= 0) return Status::InvalidArgument("the mix's epoch holds no samples");
  return counts;
}

Interleaver::Interleaver(std::vector<int64_t> counts) : counts_(std::move(counts)), taken_(counts_.size(), 0) {
  for (int64_t c : counts_) total_ += std::max<int64_t>(0, c);
  for (size_t i = 0; i < counts_.size(); ++i)
    if (counts_[i] > 0) pending_.push_back({Release(int(i)), int(i)});
  std::make_heap(pending_.begin(), pending_.end(), [](const Job& a, const Job& b) {
    return a.key != b.key ? a.key > b.key : a.source > b.source;
  });
}

// Job j of source i: released at floor(j T / c), due at ceil((j + 1) T / c).
// 128-bit products: j T reaches T^2.
int64_t Interleaver::Release(int i) const {
  const __int128 jt = static_cast<__int128>(taken_[size_t(i)]) * total_;
  return static_cast<int64_t>(jt / counts_[size_t(i)]);
}

int64_t Interleaver::Deadline(int i) const {
  const __int128 jt = static_cast<__int128>(taken_[size_t(i)] + 1) * total_;
  const __int128 c = counts_[size_t(i)];
  return static_cast<int64_t>((jt + c - 1) / c);
}

int Interleaver::Next() {
  if (t_ >= total_) return -1;
  const auto later = [](const Job& a, const Job& b) { return a.key != b.key ? a.key > b.key : a.source > b.source; };
  // Sources whose next job is released by now become ready, keyed by deadline.
  while (!pending_.empty() && pending_.front().key <= t_) {
    std::pop_heap(pending_.begin(), pending_.end(), later);
    const int i = pending_.back().source;
    pending_.pop_back();
    ready_.push_back({Deadline(i), i});
    std::push_heap(ready_.begin(), ready_.end(), later);
  }
  // Never empty: by slot t at least t + 1 jobs are released (the shares
  // sum to one), and t are done.
  std::pop_heap(ready_.begin(), ready_.end(), later);
  const int i = ready_.back().source;
  ready_.pop_back();
  ++taken_[size_t(i)];
  ++t_;
  if (taken_[size_t(i)] < counts_[size_t(i)]) {
    const int64_t release = Release(i);
    if (release <= t_) {
      ready_.push_back({Deadline(i), i});
      std::push_heap(ready_.begin(), ready_.end(), later);
    } else {
      pending_.push_back({release, i});
      std::push_heap(pending_.begin(), pending_.end(), later);
    }
  }
  return i;
}

namespace {

// Seeds of a mix's independent draws (SplitMix64 mixes them).
uint64_t MixSeed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = SplitMix64(seed ^ 0xA54FF53A5F1D36F1ull).Next() ^ a;
  x = SplitMix64(x).Next() ^ b;
  x = SplitMix64(x).Next() ^ c;
  return SplitMix64(x).Next();
}

// Source i's samples of one epoch, one round (a permutation of its
// records) at a time.
class SourceRounds {
 public:
  SourceRounds(int64_t size, int source, const MixSpec& spec, int64_t epoch)
      : size_(size), source_(source), spec_(spec), epoch_(epoch) {}
  int64_t Next() {
    if (k_ % size_ == 0) {
      const uint64_t round = static_cast<uint64_t>(k_ / size_);
      if (spec_.kind == Order::kSequential) {
        order_.resize(size_t(size_));
        for (int64_t i = 0; i < size_; ++i) order_[size_t(i)] = i;
      } else {
        order_ = Permutation(size_, MixSeed(spec_.seed, static_cast<uint64_t>(epoch_), uint64_t(source_), round));
      }
    }
    return order_[size_t(k_++ % size_)];
  }

 private:
  int64_t size_;
  int source_;
  const MixSpec& spec_;
  int64_t epoch_;
  int64_t k_ = 0;
  std::vector<int64_t> order_;
};

}  // namespace

std::vector<int64_t> MixOrder(const MixSpec& spec, int64_t epoch) {
  const size_t n = spec.sizes.size();
  std::vector<int64_t> starts(n, 0);
  for (size_t i = 1; i < n; ++i) starts[i] = starts[i - 1] + spec.sizes[i - 1];
  std::vector<SourceRounds> rounds;
  for (size_t i = 0; i < n; ++i) rounds.emplace_back(spec.sizes[i], int(i), spec, epoch);
  Interleaver mix(spec.counts);
  std::vector<int64_t> order(static_cast<size_t>(mix.total()));
  for (size_t p = 0; p < order.size(); ++p) {
    const int i = mix.Next();
    order[p] = starts[size_t(i)] + rounds[size_t(i)].Next();
  }
  if (spec.kind != Order::kSequential && spec.window > 1) {
    const int64_t w = spec.window;
    for (int64_t at = 0; at < int64_t(order.size()); at += w) {
      const int64_t len = std::min<int64_t>(w, int64_t(order.size()) - at);
      SplitMix64 rng(MixSeed(spec.seed, static_cast<uint64_t>(epoch), ~uint64_t(0), static_cast<uint64_t>(at / w)));
      for (int64_t k = len - 1; k > 0; --k)
        std::swap(order[size_t(at + k)], order[size_t(at + int64_t(rng.Below(uint64_t(k) + 1)))]);
    }
  }
  return order;
}

int OpenedMix::SourceOf(int64_t index) const {
  const auto it = std::upper_bound(starts.begin(), starts.end(), index);
  return static_cast<int>(std::max<std::ptrdiff_t>(0, it - starts.begin() - 1));
}

namespace {

std::string Hex(uint64_t v) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(v));
  return hex;
}

// The first name where two class lists differ, for messages.
std::string FirstDifference(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string x = i < a.size() ? "'" + a[i] + "'" : "none", y = i < b.size() ? "'" + b[i] + "'" : "none";
    if (x != y) return "label " + std::to_string(i) + " is " + x + " in one and " + y + " in the other";
  }
  return "";
}

// Checks each source against the first (fields, channels, classes) and maps its labels to the mix's.
Status MatchSources(const std::vector<std::unique_ptr<RecordSource>>& parts, const std::vector<std::string>& classes,
                    const std::string& classes_from, int channels, OpenedMix* mix) {
  const DatasetMeta& first = parts[0]->meta();
  const std::string given = classes_from.empty() ? "the given class list" : classes_from;
  for (size_t i = 0; i < parts.size(); ++i) {
    const DatasetMeta& m = parts[i]->meta();
    if (m.fields != first.fields)
      return Status::InvalidArgument("the mix's sources " + mix->names[0] + " and " + mix->names[i] +
                                     " hold different fields: every source of a mix must hold the same ones");
    if (channels <= 0 && m.channels != first.channels)
      return Status::InvalidArgument("the mix's sources " + mix->names[0] + " (" + std::to_string(first.channels) +
                                     " channels) and " + mix->names[i] + " (" + std::to_string(m.channels) +
                                     ") differ in channels: give the loader's output channels");
    if (classes.empty()) {
      if (m.classes != first.classes)
        return Status::InvalidArgument(
            "the mix's sources " + mix->names[0] + " (" + std::to_string(first.classes.size()) + " classes) and " +
            mix->names[i] + " (" + std::to_string(m.classes.size()) + ") have different class lists (" +
            FirstDifference(first.classes, m.classes) +
            "): give the mix's class list (LoaderOptions::classes, Python classes=, train --classes) and each "
            "source's labels are matched to it by name");
      mix->class_maps.emplace_back();
    } else {
      auto map = MatchClasses(classes, given, m.classes, mix->names[i]);
      if (!map.ok()) return map.status();
      mix->class_maps.push_back(std::move(map.value()));
    }
    mix->source_classes.push_back(static_cast<int64_t>(m.classes.size()));
  }
  return Status::Ok();
}

// The mix's description: what a state's position is a place in.
std::string Describe(const std::vector<MixSource>& sources, const std::vector<std::unique_ptr<RecordSource>>& parts,
                     const std::vector<int64_t>& sizes, const OpenedMix& mix) {
  nlohmann::json d = nlohmann::json::array();
  for (size_t i = 0; i < parts.size(); ++i) {
    nlohmann::json s = {{"name", mix.names[i]},
                        {"identity", Hex(DatasetIdentity(parts[i]->meta()))},
                        {"records", sizes[i]},
                        {"samples", mix.counts[i]}};
    if (sources[i].weight > 0) s["weight"] = sources[i].weight;
    else if (sources[i].choose > 0) s["choose"] = sources[i].choose;
    else s["repeat"] = sources[i].repeat > 0 ? sources[i].repeat : 1.0;
    d.push_back(s);
  }
  return nlohmann::json{{"mix", d}}.dump();
}

// The mix's metadata (OpenedMix::meta); fills mix->starts on the way.
DatasetMeta MixMeta(const std::vector<std::unique_ptr<RecordSource>>& parts, const std::vector<std::string>& classes,
                    int channels, OpenedMix* mix) {
  const DatasetMeta& first = parts[0]->meta();
  DatasetMeta meta = first;
  meta.classes = classes.empty() ? first.classes : classes;
  if (channels > 0) meta.channels = channels;
  meta.count = 0;
  meta.payload_bytes = 0;
  meta.shard = {0, 1};
  meta.label_counts.assign(meta.classes.size(), 0);
  bool counted = true, all_stats = true;
  internal::PixelMoments pooled;
  int64_t stats_images = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const DatasetMeta& m = parts[i]->meta();
    mix->starts.push_back(meta.count);
    meta.count += m.count;
    meta.payload_bytes += m.payload_bytes;
    if (m.label_counts.size() != m.classes.size()) counted = false;
    for (size_t c = 0; counted && c < m.label_counts.size(); ++c) {
      const int64_t to = mix->class_maps[i].Map(static_cast<int64_t>(c));
      if (to >= 0 && to < static_cast<int64_t>(meta.label_counts.size())) meta.label_counts[size_t(to)] += m.label_counts[c];
    }
    if (!m.mean.empty() && m.mean.size() == first.mean.size() && m.std.size() == m.mean.size()) {
      pooled.Merge(internal::PixelMoments::FromMeanStd(m.mean, m.std, std::max<int64_t>(1, mix->counts[i])));
      stats_images += m.stats_images;
    } else {
      all_stats = false;
    }
  }
  mix->starts.push_back(meta.count);
  if (!counted) meta.label_counts.clear();
  meta.mean.clear();
  meta.std.clear();
  meta.stats_images = 0;
  if (all_stats && pooled.images > 0) {
    pooled.MeanStd(static_cast<int>(first.mean.size()), &meta.mean, &meta.std);
    meta.stats_images = stats_images;
  }
  meta.tool = "imagepack mix";
  meta.source = "a mix of " + std::to_string(parts.size()) + " datasets";
  meta.options_json = mix->description;
  return meta;
}

}  // namespace

Result<OpenedMix> OpenMix(const std::vector<MixSource>& sources, int64_t epoch_size,
                          const std::vector<std::string>& classes, const std::string& classes_from, int channels,
                          const OpenOptions& open) {
  if (sources.empty()) return Status::InvalidArgument("a mix needs at least one source");
  OpenedMix mix;
  std::vector<std::unique_ptr<RecordSource>> parts;
  std::vector<int64_t> sizes;
  for (const MixSource& s : sources) {
    if (s.paths.empty()) return Status::InvalidArgument("a source of the mix names no database");
    auto src = OpenDatabases(s.paths, open);
    if (!src.ok()) return src.status();
    mix.names.push_back(MixSourceName(s));
    sizes.push_back(src.value()->size());
    parts.push_back(std::move(src.value()));
  }
  auto counts = MixCounts(sources, sizes, epoch_size);
  if (!counts.ok()) return counts.status();
  mix.counts = std::move(counts.value());
  IMAGEPACK_RETURN_IF_ERROR(MatchSources(parts, classes, classes_from, channels, &mix));
  mix.description = Describe(sources, parts, sizes, mix);
  DatasetMeta meta = MixMeta(parts, classes, channels, &mix);
  mix.meta = meta;
  mix.records = internal::JoinSources(std::move(parts), std::move(meta), "datasets");
  return mix;
}

namespace {

// A description's sources, or an error naming it damaged.
Result<nlohmann::json> Sources(const std::string& description, const char* whose) {
  if (description.empty()) return nlohmann::json::array();
  if (internal::JsonDepth(description) > internal::limits::kJsonDepth)
    return Status::InvalidArgument(std::string(whose) + " mix description is nested deeper than " +
                                   std::to_string(internal::limits::kJsonDepth));
  try {
    nlohmann::json j = nlohmann::json::parse(description);
    if (!j.is_object() || !j.contains("mix") || !j["mix"].is_array()) throw std::runtime_error("no mix");
    // Each source an object whose entries have the types read below
    // (value() throws on another: a damaged state ended the process).
    for (const auto& s : j["mix"]) {
      if (!s.is_object()) throw std::runtime_error("a source that is no object");
      for (const char* k : {"name", "identity"})
        if (s.contains(k) && !s[k].is_string()) throw std::runtime_error("not a string");
      for (const char* k : {"records", "samples"})
        if (s.contains(k) && !s[k].is_number_integer()) throw std::runtime_error("not an integer");
    }
    return j["mix"];
  } catch (const std::exception&) {
    return Status::InvalidArgument(std::string(whose) + " mix description is damaged: " + description.substr(0, 80));
  }
}

std::string Share(const nlohmann::json& s) {
  for (const char* k : {"weight", "repeat", "choose"})
    if (s.contains(k)) return std::string(k) + " " + s[k].dump();
  return "no share";
}

std::string Names(const nlohmann::json& sources) {
  std::string out;
  for (const auto& s : sources) out += (out.empty() ? "" : ", ") + s.value("name", std::string("?"));
  return out;
}

}  // namespace

Status CompareMixes(const std::string& saved, const std::string& current) {
  auto a = Sources(saved, "the state's");
  if (!a.ok()) return a.status();
  auto b = Sources(current, "the loader's");
  if (!b.ok()) return b.status();
  const nlohmann::json &was = a.value(), &now = b.value();
  if (was.empty() && now.empty()) return Status::Ok();
  auto count = [](const nlohmann::json& s) {
    return s.empty() ? std::string("one dataset") : "a mix of " + std::to_string(s.size()) + " (" + Names(s) + ")";
  };
  if (was.size() != now.size() || was.empty() || now.empty())
    return Status::InvalidArgument("the state was saved reading " + count(was) + ", this loader reads " + count(now) +
                                   ": its position is a place in that epoch's order");
  auto name = [&](size_t i) {
    return "source " + std::to_string(i + 1) + " (" + now[i].value("name", std::string("?")) + ")";
  };
  // Datasets first, then shares, then counts: the cause before its effects
  // (another weight changes every source's samples).
  for (size_t i = 0; i < was.size(); ++i)
    if (was[i].value("identity", std::string()) != now[i].value("identity", std::string()))
      return Status::InvalidArgument(name(i) + " is not the dataset the state was saved with (" +
                                     was[i].value("name", std::string("?")) + ", " +
                                     std::to_string(was[i].value("records", int64_t(0))) + " records, identity " +
                                     was[i].value("identity", std::string("?")) + ")");
  for (size_t i = 0; i < was.size(); ++i)
    if (Share(was[i]) != Share(now[i]))
      return Status::InvalidArgument(name(i) + ": " + Share(was[i]) + " in the state, " + Share(now[i]) + " now");
  for (size_t i = 0; i < was.size(); ++i)
    if (was[i].value("samples", int64_t(-1)) != now[i].value("samples", int64_t(-2)))
      return Status::InvalidArgument(name(i) + ": " + std::to_string(was[i].value("samples", int64_t(0))) +
                                     " samples per epoch in the state, " +
                                     std::to_string(now[i].value("samples", int64_t(0))) + " now");
  return Status::Ok();
}

}  // namespace imagepack
