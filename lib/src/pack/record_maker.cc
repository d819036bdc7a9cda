// RecordMaker (record_maker.h): an input's bytes read, prepared or decoded,
// its fields made by FieldMaker, its statistics sampled, the record sealed.
#include "pack/record_maker.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "imagepack/files.h"

namespace imagepack::internal {

namespace fs = std::filesystem;

namespace {

// Formats whose pixels are the picture itself: stored as JPEG, they lose
// detail. A WebP is lossless when its first chunk is VP8L.
bool Lossless(const ImageInfo& info, const uint8_t* data, size_t size) {
  switch (info.format) {
    case ImageFormat::kPng:
    case ImageFormat::kGif:
    case ImageFormat::kBmp:
    case ImageFormat::kTiff:
    case ImageFormat::kPnm: return true;
    case ImageFormat::kWebp: return size >= 16 && std::memcmp(data + 12, "VP8L", 4) == 0;
    case ImageFormat::kJpeg:
    case ImageFormat::kUnknown: break;
  }
  return false;
}

// Resized when the payload's size is not the source's upright size.
Stored ResizedOr(Stored otherwise, const ImageInfo& info, int width, int height) {
  const int w = info.orientation >= 5 ? info.height : info.width;
  const int h = info.orientation >= 5 ? info.width : info.height;
  return width == w && height == h ? otherwise : Stored::kResized;
}

Result<Image> DecodeForStats(const uint8_t* data, size_t size, int channels) {
  DecodeOptions d;
  d.channels = channels;
  d.limit = {SizeLimit::Mode::kShorterEdge, 32};  // DCT-scaled: nearly free
  return DecodeImage(data, size, d);
}

}  // namespace

RecordMaker::RecordMaker(const PackOptions& o, int64_t n, const internal::DatasetSource& source)
    : o_(o), source_(source), db_(source.db.get()), root_(source.root), specs_(source.fields),
      channels_(o.prepare.decode.channels),
      // A second image is prepared as the image is: the same size rule, so
      // the same output size.
      fields_(source, [this](std::vector<uint8_t> in, const SourceItem& item) {
        return FromEncoded(std::move(in), 0, item);
      }) {
  // Raw: exact statistics over every image (the pixels are at hand).
  // JPEG: every stride-th image, decoded at reduced scale. stats_sample
  // 0: none at all, for either encoding (stride 0).
  stats_stride_ = o.stats_sample <= 0          ? 0
                  : o.encoding == Encoding::kRaw ? 1
                                                 : std::max<int64_t>(1, (n + o.stats_sample - 1) / o.stats_sample);
}

// Item `pos` of the pack. Any thread. Every way through ends in Seal().
Packed RecordMaker::Make(size_t pos, SourceItem item) {
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
    Status st = fields_.Make(item, geometry, &unsealed->fields, &unsealed->field_section, &p.map_top);
    if (!st.ok()) {
      p.error = st.message();
      p.rel = item.rel;
      return p;
    }
  }
  Seal(std::move(unsealed.value()), pos, item.rel, &p);
  return p;
}

