// The loader: packed records -> augmented uint8 batches, with worker threads
// and a bounded number of batches in flight. No torch here; the trainer
// wraps it. Normalisation belongs on the device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "imagepack/augment.h"
#include "imagepack/meta.h"
#include "imagepack/mix.h"
#include "imagepack/order.h"
#include "imagepack/status.h"
#include "imagepack/transform.h"

namespace imagepack {

enum class TransformKind {
  kTrain,     // RandomResizedCrop(size, scale, ratio) + horizontal flip
  kEval,      // resize shorter edge to eval_resize, centre crop size
  kPadCrop,   // small images: pad, random crop size x size, flip
  kPadCropEval,  // small images, evaluation: centre crop of size (no pad, no flip)
};
// The one table of transforms (loader.cc) and the one spelling of each,
// for every tool option, binding and doc that names one (inspect_db
// --augment, bench_loader --transform, Python's transform=, which takes
// the names from here): "train", "eval", "pad_crop", "pad_crop_eval".
const char* TransformName(TransformKind t);
// Random crops and flips (train, pad_crop): a loader shuffles by default.
bool TransformTrains(TransformKind t);
// Every kind, in the table's order.
std::vector<TransformKind> TransformKinds();
// A transform by its name; "padcrop", the tools' spelling before the names
// were one, is read as "pad_crop". The error lists the names.
Result<TransformKind> ParseTransform(const std::string& name);
// "train, eval, pad_crop, pad_crop_eval": for help texts and messages.
std::string TransformNames();
enum class Layout { kNCHW, kNHWC };
enum class DType { kUint8, kInt64, kFloat32, kUint16, kInt32, kFloat16, kBFloat16 };
size_t DTypeBytes(DType t);
enum class CorruptPolicy {
  kFail,  // Next() returns the error, naming the record
  kSkip,  // the slot takes the next readable record of the epoch; counted
};

struct LoaderOptions {
  std::vector<std::string> paths;  // one container or the shards of one dataset
  // Several datasets mixed instead (mix.h; docs/LOADER.md, "Mixing
  // datasets"): each with its weight, repeat or choose; `paths` empty. Their
  // records are indexed one source after the other (BatchView::indices);
  // the order is random or sequential (not kBlocks) and the same for every
  // world size. Classes: every source's list must be the first's, or
  // `classes` gives the mix's list and each source is matched to it by name.
  std::vector<MixSource> sources;
  int64_t epoch_size = 0;  // a mix by weights: samples per epoch (0: every source's records, summed)
  // The class list labels are given in (the training data's, for a
  // validation loader): the dataset's labels are matched to it by name
  // (MatchClasses, classes.h) and handed out as indices into it; meta()
  // then names these classes. Open fails naming a class of the dataset
  // that this list lacks. Empty: the dataset's own classes.
  std::vector<std::string> classes;
  std::string classes_from;        // who defines `classes`, for messages (a path)
  bool in_ram = false;             // one shared copy per machine (OpenOptions::in_ram)
  bool lock_in_ram = false;        // and mlock it
  // Remote datasets (s3://, https://): the node-local cache of fetched
  // blocks and its limit, the CA for HTTPS (OpenOptions::cache_dir,
  // cache_limit_mb, ca_file).
  std::string cache_dir;
  double cache_limit_mb = 0;
  std::string ca_file;
  // Files read in place: this split's, parquet's image and label columns,
  // unlabelled files read as such (OpenOptions::split, image_column,
  // label_column, no_class).
  std::string split, image_column, label_column;
  bool no_class = false;
  int batch_size = 256;
  int size = 224;                  // output height and width (Loader::SetOutputSize changes it between epochs)
  int eval_resize = 0;             // kEval: shorter edge before the crop (0: size / 0.875)
  int pad = 4;                     // kPadCrop
  // kPadCrop, kPadCropEval: the crop's side in stored pixels, resized to
  // `size` (0: size itself, no resize). Progressive resolution on small
  // images keeps the crop at the image's scale and lowers only the output.
  int crop_size = 0;
  TransformKind transform = TransformKind::kTrain;
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
  int channels = 0;                // 0: the dataset's
  Layout layout = Layout::kNCHW;
  bool shuffle = true;             // false: Order::kSequential whatever `order` says
  uint64_t seed = 0;
  // The epoch's order (order.h; docs/LOADER.md, "Order"). kAuto: kRandom
  // when in_ram, when the records were not stored shuffled
  // (StoredShuffled), when the files total less than 256 MiB, or when at
  // least half of their bytes are in the page cache at Open(); kBlocks
  // otherwise.
  Order order = Order::kAuto;
  double block_mb = 4;        // kBlocks: block size (records per block from the mean record size)
  int window_blocks = 16;     // kBlocks: blocks whose records are shuffled together
  // Threads reading ahead of the decode threads (record ranges into the
  // page cache, chunks of at most read_chunk_mb): -1 picks 4 for kBlocks
  // from storage and none otherwise; 0 none. Size it to the device: reads
  // in flight = io_threads.
  int io_threads = -1;
  double read_chunk_mb = 4;  // a block per read (HDD-like device: 3-5% faster than 2 MB)
  int rank = 0, world_size = 1;
  // true (training): every rank gets ceil(N / world) samples per epoch, the
  // permutation padded by repeating its first indices (DistributedSampler's
  // rule). false (evaluation): rank r takes positions r, r + world, ...:
  // every sample exactly once across ranks, counts differ by at most one.
  bool even_partition = true;
  bool drop_last = false;          // drop a final short batch
  int threads = 0;                 // decode threads (0: all cores)
  int prefetch = 2;                // batches prepared ahead
  CorruptPolicy on_corrupt = CorruptPolicy::kFail;
  bool dct_scaling = true;
  // JPEG records at full DCT scale: libjpeg's fast integer IDCT (the
  // default: decoded every epoch, the augmentation dwarfs its error) or,
  // false, the accurate one that Pillow, torchvision and OpenCV use (their
  // pixels exactly; cost in docs/LOADER.md). Python: dct="fast"|"accurate".
  bool fast_dct = true;
  // Training transforms: the probability of a horizontal flip (timm's
  // --hflip; 0 for digits and text). At 1/2 the flip is the draw's lowest
  // bit, as it always was, so runs repeat those made before the option.
  double hflip = 0.5;
  // Training transforms: also flip vertically, with probability 1/2, drawn
  // from the sample's own RNG after everything else (so turning it on
  // leaves the crops and horizontal flips as they were).
  bool vflip = false;
  // Training transforms: the per-sample augmentations of torchvision's
  // classification recipes (imagepack/augment.h), after the crop and the
  // flips, in the recipe's order: the policy (`augment.kind`: AutoAugment,
  // RandAugment, TrivialAugmentWide, AugMix), then random erasing
  // (`erase.p` > 0). Drawn from a stream of their own, a function of
  // (seed, epoch, position): turning them on leaves the crops and flips as
  // they were. Images only: fields (masks, boxes) get the crop and flips.
  AugmentOptions augment;
  EraseOptions erase;
  // The crop's resampling filter: kTriangle (bilinear, antialiased) or
  // kCatmullRom (bicubic, antialiased, as Pillow's).
  ResampleFilter filter = ResampleFilter::kTriangle;
  // Boxes: one whose part inside the crop is below this fraction of its
  // area (after the crop's scaling) is dropped; an empty one always is.
  double min_box_visible = 0.0;
  // uint16 maps (16-bit masks, depth) handed over as int32 arrays
  // (DType::kInt32), widened by the workers: for consumers without uint16,
  // such as torch (the Python package sets it with as_torch).
  bool wide_maps_int32 = false;
  // The images' element type: kUint8 (the pixels), or kFloat32, kFloat16,
  // kBFloat16: (x / 255 - norm_mean[c]) / norm_std[c] per channel, as
  // torchvision's ToTensor + Normalize compute it in float32 (16-bit types
  // rounded to nearest even), made by the decode threads. Mean and std are
  // on [0, 1], one per channel or one for all; empty: 0 and 1. Fields
  // (masks, second images) keep their own types.
  DType output_dtype = DType::kUint8;
  std::vector<float> norm_mean, norm_std;
  // Page-locked output images (Python's pin_memory=True: CUDA's
  // cudaHostAlloc and cudaFreeHost, which the binding finds in the CUDA
  // runtime torch loaded; the library never links CUDA). With both set,
  // the images are handed out from buffers these allocate (uint8 images
  // copied there by the decode threads). Null: ordinary memory.
  using PinnedAllocFn = void* (*)(size_t bytes);
  using PinnedFreeFn = void (*)(void* p);
  PinnedAllocFn pinned_alloc = nullptr;
  PinnedFreeFn pinned_free = nullptr;
};

// One named array of a batch beyond its images and labels: a dataset's
// fields (docs/LOADER.md, "Fields"), samples first (shape[0] = batch
// count). Per kind: image NAME uint8 [B, C, S, S] (or NHWC); mask NAME
// uint8 or uint16 [B, S, S] (the field's dtype), depth NAME uint16 [B, S,
// S] (int32 with LoaderOptions::wide_maps_int32), both padded with their
// fill value (ignore, no reading); boxes NAME float32 [B, M, 4] with NAME's classes
// int64 [B, M] ("box_labels" for a field named "boxes", else
// NAME_labels, -1 past a sample's count) and counts int64 [B]
// ("num_boxes", else num_NAME), M the batch's largest count; ints NAME
// int64 [B, M] (-1 padded) and num_NAME; floats NAME float32 [B, M] (0
// padded) and num_NAME; text NAME uint8 [bytes] with NAME_offsets int64
// [B + 1]. Also crop_box int64 [B, 6]: each sample's source box x, y, w,
// h, horizontal flip, vertical flip.
struct BatchField {
  std::string name;
  DType dtype = DType::kUint8;
  std::vector<int64_t> shape;
  uint8_t* data = nullptr;
};

// Where time went, summed over all worker threads.
struct LoaderStats {
  int64_t images = 0;
  int64_t bytes_read = 0;
  double read_seconds = 0;
  double decode_seconds = 0;   // decode + crop + resample
  double wait_seconds = 0;     // consumer time blocked in Next()
  int64_t skipped = 0;         // corrupt records replaced (kSkip)
  int64_t read_ahead_bytes = 0;  // read by the read-ahead threads
  double read_ahead_wait_seconds = 0;  // batches held back waiting for them
  int64_t remote_requests = 0;  // object storage: requests made to the server (HEADs and GETs)
  int64_t remote_bytes = 0;     // object storage: bytes received (header, index and blocks)
};

// A batch inside the loader's own memory (Loader::NextView).
struct BatchView {
  int count = 0;                     // samples; 0 at the end of the epoch
  const uint8_t* images = nullptr;   // count samples, layout as for Next()
  const int64_t* labels = nullptr;   // count labels
  const int64_t* indices = nullptr;  // count dataset indices (which records)
  std::vector<BatchField> fields;    // datasets with fields only; into the same buffer
};

// Where a loader is in its epochs, as a value to save and restore: the
// epoch, and how many positions of that epoch's order the ranks together
// have consumed. Positions are those of the epoch's permutation of the
// dataset (0 .. N-1); with `world` ranks taking batches of B in step, k
// batches consume k * B * world positions. Restoring costs nothing (no
// record is read or decoded to get there); see docs/LOADER.md, "Resume".
struct LoaderState {
  int64_t epoch = 0;
  int64_t position = 0;  // 0 .. dataset size
  // The order the epoch was started with, and (kBlocks) the world size,
  // block and window it was made with; kAuto and 0: the loader's own. Restore() continues the
  // epoch in that order, so a run resumed with another world size, or
  // whose kAuto would now pick differently, still sees every sample once.
  Order order = Order::kAuto;
  int world = 0;
  int64_t block_records = 0;  // kBlocks: the epoch's block and window (0: the loader's own)
  int64_t window_blocks = 0;
  // The output size the epoch is rendered at (0: the loader's own): a
  // restored epoch keeps it, whatever SetOutputSize says since.
  int size = 0;
  // A mix: the sources and shares the epoch's order was made from
  // (OpenedMix::description); "" for one dataset. Loader::CheckState
  // refuses a state of another mix, naming the source that differs.
  std::string mix = {};
};

// A batch the caller owns (Loader::NextOwned): `images`, `labels` and
// `indices` point into one of the loader's batch buffers, which stays the
// caller's for as long as any copy of `hold` lives, however many batches
// come after. When the last copy goes, the buffer returns to the loader's
// pool (or is freed, if the loader is gone). Thread-safe to drop from any
// thread.
struct OwnedBatch {
  int count = 0;
  uint8_t* images = nullptr;
  int64_t* labels = nullptr;
  int64_t* indices = nullptr;
  std::vector<BatchField> fields;  // as BatchView's, held by `hold` too
  std::shared_ptr<void> hold;
};

class Loader {
 public:
  static Result<std::unique_ptr<Loader>> Open(const LoaderOptions& opts);
  virtual ~Loader() = default;

