// What loader.h names beside the Loader: the one transform table (names,
// whether each trains, old spellings), element sizes, the epoch's indices
// for callers outside the loader, and a dataset's labels.
#include <string>
#include <vector>

#include "imagepack/loader.h"
#include "imagepack/order.h"
#include "imagepack/store.h"

namespace imagepack {

size_t DTypeBytes(DType t) {
  switch (t) {
    case DType::kUint8: return 1;
    case DType::kUint16:
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kFloat32:
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
  }
  return 1;
}

namespace {

// The transforms: one name per kind (every tool, the Python package and the
// docs take these), whether it trains (random crop and flips: a loader
// shuffles by default), and the old spellings still read.
struct TransformEntry {
  TransformKind kind;
  const char* name;
  bool trains;
};
constexpr TransformEntry kTransforms[] = {
    {TransformKind::kTrain, "train", true},
    {TransformKind::kEval, "eval", false},
    {TransformKind::kPadCrop, "pad_crop", true},
    {TransformKind::kPadCropEval, "pad_crop_eval", false},
};
constexpr TransformEntry kTransformAliases[] = {
    // inspect_db --augment and bench_loader --transform until the names were one
    {TransformKind::kPadCrop, "padcrop", true},
};

}  // namespace

const char* TransformName(TransformKind t) {
  for (const auto& e : kTransforms)
    if (e.kind == t) return e.name;
  return "?";
}

bool TransformTrains(TransformKind t) {
  for (const auto& e : kTransforms)
    if (e.kind == t) return e.trains;
  return false;
}

std::vector<TransformKind> TransformKinds() {
  std::vector<TransformKind> out;
  for (const auto& e : kTransforms) out.push_back(e.kind);
  return out;
}

std::string TransformNames() {
  std::string out;
  for (const auto& e : kTransforms) out += (out.empty() ? "" : ", ") + std::string(e.name);
  return out;
}

Result<TransformKind> ParseTransform(const std::string& name) {
  for (const auto& e : kTransforms)
    if (name == e.name) return e.kind;
  for (const auto& e : kTransformAliases)
    if (name == e.name) return e.kind;
  return Status::InvalidArgument("unknown transform '" + name + "' (expected " + TransformNames() + ")");
}

std::vector<int64_t> EpochIndices(int64_t n, bool shuffle, uint64_t seed, int64_t epoch, int rank, int world,
                                  bool even_partition, int64_t start) {
  OrderSpec spec;
  spec.kind = shuffle ? Order::kRandom : Order::kSequential;
  spec.seed = seed;
  const RankOrder mine(EpochPermutation(n, spec, epoch), rank, world, even_partition, start);
  std::vector<int64_t> out(static_cast<size_t>(mine.size()));
  for (int64_t k = 0; k < mine.size(); ++k) out[static_cast<size_t>(k)] = mine[k];
  return out;
}

Result<std::vector<int64_t>> ReadLabels(const std::vector<std::string>& paths) {
  OpenOptions oo;
  oo.pread_records = true;
  auto src = OpenDatabases(paths, oo);
  if (!src.ok()) return src.status();
  auto cur = src.value()->NewCursor();
  std::vector<int64_t> labels(static_cast<size_t>(src.value()->size()));
  for (int64_t i = 0; i < src.value()->size(); ++i) {
    auto r = cur->Read(i, /*verify_checksum=*/false);
    if (!r.ok()) return r.status().WithContext(src.value()->Describe());
    labels[static_cast<size_t>(i)] = r->fields.label;
  }
  return labels;
}

}  // namespace imagepack
