// Parquet's pages (formats/parquet.h): codecs, the RLE / bit-packed
// hybrid, DELTA_BINARY_PACKED and the byte-array encodings, and a column
// chunk read page by page. The footer and page headers: parquet.cc.
#include <lz4.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "base/le.h"
#include "formats/parquet.h"

namespace imagepack::internal {

namespace {

// One raw LZ4 block into exactly `out_size` bytes.
bool Lz4Block(const uint8_t* in, size_t in_size, uint8_t* out, size_t out_size) {
  if (in_size > INT32_MAX || out_size > INT32_MAX) return false;
  return LZ4_decompress_safe(reinterpret_cast<const char*>(in), reinterpret_cast<char*>(out), int(in_size),
                             int(out_size)) == int(out_size);
}

// The deprecated LZ4 codec as Hadoop frames it (per frame: big-endian
// uncompressed and compressed sizes, then a raw block), else, as other
// writers wrote it, one raw block: arrow's rule.
bool Lz4Hadoop(const uint8_t* in, size_t in_size, uint8_t* out, size_t out_size) {
  size_t done = 0;
  while (in_size >= 8) {
    const uint32_t raw = uint32_t(in[0]) << 24 | uint32_t(in[1]) << 16 | uint32_t(in[2]) << 8 | in[3];
    const uint32_t packed = uint32_t(in[4]) << 24 | uint32_t(in[5]) << 16 | uint32_t(in[6]) << 8 | in[7];
    in += 8;
    in_size -= 8;
    if (packed > in_size || raw > out_size - done || !Lz4Block(in, packed, out + done, raw)) return false;
    in += packed;
    in_size -= packed;
    done += raw;
  }
  return in_size == 0 && done == out_size;
}

}  // namespace

Status ParquetDecompress(int codec, const uint8_t* in, size_t in_size, size_t out_size, std::vector<uint8_t>* out) {
  if (out_size > limits::kParquetPageBytes)
    return Status::InvalidArgument("a page of " + std::to_string(out_size) + " bytes (budget " +
                                   std::to_string(limits::kParquetPageBytes) + ")");
  out->resize(out_size);
  switch (codec) {
    case 0:
      if (in_size != out_size) return Status::Corruption("an uncompressed page whose two sizes differ");
      break;
    default:
      if (out_size == 0) return Status::Ok();  // an empty page (v2: its values may take no bytes at all)
  }
  switch (codec) {
    case 0:
      if (out_size) std::memcpy(out->data(), in, out_size);
      return Status::Ok();
    case 1: {  // snappy
      size_t n = 0;
      if (snappy_uncompressed_length(reinterpret_cast<const char*>(in), in_size, &n) != SNAPPY_OK || n != out_size)
        return Status::Corruption("snappy: the page does not inflate to its stated " + std::to_string(out_size) + " bytes");
      if (snappy_uncompress(reinterpret_cast<const char*>(in), in_size, reinterpret_cast<char*>(out->data()), &n) !=
              SNAPPY_OK || n != out_size)
        return Status::Corruption("snappy: a damaged page");
      return Status::Ok();
    }
    case 2: {  // gzip (zlib accepted too)
      z_stream z{};
      if (inflateInit2(&z, 32 + MAX_WBITS) != Z_OK) return Status::IOError("gzip: cannot start inflating");
      z.next_in = const_cast<uint8_t*>(in);
      z.avail_in = uInt(in_size);
      z.next_out = out->data();
      z.avail_out = uInt(out_size);
      int rc = inflate(&z, Z_FINISH);
      // Several gzip members one after another read as one stream, as gzip -d does.
      while (rc == Z_STREAM_END && z.avail_in > 0 && z.avail_out > 0 && inflateReset(&z) == Z_OK)
        rc = inflate(&z, Z_FINISH);
      const size_t got = out_size - z.avail_out;
      inflateEnd(&z);
      if (rc != Z_STREAM_END || got != out_size)
        return Status::Corruption("gzip: the page does not inflate to its stated " + std::to_string(out_size) + " bytes");
      return Status::Ok();
    }
    case 5:  // LZ4 (Hadoop's framing, else a raw block)
      if (!Lz4Hadoop(in, in_size, out->data(), out_size) && !Lz4Block(in, in_size, out->data(), out_size))
        return Status::Corruption("lz4: the page does not inflate to its stated " + std::to_string(out_size) + " bytes");
      return Status::Ok();
    case 7:  // LZ4_RAW
      if (!Lz4Block(in, in_size, out->data(), out_size))
        return Status::Corruption("lz4: the page does not inflate to its stated " + std::to_string(out_size) + " bytes");
      return Status::Ok();
    case 6: {  // zstd
      const size_t got = ZSTD_decompress(out->data(), out_size, in, in_size);
      if (ZSTD_isError(got) || got != out_size)
        return Status::Corruption(std::string("zstd: ") +
                                  (ZSTD_isError(got) ? ZSTD_getErrorName(got) : "the page does not inflate to its size"));
      return Status::Ok();
    }
    default: {
      static const char* names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
      return Status::NotSupported(std::string("codec ") + (codec >= 0 && codec < 8 ? names[codec] : "unknown") +
                                  " is not read (uncompressed, snappy, gzip, lz4 and zstd are)");
    }
  }
}

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
      for (uint32_t i : idx) {
        if (i >= dict->v.size()) return Status::Corruption("dictionary index " + std::to_string(i) + " of " +
                                                           std::to_string(dict->v.size()));
        out->v.push_back(dict->v[i]);
      }
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

// A data page's definition levels and values: v1 (levels inside the
// decompressed page) or v2 (levels before the compressed values).
Status DecodeDataPage(const PqLeaf& leaf, int codec, const PqPageHeader& h, const uint8_t* body, const Values* dict,
                      std::vector<uint32_t>* defs, Values* vals, std::vector<uint8_t>* buf) {
  const size_t n = size_t(h.num_values);
  const uint8_t* values;
  size_t values_size;
  if (h.type == 0) {
    IMAGEPACK_RETURN_IF_ERROR(ParquetDecompress(codec, body, size_t(h.compressed_size), size_t(h.uncompressed_size), buf));
    size_t pos = 0;
    if (leaf.max_def > 0) {
      if (h.def_encoding != 3) return Status::NotSupported("definition levels in encoding " + std::to_string(h.def_encoding) + " (RLE is read)");
      if (buf->size() < 4) return Status::Corruption("definition levels cut short");
      const uint32_t len = Get<uint32_t>(buf->data());
      if (len > buf->size() - 4) return Status::Corruption("definition levels past the page's end");
      IMAGEPACK_RETURN_IF_ERROR(DecodeRleHybrid(buf->data() + 4, len, BitWidth(leaf.max_def), n, defs));
      pos = 4 + len;
    }
    values = buf->data() + pos;
    values_size = buf->size() - pos;
  } else {
    const size_t levels = size_t(h.rep_length) + size_t(h.def_length);
    if (levels > size_t(h.compressed_size) || levels > size_t(h.uncompressed_size))
      return Status::Corruption("levels longer than the page");
    if (leaf.max_def > 0)
      IMAGEPACK_RETURN_IF_ERROR(DecodeRleHybrid(body + h.rep_length, size_t(h.def_length), BitWidth(leaf.max_def), n, defs));
    const size_t in = size_t(h.compressed_size) - levels, out = size_t(h.uncompressed_size) - levels;
    IMAGEPACK_RETURN_IF_ERROR(ParquetDecompress(h.v2_compressed ? codec : 0, body + levels, in, out, buf));
    values = buf->data();
    values_size = buf->size();
  }
  if (leaf.max_def == 0) defs->assign(n, 0);
  const size_t present = size_t(std::count(defs->begin(), defs->end(), uint32_t(leaf.max_def)));
  return DecodeValues(leaf, h.encoding, values, values_size, present, dict, vals);
}

}  // namespace

