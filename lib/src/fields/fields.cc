#include "imagepack/fields.h"

#include <algorithm>
#include <iterator>
#include <map>

#include <cmath>
#include <cstring>

#include "formats/text.h"
#include "imagepack/meta.h"
#include "base/le.h"

namespace imagepack {
namespace {

// The kind table (IMAGEPACK_FIELD_KINDS in fields.h), as KindInfo rows.
constexpr KindInfo kKinds[] = {
#define IMAGEPACK_KIND_ROW(id, byte, name, layout, element_bytes, prefix, floats, classes, bits, fill_key, fill, \
                           first_format)                                                                         \
  {FieldKind::id, name, FieldLayout::layout, element_bytes, prefix, floats, classes, bits, fill_key, fill, first_format},
    IMAGEPACK_FIELD_KINDS(IMAGEPACK_KIND_ROW)
#undef IMAGEPACK_KIND_ROW
};

// Row i holds kind byte i + 1, so a kind is found by its byte without a
// search (the loader looks kinds up per field per sample).
constexpr bool RowsInByteOrder() {
  for (size_t i = 0; i < std::size(kKinds); ++i)
    if (static_cast<size_t>(kKinds[i].kind) != i + 1) return false;
  return true;
}
static_assert(RowsInByteOrder(), "kind table rows must be in kind-byte order, from 1");

// A kind needs a format with fields (3) at least, and none newer than the
// newest one this build writes.
constexpr bool FirstFormatsValid() {
  for (const KindInfo& k : kKinds)
    if (k.first_format < kFormatVersionFields) return false;
  return true;
}
static_assert(FirstFormatsValid(), "a kind's first format is 3 (fields) or later");

using internal::Get;
using internal::Put;

}  // namespace

const KindInfo* FindKind(uint8_t byte) {
  return byte >= 1 && byte <= std::size(kKinds) ? &kKinds[byte - 1] : nullptr;
}

const KindInfo& InfoOf(FieldKind kind) { return *FindKind(static_cast<uint8_t>(kind)); }

const char* FieldLayoutName(FieldLayout layout) {
  switch (layout) {
    case FieldLayout::kPicture: return "picture";
    case FieldLayout::kMap: return "map";
    case FieldLayout::kBoxes: return "boxes";
    case FieldLayout::kList: return "list";
    case FieldLayout::kText: return "text";
  }
  return "?";
}

const std::vector<KindInfo>& AllKinds() {
  static const std::vector<KindInfo> all(std::begin(kKinds), std::end(kKinds));
  return all;
}

int FirstFormatOf(const FieldSpec& f) {
  // 16-bit samples (a uint16 mask) came with format 5 whatever the kind.
  return std::max(InfoOf(f.kind).first_format, f.bits > 8 ? kFormatVersionWide : 0);
}

int NewestFormatVersion() {
  int newest = kFormatVersionWide;
  for (const KindInfo& k : kKinds) newest = std::max(newest, k.first_format);
  return newest;
}