  virtual const DatasetMeta& meta() const = 0;
  virtual int channels() const = 0;
  virtual int64_t dataset_size() const = 0;  // records (a mix: of every source)
  // Positions in an epoch's order: dataset_size(), or a mix's samples per
  // epoch (MixCounts summed). LoaderState::position counts these.
  virtual int64_t epoch_length() const = 0;
  // Each source's name (its paths, comma-joined), records and samples per
  // epoch: one entry for one dataset (samples = records).
  struct SourceInfo {
    std::string name;
    int64_t records = 0, samples = 0;
  };
  virtual std::vector<SourceInfo> sources() const = 0;
  // The order epochs start with (LoaderOptions::order resolved), and the
  // records per block (kBlocks).
  virtual Order order() const = 0;
  virtual int64_t block_records() const = 0;
  // This rank's samples and batches in the current epoch (from the restored
  // position after Restore(); before any StartEpoch, a whole epoch's).
  virtual int64_t samples_per_epoch() const = 0;
  virtual int64_t batches_per_epoch() const = 0;

  // Begins epoch `epoch`: the sample order is a function of (seed, epoch,
  // rank, world_size) alone; batches are identical whatever `threads` is.
  virtual void StartEpoch(int64_t epoch) = 0;

  // The output size (height and width) of the epochs started from now on
  // (StartEpoch, or Restore of a state that names none): progressive
  // resolution (resolution.h). The loader keeps its threads, its open
  // databases and its batch buffers (they grow to the largest size asked
  // for and are reused); nothing changes for the epoch in progress. Errors
  // as Open's for `size` (1..16384, batch buffers within 64 GiB).
  virtual Status SetOutputSize(int size) = 0;
  // The current epoch's output size (before any StartEpoch: the next one's).
  virtual int output_size() const = 0;