// The item's bytes: a file read with room for the record header in front
// (a clean JPEG then becomes its record with no copy at all), or a
// database record (raw pixels are re-made from the pixels; the item
// takes the record's path and label).
Result<Unsealed> RecordMaker::Build(SourceItem& item, int64_t* bytes_in, Geometry* geometry) {
  std::vector<uint8_t> in;
  if (db_) {
    auto& cur = cursors_.local();
    if (!cur) cur = db_->NewCursor();
    auto r = cur->Read(item.db_index);
    if (!r.ok()) return r.status();
    item.rel.assign(r->path);
    auto label = DatabaseLabel(source_, r->fields.label, o_.source);  // --classes: by name
    if (!label.ok()) return label.status();
    item.label = label.value();
    const size_t headroom = kRecordHeaderSize + item.rel.size();
    *bytes_in = static_cast<int64_t>(r->payload_size);
    if (r->fields.encoding == Encoding::kRaw) {
      auto u = FromPixels(r.value());
      if (u.ok()) u->fields.label = item.label;
      return u;
    }
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

// An encoded image (JPEG, PNG, ...) at in[headroom..].
Result<Unsealed> RecordMaker::FromEncoded(std::vector<uint8_t> in, size_t headroom, const SourceItem& item) {
  const uint8_t* data = in.data() + headroom;
  const size_t size = in.size() - headroom;
  Unsealed u;
  // The header only (no pixels): what the source was, for the summary.
  const auto info = ProbeImage(data, size);
  if (o_.encoding == Encoding::kJpeg) {
    if (!o_.prepare.reencode && info.ok() && CanPassThrough(data, size, info.value(), o_.prepare)) {
      u.fields = {Encoding::kJpeg, info->components, item.label, uint32_t(info->height), uint32_t(info->width)};
      u.buffer = std::move(in);
      u.headroom = headroom;
      u.passed_through = true;
      return u;
    }
    auto prepared = PrepareJpeg(data, size, o_.prepare);
    if (!prepared.ok()) return prepared.status();
    u.fields = {Encoding::kJpeg, prepared->channels, item.label, uint32_t(prepared->height),
                uint32_t(prepared->width)};
    u.passed_through = prepared->passed_through;
    if (!u.passed_through && info.ok()) {
      u.stored = ResizedOr(Stored::kReencoded, info.value(), prepared->width, prepared->height);
      u.lossless_as_jpeg = Lossless(info.value(), data, size);
    }
    u.buffer = std::move(prepared->bytes);
    return u;
  }
  std::vector<uint8_t> spare;
  spares_.try_pop(spare);
  auto direct = DecodeIntoRecord(data, size, item, std::move(spare));
  if (direct.ok()) direct->stored = Stored::kDecoded;
  if (direct.ok() || direct.status().code() != Status::Code::kNotSupported) return direct;
  auto img = DecodeImage(data, size, o_.prepare.decode);
  if (!img.ok()) return img.status();
  u.fields = {Encoding::kRaw, img->channels, item.label, uint32_t(img->height), uint32_t(img->width)};
  u.stored = info.ok() ? ResizedOr(Stored::kDecoded, info.value(), img->width, img->height) : Stored::kDecoded;
  u.buffer = std::move(img->pixels);
  return u;
}

// Raw packing's usual case: a plain JPEG already within the limits is
// decoded straight into its record (no image buffer copied into it
// after). NotSupported for anything that needs more than a decode (then
// DecodeImage, which also reports the pixel limit). `rec` may be a spent
// record's buffer: resizing it within its size initialises nothing.
Result<Unsealed> RecordMaker::DecodeIntoRecord(const uint8_t* data, size_t size, const SourceItem& item,
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
Result<Unsealed> RecordMaker::FromPixels(const RecordView& r) {
  Image img;
  img.width = static_cast<int>(r.fields.width);
  img.height = static_cast<int>(r.fields.height);
  img.channels = r.fields.channels;
  img.pixels.assign(r.payload, r.payload + r.payload_size);
  auto [tw, th] = TargetSize(img.width, img.height, o_.prepare.decode.limit);
  const bool resized = tw != img.width || th != img.height;
  const bool converted = img.channels != channels_;
  if (resized) img = ResampleImage(img, tw, th, o_.prepare.decode.filter);
  img = ConvertChannels(std::move(img), channels_);
  Unsealed u;
  u.fields = {o_.encoding, channels_, r.fields.label, uint32_t(img.height), uint32_t(img.width)};
  if (o_.encoding == Encoding::kRaw) {
    // Pixels kept are as-is; gray made RGB (or RGB gray) counts as decoded anew.
    u.stored = resized ? Stored::kResized : converted ? Stored::kDecoded : Stored::kAsIs;
    u.buffer = std::move(img.pixels);
    return u;
  }
  auto enc = EncodeJpeg(img, o_.prepare.quality);
  if (!enc.ok()) return enc.status();
  u.stored = resized ? Stored::kResized : Stored::kReencoded;
  u.lossless_as_jpeg = true;  // raw pixels are lossless
  u.buffer = std::move(enc.value());
  u.stats_image = std::move(img);
  return u;
}

// The one tail: statistics, then the record around the payload.
void RecordMaker::Seal(Unsealed u, size_t pos, const std::string& rel, Packed* p) {
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
  p->stored = u.passed_through ? Stored::kAsIs : u.stored;
  p->lossless_as_jpeg = u.lossless_as_jpeg;
  p->payload = static_cast<int64_t>(size + u.field_section.size());
  if (u.headroom > 0) {
    u.buffer.insert(u.buffer.end(), u.field_section.begin(), u.field_section.end());
    SealRecord(u.buffer, u.fields, rel);
    p->record = std::move(u.buffer);
  } else {
    p->record = EncodeRecord(u.fields, rel, payload, size, u.field_section.data());
  }
}

}  // namespace imagepack::internal