std::string KindNames() {
  std::string out;
  for (const auto& k : kKinds) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

Result<FieldKind> ParseFieldKind(const std::string& name) {
  for (const auto& k : kKinds)
    if (name == k.name) return k.kind;
  return Status::InvalidArgument("unknown field kind '" + name + "' (expected one of " + KindNames() + ")");
}

const KindInfo* FileKindOfName(const std::string& name) {
  for (const auto& k : kKinds)
    if (k.name_prefix != nullptr && name.rfind(k.name_prefix, 0) == 0) return &k;
  return nullptr;
}

FieldKind KindOfFileField(const std::string& name) {
  const KindInfo* k = FileKindOfName(name);
  return k ? k->kind : FieldKind::kImage;
}

void AppendField(std::vector<uint8_t>& out, const FieldView& f) {
  const KindInfo& info = InfoOf(f.kind);
  const size_t at = out.size();
  out.resize(at + kFieldHeaderSize + f.size);
  uint8_t* p = out.data() + at;
  p[0] = f.slot;
  p[1] = static_cast<uint8_t>(f.kind);
  p[2] = f.encoding;
  p[3] = f.channels;
  const bool list = info.element_bytes > 0;
  Put<uint32_t>(p + 4, list ? static_cast<uint32_t>(f.size / info.element_bytes) : f.height);
  Put<uint32_t>(p + 8, list ? 0 : f.width);
  Put<uint32_t>(p + 12, static_cast<uint32_t>(f.size));
  if (f.size) std::memcpy(p + kFieldHeaderSize, f.data, f.size);
}

Status CheckFieldLayout(const FieldView& f) {
  const KindInfo& info = InfoOf(f.kind);
  const std::string what = std::string(info.name) + " field " + std::to_string(f.slot);
  int sample_bytes = 0;  // bytes per pixel of a raw picture or map
  switch (info.layout) {
    case FieldLayout::kBoxes:
    case FieldLayout::kList:
    case FieldLayout::kText:
      if (f.width != 0 || f.encoding != 0 || f.channels != 0)
        return Status::Corruption(what + ": list entry has geometry bytes set");
      if (uint64_t(f.count) * info.element_bytes != f.size)
        return Status::Corruption(what + ": " + std::to_string(f.count) + " elements but " + std::to_string(f.size) +
                                  " bytes");
      return Status::Ok();
    case FieldLayout::kMap:
      if ((f.encoding != 1 && f.encoding != 2) || f.channels != 1)
        return Status::Corruption(what + ": a " + info.name + " must be raw (encoding 1: uint8, 2: uint16) with 1 channel");
      sample_bytes = f.encoding;
      break;
    case FieldLayout::kPicture:
      if (f.encoding > 1) return Status::Corruption(what + ": bad encoding byte " + std::to_string(f.encoding));
      if (f.channels != 1 && f.channels != 3)
        return Status::Corruption(what + ": bad channel count " + std::to_string(f.channels));
      sample_bytes = f.encoding == 1 ? f.channels : 0;
      break;
  }
  if (f.width == 0 || f.height == 0) return Status::Corruption(what + ": zero width or height");
  if (sample_bytes > 0 && uint64_t(f.width) * f.height * sample_bytes != f.size)
    return Status::Corruption(what + ": raw data is " + std::to_string(f.size) + " bytes, not " +
                              std::to_string(f.height) + "x" + std::to_string(f.width) + "x" +
                              std::to_string(sample_bytes));
  return Status::Ok();
}

std::vector<Box> ReadBoxes(const FieldView& f) {
  std::vector<Box> out(f.count);
  for (uint32_t i = 0; i < f.count; ++i) {
    const uint8_t* p = f.data + size_t(i) * kBoxBytes;
    out[i] = {Get<float>(p), Get<float>(p + 4), Get<float>(p + 8), Get<float>(p + 12), Get<int32_t>(p + 16)};
  }
  return out;
}

void WriteBoxes(const std::vector<Box>& boxes, std::vector<uint8_t>* out) {
  out->resize(boxes.size() * kBoxBytes);
  for (size_t i = 0; i < boxes.size(); ++i) {
    uint8_t* p = out->data() + i * kBoxBytes;
    Put<float>(p, boxes[i].x0);
    Put<float>(p + 4, boxes[i].y0);
    Put<float>(p + 8, boxes[i].x1);
    Put<float>(p + 12, boxes[i].y1);
    Put<int32_t>(p + 16, boxes[i].label);
  }
}

namespace {

// A map's values: a mask's within its classes or the ignore value (maps of
// other kinds hold measurements: any value).
template <typename T>
Status CheckMapValues(const FieldView& f, const FieldSpec& spec, uint32_t W) {
  if (!InfoOf(spec.kind).classes || spec.classes.empty()) return Status::Ok();
  const size_t n = spec.classes.size();
  const size_t count = f.size / sizeof(T);
  for (size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, f.data + i * sizeof(T), sizeof(T));
    if (size_t(v) >= n && int(v) != spec.ignore)
      return Status::Corruption("value " + std::to_string(v) + " at (" + std::to_string(i % W) + ", " +
                                std::to_string(i / W) + ") is neither a class [0," + std::to_string(n) +
                                ") nor the ignore value " + std::to_string(spec.ignore));
  }
  return Status::Ok();
}

Status CheckBoxes(const FieldView& f, const FieldSpec& spec, uint32_t W, uint32_t H, const std::string& size) {
  const auto boxes = ReadBoxes(f);
  for (size_t i = 0; i < boxes.size(); ++i) {
    const Box& b = boxes[i];
    const std::string which = "box " + std::to_string(i);
    if (!std::isfinite(b.x0) || !std::isfinite(b.y0) || !std::isfinite(b.x1) || !std::isfinite(b.y1))
      return Status::Corruption(which + " is not finite");
    if (b.x0 < 0 || b.y0 < 0 || b.x1 > float(W) || b.y1 > float(H) || b.x0 > b.x1 || b.y0 > b.y1)
      return Status::Corruption(which + " (" + std::to_string(b.x0) + ", " + std::to_string(b.y0) + ", " +
                                std::to_string(b.x1) + ", " + std::to_string(b.y1) + ") is not inside the " + size +
                                " image");
    if (b.label < 0 || (!spec.classes.empty() && size_t(b.label) >= spec.classes.size()))
      return Status::Corruption(which + " class " + std::to_string(b.label) + " out of range [0," +
                                std::to_string(spec.classes.size()) + ")");
  }
  return Status::Ok();
}

}  // namespace

