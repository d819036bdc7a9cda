#include "formats/tfrecord.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "base/le.h"
#include "formats/text.h"

namespace imagepack::internal {
namespace {

// The byte-at-a-time table of the reflected Castagnoli polynomial, and
// three more for slicing by 4 (a record's image is read once to check it).
struct Crc32cTables {
  std::array<std::array<uint32_t, 256>, 4> t{};
  Crc32cTables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (size_t s = 1; s < 4; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
};

const Crc32cTables& Tables() {
  static const Crc32cTables tables;
  return tables;
}

#if defined(__x86_64__)
// SSE4.2's crc32 instruction computes CRC-32C: 8 bytes a step.
__attribute__((target("sse4.2"))) uint32_t Crc32cHardware(const uint8_t* data, size_t size, uint32_t crc) {
  uint64_t c = ~crc;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t v;
    std::memcpy(&v, data + i, 8);
    c = __builtin_ia32_crc32di(c, v);
  }
  uint32_t c32 = uint32_t(c);
  for (; i < size; ++i) c32 = __builtin_ia32_crc32qi(c32, data[i]);
  return ~c32;
}

bool HasCrcInstruction() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

uint32_t Crc32c(const uint8_t* data, size_t size, uint32_t crc) {
#if defined(__x86_64__)
  if (HasCrcInstruction()) return Crc32cHardware(data, size, crc);
#endif
  return Crc32cPortable(data, size, crc);
}

uint32_t Crc32cPortable(const uint8_t* data, size_t size, uint32_t crc) {
  const auto& t = Tables().t;
  crc = ~crc;
  size_t i = 0;
  for (; i + 4 <= size; i += 4) {
    crc ^= uint32_t(data[i]) | uint32_t(data[i + 1]) << 8 | uint32_t(data[i + 2]) << 16 | uint32_t(data[i + 3]) << 24;
    crc = t[3][crc & 0xff] ^ t[2][(crc >> 8) & 0xff] ^ t[1][(crc >> 16) & 0xff] ^ t[0][crc >> 24];
  }
  for (; i < size; ++i) crc = t[0][(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string TfRecordWhere(const std::string& shown, int64_t record) {
  return shown + ":record " + std::to_string(record);
}

Result<TfRecordFrame> ReadTfRecordHeader(const TfReadFn& read, uint64_t file_size, uint64_t at, int64_t record,
                                         const std::string& shown, bool* end, uint64_t budget) {
  *end = at >= file_size;
  if (*end) return TfRecordFrame{};
  const std::string where = TfRecordWhere(shown, record);
  if (file_size - at < 12)
    return Status::Corruption(where + ": truncated: " + std::to_string(file_size - at) +
                              " bytes at byte " + std::to_string(at) + " where a 12-byte record header starts");
  uint8_t h[12];
  IMAGEPACK_RETURN_IF_ERROR(read(h, sizeof h, at));
  const uint64_t length = Get<uint64_t>(h);
  if (MaskCrc(Crc32c(h, 8)) != Get<uint32_t>(h + 8))
    return Status::Corruption(where + ": the length's CRC does not match (byte " + std::to_string(at) +
                              "): a damaged or not a TFRecord file");
  if (length > budget)
    return Status::InvalidArgument(where + ": a record of " + std::to_string(length) + " bytes (budget " +
                                   std::to_string(budget) + ")");
  TfRecordFrame f;
  f.offset = at + 12;
  f.size = length;
  if (file_size - f.offset < length || file_size - f.offset - length < 4)
    return Status::Corruption(where + ": truncated: the record of " + std::to_string(length) + " bytes at byte " +
                              std::to_string(at) + " runs past the end of the file (" + std::to_string(file_size) +
                              " bytes)");
  f.next = f.offset + length + 4;
  return f;
}

Result<uint64_t> FindTfRecordHeader(const TfReadFn& read, uint64_t file_size, uint64_t from) {
  constexpr size_t kChunk = 1 << 20;
  std::vector<uint8_t> buf;
  for (uint64_t base = from; base < file_size && file_size - base >= 16;) {
    // This chunk's candidate starts, and the 11 bytes after them.
    const uint64_t starts = std::min<uint64_t>(kChunk, file_size - base - 15);
    buf.resize(size_t(starts + 11));
    IMAGEPACK_RETURN_IF_ERROR(read(buf.data(), buf.size(), base));
    for (size_t i = 0; i < starts; ++i) {
      const uint8_t* h = buf.data() + i;
      if (MaskCrc(Crc32c(h, 8)) != Get<uint32_t>(h + 8)) continue;
      const uint64_t at = base + i, length = Get<uint64_t>(h);
      if (length <= file_size - at - 16) return at;
    }
    base += starts;
  }
  return file_size;
}

Status CheckTfRecordData(const TfReadFn& read, const TfRecordFrame& frame, const uint8_t* data, int64_t record,
                         const std::string& shown) {
  uint8_t c[4];
  IMAGEPACK_RETURN_IF_ERROR(read(c, sizeof c, frame.offset + frame.size));
  if (MaskCrc(Crc32c(data, frame.size)) != Get<uint32_t>(c))
    return Status::Corruption(TfRecordWhere(shown, record) + ": the data's CRC does not match (" +
                              std::to_string(frame.size) + " bytes at byte " + std::to_string(frame.offset) + ")");
  return Status::Ok();
}

namespace {

// A protobuf message's bytes [pos, end) of the record's data, read field
// by field; errors name the byte.
struct Wire {
  const uint8_t* data;
  size_t pos;
  size_t end;

  bool done() const { return pos >= end; }

  Status Bad(const std::string& what) const {
    return Status::Corruption("tf.train.Example: " + what + " at byte " + std::to_string(pos));
  }

  Result<uint64_t> Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= end) return Bad("a varint cut short");
      const uint8_t b = data[pos++];
      if (shift == 63 && (b & 0x7e)) return Bad("a varint over 64 bits");
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    return Bad("a varint over 10 bytes");
  }

  // A length-delimited field's body: [start, start + n) within this message.
  Result<Wire> Delimited() {
    auto n = Varint();
    if (!n.ok()) return n.status();
    if (*n > end - pos) return Bad("a field of " + std::to_string(*n) + " bytes past its message's end");
    Wire inner{data, pos, pos + size_t(*n)};
    pos += size_t(*n);
    return inner;
  }

  // Skips a field of `type` (an unknown one).
  Status Skip(uint32_t type) {
    switch (type) {
      case 0: return Varint().status();
      case 1:
      case 5: {
        const size_t n = type == 1 ? 8 : 4;
        if (end - pos < n) return Bad("a fixed field cut short");
        pos += n;
        return Status::Ok();
      }
      case 2: return Delimited().status();
      default: return Bad("wire type " + std::to_string(type) + " (groups are not read)");
    }
  }

  // The next field's number and wire type.
  Status Tag(uint32_t* field, uint32_t* type) {
    auto t = Varint();
    if (!t.ok()) return t.status();
    if ((*t >> 3) == 0 || (*t >> 3) > 0x1fffffff) return Bad("field number 0 or out of range");
    *field = uint32_t(*t >> 3);
    *type = uint32_t(*t & 7);
    return Status::Ok();
  }
};

// Counts values against limits::kTfValues.
struct Budget {
  size_t values = 0;
  Status Take(const Wire& w, size_t n) {
    values += n;
    if (values > limits::kTfValues)
      return w.Bad("more than " + std::to_string(limits::kTfValues) + " list values");
    return Status::Ok();
  }
};

// A BytesList, FloatList or Int64List (field `kind` of Feature) into `f`.
Status ReadList(Wire w, TfFeature::Kind kind, TfFeature* f, Budget& budget) {
  if (f->kind != kind) *f = TfFeature{};  // a oneof: the last case set wins
  f->kind = kind;
  while (!w.done()) {
    uint32_t field = 0, type = 0;
    IMAGEPACK_RETURN_IF_ERROR(w.Tag(&field, &type));
    if (field != 1) {
      IMAGEPACK_RETURN_IF_ERROR(w.Skip(type));
      continue;
    }
    if (kind == TfFeature::Kind::kBytes) {
      if (type != 2) return w.Bad("a BytesList value of wire type " + std::to_string(type));
      auto v = w.Delimited();
      if (!v.ok()) return v.status();
      IMAGEPACK_RETURN_IF_ERROR(budget.Take(w, 1));
      f->bytes.emplace_back(v->pos, v->end - v->pos);
    } else if (kind == TfFeature::Kind::kFloat) {
      Wire v = w;
      if (type == 2) {
        auto packed = w.Delimited();
        if (!packed.ok()) return packed.status();
        v = *packed;
        if ((v.end - v.pos) % 4) return w.Bad("a packed FloatList of " + std::to_string(v.end - v.pos) + " bytes");
      } else if (type == 5) {
        if (w.end - w.pos < 4) return w.Bad("a float cut short");
        v.end = v.pos + 4;
        w.pos += 4;
      } else {
        return w.Bad("a FloatList value of wire type " + std::to_string(type));
      }
      IMAGEPACK_RETURN_IF_ERROR(budget.Take(w, (v.end - v.pos) / 4));
      for (size_t at = v.pos; at < v.end; at += 4) {
        const uint32_t bits = Get<uint32_t>(v.data + at);
        float x;
        std::memcpy(&x, &bits, 4);
        f->floats.push_back(x);
      }
    } else {
      if (type == 2) {
        auto packed = w.Delimited();
        if (!packed.ok()) return packed.status();
        Wire v = *packed;
        while (!v.done()) {
          auto x = v.Varint();
          if (!x.ok()) return x.status();
          IMAGEPACK_RETURN_IF_ERROR(budget.Take(v, 1));
          f->ints.push_back(int64_t(*x));
        }
      } else if (type == 0) {
        auto x = w.Varint();
        if (!x.ok()) return x.status();
        IMAGEPACK_RETURN_IF_ERROR(budget.Take(w, 1));
        f->ints.push_back(int64_t(*x));
      } else {
        return w.Bad("an Int64List value of wire type " + std::to_string(type));
      }
    }
  }
  return Status::Ok();
}

// A Feature message into `f` (merged with what the key held, as protobuf
// merges a repeated message).
Status ReadFeature(Wire w, TfFeature* f, Budget& budget) {
  while (!w.done()) {
    uint32_t field = 0, type = 0;
    IMAGEPACK_RETURN_IF_ERROR(w.Tag(&field, &type));
    if (field < 1 || field > 3 || type != 2) {
      IMAGEPACK_RETURN_IF_ERROR(w.Skip(type));
      continue;
    }
    auto list = w.Delimited();
    if (!list.ok()) return list.status();
    const TfFeature::Kind kind =
        field == 1 ? TfFeature::Kind::kBytes : field == 2 ? TfFeature::Kind::kFloat : TfFeature::Kind::kInt64;
    IMAGEPACK_RETURN_IF_ERROR(ReadList(*list, kind, f, budget));
  }
  return Status::Ok();
}

// One map entry (key 1, value 2) of Features into `out`; a key given again
// replaces the earlier entry, as a protobuf map does.
Status ReadEntry(Wire w, TfExample* out, Budget& budget) {
  std::string key;
  TfFeature value;
  while (!w.done()) {
    uint32_t field = 0, type = 0;
    IMAGEPACK_RETURN_IF_ERROR(w.Tag(&field, &type));
    if ((field == 1 || field == 2) && type == 2) {
      auto body = w.Delimited();
      if (!body.ok()) return body.status();
      if (field == 2) {
        IMAGEPACK_RETURN_IF_ERROR(ReadFeature(*body, &value, budget));
        continue;
      }
      if (body->end - body->pos > limits::kNameBytes)
        return w.Bad("a feature key of " + std::to_string(body->end - body->pos) + " bytes (budget " +
                     std::to_string(limits::kNameBytes) + ")");
      key.assign(reinterpret_cast<const char*>(w.data + body->pos), body->end - body->pos);
      if (!IsUtf8(key)) return w.Bad("a feature key that is not UTF-8: " + Shown(key));
      continue;
    }
    IMAGEPACK_RETURN_IF_ERROR(w.Skip(type));
  }
  if (out->size() >= limits::kTfFeatures && !out->count(key))
    return w.Bad("more than " + std::to_string(limits::kTfFeatures) + " features");
  (*out)[key] = std::move(value);
  return Status::Ok();
}

}  // namespace

Result<TfExample> ParseTfExample(const uint8_t* data, size_t size) {
  TfExample out;
  Budget budget;
  Wire example{data, 0, size};
  while (!example.done()) {
    uint32_t field = 0, type = 0;
    IMAGEPACK_RETURN_IF_ERROR(example.Tag(&field, &type));
    if (field != 1 || type != 2) {
      IMAGEPACK_RETURN_IF_ERROR(example.Skip(type));
      continue;
    }
    auto features = example.Delimited();
    if (!features.ok()) return features.status();
    Wire fs = *features;
    while (!fs.done()) {
      IMAGEPACK_RETURN_IF_ERROR(fs.Tag(&field, &type));
      if (field != 1 || type != 2) {
        IMAGEPACK_RETURN_IF_ERROR(fs.Skip(type));
        continue;
      }
      auto entry = fs.Delimited();
      if (!entry.ok()) return entry.status();
      IMAGEPACK_RETURN_IF_ERROR(ReadEntry(*entry, &out, budget));
    }
  }
  return out;
}

namespace {

void PutVarint(std::vector<uint8_t>& b, uint64_t v) {
  while (v >= 0x80) {
    b.push_back(uint8_t(v | 0x80));
    v >>= 7;
  }
  b.push_back(uint8_t(v));
}

// Field `field` of wire type 2 (length-delimited) holding `size` bytes.
void PutDelimited(std::vector<uint8_t>& b, uint32_t field, const void* data, size_t size) {
  PutVarint(b, uint64_t(field) << 3 | 2);
  PutVarint(b, size);
  const auto* p = static_cast<const uint8_t*>(data);
  b.insert(b.end(), p, p + size);
}

}  // namespace

void TfExampleBuilder::AddEntry(const std::string& key, uint32_t kind_field, const std::vector<uint8_t>& list) {
  std::vector<uint8_t> feature, entry;
  PutDelimited(feature, kind_field, list.data(), list.size());  // Feature: its oneof
  PutDelimited(entry, 1, key.data(), key.size());
  PutDelimited(entry, 2, feature.data(), feature.size());
  PutDelimited(entries_, 1, entry.data(), entry.size());  // Features.feature, one map entry
}

void TfExampleBuilder::AddBytes(const std::string& key, const std::vector<std::string_view>& values) {
  std::vector<uint8_t> list;
  for (std::string_view v : values) PutDelimited(list, 1, v.data(), v.size());
  AddEntry(key, 1, list);
}

void TfExampleBuilder::AddFloats(const std::string& key, const std::vector<float>& values) {
  std::vector<uint8_t> list;
  if (!values.empty()) {
    std::vector<uint8_t> packed(values.size() * 4);
    for (size_t i = 0; i < values.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &values[i], 4);
      for (int k = 0; k < 4; ++k) packed[i * 4 + size_t(k)] = uint8_t(bits >> (8 * k));  // little-endian
    }
    PutDelimited(list, 1, packed.data(), packed.size());
  }
  AddEntry(key, 2, list);
}

void TfExampleBuilder::AddInts(const std::string& key, const std::vector<int64_t>& values) {
  std::vector<uint8_t> list;
  if (!values.empty()) {
    std::vector<uint8_t> packed;
    for (int64_t v : values) PutVarint(packed, uint64_t(v));  // int64: a negative value takes 10 bytes
    PutDelimited(list, 1, packed.data(), packed.size());
  }
  AddEntry(key, 3, list);
}

std::vector<uint8_t> TfExampleBuilder::Serialize() const {
  std::vector<uint8_t> out;
  out.reserve(entries_.size() + 11);
  PutDelimited(out, 1, entries_.data(), entries_.size());  // Example.features
  return out;
}

void AppendTfRecord(const uint8_t* data, size_t size, std::vector<uint8_t>* out) {
  uint8_t h[12];
  const uint64_t n = size;
  for (int k = 0; k < 8; ++k) h[k] = uint8_t(n >> (8 * k));
  const uint32_t lc = MaskCrc(Crc32c(h, 8));
  for (int k = 0; k < 4; ++k) h[8 + k] = uint8_t(lc >> (8 * k));
  out->insert(out->end(), h, h + 12);
  out->insert(out->end(), data, data + size);
  const uint32_t dc = MaskCrc(Crc32c(data, size));
  for (int k = 0; k < 4; ++k) out->push_back(uint8_t(dc >> (8 * k)));
}

Status ReadTfRecordIndex(const TfReadFn& read, uint64_t size, uint64_t data_size, const std::string& shown,
                         const std::function<void(uint64_t offset, uint64_t size)>& line) {
  constexpr uint64_t kMinRecord = 16;  // an empty record: header and data CRC
  const uint64_t max_lines = std::min<uint64_t>(limits::kTfIndexLines, data_size / kMinRecord);
  const uint64_t max_bytes = max_lines >= UINT64_MAX / limits::kTfIndexLineBytes - 1
                                 ? UINT64_MAX
                                 : limits::kTfIndexLineBytes * (max_lines + 1);
  if (size > max_bytes)
    return Status::InvalidArgument(shown + ": an index of " + std::to_string(size) + " bytes for a data file of " +
                                   std::to_string(data_size) + " bytes (which holds at most " +
                                   std::to_string(max_lines) + " records, an index of at most " +
                                   std::to_string(max_bytes) + " bytes)");
  constexpr size_t kChunk = 64 << 10;
  std::vector<char> chunk(std::min<uint64_t>(size, kChunk));
  std::string l;  // the line so far, at most kTfIndexLineBytes
  uint64_t lines = 0, records = 0, next_free = 0;
  auto where = [&] { return shown + ":" + std::to_string(lines); };
  auto finish = [&]() -> Status {
    ++lines;
    const std::string t = TrimSpace(l);
    l.clear();
    if (t.empty()) return Status::Ok();
    uint64_t v[2];
    size_t p = 0;
    for (int k = 0; k < 2; ++k) {
      while (p < t.size() && (t[p] == ' ' || t[p] == '\t')) ++p;
      const size_t start = p;
      uint64_t x = 0;
      for (; p < t.size() && t[p] >= '0' && t[p] <= '9'; ++p) {
        if (x > (UINT64_MAX - 9) / 10) return Status::InvalidArgument(where() + ": a number too large");
        x = x * 10 + uint64_t(t[p] - '0');
      }
      if (p == start || (p < t.size() && t[p] != ' ' && t[p] != '\t'))
        return Status::InvalidArgument(where() + ": expected OFFSET SIZE, got " + Shown(t));
      v[k] = x;
    }
    if (p != t.size()) return Status::InvalidArgument(where() + ": expected OFFSET SIZE, got " + Shown(t));
    if (++records > max_lines)
      return Status::InvalidArgument(where() + ": more than " + std::to_string(max_lines) +
                                     " records, more than a data file of " + std::to_string(data_size) +
                                     " bytes holds");
    if (v[1] < kMinRecord || v[0] > data_size || v[1] > data_size - v[0])
      return Status::InvalidArgument(where() + ": a record of " + std::to_string(v[1]) + " bytes at byte " +
                                     std::to_string(v[0]) + " is not inside the data file (" +
                                     std::to_string(data_size) + " bytes)");
    if (v[0] < next_free)
      return Status::InvalidArgument(where() + ": the record at byte " + std::to_string(v[0]) +
                                     " overlaps the one before it (records are listed in order)");
    next_free = v[0] + v[1];
    line(v[0], v[1]);
    return Status::Ok();
  };
  for (uint64_t at = 0; at < size;) {
    const size_t n = size_t(std::min<uint64_t>(size - at, chunk.size()));
    IMAGEPACK_RETURN_IF_ERROR(read(chunk.data(), n, at));
    at += n;
    for (size_t i = 0; i < n; ++i) {
      if (chunk[i] == '\n') {
        IMAGEPACK_RETURN_IF_ERROR(finish());
        continue;
      }
      if (l.size() >= limits::kTfIndexLineBytes)
        return Status::InvalidArgument(shown + ":" + std::to_string(lines + 1) + ": a line of more than " +
                                       std::to_string(limits::kTfIndexLineBytes) + " bytes");
      l.push_back(chunk[i]);
    }
  }
  if (!l.empty()) IMAGEPACK_RETURN_IF_ERROR(finish());
  return Status::Ok();
}

Result<std::vector<std::pair<uint64_t, uint64_t>>> ParseTfRecordIndex(const std::string& text,
                                                                      const std::string& shown, uint64_t data_size) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  auto read = [&](void* buf, size_t n, uint64_t at) -> Status {
    std::memcpy(buf, text.data() + at, n);
    return Status::Ok();
  };
  IMAGEPACK_RETURN_IF_ERROR(ReadTfRecordIndex(read, text.size(), data_size, shown,
                                              [&](uint64_t o, uint64_t n) { out.emplace_back(o, n); }));
  return out;
}

}  // namespace imagepack::internal
