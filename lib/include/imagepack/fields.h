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

// How a kind's data is stored and handled. Every stage switches on this,
// exhaustively (no default: -Wswitch names a stage that misses one), never
// on the kind itself; a new kind of an existing layout is one entry in the
// kind table (IMAGEPACK_FIELD_KINDS below) and touches no stage.
enum class FieldLayout : uint8_t {
  kPicture,  // JPEG or raw HWC uint8 of the image's geometry, rendered as the image is
  kMap,      // raw H x W samples, uint8 or uint16 little-endian (encoding byte 1 or
             // 2); resized and cropped by nearest neighbour, the fill value outside
  kBoxes,    // count x 20 bytes (kBoxBytes), mapped under the crop and flips
  kList,     // count x 4 bytes, int32 or float32, padded to the batch's longest
  kText,     // UTF-8 bytes, concatenated with offsets in a batch
};

// The kind table: every kind of field, one row each. Adding a kind of an
// existing layout is a row here, its row in docs/FORMAT.md ("Kinds") and a
// case in its test (tests/python/test_kinds.py checks the three agree and
// regenerates scripts/read_db.py's copy); no stage changes. Columns (see
// KindInfo): enumerator, kind byte (stored in each field entry: never
// renumber), name, layout, element bytes, name prefix, floats, classes,
// fixed bits, fill key, default fill, first format.
#define IMAGEPACK_FIELD_KINDS(X)                                                     \
  /* a second image of the same geometry (paired target): JPEG or raw uint8 */      \
  X(kImage, 1, "image", kPicture, 0, "image", false, false, 0, nullptr, 0, 3)         \
  /* per-pixel label map, raw uint8 or uint16, the image's geometry */              \
  X(kMask, 2, "mask", kMap, 0, "mask", false, true, 0, "ignore", -1, 3)               \
  /* int32 list (multi-label classes, ids) */                                       \
  X(kInts, 3, "ints", kList, 4, nullptr, false, false, 0, nullptr, 0, 3)              \
  /* n x (float32 x0, y0, x1, y1 in pixels; int32 class) */                         \
  X(kBoxes, 4, "boxes", kBoxes, kBoxBytes, nullptr, false, true, 0, nullptr, 0, 3)    \
  /* float32 vector (regression targets) */                                         \
  X(kFloats, 5, "floats", kList, 4, nullptr, true, false, 0, nullptr, 0, 3)           \
  /* UTF-8 text (captions, JSON metadata) */                                        \
  X(kText, 6, "text", kText, 1, nullptr, false, false, 0, nullptr, 0, 3)              \
  /* per-pixel uint16 measurement (depth in declared units), the image's geometry */ \
  X(kDepth, 7, "depth", kMap, 0, "depth", false, false, 16, "no_reading", 0, 5)

// Bytes of one box in a record: x0, y0, x1, y1 (float32), class (int32).
constexpr size_t kBoxBytes = 20;

enum class FieldKind : uint8_t {
#define IMAGEPACK_KIND_ENUMERATOR(id, byte, ...) id = byte,
  IMAGEPACK_FIELD_KINDS(IMAGEPACK_KIND_ENUMERATOR)
#undef IMAGEPACK_KIND_ENUMERATOR
};

// "picture", "map", "boxes", "list", "text" (docs/FORMAT.md, "Kinds").
const char* FieldLayoutName(FieldLayout layout);

