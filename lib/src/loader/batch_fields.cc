#include "loader/batch_fields.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "imagepack/mask.h"

namespace imagepack::internal {

std::vector<BatchField> FieldArrays::Views() {
  std::vector<BatchField> f;
  for (auto& o : outs) f.push_back({o.name, o.dtype, o.shape, o.bytes.data()});
  return f;
}

FieldBatcher::FieldBatcher(std::vector<FieldSpec> fields, Shape shape) : fields_(std::move(fields)), s_(shape) {
  if (fields_.empty()) return;
  const int64_t B = s_.batch_size, S = s_.size, C = s_.channels;
  for (const FieldSpec& f : fields_) {
    outs_of_.push_back(template_.size());
    const KindInfo& info = InfoOf(f.kind);
    switch (info.layout) {
      case FieldLayout::kPicture:
        template_.push_back({f.name, DType::kUint8,
                             s_.nchw ? std::vector<int64_t>{B, C, S, S} : std::vector<int64_t>{B, S, S, C}, {}});
        break;
      case FieldLayout::kMap:
        template_.push_back({f.name,
                             MapSampleBytes(f) == 1 ? DType::kUint8
                             : s_.wide_maps_int32   ? DType::kInt32
                                                    : DType::kUint16,
                             {B, S, S},
                             {}});
        break;
      case FieldLayout::kBoxes:
        template_.push_back({f.name, DType::kFloat32, {B, 0, 4}, {}});
        template_.push_back({FieldLabelsName(f.name), DType::kInt64, {B, 0}, {}});
        template_.push_back({FieldCountName(f.name), DType::kInt64, {B}, {}});
        break;
      case FieldLayout::kList:
        template_.push_back({f.name, info.floats ? DType::kFloat32 : DType::kInt64, {B, 0}, {}});
        template_.push_back({FieldCountName(f.name), DType::kInt64, {B}, {}});
        break;
      case FieldLayout::kText:
        template_.push_back({f.name, DType::kUint8, {0}, {}});
        template_.push_back({f.name + "_offsets", DType::kInt64, {B + 1}, {}});
        break;
    }
  }
  template_.push_back({"crop_box", DType::kInt64, {B, 6}, {}});
}

void FieldBatcher::Prepare(FieldArrays* a) const {
  const int64_t B = s_.batch_size;
  if (a->outs.empty()) a->outs = template_;
  for (size_t slot = 0; slot < fields_.size(); ++slot) {
    if (!InfoOf(fields_[slot].kind).from_file()) continue;  // sized by Finish
    FieldOut& o = a->outs[outs_of_[slot]];
    o.shape = template_[outs_of_[slot]].shape;  // a batch made at another output size takes this one's
    o.shape[0] = B;
    size_t n = DTypeBytes(o.dtype);
    for (int64_t d : o.shape) n *= size_t(d);
    o.bytes.resize(n);
  }
  FieldOut& crop = a->outs.back();
  crop.shape[0] = B;
  crop.bytes.assign(size_t(B) * 6 * 8, 0);
  a->var.resize(fields_.size());
  for (auto& v : a->var) v.assign(size_t(B), {});
}

Status FieldBatcher::RenderSample(const RecordView& rec, const CropBox& box, bool flip, bool vflip,
                                  const RenderImageFn& render, FieldArrays* a, int64_t i) const {
  const std::vector<FieldView> views = RecordFieldViews(rec);
  if (views.size() != fields_.size())
    return Status::Corruption("holds " + std::to_string(views.size()) + " fields, the dataset declares " +
                              std::to_string(fields_.size()));
  const int S = s_.size;
  for (size_t slot = 0; slot < views.size(); ++slot) {
    const FieldView& f = views[slot];
    const FieldSpec& spec = fields_[slot];
    if (f.slot != slot || f.kind != spec.kind)
      return Status::Corruption("field " + std::to_string(slot) + " is not the declared " + spec.name);
    const KindInfo& info = InfoOf(f.kind);
    if (info.from_file() && (f.width != rec.fields.width || f.height != rec.fields.height))
      return Status::Corruption(spec.name + " is " + std::to_string(f.width) + "x" + std::to_string(f.height) +
                                ", the image " + std::to_string(rec.fields.width) + "x" +
                                std::to_string(rec.fields.height));
    FieldOut& out = a->outs[outs_of_[slot]];
    std::vector<uint8_t>& var = a->var[slot][size_t(i)];
    switch (info.layout) {
      case FieldLayout::kPicture: {
        const size_t image_bytes = size_t(S) * S * size_t(s_.channels);
        Status st = render(static_cast<Encoding>(f.encoding), f.data, f.size, f.channels,
                           out.bytes.data() + size_t(i) * image_bytes);
        if (!st.ok()) return st.WithContext(spec.name);
        break;
      }
      case FieldLayout::kMap: {
        const int bytes = MapSampleBytes(spec);
        if (f.encoding != bytes)
          return Status::Corruption(spec.name + " holds " + std::to_string(8 * f.encoding) + "-bit samples, the "
                                    "dataset declares " + std::to_string(spec.bits));
        const size_t n = size_t(S) * S;
        const uint16_t fill = static_cast<uint16_t>(MapFill(spec));
        if (out.dtype != DType::kInt32) {
          RenderMask(f.data, int(f.width), int(f.height), box, S, S, flip, vflip, fill,
                     out.bytes.data() + size_t(i) * n * bytes, bytes);
          break;
        }
        thread_local std::vector<uint16_t> narrow;  // the uint16 crop, then widened
        std::vector<uint16_t>& tmp = narrow;
        tmp.resize(n);
        RenderMask(f.data, int(f.width), int(f.height), box, S, S, flip, vflip, fill,
                   reinterpret_cast<uint8_t*>(tmp.data()), bytes);
        int32_t* wide = reinterpret_cast<int32_t*>(out.bytes.data()) + size_t(i) * n;
        for (size_t k = 0; k < n; ++k) wide[k] = tmp[k];
        break;
      }
      case FieldLayout::kBoxes: IMAGEPACK_RETURN_IF_ERROR(RenderBoxes(f, box, flip, vflip, &var)); break;
      case FieldLayout::kList:
      case FieldLayout::kText: var.assign(f.data, f.data + f.size); break;
    }
  }
  const int64_t crop[6] = {box.x, box.y, box.w, box.h, flip, vflip};
  std::memcpy(a->outs.back().bytes.data() + size_t(i) * sizeof crop, crop, sizeof crop);
  return Status::Ok();
}

// Boxes mapped into the output square, flipped, clipped; those whose part
// inside is empty or below min_box_visible of their area dropped.
Status FieldBatcher::RenderBoxes(const FieldView& f, const CropBox& box, bool flip, bool vflip,
                                 std::vector<uint8_t>* var) const {
  const int S = s_.size;
  const double fx = double(S) / box.w, fy = double(S) / box.h;
  std::vector<Box> kept;
  for (const Box& bx : ReadBoxes(f)) {
    double x0 = (bx.x0 - box.x) * fx, x1 = (bx.x1 - box.x) * fx;
    double y0 = (bx.y0 - box.y) * fy, y1 = (bx.y1 - box.y) * fy;
    if (flip) std::tie(x0, x1) = std::make_pair(S - x1, S - x0);
    if (vflip) std::tie(y0, y1) = std::make_pair(S - y1, S - y0);
    const double area = (x1 - x0) * (y1 - y0);
    x0 = std::clamp(x0, 0.0, double(S));
    x1 = std::clamp(x1, 0.0, double(S));
    y0 = std::clamp(y0, 0.0, double(S));
    y1 = std::clamp(y1, 0.0, double(S));
    const double visible = (x1 - x0) * (y1 - y0);
    if (x1 <= x0 || y1 <= y0 || visible < s_.min_box_visible * area) continue;
    kept.push_back({float(x0), float(y0), float(x1), float(y1), bx.label});
  }
  WriteBoxes(kept, var);
  return Status::Ok();
}

void FieldBatcher::Finish(FieldArrays* a, int count) const {
  const size_t n = size_t(count);
  for (size_t slot = 0; slot < fields_.size(); ++slot) {
    const KindInfo& info = InfoOf(fields_[slot].kind);
    FieldOut* out = &a->outs[outs_of_[slot]];
    const auto& var = a->var[slot];
    switch (info.layout) {
      case FieldLayout::kPicture:
      case FieldLayout::kMap: out->shape[0] = int64_t(n); break;  // made for batch_size samples
      case FieldLayout::kText: PadText(var, n, out); break;
      case FieldLayout::kBoxes: PadBoxes(var, n, out); break;
      case FieldLayout::kList: PadList(info.floats, var, n, out); break;
    }
  }
  a->outs.back().shape[0] = int64_t(n);
}

// Text: the samples' bytes one after another, and n + 1 offsets.
void FieldBatcher::PadText(const std::vector<std::vector<uint8_t>>& var, size_t n, FieldOut* out) const {
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += var[i].size();
  out->bytes.resize(total);
  out->shape = {int64_t(total)};
  FieldOut& offsets = out[1];
  offsets.shape = {int64_t(n) + 1};
  offsets.bytes.resize((n + 1) * 8);
  int64_t* off = reinterpret_cast<int64_t*>(offsets.bytes.data());
  off[0] = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!var[i].empty()) std::memcpy(out->bytes.data() + off[i], var[i].data(), var[i].size());
    off[i + 1] = off[i] + int64_t(var[i].size());
  }
}

