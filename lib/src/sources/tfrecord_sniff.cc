// What a file is to the TFRecord row of the registry (registry.h): its
// name first (TfRecordNameIs), a record's header and CRCs in its first
// 64 KiB where the name says nothing (TfRecordBytesSay), so a damaged or
// empty first file does not hide the set.
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "formats/braces.h"
#include "formats/gzip.h"
#include "formats/labels.h"
#include "base/limits.h"
#include "formats/text.h"
#include "formats/tfrecord.h"
#include "formats/webdataset.h"
#include "imagepack/storage.h"
#include "sources/registry.h"
#include "sources/sources.h"
#include "sources/tfrecord_listing.h"
#include "storage/fd_io.h"


namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {


bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A name that says TFRecord: .tfrecord or .tfrec anywhere in it (TFDS's
// "mnist-train.tfrecord-00000-of-00001", "x.tfrecords", "x.tfrec.gz"), or
// TF-slim / Inception's "train-00000-of-01024": digits, "-of-", digits at
// its end and no extension.
bool NameSaysTfRecord(const std::string& path) {
  const std::string l = LowerAscii(BaseNameOf(path));
  if (l.find(".tfrec") != std::string::npos) return true;
  if (l.find('.') != std::string::npos) return false;
  const auto of = l.rfind("-of-");
  if (of == std::string::npos || of == 0 || of + 4 == l.size() || !std::isdigit(static_cast<unsigned char>(l[of - 1])))
    return false;
  for (size_t i = of + 4; i < l.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(l[i]))) return false;
  return true;
}

// A name that says another format: a database, a shard, parquet, an image,
// text.
bool NameSaysOther(const std::string& path) {
  const std::string l = LowerAscii(BaseNameOf(path));
  if (l.empty() || IsShardName(l) || HasImageExtension(l)) return true;
  for (const char* other : {".blob", ".lmdb", ".mdb", ".parquet", ".json", ".jsonl", ".csv", ".txt"})
    if (EndsWith(l, other)) return true;
  return false;
}

// Up to 64 KiB of a file's first bytes, inflated first when they are gzip.
std::vector<uint8_t> Head(const ByteSource& bytes, bool* gzipped) {
  constexpr uint64_t kHead = 64 << 10;
  std::vector<uint8_t> raw(std::min<uint64_t>(bytes.size(), kHead));
  if (!bytes.ReadAt(0, raw.size(), raw.data()).ok()) return {};
  *gzipped = raw.size() >= 2 && raw[0] == 0x1f && raw[1] == 0x8b;
  if (!*gzipped) return raw;
  std::vector<uint8_t> out(kHead);
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return {};
  z.next_in = raw.data();
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&z, Z_SYNC_FLUSH);
  out.resize(out.size() - z.avail_out);
  inflateEnd(&z);
  if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) out.clear();
  return out;
}

// `head` (a file's first bytes; `size` the file's, UINT64_MAX when gzipped)
// holds a TFRecord header whose length's CRC matches: at byte 0 (a length
// over the budget is the record's error, named when the file is read), or,
// when the first record is damaged, at a later byte, with a length that
// fits the file and, where the record ends inside `head`, a data CRC that
// matches too.
bool HeadHasRecord(const std::vector<uint8_t>& head, uint64_t size) {
  auto header_at = [&](size_t at, uint64_t* length) {
    if (head.size() - at < 12) return false;
    std::memcpy(length, head.data() + at, 8);
    uint32_t crc;
    std::memcpy(&crc, head.data() + at + 8, 4);
    return MaskCrc(Crc32c(head.data() + at, 8)) == crc;
  };
  uint64_t length = 0;
  if (head.size() >= 12 && header_at(0, &length)) return true;
  for (size_t at = 1; at + 12 <= head.size(); ++at) {
    if (!header_at(at, &length) || size - at < 16 || length > size - at - 16) continue;
    if (head.size() - at - 12 < length + 4) return true;
    uint32_t crc;
    std::memcpy(&crc, head.data() + at + 12 + length, 4);
    if (MaskCrc(Crc32c(head.data() + at + 12, size_t(length))) == crc) return true;
  }
  return false;
}

bool SniffBytes(const ByteSource& bytes) {
  if (bytes.size() == 0) return false;
  bool gzipped = false;
  const std::vector<uint8_t> head = Head(bytes, &gzipped);
  return HeadHasRecord(head, gzipped ? UINT64_MAX : bytes.size());
}

// Files beside TFRecords that are not records: DALI indexes, class lists,
// TFDS's dataset_info.json and features.json, hidden files (.DS_Store,
// temporaries).
bool IsTfSideFile(const std::string& name) {
  const std::string l = LowerAscii(name);
  return (!l.empty() && l[0] == '.') || EndsWith(l, ".idx") || EndsWith(l, ".txt") || EndsWith(l, ".json") ||
         EndsWith(l, ".md");
}

}  // namespace

NameIs TfRecordNameIs(const std::string& base_name) {
  if (IsTfSideFile(base_name)) return NameIs::kSide;
  if (NameSaysTfRecord(base_name)) return NameIs::kMine;
  return NameSaysOther(base_name) ? NameIs::kForeign : NameIs::kUnknown;
}

bool TfRecordBytesSay(const ByteSource& bytes) { return SniffBytes(bytes); }

}  // namespace imagepack::internal
