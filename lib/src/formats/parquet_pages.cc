// Parquet's pages (formats/parquet.h): the RLE / bit-packed hybrid,
// DELTA_BINARY_PACKED and the byte-array encodings, and a column chunk
// read page by page, flat or as rows of lists. The footer and page
// headers: parquet.cc; codecs: parquet_codecs.cc.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <deque>

#include "base/le.h"
#include "formats/parquet.h"

namespace imagepack::internal {

namespace {

Result<uint64_t> ReadVarint(const uint8_t* d, size_t size, size_t* pos) {
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*pos >= size) return Status::Corruption("a varint cut short");
    const uint8_t b = d[(*pos)++];
    if (shift == 63 && (b & 0x7e)) return Status::Corruption("a varint over 64 bits");
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  return Status::Corruption("a varint over 10 bytes");
}

// `count` values of `width` bits (LSB first) from d[*pos...] into out.
Status Unpack(const uint8_t* d, size_t size, size_t* pos, int width, size_t count, size_t keep,
              const std::function<void(uint64_t)>& put) {
  const uint64_t bits = uint64_t(count) * uint64_t(width);
  const size_t bytes = size_t((bits + 7) / 8);
  if (bytes > size - *pos) return Status::Corruption("bit-packed values past the end");
  uint64_t bit = uint64_t(*pos) * 8;
  for (size_t i = 0; i < count && i < keep; ++i) {
    uint64_t v = 0;
    for (int b = 0; b < width; ++b, ++bit) v |= uint64_t((d[bit >> 3] >> (bit & 7)) & 1) << b;
    put(v);
  }
  *pos += bytes;
  return Status::Ok();
}

}  // namespace

Status DecodeRleHybrid(const uint8_t* data, size_t size, int bit_width, size_t n, std::vector<uint32_t>* out) {
  if (bit_width < 0 || bit_width > 32) return Status::Corruption("a bit width of " + std::to_string(bit_width));
  out->clear();
  size_t pos = 0;
  while (out->size() < n) {
    auto h = ReadVarint(data, size, &pos);
    if (!h.ok()) return h.status().WithContext("RLE levels");
    if (*h & 1) {
      const uint64_t groups = *h >> 1;
      if (groups == 0 || groups > (size - pos) + 1) return Status::Corruption("RLE levels: a bit-packed run past the end");
      IMAGEPACK_RETURN_IF_ERROR(Unpack(data, size, &pos, bit_width, size_t(groups) * 8, n - out->size(),
                                       [&](uint64_t v) { out->push_back(uint32_t(v)); }));
    } else {
      const uint64_t count = *h >> 1;
      const size_t bytes = size_t((bit_width + 7) / 8);
      if (bytes > size - pos) return Status::Corruption("RLE levels: a run's value past the end");
      uint32_t v = 0;
      for (size_t b = 0; b < bytes; ++b) v |= uint32_t(data[pos + b]) << (8 * b);
      pos += bytes;
      if (count == 0) continue;
      out->insert(out->end(), size_t(std::min<uint64_t>(count, n - out->size())), v);
    }
  }
  return Status::Ok();
}