// Boxes: [n, m, 4] float32 (0 past a sample's count), labels [n, m] int64
// (-1 past it), counts [n].
void FieldBatcher::PadBoxes(const std::vector<std::vector<uint8_t>>& var, size_t n, FieldOut* out) const {
  const size_t eb = InfoOf(FieldKind::kBoxes).element_bytes;
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, var[i].size() / eb);
  FieldOut& labels = out[1];
  FieldOut& counts = out[2];
  counts.shape = {int64_t(n)};
  counts.bytes.resize(n * 8);
  int64_t* count = reinterpret_cast<int64_t*>(counts.bytes.data());
  out->shape = {int64_t(n), int64_t(m), 4};
  out->bytes.assign(n * m * 16, 0);
  labels.shape = {int64_t(n), int64_t(m)};
  labels.bytes.resize(n * m * 8);
  float* xy = reinterpret_cast<float*>(out->bytes.data());
  int64_t* cls = reinterpret_cast<int64_t*>(labels.bytes.data());
  std::fill(cls, cls + n * m, -1);
  for (size_t i = 0; i < n; ++i) {
    FieldView fv;
    fv.count = uint32_t(var[i].size() / eb);
    fv.data = var[i].data();
    const auto boxes = ReadBoxes(fv);
    count[i] = int64_t(boxes.size());
    for (size_t k = 0; k < boxes.size(); ++k) {
      float* q = xy + (i * m + k) * 4;
      q[0] = boxes[k].x0, q[1] = boxes[k].y0, q[2] = boxes[k].x1, q[3] = boxes[k].y1;
      cls[i * m + k] = boxes[k].label;
    }
  }
}

