// Parquet's codecs (formats/parquet.h, ParquetDecompress): snappy, gzip,
// zstd, LZ4 (Hadoop's framing or a raw block) and LZ4_RAW, each into
// exactly the page's stated size.
#include <lz4.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>

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

}  // namespace imagepack::internal
