// FieldMaker (field_maker.h): an input's fields made into its record's
// field section, by layout.
#include "pack/field_maker.h"

#include <algorithm>
#include <cstring>

#include "imagepack/image.h"
#include "imagepack/mask.h"

namespace imagepack::internal {

// A point of the stored image in the upright one (the inverse of
// ApplyOrientation's pixel mapping, on pixel edges).
std::pair<float, float> Orient(float x, float y, int orientation, int W, int H) {
  switch (orientation) {
    case 2: return {W - x, y};
    case 3: return {W - x, H - y};
    case 4: return {x, H - y};
    case 5: return {y, x};
    case 6: return {H - y, x};
    case 7: return {H - y, W - x};
    case 8: return {y, W - x};
    default: return {x, y};
  }
}

Status FieldMaker::Named(const FieldSpec& spec, const SourceField& sf, const Status& st) {
  return st.WithContext(spec.name + " " + sf.file);
}
Status FieldMaker::OtherSize(const FieldSpec& spec, const SourceField& sf, const Geometry& g, int w, int h) {
  return Named(spec, sf,
               Status::InvalidArgument("is " + std::to_string(w) + "x" + std::to_string(h) + ", the image is " +
                                       std::to_string(g.upright_w()) + "x" + std::to_string(g.upright_h())));
}

Status FieldMaker::MakeImageField(const SourceField& sf, const FieldSpec& spec, const Geometry& g, FieldView* f,
                                  std::vector<uint8_t>* data) const {
  auto bytes = internal::ReadFieldFile(source_, sf);
  if (!bytes.ok()) return bytes.status();
  auto info = ProbeImage(bytes->data(), bytes->size());
  if (!info.ok()) return Named(spec, sf, info.status());
  if (info->upright_width() != g.upright_w() || info->upright_height() != g.upright_h())
    return OtherSize(spec, sf, g, info->upright_width(), info->upright_height());
  SourceItem none;
  auto made = prepare_(std::move(bytes.value()), none);
  if (!made.ok()) return Named(spec, sf, made.status());
  if (int(made->fields.width) != g.out_w || int(made->fields.height) != g.out_h)
    return Named(spec, sf, Status::Corruption("came out at a size other than the image's"));
  data->assign(made->buffer.begin() + made->headroom, made->buffer.end());
  f->encoding = static_cast<uint8_t>(made->fields.encoding);
  f->channels = static_cast<uint8_t>(made->fields.channels);
  f->width = made->fields.width;
  f->height = made->fields.height;
  return Status::Ok();
}

Status FieldMaker::MakeMapField(const SourceField& sf, const FieldSpec& spec, const Geometry& g, FieldView* f,
                                std::vector<uint8_t>* data, int* top) const {
  auto bytes = internal::ReadFieldFile(source_, sf);
  if (!bytes.ok()) return bytes.status();
  const int B = MapSampleBytes(spec);
  auto map = DecodeMask(bytes->data(), bytes->size(), spec.bits);
  if (!map.ok()) return Named(spec, sf, map.status());
  Image m = std::move(map.value());
  if (m.width == g.stored_w && m.height == g.stored_h) {
    m = ApplyOrientation(std::move(m), g.orientation);
  } else if (m.width != g.upright_w() || m.height != g.upright_h()) {
    return OtherSize(spec, sf, g, m.width, m.height);
  }
  if (m.width != g.out_w || m.height != g.out_h)
    m = ResizeMaskNearest(m.pixels.data(), m.width, m.height, g.out_w, g.out_h, B);
  *top = -1;
  for (size_t i = 0; i < m.pixels.size(); i += B) {
    const int v = B == 2 ? m.pixels[i] | (m.pixels[i + 1] << 8) : m.pixels[i];
    if (v > *top && v != spec.ignore) *top = v;
  }
  if (InfoOf(spec.kind).classes && !spec.classes.empty() && *top >= static_cast<int>(spec.classes.size()))
    return Status::InvalidArgument(spec.name + ": " + InfoOf(spec.kind).name + " value " + std::to_string(*top) +
                                   " is outside the " + std::to_string(spec.classes.size()) + " " +
                                   InfoOf(spec.kind).name + " classes and is not the ignore value");
  *data = std::move(m.pixels);
  f->encoding = static_cast<uint8_t>(B);
  f->channels = 1;
  f->width = static_cast<uint32_t>(g.out_w);
  f->height = static_cast<uint32_t>(g.out_h);
  return Status::Ok();
}

Status FieldMaker::MakeBoxesField(const SourceField& sf, const FieldSpec& spec, const Geometry& g, FieldView* f,
                                  std::vector<uint8_t>* data) const {
  std::vector<Box> boxes = sf.boxes;
  for (Box& b : boxes) {
    const float w = float(g.stored_w), h = float(g.stored_h);
    if (b.x0 < 0 && b.x0 >= -1) b.x0 = 0;
    if (b.y0 < 0 && b.y0 >= -1) b.y0 = 0;
    if (b.x1 > w && b.x1 <= w + 1) b.x1 = w;
    if (b.y1 > h && b.y1 <= h + 1) b.y1 = h;
  }
  WriteBoxes(boxes, data);
  f->count = static_cast<uint32_t>(boxes.size());
  f->data = data->data();
  f->size = data->size();
  IMAGEPACK_RETURN_IF_ERROR(CheckFieldContent(*f, spec, g.stored_w, g.stored_h).WithContext(spec.name));
  const float sx = float(g.out_w) / g.upright_w(), sy = float(g.out_h) / g.upright_h();
  for (Box& b : boxes) {
    auto [ax, ay] = Orient(b.x0, b.y0, g.orientation, g.stored_w, g.stored_h);
    auto [bx, by] = Orient(b.x1, b.y1, g.orientation, g.stored_w, g.stored_h);
    b.x0 = std::min(ax, bx) * sx;
    b.x1 = std::max(ax, bx) * sx;
    b.y0 = std::min(ay, by) * sy;
    b.y1 = std::max(ay, by) * sy;
  }
  WriteBoxes(boxes, data);
  return Status::Ok();
}

Status FieldMaker::Make(const SourceItem& item, const Geometry& g, RecordFields* record,
                        std::vector<uint8_t>* section, std::vector<int>* map_top) const {
  std::vector<uint8_t>& out = *section;
  for (const SourceField& sf : item.fields) {
    const FieldSpec& spec = specs_[sf.slot];
    FieldView f;
    f.slot = static_cast<uint8_t>(sf.slot);
    f.kind = spec.kind;
    std::vector<uint8_t> data;  // keeps f.data alive
    const KindInfo& info = InfoOf(spec.kind);
    switch (info.layout) {
      case FieldLayout::kPicture: IMAGEPACK_RETURN_IF_ERROR(MakeImageField(sf, spec, g, &f, &data)); break;
      case FieldLayout::kMap:
        IMAGEPACK_RETURN_IF_ERROR(MakeMapField(sf, spec, g, &f, &data, &(*map_top)[sf.slot]));
        break;
      case FieldLayout::kBoxes: IMAGEPACK_RETURN_IF_ERROR(MakeBoxesField(sf, spec, g, &f, &data)); break;
      case FieldLayout::kList:
        data.resize((info.floats ? sf.floats.size() : sf.ints.size()) * 4);
        if (!data.empty())
          std::memcpy(data.data(), info.floats ? static_cast<const void*>(sf.floats.data())
                                               : static_cast<const void*>(sf.ints.data()),
                      data.size());
        break;
      case FieldLayout::kText: data.assign(sf.text.begin(), sf.text.end()); break;
    }
    f.data = data.data();
    f.size = data.size();
    if (!info.spatial()) {  // finite floats, UTF-8 text: verify's rule
      f.count = static_cast<uint32_t>(f.size / info.element_bytes);
      IMAGEPACK_RETURN_IF_ERROR(CheckFieldContent(f, spec, 0, 0).WithContext(spec.name));
    }
    AppendField(out, f);
  }
  record->field_count = static_cast<uint16_t>(item.fields.size());
  record->fields_size = static_cast<uint32_t>(out.size());
  return Status::Ok();
}

}  // namespace imagepack::internal
