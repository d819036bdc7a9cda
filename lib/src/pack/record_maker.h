// One input of pack_lmdb made into a record (RecordMaker): read or
// decoded, prepared (pass-through, resize, re-encode), its fields made
// (field_maker.h), statistics sampled, sealed with its checksum. Any
// thread. Used by pack.cc (the pipeline, PackDataset). Internal.
#pragma once

#include <tbb/concurrent_queue.h>
#include <tbb/enumerable_thread_specific.h>

#include <memory>
#include <string>
#include <vector>

#include "pack/field_maker.h"
#include "imagepack/pack.h"
#include "fields/pixel_stats.h"
#include "sources/sources.h"

namespace imagepack::internal {

// What one input became: its record, or the reason it has none.
struct Packed {
  size_t pos = 0;
  std::string rel;  // the input's name, for its error
  std::vector<uint8_t> record;
  std::string error;
  bool passed_through = false;
  Stored stored = Stored::kAsIs;
  bool lossless_as_jpeg = false;
  PixelMoments moments;
  int64_t bytes_in = 0;
  int64_t payload = 0;
  int32_t label = -1;
  int64_t write_at = -1;  // parallel writes: where the record goes
  std::vector<int> map_top;  // per field slot: a map's largest value but its fill value, -1: none
};

// Turns source items into records: PackDataset's parallel stage.
class RecordMaker {
 public:
  // `n`: the items the pack takes (PackInputs).
  RecordMaker(const PackOptions& o, int64_t n, const internal::DatasetSource& source);

  // Item `pos` of the pack. Any thread. Every way through ends in Seal().
  Packed Make(size_t pos, SourceItem item);

  // Buffers of raw records already written (by the workers for a blob, or
  // handed back by the LMDB writer) come back here for the next images:
  // zero-filling a fresh 200-300 KB buffer per image was 3-4% of raw
  // packing. Bounded by the records in flight: records made by DecodeImage
  // (resize, CMYK) take no spare, so unbounded it would grow with the
  // dataset.
  bool WantsSpare(size_t in_flight) const {
    return o_.encoding == Encoding::kRaw && spares_.unsafe_size() < in_flight;
  }
  void GiveSpare(std::vector<uint8_t>&& buffer) { spares_.push(std::move(buffer)); }
  const void* spares_id() const { return &spares_; }

 private:
  // The item's bytes: a file read with room for the record header in front
  // (a clean JPEG then becomes its record with no copy at all), or a
  // database record (raw pixels are re-made from the pixels; the item
  // takes the record's path and label).
  Result<Unsealed> Build(SourceItem& item, int64_t* bytes_in, Geometry* geometry);
  // An encoded image (JPEG, PNG, ...) at in[headroom..].
  Result<Unsealed> FromEncoded(std::vector<uint8_t> in, size_t headroom, const SourceItem& item);
  // Raw packing's usual case: a plain JPEG already within the limits is
  // decoded straight into its record (no image buffer copied into it
  // after). NotSupported for anything that needs more than a decode (then
  // DecodeImage, which also reports the pixel limit). `rec` may be a spent
  // record's buffer: resizing it within its size initialises nothing.
  Result<Unsealed> DecodeIntoRecord(const uint8_t* data, size_t size, const SourceItem& item,
                                    std::vector<uint8_t> rec);
  // A database's raw record: resized and converted like a decoded file.
  Result<Unsealed> FromPixels(const RecordView& r);
  // The one tail: statistics, then the record around the payload.
  void Seal(Unsealed u, size_t pos, const std::string& rel, Packed* p);

  const PackOptions& o_;
  const internal::DatasetSource& source_;
  const RecordSource* db_;
  const std::string& root_;
  const std::vector<FieldSpec>& specs_;
  const int channels_;
  int64_t stats_stride_ = 1;  // 0: no statistics
  FieldMaker fields_;
  tbb::enumerable_thread_specific<std::unique_ptr<RecordCursor>> cursors_;
  tbb::concurrent_queue<std::vector<uint8_t>> spares_;
};

}  // namespace imagepack::internal
