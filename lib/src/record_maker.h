// One input of pack_lmdb made into a record (RecordMaker): read or
// decoded, prepared (pass-through, resize, re-encode), its fields made
// (second images prepared like the image, masks decoded and resized by
// nearest neighbour, boxes turned and scaled with the image), statistics
// sampled, sealed with its checksum. Any thread. Included by pack.cc only
// (the pipeline, PackDataset). Internal.
#pragma once

#include <tbb/concurrent_queue.h>
#include <tbb/enumerable_thread_specific.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "imagepack/files.h"
#include "imagepack/mask.h"
#include "imagepack/pack.h"
#include "formats/text.h"
#include "pixel_stats.h"
#include "sources.h"
#include "tsan_annotations.h"

namespace imagepack::internal {

namespace fs = std::filesystem;


// What one input became: its record, or the reason it has none.
struct Packed {
  size_t pos = 0;
  std::string rel;  // the input's name, for its error
  std::vector<uint8_t> record;
  std::string error;
  bool passed_through = false;
  PixelMoments moments;
  int64_t bytes_in = 0;
  int64_t payload = 0;
  int32_t label = -1;
  int64_t write_at = -1;  // parallel writes: where the record goes
  std::vector<int> map_top;  // per field slot: a map's largest value but its fill value, -1: none
};

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
inline std::pair<float, float> Orient(float x, float y, int orientation, int W, int H) {
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

// A record before it is sealed: its header fields and its payload. The
// payload is either buffer[headroom..] with room for the header in front
// (sealed in place, no copy: a JPEG kept as it was, pixels decoded straight
// into the record) or the whole buffer (headroom 0: copied behind a header).
struct Unsealed {
  RecordFields fields;
  std::vector<uint8_t> buffer;
  size_t headroom = 0;
  bool passed_through = false;
  Image stats_image;  // JPEG made from pixels: those pixels, for the statistics
  std::vector<uint8_t> field_section;  // the record's field entries (version 2)
};

inline Result<Image> DecodeForStats(const uint8_t* data, size_t size, int channels) {
  DecodeOptions d;
  d.channels = channels;
  d.limit = {SizeLimit::Mode::kShorterEdge, 32};  // DCT-scaled: nearly free
  return DecodeImage(data, size, d);
}

// Turns source items into records: PackDataset's parallel stage.
class RecordMaker {
 public:
  // `n`: the items the pack takes (PackInputs).
  RecordMaker(const PackOptions& o, int64_t n, const internal::DatasetSource& source)
      : o_(o), source_(source), db_(source.db.get()), root_(source.root), specs_(source.fields),
        channels_(o.prepare.decode.channels) {
    // Raw: exact statistics over every image (the pixels are at hand).
    // JPEG: every stride-th image, decoded at reduced scale. stats_sample
    // 0: none at all, for either encoding (stride 0).
    stats_stride_ = o.stats_sample <= 0          ? 0
                    : o.encoding == Encoding::kRaw ? 1
                                                   : std::max<int64_t>(1, (n + o.stats_sample - 1) / o.stats_sample);
  }

  // Item `pos` of the pack. Any thread. Every way through ends in Seal().
  Packed Make(size_t pos, SourceItem item) {
    Packed p;
    p.pos = pos;
    Geometry geometry;
    auto unsealed = Build(item, &p.bytes_in, &geometry);
    if (!unsealed.ok()) {
      p.error = unsealed.status().message();
      p.rel = item.rel.empty() && item.db_index >= 0 ? RecordKey(item.db_index) : item.rel;
      return p;
    }
    p.label = item.label;
    if (!specs_.empty()) {
      geometry.out_w = static_cast<int>(unsealed->fields.width);
      geometry.out_h = static_cast<int>(unsealed->fields.height);
      p.map_top.assign(specs_.size(), -1);
      Status st = MakeFields(item, geometry, &unsealed.value(), &p);
      if (!st.ok()) {
        p.error = st.message();
        p.rel = item.rel;
        return p;
      }
    }
    Seal(std::move(unsealed.value()), pos, item.rel, &p);
    return p;
  }

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
  Result<Unsealed> Build(SourceItem& item, int64_t* bytes_in, Geometry* geometry) {
    std::vector<uint8_t> in;
    if (db_) {
      auto& cur = cursors_.local();
      if (!cur) cur = db_->NewCursor();
      auto r = cur->Read(item.db_index);
      if (!r.ok()) return r.status();
      item.rel.assign(r->path);
      item.label = r->fields.label;
      const size_t headroom = kRecordHeaderSize + item.rel.size();
      *bytes_in = static_cast<int64_t>(r->payload_size);
      if (r->fields.encoding == Encoding::kRaw) return FromPixels(r.value());
      in.resize(headroom + r->payload_size);
      std::memcpy(in.data() + headroom, r->payload, r->payload_size);
      return FromEncoded(std::move(in), headroom, item);
    }
    const size_t headroom = kRecordHeaderSize + item.rel.size();
    if (item.archive >= 0) {
      auto f = ReadArchiveItem(source_, item, headroom);
      if (!f.ok()) return f.status();
      in = std::move(f.value());
      *bytes_in = static_cast<int64_t>(item.size);
    } else {
      auto f = ReadFile((fs::path(root_) / item.rel).string(), headroom);
      if (!f.ok()) return f.status();
      in = std::move(f.value());
      *bytes_in = static_cast<int64_t>(in.size() - headroom);
    }
    if (!specs_.empty()) {
      auto info = ProbeImage(in.data() + headroom, in.size() - headroom);
      if (!info.ok()) return info.status();
      *geometry = {info->width, info->height, info->orientation, 0, 0};
    }
    return FromEncoded(std::move(in), headroom, item);
  }

  // The sample's other fields, in slot order, as the record's field
  // section: images prepared as the record's image (same size rule, so the
  // same output size), masks by nearest neighbour, boxes scaled; masks and
  // boxes given in the stored pixel grid are turned upright with the image.
  // A field's error, named by the field and its file.
  static Status Named(const FieldSpec& spec, const SourceField& sf, const Status& st) {
    return st.WithContext(spec.name + " " + sf.file);
  }
  // A partner of another size than the image (upright), named.
  static Status OtherSize(const FieldSpec& spec, const SourceField& sf, const Geometry& g, int w, int h) {
    return Named(spec, sf,
                 Status::InvalidArgument("is " + std::to_string(w) + "x" + std::to_string(h) + ", the image is " +
                                         std::to_string(g.upright_w()) + "x" + std::to_string(g.upright_h())));
  }

  // A second image, prepared like the image (it must come out at its size).
  Status MakeImageField(const SourceField& sf, const FieldSpec& spec, const Geometry& g, FieldView* f,
                        std::vector<uint8_t>* data) {
    auto bytes = internal::ReadFieldFile(source_, sf);
    if (!bytes.ok()) return bytes.status();
    auto info = ProbeImage(bytes->data(), bytes->size());
    if (!info.ok()) return Named(spec, sf, info.status());
    if (info->upright_width() != g.upright_w() || info->upright_height() != g.upright_h())
      return OtherSize(spec, sf, g, info->upright_width(), info->upright_height());
    SourceItem none;
    auto made = FromEncoded(std::move(bytes.value()), 0, none);
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

  // A map: decoded to values of its sample width, turned upright with the
  // image (when stored at the image's stored size), resized by nearest
  // neighbour, its values checked against declared classes (verify's rule).
  Status MakeMapField(const SourceField& sf, const FieldSpec& spec, const Geometry& g, FieldView* f,
                      std::vector<uint8_t>* data, int* top) {
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

  // Boxes given on the stored grid: edges within a pixel outside the image
  // clipped to it (rounding in other tools' exports), then checked there by
  // verify's rule, turned upright and scaled with the image.
  Status MakeBoxesField(const SourceField& sf, const FieldSpec& spec, const Geometry& g, FieldView* f,
                        std::vector<uint8_t>* data) {
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

  // The item's fields in slot order into u->field_section.
  Status MakeFields(const SourceItem& item, const Geometry& g, Unsealed* u, Packed* p) {
    std::vector<uint8_t>& out = u->field_section;
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
          IMAGEPACK_RETURN_IF_ERROR(MakeMapField(sf, spec, g, &f, &data, &p->map_top[sf.slot]));
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
    u->fields.field_count = static_cast<uint16_t>(item.fields.size());
    u->fields.fields_size = static_cast<uint32_t>(out.size());
    return Status::Ok();
  }

  // An encoded image (JPEG, PNG, ...) at in[headroom..].
  Result<Unsealed> FromEncoded(std::vector<uint8_t> in, size_t headroom, const SourceItem& item) {
    const uint8_t* data = in.data() + headroom;
    const size_t size = in.size() - headroom;
    Unsealed u;
    if (o_.encoding == Encoding::kJpeg) {
      if (!o_.prepare.reencode) {
        auto info = ProbeImage(data, size);
        if (info.ok() && CanPassThrough(data, size, info.value(), o_.prepare)) {
          u.fields = {Encoding::kJpeg, info->components, item.label, uint32_t(info->height), uint32_t(info->width)};
          u.buffer = std::move(in);
          u.headroom = headroom;
          u.passed_through = true;
          return u;
        }
      }
      auto prepared = PrepareJpeg(data, size, o_.prepare);
      if (!prepared.ok()) return prepared.status();
      u.fields = {Encoding::kJpeg, prepared->channels, item.label, uint32_t(prepared->height),
                  uint32_t(prepared->width)};
      u.passed_through = prepared->passed_through;
      u.buffer = std::move(prepared->bytes);
      return u;
    }
    std::vector<uint8_t> spare;
    spares_.try_pop(spare);
    auto direct = DecodeIntoRecord(data, size, item, std::move(spare));
    if (direct.ok() || direct.status().code() != Status::Code::kNotSupported) return direct;
    auto img = DecodeImage(data, size, o_.prepare.decode);
    if (!img.ok()) return img.status();
    u.fields = {Encoding::kRaw, img->channels, item.label, uint32_t(img->height), uint32_t(img->width)};
    u.buffer = std::move(img->pixels);
    return u;
  }

  // Raw packing's usual case: a plain JPEG already within the limits is
  // decoded straight into its record (no image buffer copied into it
  // after). NotSupported for anything that needs more than a decode (then
  // DecodeImage, which also reports the pixel limit). `rec` may be a spent
  // record's buffer: resizing it within its size initialises nothing.
  Result<Unsealed> DecodeIntoRecord(const uint8_t* data, size_t size, const SourceItem& item,
                                    std::vector<uint8_t> rec) {
    const DecodeOptions& d = o_.prepare.decode;
    auto info = ProbeImage(data, size);
    if (!info.ok() || info->format != ImageFormat::kJpeg || int64_t(info->width) * info->height > d.max_pixels)
      return Status::NotSupported("not a plain JPEG");
    const size_t px = size_t(info->width) * info->height;  // JPEG sizes are 16-bit: no overflow
    Unsealed u;
    u.headroom = kRecordHeaderSize + item.rel.size();
    rec.resize(u.headroom + px * d.channels);
    IMAGEPACK_RETURN_IF_ERROR(DecodeJpegInto(data, size, info.value(), d, rec.data() + u.headroom));
    u.fields = {Encoding::kRaw, d.channels, item.label, uint32_t(info->height), uint32_t(info->width)};
    u.buffer = std::move(rec);
    return u;
  }

  // A database's raw record: resized and converted like a decoded file.
  Result<Unsealed> FromPixels(const RecordView& r) {
    Image img;
    img.width = static_cast<int>(r.fields.width);
    img.height = static_cast<int>(r.fields.height);
    img.channels = r.fields.channels;
    img.pixels.assign(r.payload, r.payload + r.payload_size);
    auto [tw, th] = TargetSize(img.width, img.height, o_.prepare.decode.limit);
    if (tw != img.width || th != img.height) img = ResampleImage(img, tw, th, o_.prepare.decode.filter);
    img = ConvertChannels(std::move(img), channels_);
    Unsealed u;
    u.fields = {o_.encoding, channels_, r.fields.label, uint32_t(img.height), uint32_t(img.width)};
    if (o_.encoding == Encoding::kRaw) {
      u.buffer = std::move(img.pixels);
      return u;
    }
    auto enc = EncodeJpeg(img, o_.prepare.quality);
    if (!enc.ok()) return enc.status();
    u.buffer = std::move(enc.value());
    u.stats_image = std::move(img);
    return u;
  }

  // The one tail: statistics, then the record around the payload.
  void Seal(Unsealed u, size_t pos, const std::string& rel, Packed* p) {
    const uint8_t* payload = u.buffer.data() + u.headroom;
    const size_t size = u.buffer.size() - u.headroom;
    if (stats_stride_ == 0) {
      // --stats-sample 0: no statistics, so the metadata states none
    } else if (u.fields.encoding == Encoding::kRaw) {
      p->moments.Add(payload, size_t(u.fields.width) * u.fields.height, u.fields.channels);
    } else if (static_cast<int64_t>(pos) % stats_stride_ == 0) {
      if (!u.stats_image.pixels.empty()) {
        const Image& img = u.stats_image;
        p->moments.Add(img.pixels.data(), size_t(img.width) * img.height, img.channels);
      } else if (auto small = DecodeForStats(payload, size, channels_); small.ok()) {
        p->moments.Add(small->pixels.data(), size_t(small->width) * small->height, small->channels);
      }
    }
    p->passed_through = u.passed_through;
    p->payload = static_cast<int64_t>(size + u.field_section.size());
    if (u.headroom > 0) {
      u.buffer.insert(u.buffer.end(), u.field_section.begin(), u.field_section.end());
      SealRecord(u.buffer, u.fields, rel);
      p->record = std::move(u.buffer);
    } else {
      p->record = EncodeRecord(u.fields, rel, payload, size, u.field_section.data());
    }
  }

  const PackOptions& o_;
  const internal::DatasetSource& source_;
  const RecordSource* db_;
  const std::string& root_;
  const std::vector<FieldSpec>& specs_;
  const int channels_;
  int64_t stats_stride_ = 1;  // 0: no statistics
  tbb::enumerable_thread_specific<std::unique_ptr<RecordCursor>> cursors_;
  tbb::concurrent_queue<std::vector<uint8_t>> spares_;
};

// This shard's items, in sorted path order or shuffled by the seed.
}  // namespace imagepack::internal
