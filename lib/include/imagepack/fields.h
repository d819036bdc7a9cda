// The fields of a sample beyond its image and class: masks, second images,
// boxes, int lists, float vectors and UTF-8 text (captions, JSON). The
// metadata declares each (FieldSpec); a record stores one entry per field
// after its image (docs/FORMAT.md, "Fields"). Every stage that handles
// fields (record parsing, verify, pack, the loader, Python) looks a kind up
// in one table here (KindInfo) instead of switching on it in its own way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "imagepack/status.h"

namespace imagepack {

// Stored as one byte in each field entry; never renumber.
enum class FieldKind : uint8_t {
  kImage = 1,   // a second image of the same geometry (paired target): JPEG or raw uint8
  kMask = 2,    // per-pixel label map, raw uint8, the image's geometry
  kInts = 3,    // int32 list (multi-label classes, ids)
  kBoxes = 4,   // n x (float32 x0, y0, x1, y1 in pixels; int32 class)
  kFloats = 5,  // float32 vector (regression targets)
  kText = 6,    // UTF-8 text (captions, JSON metadata)
};

// How each kind behaves, in one place.
struct KindInfo {
  FieldKind kind;
  const char* name;       // "image", "mask", "ints", "boxes", "floats", "text"
  bool spatial;           // follows the image's geometry (resize, crop, flip)
  size_t element_bytes;   // list kinds: bytes per element (boxes 20); 0 otherwise
};
const KindInfo& InfoOf(FieldKind kind);
// Null for a byte that names no kind.
const KindInfo* FindKind(uint8_t byte);
Result<FieldKind> ParseFieldKind(const std::string& name);

// Bytes of one box in a record: x0, y0, x1, y1 (float32), class (int32).
constexpr size_t kBoxBytes = 20;

// A field as the dataset metadata declares it. Records refer to it by its
// position in DatasetMeta::fields ("slot").
struct FieldSpec {
  std::string name;
  FieldKind kind = FieldKind::kText;
  // kMask: the name of each value (value v is classes[v]); kBoxes: the box
  // classes. Empty: not declared (no value check).
  std::vector<std::string> classes;
  int ignore = -1;  // kMask: the value outside any class (255 usually); -1: none

  bool operator==(const FieldSpec& o) const {
    return name == o.name && kind == o.kind && classes == o.classes && ignore == o.ignore;
  }
  bool operator!=(const FieldSpec& o) const { return !(*this == o); }
};

// One stored field of a record. `data` points into the record.
//   image: encoding 0 (JPEG) or 1 (raw HWC), channels 1 or 3, height, width
//   mask:  encoding 1 (raw), channels 1, height, width
//   ints, floats, boxes: count elements; text: count = size in bytes
struct FieldView {
  uint8_t slot = 0;
  FieldKind kind = FieldKind::kText;
  uint8_t encoding = 0;
  uint8_t channels = 0;
  uint32_t height = 0, width = 0;
  uint32_t count = 0;
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// The 16-byte entry header that precedes each field's data in a record.
constexpr size_t kFieldHeaderSize = 16;

// Appends one field entry (header + data) to `out`. For image and mask,
// height/width are the geometry; for the list kinds, count is taken from
// size / element_bytes and height = count, width = 0.
void AppendField(std::vector<uint8_t>& out, const FieldView& field);

// Checks one entry's header against its data length (sizes agree with the
// geometry or count, known kind, sane encoding). Errors say what is wrong.
Status CheckFieldLayout(const FieldView& f);

// What a record's field holds, checked against its spec and the record's
// image (width x height): a mask of the image's size with only declared
// values or the ignore value, boxes finite and inside the image with
// classes in range, text that is valid UTF-8,
// a second image of the image's size. The first problem, or Ok.
Status CheckFieldContent(const FieldView& f, const FieldSpec& spec, uint32_t width, uint32_t height);

bool IsValidUtf8(const uint8_t* data, size_t size);

// The boxes of a field as floats (x0, y0, x1, y1) and classes.
struct Box {
  float x0, y0, x1, y1;
  int32_t label;
};
std::vector<Box> ReadBoxes(const FieldView& f);
void WriteBoxes(const std::vector<Box>& boxes, std::vector<uint8_t>* out);

// The names of the arrays a field adds to a batch: its own, and for boxes
// their classes ("box_labels" for a field named "boxes", else NAME_labels)
// and counts ("num_boxes" / num_NAME), for ints and floats their counts,
// for text NAME_offsets.
std::string FieldLabelsName(const std::string& field);
std::string FieldCountName(const std::string& field);
std::vector<std::string> BatchKeysOf(const FieldSpec& f);

// The batch keys the loader itself gives: image, label, index, crop_box.
// A field (or an array it adds) named like one of them, or like an array
// another field adds, would replace it in a dict batch: refused at pack
// time (naming the field) and at open.
Status CheckBatchKeys(const std::vector<FieldSpec>& fields);

}  // namespace imagepack