Status DecodeDeltaBinaryPacked(const uint8_t* data, size_t size, size_t n, std::vector<int64_t>* out, size_t* used) {
  size_t pos = 0;
  auto block = ReadVarint(data, size, &pos);
  auto minis = block.ok() ? ReadVarint(data, size, &pos) : block;
  auto total = minis.ok() ? ReadVarint(data, size, &pos) : minis;
  auto first = total.ok() ? ReadVarint(data, size, &pos) : total;
  if (!first.ok()) return first.status().WithContext("DELTA_BINARY_PACKED header");
  if (*block == 0 || *block % 128 || *block > 65536 || *minis == 0 || *block % *minis || (*block / *minis) % 32)
    return Status::Corruption("DELTA_BINARY_PACKED: a block of " + std::to_string(*block) + " in " +
                              std::to_string(*minis) + " miniblocks");
  if (*total > n) return Status::Corruption("DELTA_BINARY_PACKED: " + std::to_string(*total) + " values where " +
                                            std::to_string(n) + " are expected");
  out->clear();
  uint64_t value = (*first >> 1) ^ -(*first & 1);
  if (*total > 0) out->push_back(int64_t(value));
  const size_t per_mini = size_t(*block / *minis);
  while (out->size() < *total) {
    auto zz = ReadVarint(data, size, &pos);
    if (!zz.ok()) return zz.status().WithContext("DELTA_BINARY_PACKED block");
    const uint64_t min_delta = (*zz >> 1) ^ -(*zz & 1);
    if (*minis > size - pos) return Status::Corruption("DELTA_BINARY_PACKED: bit widths past the end");
    const uint8_t* widths = data + pos;
    pos += size_t(*minis);
    for (size_t m = 0; m < *minis && out->size() < *total; ++m) {
      if (widths[m] > 64) return Status::Corruption("DELTA_BINARY_PACKED: a bit width of " + std::to_string(widths[m]));
      IMAGEPACK_RETURN_IF_ERROR(Unpack(data, size, &pos, widths[m], per_mini, size_t(*total) - out->size(),
                                       [&](uint64_t d) {
                                         value += min_delta + d;
                                         out->push_back(int64_t(value));
                                       }));
    }
  }
  *used = pos;
  return Status::Ok();
}

