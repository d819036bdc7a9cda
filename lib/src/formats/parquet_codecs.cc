// Parquet's codecs (formats/parquet.h, ParquetDecompress): snappy, gzip,
// zstd, LZ4 (Hadoop's framing or a raw block) and LZ4_RAW, each into
// exactly the page's stated size.
#include <lz4.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
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

PqBudget::PqBudget(uint64_t file_size)
    : total_(limits::kParquetExpandFloor +
             (file_size > (UINT64_MAX - limits::kParquetExpandFloor) / limits::kParquetExpandFactor
                  ? UINT64_MAX - limits::kParquetExpandFloor
                  : limits::kParquetExpandFactor * file_size)),
      left_(total_) {}

Status PqBudget::Charge(uint64_t bytes, const char* what) {
  if (bytes > left_)
    return Status::InvalidArgument(std::string(what) + " expand the file past its budget of " + std::to_string(total_) +
                                   " bytes (" + std::to_string(limits::kParquetExpandFactor) + " x its size + " +
                                   std::to_string(limits::kParquetExpandFloor) + ")");
  left_ -= bytes;
  return Status::Ok();
}

namespace {

// Grows `out` by the next step of a stream inflated in place: doubling
// from 64 KiB, never past `out_size`, each step charged first.
Status Grow(std::vector<uint8_t>* out, size_t out_size, PqBudget* budget) {
  const size_t now = out->size();
  const size_t step = std::min(out_size - now, std::max<size_t>(size_t(64) << 10, now));
  if (budget) IMAGEPACK_RETURN_IF_ERROR(budget->Charge(step, "inflated pages"));
  out->resize(now + step);
  return Status::Ok();
}

Status Gunzip(const uint8_t* in, size_t in_size, size_t out_size, std::vector<uint8_t>* out, PqBudget* budget) {
  z_stream z{};
  if (inflateInit2(&z, 32 + MAX_WBITS) != Z_OK) return Status::IOError("gzip: cannot start inflating");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  z.next_in = const_cast<uint8_t*>(in);
  z.avail_in = uInt(in_size);
  size_t got = 0;
  int rc = Z_OK;
  for (;;) {
    const bool full = got == out->size();
    if (full && got < out_size) {
      IMAGEPACK_RETURN_IF_ERROR(Grow(out, out_size, budget));
      continue;
    }
    uint8_t spare;  // once the stated size is out: any further byte is one too many
    z.next_out = full ? &spare : out->data() + got;
    z.avail_out = full ? 1 : uInt(out->size() - got);
    rc = inflate(&z, Z_NO_FLUSH);
    if (full && z.avail_out == 0) return Status::Corruption("gzip: the page inflates past its stated " + std::to_string(out_size) + " bytes");
    if (!full) got = out->size() - z.avail_out;
    // Several gzip members one after another read as one stream, as gzip -d does.
    if (rc == Z_STREAM_END && z.avail_in > 0 && inflateReset(&z) == Z_OK) continue;
    if (rc != Z_OK) break;  // the end, damage, or no progress (the input ran out)
  }
  if (rc != Z_STREAM_END || got != out_size)
    return Status::Corruption("gzip: the page does not inflate to its stated " + std::to_string(out_size) + " bytes");
  return Status::Ok();
}

Status Unzstd(const uint8_t* in, size_t in_size, size_t out_size, std::vector<uint8_t>* out, PqBudget* budget) {
  ZSTD_DStream* z = ZSTD_createDStream();
  if (z == nullptr) return Status::IOError("zstd: cannot start inflating");
  struct Free {
    ZSTD_DStream* z;
    ~Free() { ZSTD_freeDStream(z); }
  } free_it{z};
  ZSTD_inBuffer ib{in, in_size, 0};
  size_t got = 0, rc = 1;
  for (;;) {
    const bool full = got == out->size();
    if (full && got < out_size) {
      IMAGEPACK_RETURN_IF_ERROR(Grow(out, out_size, budget));
      continue;
    }
    uint8_t spare;
    ZSTD_outBuffer ob{full ? &spare : out->data(), full ? 1 : out->size(), full ? 0 : got};
    const size_t before_in = ib.pos, before_out = ob.pos;
    rc = ZSTD_decompressStream(z, &ob, &ib);
    if (ZSTD_isError(rc)) return Status::Corruption(std::string("zstd: ") + ZSTD_getErrorName(rc));
    if (full && ob.pos > 0) return Status::Corruption("zstd: the page inflates past its stated " + std::to_string(out_size) + " bytes");
    if (!full) got = ob.pos;
    if (rc == 0 && ib.pos == ib.size) break;              // the last frame ended with the input
    if (ib.pos == before_in && ob.pos == before_out) break;  // no progress: the input ran out inside a frame
  }
  if (rc != 0 || got != out_size || ib.pos != ib.size)
    return Status::Corruption("zstd: the page does not inflate to its stated " + std::to_string(out_size) + " bytes");
  return Status::Ok();
}

}  // namespace