Status CheckFieldContent(const FieldView& f, const FieldSpec& spec, uint32_t W, uint32_t H) {
  if (f.kind != spec.kind)
    return Status::Corruption(std::string("is stored as ") + InfoOf(f.kind).name + ", metadata says " +
                              InfoOf(spec.kind).name);
  auto size_text = [](uint32_t w, uint32_t h) { return std::to_string(w) + "x" + std::to_string(h); };
  const KindInfo& info = InfoOf(f.kind);
  switch (info.layout) {
    case FieldLayout::kPicture:
    case FieldLayout::kMap:
      if (f.width != W || f.height != H)
        return Status::Corruption("is " + size_text(f.width, f.height) + ", the image is " + size_text(W, H));
      if (info.layout == FieldLayout::kPicture) return Status::Ok();
      if (f.encoding != MapSampleBytes(spec))
        return Status::Corruption("holds " + std::to_string(8 * f.encoding) + "-bit samples, metadata says " +
                                  std::to_string(spec.bits));
      return f.encoding == 2 ? CheckMapValues<uint16_t>(f, spec, W) : CheckMapValues<uint8_t>(f, spec, W);
    case FieldLayout::kBoxes: return CheckBoxes(f, spec, W, H, size_text(W, H));
    case FieldLayout::kList:
      if (info.floats)
        for (uint32_t i = 0; i < f.count; ++i)
          if (!std::isfinite(Get<float>(f.data + 4 * size_t(i))))
            return Status::Corruption("element " + std::to_string(i) + " is not finite");
      return Status::Ok();
    case FieldLayout::kText:
      if (!internal::IsUtf8(std::string_view(reinterpret_cast<const char*>(f.data), f.size)))
        return Status::Corruption("is not valid UTF-8");
      return Status::Ok();
  }
  return Status::Ok();
}

std::string FieldLabelsName(const std::string& field) { return field == "boxes" ? "box_labels" : field + "_labels"; }
std::string FieldCountName(const std::string& field) { return field == "boxes" ? "num_boxes" : "num_" + field; }

std::vector<std::string> BatchKeysOf(const FieldSpec& f) {
  switch (InfoOf(f.kind).layout) {
    case FieldLayout::kPicture:
    case FieldLayout::kMap: return {f.name};
    case FieldLayout::kBoxes: return {f.name, FieldLabelsName(f.name), FieldCountName(f.name)};
    case FieldLayout::kList: return {f.name, FieldCountName(f.name)};
    case FieldLayout::kText: return {f.name, f.name + "_offsets"};
  }
  return {f.name};
}

Status CheckBatchKeys(const std::vector<FieldSpec>& fields) {
  std::map<std::string, std::string> owner = {
      {"image", ""}, {"label", ""}, {"index", ""}, {"crop_box", ""}};
  for (const FieldSpec& f : fields)
    for (const std::string& key : BatchKeysOf(f)) {
      auto [it, fresh] = owner.emplace(key, f.name);
      if (fresh) continue;
      const std::string by = it->second.empty() ? "the loader's own '" + key + "'"
                                                : "'" + key + "' of field '" + it->second + "'";
      return Status::InvalidArgument("field '" + f.name + "' (" + InfoOf(f.kind).name + ") gives a batch array '" +
                                     key + "', the name of " + by + ": rename the field");
    }
  return Status::Ok();
}

}  // namespace imagepack