// Ints: [n, m] int64, -1 past a sample's count; floats: [n, m] float32, 0
// past it; counts [n].
void FieldBatcher::PadList(bool floats, const std::vector<std::vector<uint8_t>>& var, size_t n,
                           FieldOut* out) const {
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, var[i].size() / 4);
  FieldOut& counts = out[1];
  counts.shape = {int64_t(n)};
  counts.bytes.resize(n * 8);
  int64_t* count = reinterpret_cast<int64_t*>(counts.bytes.data());
  out->shape = {int64_t(n), int64_t(m)};
  if (!floats) {
    out->bytes.resize(n * m * 8);
    int64_t* v = reinterpret_cast<int64_t*>(out->bytes.data());
    std::fill(v, v + n * m, -1);
    for (size_t i = 0; i < n; ++i) {
      count[i] = int64_t(var[i].size() / 4);
      for (int64_t k = 0; k < count[i]; ++k) {
        int32_t x;
        std::memcpy(&x, var[i].data() + 4 * k, 4);
        v[i * m + k] = x;
      }
    }
    return;
  }
  out->bytes.assign(n * m * 4, 0);
  for (size_t i = 0; i < n; ++i) {
    count[i] = int64_t(var[i].size() / 4);
    if (!var[i].empty()) std::memcpy(out->bytes.data() + i * m * 4, var[i].data(), var[i].size());
  }
}

}  // namespace imagepack::internal