Status ParquetDecompress(int codec, const uint8_t* in, size_t in_size, size_t out_size, std::vector<uint8_t>* out,
                         PqBudget* budget) {
  if (out_size > limits::kParquetPageBytes)
    return Status::InvalidArgument("a page of " + std::to_string(out_size) + " bytes (budget " +
                                   std::to_string(limits::kParquetPageBytes) + ")");
  out->clear();
  if (codec == 0 && in_size != out_size) return Status::Corruption("an uncompressed page whose two sizes differ");
  if (out_size == 0 && codec >= 0 && codec <= 7 && codec != 3 && codec != 4)
    return Status::Ok();  // an empty page (v2: its values may take no bytes at all)
  // Codecs whose output is sized first: the stated size is checked against
  // what the input can make before anything is allocated.
  auto sized = [&](const char* name, bool possible) -> Status {
    if (!possible)
      return Status::Corruption(std::string(name) + ": the page does not inflate to its stated " +
                                std::to_string(out_size) + " bytes");
    if (budget) IMAGEPACK_RETURN_IF_ERROR(budget->Charge(out_size, "inflated pages"));
    out->resize(out_size);
    return Status::Ok();
  };
  // LZ4 makes at most 255 bytes of each input byte (its length runs).
  const bool lz4_possible = out_size / 255 <= in_size;
  switch (codec) {
    case 0:
      IMAGEPACK_RETURN_IF_ERROR(sized("uncompressed", true));
      std::memcpy(out->data(), in, out_size);
      return Status::Ok();
    case 1: {  // snappy: the stream is walked (no output) before the output is made
      size_t n = 0;
      const bool ok = snappy_uncompressed_length(reinterpret_cast<const char*>(in), in_size, &n) == SNAPPY_OK &&
                      n == out_size &&
                      snappy_validate_compressed_buffer(reinterpret_cast<const char*>(in), in_size) == SNAPPY_OK;
      IMAGEPACK_RETURN_IF_ERROR(sized("snappy", ok));
      if (snappy_uncompress(reinterpret_cast<const char*>(in), in_size, reinterpret_cast<char*>(out->data()), &n) !=
              SNAPPY_OK || n != out_size)
        return Status::Corruption("snappy: a damaged page");
      return Status::Ok();
    }
    case 2: return Gunzip(in, in_size, out_size, out, budget);  // gzip (zlib accepted too)
    case 5:  // LZ4 (Hadoop's framing, else a raw block)
      IMAGEPACK_RETURN_IF_ERROR(sized("lz4", lz4_possible));
      if (!Lz4Hadoop(in, in_size, out->data(), out_size) && !Lz4Block(in, in_size, out->data(), out_size))
        return Status::Corruption("lz4: the page does not inflate to its stated " + std::to_string(out_size) + " bytes");
      return Status::Ok();
    case 7:  // LZ4_RAW
      IMAGEPACK_RETURN_IF_ERROR(sized("lz4", lz4_possible));
      if (!Lz4Block(in, in_size, out->data(), out_size))
        return Status::Corruption("lz4: the page does not inflate to its stated " + std::to_string(out_size) + " bytes");
      return Status::Ok();
    case 6: return Unzstd(in, in_size, out_size, out, budget);
    default: {
      static const char* names[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
      return Status::NotSupported(std::string("codec ") + (codec >= 0 && codec < 8 ? names[codec] : "unknown") +
                                  " is not read (uncompressed, snappy, gzip, lz4 and zstd are)");
    }
  }
}

}  // namespace imagepack::internal