Status ReadParquetColumn(const PqReadFn& read, uint64_t file_size, const PqLeaf& leaf, const PqChunk& chunk,
                         int64_t rows, const std::string& where,
                         const std::function<Status(int64_t row, const PqValue& v)>& fn) {
  if (leaf.max_rep > 0) return Status::NotSupported(where + ": a repeated column (a list) is not read");
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
  bool have_dict = false;
  std::vector<uint8_t> head, body, buf, dict_bytes;
  std::vector<uint32_t> defs;
  int64_t row = 0;
  for (int64_t page = 0; row < rows && at < end; ++page) {
    const std::string here = where + ", page " + std::to_string(page);
    PqPageHeader h;
    size_t used = 0;
    for (uint64_t window = 1 << 16;; window <<= 4) {  // headers carry statistics: read more if cut short
      head.resize(size_t(std::min<uint64_t>(end - at, window)));
      IMAGEPACK_RETURN_IF_ERROR(read(head.data(), head.size(), at));
      auto parsed = ParseParquetPageHeader(head.data(), head.size(), &used);
      if (parsed.ok()) {
        h = parsed.value();
        break;
      }
      if (head.size() == end - at || window >= (uint64_t(16) << 20)) return parsed.status().WithContext(here);
    }
    at += used;
    if (uint64_t(h.compressed_size) > end - at) return Status::Corruption(here + ": the page runs past its column chunk");
    if (uint64_t(h.compressed_size) > limits::kParquetPageBytes)
      return Status::InvalidArgument(here + ": a page of " + std::to_string(h.compressed_size) + " bytes (budget " +
                                     std::to_string(limits::kParquetPageBytes) + ")");
    body.resize(size_t(h.compressed_size));
    IMAGEPACK_RETURN_IF_ERROR(read(body.data(), body.size(), at));
    at += body.size();
    if (h.has_crc && uint32_t(crc32(0, body.data(), uInt(body.size()))) != h.crc)
      return Status::Corruption(here + ": the page's CRC does not match");
    if (uint64_t(h.num_values) > limits::kParquetPageValues)
      return Status::InvalidArgument(here + ": " + std::to_string(h.num_values) + " values in a page (budget " +
                                     std::to_string(limits::kParquetPageValues) + ")");
    if (h.type == 2) {
      dict = Values{};
      // The dictionary's bytes stay in dict_bytes while its values point there.
      Status st = ParquetDecompress(chunk.codec, body.data(), body.size(), size_t(h.uncompressed_size), &dict_bytes);
      if (st.ok()) st = DecodePlain(leaf, dict_bytes.data(), dict_bytes.size(), size_t(h.num_values), &dict);
      if (!st.ok()) return st.WithContext(here + " (dictionary)");
      have_dict = true;
      continue;
    }
    if (h.type != 0 && h.type != 3) continue;  // index pages
    Values vals;
    Status st = DecodeDataPage(leaf, chunk.codec, h, body.data(), have_dict ? &dict : nullptr, &defs, &vals, &buf);
    if (!st.ok()) return st.WithContext(here);
    size_t next = 0;
    for (size_t i = 0; i < defs.size(); ++i, ++row) {
      if (row >= rows) return Status::Corruption(here + ": more values than the row group's " + std::to_string(rows) + " rows");
      PqValue v;
      if (defs[i] == uint32_t(leaf.max_def)) {
        if (next >= vals.v.size()) return Status::Corruption(here + ": fewer values than its levels say");
        v = vals.v[next++];
      } else {
        v.null = true;
      }
      IMAGEPACK_RETURN_IF_ERROR(fn(row, v));
    }
  }
  if (row != rows)
    return Status::Corruption(where + ": " + std::to_string(row) + " values for the row group's " + std::to_string(rows) + " rows");
  return Status::Ok();
}

}  // namespace imagepack::internal
