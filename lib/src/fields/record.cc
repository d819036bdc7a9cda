#include "imagepack/record.h"

#include <xxhash.h>
#if defined(__x86_64__)
// Debian's libxxhash builds XXH3_64bits for baseline x86-64 (SSE2); its
// dispatching twin picks AVX2 or AVX-512 at run time and gives the same
// hash. This header renames the calls below to it.
#include <xxh_x86dispatch.h>
#endif

#include <cstdio>
#include <cstring>

#include "base/le.h"

namespace imagepack {
namespace {

using internal::Get;
using internal::Put;

constexpr char kMagic[4] = {'I', 'P', 'K', 'R'};

// Walks `count` field entries filling exactly `size` bytes, checking each
// (CheckFieldLayout); appends them to `out` when given.
Status WalkFields(const uint8_t* d, size_t size, uint16_t count, std::vector<FieldView>* out) {
  size_t at = 0;
  for (uint16_t i = 0; i < count; ++i) {
    if (size - at < kFieldHeaderSize)
      return Status::Corruption("field " + std::to_string(i) + " runs past the record's end");
    const uint8_t* p = d + at;
    const KindInfo* kind = FindKind(p[1]);
    if (!kind) return Status::Corruption("field " + std::to_string(i) + " has unknown kind " + std::to_string(p[1]));
    FieldView f;
    f.slot = p[0];
    f.kind = kind->kind;
    f.encoding = p[2];
    f.channels = p[3];
    const uint32_t dim0 = Get<uint32_t>(p + 4), dim1 = Get<uint32_t>(p + 8);
    f.size = Get<uint32_t>(p + 12);
    if (kind->element_bytes > 0) {
      f.count = dim0;
      f.width = dim1;  // 0 for lists; CheckFieldLayout says so otherwise
    } else {
      f.height = dim0;
      f.width = dim1;
    }
    if (f.size > size - at - kFieldHeaderSize)
      return Status::Corruption("field " + std::to_string(i) + " (" + kind->name + ") is " + std::to_string(f.size) +
                                " bytes, past the record's end");
    f.data = p + kFieldHeaderSize;
    IMAGEPACK_RETURN_IF_ERROR(CheckFieldLayout(f));
    if (out) out->push_back(f);
    at += kFieldHeaderSize + f.size;
  }
  if (at != size)
    return Status::Corruption("field section is " + std::to_string(size) + " bytes, its " + std::to_string(count) +
                              " fields fill " + std::to_string(at));
  return Status::Ok();
}

}  // namespace

const char* EncodingName(Encoding e) { return e == Encoding::kRaw ? "raw" : "jpeg"; }

Result<Encoding> ParseEncoding(const std::string& name) {
  if (name == "jpeg") return Encoding::kJpeg;
  if (name == "raw") return Encoding::kRaw;
  return Status::InvalidArgument("unknown encoding '" + name + "' (expected jpeg or raw)");
}

std::vector<uint8_t> EncodeRecord(const RecordFields& f, std::string_view path,
                                  const uint8_t* payload, size_t payload_size, const uint8_t* field_data) {
  std::vector<uint8_t> out(kRecordHeaderSize + path.size() + payload_size + f.fields_size);
  if (payload_size) std::memcpy(out.data() + kRecordHeaderSize + path.size(), payload, payload_size);
  if (f.fields_size)
    std::memcpy(out.data() + kRecordHeaderSize + path.size() + payload_size, field_data, f.fields_size);
  SealRecord(out, f, path);
  return out;
}

void SealRecord(std::vector<uint8_t>& out, const RecordFields& f, std::string_view path) {
  const size_t payload_size = out.size() - kRecordHeaderSize - path.size() - f.fields_size;
  uint8_t* p = out.data();
  std::memcpy(p + 8, kMagic, 4);
  Put<uint16_t>(p + 12, f.field_count > 0 ? kRecordVersionFields : kRecordVersion);
  p[14] = static_cast<uint8_t>(f.encoding);
  p[15] = static_cast<uint8_t>(f.channels);
  Put<int32_t>(p + 16, f.label);
  Put<uint32_t>(p + 20, f.height);
  Put<uint32_t>(p + 24, f.width);
  Put<uint16_t>(p + 28, static_cast<uint16_t>(path.size()));
  Put<uint16_t>(p + 30, f.field_count);
  Put<uint32_t>(p + 32, static_cast<uint32_t>(payload_size));
  Put<uint32_t>(p + 36, f.fields_size);
  if (!path.empty()) std::memcpy(p + kRecordHeaderSize, path.data(), path.size());
  Put<uint64_t>(p, XXH3_64bits(p + 8, out.size() - 8));
}

Result<RecordView> ParseRecord(const uint8_t* d, size_t size, bool verify_checksum) {
  if (size < kRecordHeaderSize)
    return Status::Corruption("record is " + std::to_string(size) + " bytes, shorter than its " +
                              std::to_string(kRecordHeaderSize) + "-byte header");
  if (std::memcmp(d + 8, kMagic, 4) != 0) return Status::Corruption("bad record magic");
  const uint16_t version = Get<uint16_t>(d + 12);
  if (version != kRecordVersion && version != kRecordVersionFields)
    return Status::NotSupported("record version " + std::to_string(version) + " (this build reads " +
                                std::to_string(kRecordVersion) + " and " + std::to_string(kRecordVersionFields) +
                                ")");
  RecordView v;
  if (d[14] > 1) return Status::Corruption("bad encoding byte " + std::to_string(d[14]));
  v.fields.encoding = static_cast<Encoding>(d[14]);
  v.fields.channels = d[15];
  if (v.fields.channels != 1 && v.fields.channels != 3)
    return Status::Corruption("bad channel count " + std::to_string(v.fields.channels));
  const uint16_t field_count = Get<uint16_t>(d + 30);
  const uint32_t fields_size = Get<uint32_t>(d + 36);
  if (version == kRecordVersion && (field_count != 0 || fields_size != 0))
    return Status::Corruption("reserved header bytes are not zero");
  if (version == kRecordVersionFields && field_count == 0)
    return Status::Corruption("version 2 record with no fields");
  v.fields.field_count = field_count;
  v.fields.fields_size = fields_size;
  v.fields.label = Get<int32_t>(d + 16);
  if (v.fields.label < -1) return Status::Corruption("bad label " + std::to_string(v.fields.label));
  v.fields.height = Get<uint32_t>(d + 20);
  v.fields.width = Get<uint32_t>(d + 24);
  const size_t path_len = Get<uint16_t>(d + 28);
  const size_t payload_len = Get<uint32_t>(d + 32);
  if (kRecordHeaderSize + path_len + payload_len + uint64_t(fields_size) != size)
    return Status::Corruption("record length mismatch: header says " + std::to_string(path_len) +
                              " path + " + std::to_string(payload_len) + " payload + " +
                              std::to_string(fields_size) + " field bytes, record is " + std::to_string(size) +
                              " bytes");
  if (path_len > 0 && std::memchr(d + kRecordHeaderSize, 0, path_len) != nullptr)
    return Status::Corruption("record path holds a NUL byte");
  if (v.fields.encoding == Encoding::kRaw &&
      uint64_t(v.fields.height) * v.fields.width * v.fields.channels != payload_len)
    return Status::Corruption("raw payload is " + std::to_string(payload_len) + " bytes, not " +
                              std::to_string(v.fields.height) + "x" + std::to_string(v.fields.width) +
                              "x" + std::to_string(v.fields.channels));
  if (verify_checksum) {
    const uint64_t want = Get<uint64_t>(d);
    const uint64_t got = XXH3_64bits(d + 8, size - 8);
    if (want != got) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "checksum mismatch (stored %016llx, computed %016llx)",
                    static_cast<unsigned long long>(want), static_cast<unsigned long long>(got));
      return Status::Corruption(buf);
    }
  }
  v.path = std::string_view(reinterpret_cast<const char*>(d + kRecordHeaderSize), path_len);
  v.payload = d + kRecordHeaderSize + path_len;
  v.payload_size = payload_len;
  v.field_data = v.payload + payload_len;
  IMAGEPACK_RETURN_IF_ERROR(WalkFields(v.field_data, fields_size, field_count, nullptr));
  return v;
}

std::vector<FieldView> RecordFieldViews(const RecordView& v) {
  std::vector<FieldView> out;
  out.reserve(v.fields.field_count);
  (void)WalkFields(v.field_data, v.fields.fields_size, v.fields.field_count, &out);
  return out;
}

std::string RecordKey(int64_t index) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%010lld", static_cast<long long>(index));
  return buf;
}

}  // namespace imagepack
