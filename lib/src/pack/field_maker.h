// The fields of one input made into its record's field section
// (FieldMaker): second images prepared as the image is, maps decoded and
// resized by nearest neighbour, boxes turned and scaled with the image,
// lists and text checked by verify's rules; one switch on the layout.
// Used by RecordMaker (record_maker.h). Internal.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "imagepack/fields.h"
#include "imagepack/pixels.h"
#include "imagepack/record.h"
#include "sources/sources.h"

namespace imagepack::internal {

// Where a sample's spatial fields must line up: the image as stored (before
// EXIF orientation) and as written.
struct Geometry {
  int stored_w = 0, stored_h = 0;
  int orientation = 1;
  int out_w = 0, out_h = 0;
  int upright_w() const { return orientation >= 5 ? stored_h : stored_w; }
  int upright_h() const { return orientation >= 5 ? stored_w : stored_h; }
};

// A point of the stored image in the upright one (the inverse of
// ApplyOrientation's pixel mapping, on pixel edges).
std::pair<float, float> Orient(float x, float y, int orientation, int W, int H);

// A record before it is sealed: its header fields and its payload. The
// payload is either buffer[headroom..] with room for the header in front
// (sealed in place, no copy: a JPEG kept as it was, pixels decoded straight
// into the record) or the whole buffer (headroom 0: copied behind a header).
// How an image became its payload, for the pack's summary.
enum class Stored : uint8_t {
  kAsIs,       // the source's bytes (a clean JPEG), or a database's raw pixels, unchanged
  kResized,    // made smaller (--max-size, --max-edge)
  kReencoded,  // decoded and encoded again as JPEG at its own size
  kDecoded,    // decoded to raw pixels at its own size
};

struct Unsealed {
  RecordFields fields;
  std::vector<uint8_t> buffer;
  size_t headroom = 0;
  bool passed_through = false;
  Stored stored = Stored::kAsIs;
  bool lossless_as_jpeg = false;  // a lossless source (PNG, raw pixels, ...) stored as JPEG
  Image stats_image;  // JPEG made from pixels: those pixels, for the statistics
  std::vector<uint8_t> field_section;  // the record's field entries (version 2)
};

class FieldMaker {
 public:
  // How a second image is prepared: as the record's image is (an encoded
  // file's bytes in, an unsealed payload out).
  using PrepareImage = std::function<Result<Unsealed>(std::vector<uint8_t>, const SourceItem&)>;
  FieldMaker(const DatasetSource& source, PrepareImage prepare)
      : source_(source), specs_(source.fields), prepare_(std::move(prepare)) {}

  // The item's fields in slot order appended to *section (its count and
  // size set in *record); map_top[slot]: each map's largest value but its
  // fill value. Any thread. A field's error names the field and its file.
  Status Make(const SourceItem& item, const Geometry& g, RecordFields* record, std::vector<uint8_t>* section,
              std::vector<int>* map_top) const;

 private:
  // A field's error, named by the field and its file.
  static Status Named(const FieldSpec& spec, const SourceField& sf, const Status& st);
  // A partner of another size than the image (upright), named.
  static Status OtherSize(const FieldSpec& spec, const SourceField& sf, const Geometry& g, int w, int h);
  // A second image, prepared like the image (it must come out at its size).
  Status MakeImageField(const SourceField& sf, const FieldSpec& spec, const Geometry& g, FieldView* f,
                        std::vector<uint8_t>* data) const;
  // A map: decoded to values of its sample width, turned upright with the
  // image (when stored at the image's stored size), resized by nearest
  // neighbour, its values checked against declared classes (verify's rule).
  Status MakeMapField(const SourceField& sf, const FieldSpec& spec, const Geometry& g, FieldView* f,
                      std::vector<uint8_t>* data, int* top) const;
  // Boxes given on the stored grid: edges within a pixel outside the image
  // clipped to it (rounding in other tools' exports), then checked there by
  // verify's rule, turned upright and scaled with the image.
  Status MakeBoxesField(const SourceField& sf, const FieldSpec& spec, const Geometry& g, FieldView* f,
                        std::vector<uint8_t>* data) const;

  const DatasetSource& source_;
  const std::vector<FieldSpec>& specs_;
  PrepareImage prepare_;
};

}  // namespace imagepack::internal