// Everything a stage needs to know about a kind: one row of the kind table.
struct KindInfo {
  FieldKind kind;
  const char* name;       // as metadata and --field NAME:KIND spell it
  FieldLayout layout;
  size_t element_bytes;   // boxes 20, lists 4, text 1; 0 for pictures and maps
  // Pictures and maps: a paired tree, manifest key or WebDataset member
  // whose name starts with this holds this kind ("image", "mask",
  // "depth"); a manifest key so named holds paths (its strings are opened
  // as files), any other only when --field NAME:KIND declares it. Null for
  // the kinds that are values.
  const char* name_prefix;
  bool floats;            // lists: float32 (padded with 0), else int32 (padded with -1)
  bool classes;           // the field may declare class names (masks: values; boxes: box classes)
  int fixed_bits;         // maps: bits per sample every such field has (depth 16); 0: declared per field
  // Maps: the metadata key of the value outside the data, which the loader
  // pads with (masks "ignore", depth "no_reading").
  const char* fill_key;
  int default_fill;       // ... when a source declares none (mask -1: none, read as 0; depth 0)
  // The first format version that can hold this kind (meta.h): a dataset
  // with it is written in at least this version, so that a build that
  // reads only older versions refuses the file by its version instead of
  // calling its records corrupt.
  int first_format;
  // Follows the image's geometry (resize, crop, flips).
  bool spatial() const { return from_file() || layout == FieldLayout::kBoxes; }
  // A file of the image's size (a picture or a map), not a value.
  bool from_file() const { return layout == FieldLayout::kPicture || layout == FieldLayout::kMap; }
};
const KindInfo& InfoOf(FieldKind kind);
// Every row of the kind table, in kind-byte order.
const std::vector<KindInfo>& AllKinds();
// Null for a byte that names no kind.
const KindInfo* FindKind(uint8_t byte);
Result<FieldKind> ParseFieldKind(const std::string& name);
// "image, mask, ..." : every kind's name, for messages.
std::string KindNames();
// The picture or map kind whose name_prefix `name` starts with ("image2",
// "mask_fine", "depth"); null when none does.
const KindInfo* FileKindOfName(const std::string& name);
// The kind of a file-valued field named `name` (a paired tree, a
// WebDataset member): FileKindOfName's, else a second image.
FieldKind KindOfFileField(const std::string& name);

// A field as the dataset metadata declares it. Records refer to it by its
// position in DatasetMeta::fields ("slot").
struct FieldSpec {
  std::string name;
  FieldKind kind = FieldKind::kText;
  // Masks: the name of each value (value v is classes[v]); boxes: the box
  // classes. Empty: not declared (no value check).
  std::vector<std::string> classes;
  // Maps: the value outside the data (the kind's fill_key: a mask's ignore
  // value, 255 usually, -1 for none; depth's "no reading", 0 usually).
  int ignore = -1;
  int bits = 8;       // maps: bits per sample, 8 or 16 (depth: 16)
  double scale = 0;   // depth: units per stored value (0.001: millimetres as metres); 0: not declared

  bool operator==(const FieldSpec& o) const {
    return name == o.name && kind == o.kind && classes == o.classes && ignore == o.ignore && bits == o.bits &&
           scale == o.scale;
  }
  bool operator!=(const FieldSpec& o) const { return !(*this == o); }
};

// The first format version that can hold field `f`: its kind's, or 5 for
// 16-bit samples. A dataset's metadata is written in the newest of its
// fields' (and 4 at least).
int FirstFormatOf(const FieldSpec& f);
// The newest format version this build reads and writes: 5, or a newer
// kind's first format.
int NewestFormatVersion();

// The value a map field holds outside its data (the loader's padding).
inline int MapFill(const FieldSpec& spec) { return spec.ignore >= 0 ? spec.ignore : 0; }
// Bytes per stored sample of a map field (1 or 2).
inline int MapSampleBytes(const FieldSpec& spec) { return spec.bits > 8 ? 2 : 1; }

// One stored field of a record. `data` points into the record.
//   picture: encoding 0 (JPEG) or 1 (raw HWC), channels 1 or 3, height, width
//   map:     encoding 1 (raw uint8) or 2 (raw uint16 LE), channels 1, height, width
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

// Appends one field entry (header + data) to `out`. For pictures and maps,
// height/width are the geometry; for the list kinds, count is taken from
// size / element_bytes and height = count, width = 0.
void AppendField(std::vector<uint8_t>& out, const FieldView& field);

// Checks one entry's header against its data length (sizes agree with the
// geometry or count, known kind, sane encoding). Errors say what is wrong.
Status CheckFieldLayout(const FieldView& f);

// What a record's field holds, checked against its spec and the record's
// image (width x height): a map of the image's size and the declared
// sample width, a mask with only declared values or the ignore value, boxes finite and inside the image with
// classes in range, text that is valid UTF-8 (the one validator,
// formats/text.h, that also checks names where they enter),
// a second image of the image's size. The first problem, or Ok.
Status CheckFieldContent(const FieldView& f, const FieldSpec& spec, uint32_t width, uint32_t height);

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