  // The state after the batches handed out so far (all ranks are assumed to
  // have taken as many: they step together).
  virtual LoaderState state() const = 0;

  // Continues epoch state.epoch at state.position, with nothing read or
  // decoded for the positions before it. The rest of the epoch is split
  // over this loader's world_size (which may differ from the one that saved
  // the state) by the rule of EpochIndices; with the same world size and
  // batch size, the batches are exactly those the uninterrupted loader
  // would have produced, augmentation included.
  virtual void Restore(const LoaderState& state) = 0;

  // Whether `state` can continue on this loader: OK, or InvalidArgument
  // when it was saved reading another mix (other sources or shares; named),
  // a mix on a loader of one dataset or the reverse, or beyond the epoch.
  // The dataset's identity is the caller's to compare (DatasetIdentity of
  // meta(), which for a mix names its sources and shares).
  virtual Status CheckState(const LoaderState& state) const = 0;

  // Writes the next batch: images as uint8 [B, C, size, size] (NCHW) or
  // [B, size, size, C] (NHWC) into `images` (output_dtype's elements), labels into `labels` (B
  // entries). Returns the batch's sample count (the last may be short),
  // 0 at the end of the epoch, or the error of a corrupt record (kFail).
  // REQUIRES: room for batch_size samples in both buffers.
  // `indices`, when given (room for batch_size), gets each sample's dataset
  // index.
  virtual Result<int> Next(uint8_t* images, int64_t* labels, int64_t* indices = nullptr) = 0;

  // The same batch without the copy: the view points into the loader's
  // batch buffer and stays valid until the next call to Next(), NextView()
  // or StartEpoch(), or the loader's destruction.
  virtual Result<BatchView> NextView() = 0;

  // The next batch as one the caller owns (see OwnedBatch); count 0 at the
  // end of the epoch. The pool keeps `prefetch` + 1 spare buffers: callers
  // that hold more batches than that make the loader allocate new ones.
  virtual Result<OwnedBatch> NextOwned() = 0;

  virtual LoaderStats stats() const = 0;
};

// Every record's label, in index order (for MeasureShuffle): one pass
// over the dataset with pread, records' checksums not verified. Errors
// name the record.
Result<std::vector<int64_t>> ReadLabels(const std::vector<std::string>& paths);

// The dataset indices rank `rank` of `world` reads in epoch `epoch` in
// random (shuffle) or sequential order, from position `start` on:
// DealPositions(EpochOrder(...)) (order.h).
std::vector<int64_t> EpochIndices(int64_t n, bool shuffle, uint64_t seed, int64_t epoch, int rank, int world,
                                  bool even_partition, int64_t start = 0);

}  // namespace imagepack