namespace {

// A page's (or the dictionary's) values: ranges of `data` or of `arena`.
struct Values {
  std::vector<PqValue> v;
  std::vector<std::string> arena;  // DELTA_BYTE_ARRAY's rebuilt strings
  PqBudget* budget = nullptr;      // charged for bytes made beyond the page's own
  Status Charge(uint64_t bytes, const char* what) { return budget ? budget->Charge(bytes, what) : Status::Ok(); }
};

Status DecodePlain(const PqLeaf& leaf, const uint8_t* d, size_t size, size_t count, Values* out) {
  size_t pos = 0;
  const size_t width = leaf.type == PqType::kInt32 || leaf.type == PqType::kFloat ? 4
                       : leaf.type == PqType::kInt64 || leaf.type == PqType::kDouble ? 8
                       : leaf.type == PqType::kInt96 ? 12 : leaf.type == PqType::kFixed ? size_t(std::max(0, leaf.type_length)) : 0;
  if (width == 0 && leaf.type != PqType::kByteArray && leaf.type != PqType::kBoolean)
    return Status::Corruption("a fixed-length column of length " + std::to_string(leaf.type_length));
  if (leaf.type == PqType::kBoolean) {
    if ((count + 7) / 8 > size) return Status::Corruption("PLAIN booleans past the end");
    for (size_t i = 0; i < count; ++i) out->v.push_back({false, (d[i / 8] >> (i % 8)) & 1, 0, nullptr, 0});
    return Status::Ok();
  }
  for (size_t i = 0; i < count; ++i) {
    PqValue x;
    if (leaf.type == PqType::kByteArray) {
      if (size - pos < 4) return Status::Corruption("a PLAIN byte array's length past the end");
      const uint32_t n = Get<uint32_t>(d + pos);
      pos += 4;
      if (n > size - pos) return Status::Corruption("a PLAIN byte array of " + std::to_string(n) + " bytes past the end");
      x.p = d + pos;
      x.n = n;
      pos += n;
    } else {
      if (width > size - pos) return Status::Corruption("PLAIN values past the end");
      x.p = d + pos;
      x.n = width;
      if (leaf.type == PqType::kInt32) x.i = Get<int32_t>(d + pos);
      if (leaf.type == PqType::kInt64) x.i = Get<int64_t>(d + pos);
      if (leaf.type == PqType::kFloat) x.f = Get<float>(d + pos);
      if (leaf.type == PqType::kDouble) x.f = Get<double>(d + pos);
      pos += width;
    }
    out->v.push_back(x);
  }
  return Status::Ok();
}

// DELTA_LENGTH_BYTE_ARRAY (lengths, then the bytes) and DELTA_BYTE_ARRAY
// (prefix lengths, then suffixes as DELTA_LENGTH_BYTE_ARRAY).
Status DecodeDeltaLength(const uint8_t* d, size_t size, size_t count, Values* out, size_t* used) {
  std::vector<int64_t> lengths;
  size_t pos = 0;
  IMAGEPACK_RETURN_IF_ERROR(DecodeDeltaBinaryPacked(d, size, count, &lengths, &pos));
  if (lengths.size() != count) return Status::Corruption("DELTA_LENGTH_BYTE_ARRAY: lengths for fewer values");
  for (int64_t n : lengths) {
    if (n < 0 || uint64_t(n) > size - pos) return Status::Corruption("DELTA_LENGTH_BYTE_ARRAY: bytes past the end");
    out->v.push_back({false, 0, 0, d + pos, size_t(n)});
    pos += size_t(n);
  }
  *used = pos;
  return Status::Ok();
}

Status DecodeDeltaByteArray(const uint8_t* d, size_t size, size_t count, Values* out) {
  std::vector<int64_t> prefix;
  size_t pos = 0, used = 0;
  IMAGEPACK_RETURN_IF_ERROR(DecodeDeltaBinaryPacked(d, size, count, &prefix, &pos));
  Values suffix;
  IMAGEPACK_RETURN_IF_ERROR(DecodeDeltaLength(d + pos, size - pos, count, &suffix, &used));
  if (prefix.size() != count) return Status::Corruption("DELTA_BYTE_ARRAY: prefixes for fewer values");
  out->arena.reserve(count);
  std::string last;
  uint64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    if (prefix[i] < 0 || size_t(prefix[i]) > last.size()) return Status::Corruption("DELTA_BYTE_ARRAY: a prefix longer than the value before");
    total += uint64_t(prefix[i]) + suffix.v[i].n;
    if (total > limits::kParquetPageBytes) return Status::InvalidArgument("DELTA_BYTE_ARRAY: values past the page budget");
    IMAGEPACK_RETURN_IF_ERROR(out->Charge(uint64_t(prefix[i]) + suffix.v[i].n, "DELTA_BYTE_ARRAY's rebuilt values"));
    last = last.substr(0, size_t(prefix[i])) + std::string(reinterpret_cast<const char*>(suffix.v[i].p), suffix.v[i].n);
    out->arena.push_back(last);
  }
  for (const auto& s : out->arena) out->v.push_back({false, 0, 0, reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  return Status::Ok();
}

// BYTE_STREAM_SPLIT: byte k of value i at d[k * count + i]; the values
// gathered into the arena, then read as PLAIN.
Status DecodeByteStreamSplit(const PqLeaf& leaf, const uint8_t* d, size_t size, size_t count, Values* out) {
  const size_t width = leaf.type == PqType::kInt32 || leaf.type == PqType::kFloat ? 4
                       : leaf.type == PqType::kInt64 || leaf.type == PqType::kDouble ? 8
                       : leaf.type == PqType::kFixed ? size_t(std::max(0, leaf.type_length)) : 0;
  if (width == 0) return Status::NotSupported("BYTE_STREAM_SPLIT on a column of variable width");
  if (count > size / width) return Status::Corruption("BYTE_STREAM_SPLIT values past the end");
  IMAGEPACK_RETURN_IF_ERROR(out->Charge(count * width, "BYTE_STREAM_SPLIT's values"));
  out->arena.emplace_back(count * width, '\0');
  std::string& plain = out->arena.back();
  for (size_t i = 0; i < count; ++i)
    for (size_t k = 0; k < width; ++k) plain[i * width + k] = char(d[k * count + i]);
  return DecodePlain(leaf, reinterpret_cast<const uint8_t*>(plain.data()), plain.size(), count, out);
}

Status DecodeValues(const PqLeaf& leaf, int encoding, const uint8_t* d, size_t size, size_t count, const Values* dict,
                    Values* out) {
  size_t used = 0;
  switch (encoding) {
    case 0: return DecodePlain(leaf, d, size, count, out);
    case 2:
    case 8: {  // PLAIN_DICTIONARY, RLE_DICTIONARY
      if (!dict) return Status::Corruption("dictionary-encoded values without a dictionary page");
      if (count == 0) return Status::Ok();
      if (size < 1) return Status::Corruption("dictionary indices cut short");
      std::vector<uint32_t> idx;
      IMAGEPACK_RETURN_IF_ERROR(DecodeRleHybrid(d + 1, size - 1, d[0], count, &idx));
      // Each index repeats its entry's bytes for whoever takes the value:
      // one run of a 16 MiB entry must not pass for a few bytes.
      uint64_t bytes = 0;
      for (uint32_t i : idx) {
        if (i >= dict->v.size()) return Status::Corruption("dictionary index " + std::to_string(i) + " of " +
                                                           std::to_string(dict->v.size()));
        bytes += dict->v[i].n;
      }
      if (bytes > limits::kParquetPageBytes)
        return Status::InvalidArgument("dictionary values of " + std::to_string(bytes) + " bytes in one page (budget " +
                                       std::to_string(limits::kParquetPageBytes) + ")");
      IMAGEPACK_RETURN_IF_ERROR(out->Charge(bytes, "dictionary values"));
      for (uint32_t i : idx) out->v.push_back(dict->v[i]);
      return Status::Ok();
    }
    case 5: {
      if (leaf.type != PqType::kInt32 && leaf.type != PqType::kInt64)
        return Status::Corruption("DELTA_BINARY_PACKED on a column that is not integers");
      std::vector<int64_t> ints;
      IMAGEPACK_RETURN_IF_ERROR(DecodeDeltaBinaryPacked(d, size, count, &ints, &used));
      if (ints.size() != count) return Status::Corruption("DELTA_BINARY_PACKED: fewer values than the page holds");
      for (int64_t i : ints) out->v.push_back({false, leaf.type == PqType::kInt32 ? int64_t(int32_t(i)) : i, 0, nullptr, 0});
      return Status::Ok();
    }
    case 3: {  // RLE booleans: a 4-byte length, then the hybrid at bit width 1
      if (leaf.type != PqType::kBoolean) return Status::NotSupported("RLE values on a column that is not booleans");
      if (size < 4 || Get<uint32_t>(d) > size - 4) return Status::Corruption("RLE booleans past the end");
      std::vector<uint32_t> bits;
      IMAGEPACK_RETURN_IF_ERROR(DecodeRleHybrid(d + 4, Get<uint32_t>(d), 1, count, &bits));
      for (uint32_t b : bits) out->v.push_back({false, int64_t(b), 0, nullptr, 0});
      return Status::Ok();
    }
    case 9: return DecodeByteStreamSplit(leaf, d, size, count, out);
    case 6: return DecodeDeltaLength(d, size, count, out, &used);
    case 7: return DecodeDeltaByteArray(d, size, count, out);
    default:
      return Status::NotSupported("encoding " + std::to_string(encoding) +
                                  " is not read (PLAIN, dictionary, RLE booleans, DELTA_BINARY_PACKED, "
                                  "DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY and BYTE_STREAM_SPLIT are)");
  }
}

int BitWidth(int max) {
  int w = 0;
  while ((1 << w) <= max) ++w;
  return w;
}

// Levels of `max` (0: none, all 0) from `len` bytes at `d`, n of them.
Status Levels(const uint8_t* d, size_t len, int max, size_t n, const char* what, std::vector<uint32_t>* out) {
  if (max == 0) {
    out->assign(n, 0);
    return Status::Ok();
  }
  Status st = DecodeRleHybrid(d, len, BitWidth(max), n, out);
  if (!st.ok()) return st.WithContext(what);
  for (uint32_t l : *out)
    if (l > uint32_t(max))
      return Status::Corruption(std::string(what) + ": a level of " + std::to_string(l) + " above the column's " +
                                std::to_string(max));
  return Status::Ok();
}

// v1 levels inside the decompressed page: a 4-byte length, then the hybrid.
Status LevelsV1(const std::vector<uint8_t>& buf, size_t* pos, int encoding, int max, size_t n, const char* what,
                std::vector<uint32_t>* out) {
  if (max == 0) return Levels(nullptr, 0, 0, n, what, out);
  if (encoding != 3) return Status::NotSupported(std::string(what) + " in encoding " + std::to_string(encoding) + " (RLE is read)");
  if (buf.size() - *pos < 4) return Status::Corruption(std::string(what) + " cut short");
  const uint32_t len = Get<uint32_t>(buf.data() + *pos);
  if (len > buf.size() - *pos - 4) return Status::Corruption(std::string(what) + " past the page's end");
  IMAGEPACK_RETURN_IF_ERROR(Levels(buf.data() + *pos + 4, len, max, n, what, out));
  *pos += 4 + len;
  return Status::Ok();
}

// A data page's repetition and definition levels and values: v1 (levels
// inside the decompressed page) or v2 (levels before the compressed values).
Status DecodeDataPage(const PqLeaf& leaf, int codec, const PqPageHeader& h, const uint8_t* body, const Values* dict,
                      std::vector<uint32_t>* reps, std::vector<uint32_t>* defs, Values* vals, std::vector<uint8_t>* buf) {
  PqBudget* budget = vals->budget;
  const size_t n = size_t(h.num_values);
  const uint8_t* values;
  size_t values_size;
  if (h.type == 0) {
    IMAGEPACK_RETURN_IF_ERROR(
        ParquetDecompress(codec, body, size_t(h.compressed_size), size_t(h.uncompressed_size), buf, budget));
    size_t pos = 0;
    IMAGEPACK_RETURN_IF_ERROR(LevelsV1(*buf, &pos, h.rep_encoding, leaf.max_rep, n, "repetition levels", reps));
    IMAGEPACK_RETURN_IF_ERROR(LevelsV1(*buf, &pos, h.def_encoding, leaf.max_def, n, "definition levels", defs));
    values = buf->data() + pos;
    values_size = buf->size() - pos;
  } else {
    const size_t levels = size_t(h.rep_length) + size_t(h.def_length);
    if (levels > size_t(h.compressed_size) || levels > size_t(h.uncompressed_size))
      return Status::Corruption("levels longer than the page");
    IMAGEPACK_RETURN_IF_ERROR(Levels(body, size_t(h.rep_length), leaf.max_rep, n, "repetition levels", reps));
    IMAGEPACK_RETURN_IF_ERROR(
        Levels(body + h.rep_length, size_t(h.def_length), leaf.max_def, n, "definition levels", defs));
    const size_t in = size_t(h.compressed_size) - levels, out = size_t(h.uncompressed_size) - levels;
    IMAGEPACK_RETURN_IF_ERROR(ParquetDecompress(h.v2_compressed ? codec : 0, body + levels, in, out, buf, budget));
    values = buf->data();
    values_size = buf->size();
  }
  const size_t present = size_t(std::count(defs->begin(), defs->end(), uint32_t(leaf.max_def)));
  return DecodeValues(leaf, h.encoding, values, values_size, present, dict, vals);
}

// One decoded data page: its levels and the values of its present slots.
struct Page {
  std::string here;
  std::vector<uint32_t> reps, defs;
  Values vals;
};

// The data pages of a column chunk in order, each passed to `fn`, until
// the chunk ends or `fn` sets *done.
Status ForEachPage(const PqReadFn& read, uint64_t file_size, PqBudget& budget, const PqLeaf& leaf, const PqChunk& chunk,
                   const std::string& where, const std::function<Status(const Page&, bool* done)>& fn) {
  if (chunk.encrypted) return Status::NotSupported(where + ": an encrypted column; not read");
  if (!chunk.file_path.empty()) return Status::NotSupported(where + ": a column chunk in another file; not read");
  // The first page: the dictionary's when there is one (some writers
  // leave data_page_offset 0 then).
  int64_t first = chunk.data_page_offset;
  if (chunk.dictionary_page_offset >= 4 && (chunk.dictionary_page_offset < first || first < 4))
    first = chunk.dictionary_page_offset;
  const uint64_t at0 = first < 4 ? 0 : uint64_t(first);
  uint64_t at = at0;
  if (at0 == 0 || chunk.total_compressed_size < 0 || at > file_size ||
      uint64_t(chunk.total_compressed_size) > file_size - at)
    return Status::Corruption(where + ": the column chunk lies outside the file");
  const uint64_t end = at + uint64_t(chunk.total_compressed_size);
  Values dict;
  dict.budget = &budget;
  bool have_dict = false, done = false;
  std::vector<uint8_t> head, body, buf, dict_bytes;
  uint64_t head_at = 0;  // the file offset of head[0]: headers are parsed out of a window that slides
  Page p;
  for (int64_t page = 0; !done && at < end; ++page) {
    p.here = where + ", page " + std::to_string(page);
    if (uint64_t(page) >= limits::kParquetChunkPages)
      return Status::InvalidArgument(p.here + ": more than " + std::to_string(limits::kParquetChunkPages) +
                                     " pages in a column chunk (budget)");
    PqPageHeader h;
    size_t used = 0;
    for (uint64_t window = 1 << 16;; window <<= 4) {  // headers carry statistics: read more if cut short
      const bool inside = at >= head_at && at - head_at < head.size();
      if (!inside || window > (1 << 16)) {
        head.resize(size_t(std::min<uint64_t>(end - at, window)));
        IMAGEPACK_RETURN_IF_ERROR(read(head.data(), head.size(), at));
        head_at = at;
      }
      const size_t off = size_t(at - head_at);
      auto parsed = ParseParquetPageHeader(head.data() + off, head.size() - off, &used);
      if (parsed.ok()) {
        h = parsed.value();
        break;
      }
      if (head_at + head.size() == end || window >= (uint64_t(16) << 20)) return parsed.status().WithContext(p.here);
    }
    if (h.type < 0 || h.type > 3)
      return Status::Corruption(p.here + ": page header: " +
                                (h.type < 0 ? std::string("no page type") : "page type " + std::to_string(h.type)));
    at += used;
    if (uint64_t(h.compressed_size) > end - at) return Status::Corruption(p.here + ": the page runs past its column chunk");
    if (uint64_t(h.compressed_size) > limits::kParquetPageBytes)
      return Status::InvalidArgument(p.here + ": a page of " + std::to_string(h.compressed_size) + " bytes (budget " +
                                     std::to_string(limits::kParquetPageBytes) + ")");
    body.resize(size_t(h.compressed_size));
    // A small page lies in the window its header came from: no second read
    // (a million one-row row groups made two reads each).
    if (body.empty()) {
      // an empty page: nothing to copy or read (memcpy of none from a null
      // pointer is undefined)
    } else if (at >= head_at && at - head_at <= head.size() && body.size() <= head.size() - (at - head_at)) {
      std::memcpy(body.data(), head.data() + (at - head_at), body.size());
    } else {
      IMAGEPACK_RETURN_IF_ERROR(read(body.data(), body.size(), at));
    }
    at += body.size();
    if (h.has_crc && uint32_t(crc32(0, body.data(), uInt(body.size()))) != h.crc)
      return Status::Corruption(p.here + ": the page's CRC does not match");
    if (uint64_t(h.num_values) > limits::kParquetPageValues)
      return Status::InvalidArgument(p.here + ": " + std::to_string(h.num_values) + " values in a page (budget " +
                                     std::to_string(limits::kParquetPageValues) + ")");
    if (h.type == 1) continue;  // an index page
    if (Status st = budget.Charge(uint64_t(h.num_values) * limits::kParquetValueCost, "value slots"); !st.ok())
      return st.WithContext(p.here);
    if (h.type == 2) {
      dict = Values{};
      dict.budget = &budget;
      // The dictionary's bytes stay in dict_bytes while its values point there.
      Status st = ParquetDecompress(chunk.codec, body.data(), body.size(), size_t(h.uncompressed_size), &dict_bytes,
                                    &budget);
      if (st.ok()) st = DecodePlain(leaf, dict_bytes.data(), dict_bytes.size(), size_t(h.num_values), &dict);
      if (!st.ok()) return st.WithContext(p.here + " (dictionary)");
      have_dict = true;
      continue;
    }
    p.vals = Values{};
    p.vals.budget = &budget;
    Status st = DecodeDataPage(leaf, chunk.codec, h, body.data(), have_dict ? &dict : nullptr, &p.reps, &p.defs, &p.vals, &buf);
    if (!st.ok()) return st.WithContext(p.here);
    IMAGEPACK_RETURN_IF_ERROR(fn(p, &done));
  }
  return Status::Ok();
}

// Rows of a repeated column built from their levels (PqRow).
class RowBuilder {
 public:
  RowBuilder(const PqLeaf& leaf, int64_t rows, const std::function<Status(int64_t, const PqRow&)>& fn)
      : leaf_(leaf),
        rows_(rows),
        fn_(fn),
        bytes_(leaf.type == PqType::kByteArray || leaf.type == PqType::kFixed || leaf.type == PqType::kInt96) {}

  // One level pair; `v` the slot's value when def is the leaf's max.
  Status Add(uint32_t rep, uint32_t def, const PqValue* v) {
    const size_t r = size_t(leaf_.max_rep);
    if (rep == 0) {
      IMAGEPACK_RETURN_IF_ERROR(Flush());
      if (next_ >= rows_) return Status::Corruption("more rows than the row group's " + std::to_string(rows_));
      row_.lists.resize(r);
      for (auto& l : row_.lists) l.clear();
      row_.values.clear();
      arena_.clear();
      levels_ = 0;
      open_ = true;
      row_.lists[0].push_back({});
    } else if (!open_) {
      return Status::Corruption("a repetition level of " + std::to_string(rep) + " before any row starts");
    } else if (def < uint32_t(leaf_.rep_defs[rep - 1]) || last_def_ < uint32_t(leaf_.rep_defs[rep - 1])) {
      return Status::Corruption("a repetition level of " + std::to_string(rep) + " adds to a list that is empty or " +
                                "null (definition levels " + std::to_string(last_def_) + ", " + std::to_string(def) + ")");
    }
    last_def_ = def;
    if (++levels_ > limits::kParquetRowValues)
      return Status::InvalidArgument("row " + std::to_string(next_) + " has more than " +
                                     std::to_string(limits::kParquetRowValues) + " values (budget)");
    for (size_t k = rep == 0 ? 1 : rep;; ++k) {  // the list at depth k continues or was just started
      PqList& cur = row_.lists[k - 1].back();
      const uint32_t full = uint32_t(leaf_.rep_defs[k - 1]);
      if (def + 1 < full) {  // it (or a group above it) is null
        cur.null = true;
        return Status::Ok();
      }
      if (def + 1 == full) return Status::Ok();  // empty
      if (k == r) {  // an element: a value, or null
        PqValue x;
        x.null = def < uint32_t(leaf_.max_def);
        if (!x.null) {
          x = *v;
          if (!bytes_) {
            x.p = nullptr;
            x.n = 0;
          } else if (x.p) {  // bytes outlive the page: a row may span pages
            arena_.emplace_back(reinterpret_cast<const char*>(x.p), x.n);
            x.p = reinterpret_cast<const uint8_t*>(arena_.back().data());
          }
        }
        row_.values.push_back(x);
        cur.end = uint32_t(row_.values.size());
        return Status::Ok();
      }
      const uint32_t start = ChildStart(k + 1);
      row_.lists[k].push_back({false, start, start});
      cur.end = uint32_t(row_.lists[k].size());
    }
  }

  Status Flush() {
    if (!open_) return Status::Ok();
    open_ = false;
    return fn_(next_++, row_);
  }
  int64_t rows() const { return next_; }

 private:
  // Where a new list at depth d starts: the end of the next depth's array.
  uint32_t ChildStart(size_t d) const {
    return uint32_t(d == size_t(leaf_.max_rep) ? row_.values.size() : row_.lists[d].size());
  }

  const PqLeaf& leaf_;
  int64_t rows_;
  const std::function<Status(int64_t, const PqRow&)>& fn_;
  const bool bytes_;  // values are bytes (else numbers)
  PqRow row_;
  std::deque<std::string> arena_;
  size_t levels_ = 0;
  uint32_t last_def_ = 0;  // the level before
  int64_t next_ = 0;
  bool open_ = false;
};

}  // namespace

Status ReadParquetColumn(const PqReadFn& read, uint64_t file_size, PqBudget& budget, const PqLeaf& leaf,
                         const PqChunk& chunk, int64_t rows, const std::string& where,
                         const std::function<Status(int64_t row, const PqValue& v)>& fn) {
  if (leaf.max_rep > 0) return Status::NotSupported(where + ": a repeated column (a list) is read by rows");
  int64_t row = 0;
  IMAGEPACK_RETURN_IF_ERROR(ForEachPage(read, file_size, budget, leaf, chunk, where, [&](const Page& p, bool* done) -> Status {
    size_t next = 0;
    for (size_t i = 0; i < p.defs.size(); ++i, ++row) {
      if (row >= rows) return Status::Corruption(p.here + ": more values than the row group's " + std::to_string(rows) + " rows");
      PqValue v;
      if (p.defs[i] == uint32_t(leaf.max_def)) {
        if (next >= p.vals.v.size()) return Status::Corruption(p.here + ": fewer values than its levels say");
        v = p.vals.v[next++];
      } else {
        v.null = true;
      }
      IMAGEPACK_RETURN_IF_ERROR(fn(row, v));
    }
    *done = row >= rows;
    return Status::Ok();
  }));
  if (row != rows)
    return Status::Corruption(where + ": " + std::to_string(row) + " values for the row group's " + std::to_string(rows) + " rows");
  return Status::Ok();
}

Status ReadParquetRows(const PqReadFn& read, uint64_t file_size, PqBudget& budget, const PqLeaf& leaf,
                       const PqChunk& chunk, int64_t rows, const std::string& where,
                       const std::function<Status(int64_t row, const PqRow& r)>& fn) {
  if (leaf.max_rep == 0 || leaf.rep_defs.size() != size_t(leaf.max_rep))
    return Status::InvalidArgument(where + ": not a repeated column");
  RowBuilder rb(leaf, rows, fn);
  IMAGEPACK_RETURN_IF_ERROR(ForEachPage(read, file_size, budget, leaf, chunk, where, [&](const Page& p, bool*) -> Status {
    size_t next = 0;
    for (size_t i = 0; i < p.defs.size(); ++i) {
      const PqValue* v = nullptr;
      if (p.defs[i] == uint32_t(leaf.max_def)) {
        if (next >= p.vals.v.size()) return Status::Corruption(p.here + ": fewer values than its levels say");
        v = &p.vals.v[next++];
      }
      Status st = rb.Add(p.reps[i], p.defs[i], v);
      if (!st.ok()) return st.WithContext(p.here);
    }
    return Status::Ok();
  }));
  Status st = rb.Flush();
  if (!st.ok()) return st.WithContext(where);
  if (rb.rows() != rows)
    return Status::Corruption(where + ": " + std::to_string(rb.rows()) + " rows for the row group's " + std::to_string(rows));
  return Status::Ok();
}

}  // namespace imagepack::internal
