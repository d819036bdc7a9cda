// Mixing datasets: several packs read as one training stream, each with its
// share of every epoch (MosaicML Streaming's proportion, repeat and choose;
// Grain's mix). The loader takes them as LoaderOptions::sources; the order
// of a mixed epoch is a function of (seed, epoch) alone, not of the world
// size. docs/LOADER.md, "Mixing datasets".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "imagepack/classes.h"
#include "imagepack/meta.h"
#include "imagepack/order.h"
#include "imagepack/status.h"
#include "imagepack/store.h"

namespace imagepack {

// One dataset of a mix and how much of each epoch it gets: a relative
// `weight` (then every source has one), or an absolute `repeat` (that many
// times its records per epoch, rounded: 3 shows each record 3 times, 0.5
// half of them) or `choose` (that many samples per epoch). None of the
// three: repeat 1.
struct MixSource {
  std::vector<std::string> paths;  // one container, or the shards of one dataset
  double weight = 0;
  double repeat = 0;
  int64_t choose = 0;
};

// A source's paths as one name for logs, states and messages: the paths
// joined by commas, as --data takes them.
std::string MixSourceName(const MixSource& source);

// Samples of each source per epoch, exact. Weights: `epoch_size` (0: the
// sum of `sizes`, every record once on average) split in proportion to the
// weights by largest remainder (ties to the earlier source), so the counts
// sum to it exactly; repeat: llround(repeat * size); choose: as given. A
// count above the source's size repeats its records (each round a new
// order), never drops the surplus. Errors name the source: a weight with a
// repeat or choose, weights on some sources only, a negative or non-finite
// share, an empty source, an epoch_size without weights, an empty epoch.
Result<std::vector<int64_t>> MixCounts(const std::vector<MixSource>& sources, const std::vector<int64_t>& sizes,
                                       int64_t epoch_size = 0);

// The deterministic interleave of sources holding `counts` samples: which
// source each position of the epoch takes. Every prefix is within one
// sample of the ratio: after p positions source i has taken strictly less
// than one sample more or less than p * counts[i] / total, for any number
// of sources. Position t is a time slot of a one-machine schedule of unit
// jobs (Pfair): source i's j-th sample may start at floor(j * total /
// counts[i]) and must end by ceil((j + 1) * total / counts[i]); the
// earliest deadline goes first (ties: the lower source). Such a schedule
// exists since the shares sum to one, and earliest-deadline-first meets
// every deadline, which is the bound. O(log sources) per position.
class Interleaver {
 public:
  explicit Interleaver(std::vector<int64_t> counts);
  // The source of the next position; -1 after the last.
  int Next();
  int64_t total() const { return total_; }

 private:
  struct Job {
    int64_t key;  // release or deadline time
    int source;
  };
  int64_t Release(int source) const;
  int64_t Deadline(int source) const;

  std::vector<int64_t> counts_, taken_;
  int64_t total_ = 0, t_ = 0;
  std::vector<Job> pending_, ready_;  // heaps: by release; by (deadline, source)
};

// Positions of a mixed epoch shuffled together after the interleave
// (random order): enough that the ranks' round-robin deal of the positions
// sees no pattern of the interleave (with weights 1:1, ranks 0 and 1 of 2
// would otherwise each read one source only), few enough that any 1,000
// consecutive positions keep the ratio within a point or two.
constexpr int64_t kMixWindow = 256;

// Everything a mixed epoch's order depends on besides the epoch.
struct MixSpec {
  std::vector<int64_t> sizes;   // records per source
  std::vector<int64_t> counts;  // samples per source per epoch (MixCounts)
  Order kind = Order::kRandom;  // kRandom, or kSequential (each source in record order, nothing shuffled)
  uint64_t seed = 0;
  int64_t window = kMixWindow;
};

// The epoch's order of a mix: indices into the sources laid end to end
// (record k of source i is sizes[0] + ... + sizes[i-1] + k). Source i's
// counts[i] samples are rounds of its records, each round a permutation of
// its own (random order: drawn from (seed, epoch, i, round); sequential:
// 0, 1, ...), a last partial round a prefix of one: repeat 3 shows each
// record exactly 3 times, a count below the size a subset drawn anew each
// epoch. The sources' samples are interleaved (Interleaver), then
// (random order) shuffled within consecutive windows of `window`
// positions. A function of (spec, epoch) alone, so every world size deals
// the same global order (DealPositions).
std::vector<int64_t> MixOrder(const MixSpec& spec, int64_t epoch);

// A mix opened: its sources' records as one RecordSource (source 0's
// records, then source 1's, ...), the mix's metadata, and how each
// source's labels map into the mix's classes.
struct OpenedMix {
  std::unique_ptr<RecordSource> records;
  // The mix's metadata: the classes (the given list, else the sources'
  // common one), channels, fields and encoding of the first source,
  // count = every source's records, label counts summed in the mix's
  // classes, mean/std pooled with each source weighted by its samples per
  // epoch, and `options_json` = `description`, so DatasetIdentity names
  // the mix (sources, their records and shares) and nothing else.
  DatasetMeta meta;
  std::vector<std::string> names;  // MixSourceName of each source
  std::vector<int64_t> starts;     // first record of each source; back(): all records
  std::vector<int64_t> counts;     // samples per epoch (MixCounts)
  std::vector<ClassMap> class_maps;     // source label -> mix label
  std::vector<int64_t> source_classes;  // each source's own class count (labels are checked against it)
  // Canonical JSON: per source its name, identity (DatasetIdentity, hex),
  // records, share and samples per epoch. Kept in LoaderState::mix.
  std::string description;

  // The source of mix record `index`.
  int SourceOf(int64_t index) const;
};

// Opens each source (OpenDatabases with `open`) and checks that they can
// be one stream: the same fields; the same channels unless `channels` (the
// loader's output channels) is given; the same class list unless
// `classes` is given, in which case each source's classes are matched to
// it by name (MatchClasses; `classes_from` names the list in messages).
// Errors name the sources that differ and the first class or field that
// does, and say what to do.
Result<OpenedMix> OpenMix(const std::vector<MixSource>& sources, int64_t epoch_size,
                          const std::vector<std::string>& classes, const std::string& classes_from, int channels,
                          const OpenOptions& open);

// OK when two mix descriptions (OpenedMix::description) name the same
// sources (by identity: the same records) with the same shares and samples
// per epoch. Otherwise InvalidArgument naming the first source that differs
// and how ("source 2 (b.lmdb): weight 0.3 in the state, 0.5 now").
// `saved`: the state's; `current`: the loader's. Either may be empty (one
// dataset, no mix).
Status CompareMixes(const std::string& saved, const std::string& current);

}  // namespace imagepack
