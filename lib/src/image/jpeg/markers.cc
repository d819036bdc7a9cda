// JPEG headers and markers, read without decoding: the facts ProbeImage
// reports (size, colour, EXIF orientation, progressive, EOI) and the
// structure walk that decides pass-through. Every length and offset read
// from the data is checked against the buffer before use: this runs on
// untrusted files and is fuzzed.
#include <cstdio>
#include <cstring>
#include <string>

#include "imagepack/probe.h"
#include "image/jpeg/jpeg.h"

namespace imagepack {
namespace {

uint16_t Be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t Be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3];
}

// Reads the EXIF orientation from an APP1 payload starting after "Exif\0\0".
// Returns 1 when absent or malformed: a bad EXIF block must not make an
// otherwise fine image unreadable.
int ExifOrientation(const uint8_t* tiff, size_t size) {
  if (size < 8) return 1;
  bool le;
  if (tiff[0] == 'I' && tiff[1] == 'I') le = true;
  else if (tiff[0] == 'M' && tiff[1] == 'M') le = false;
  else return 1;
  auto u16 = [&](size_t off) -> uint32_t {
    return le ? (tiff[off] | (tiff[off + 1] << 8)) : ((tiff[off] << 8) | tiff[off + 1]);
  };
  auto u32 = [&](size_t off) -> uint32_t {
    return le ? (uint32_t(tiff[off]) | (uint32_t(tiff[off + 1]) << 8) |
                 (uint32_t(tiff[off + 2]) << 16) | (uint32_t(tiff[off + 3]) << 24))
              : Be32(tiff + off);
  };
  if (u16(2) != 42) return 1;
  uint64_t ifd = u32(4);
  if (ifd + 2 > size) return 1;
  uint32_t count = u16(ifd);
  for (uint32_t i = 0; i < count; ++i) {
    uint64_t e = ifd + 2 + uint64_t(i) * 12;
    if (e + 12 > size) return 1;
    if (u16(e) == 0x0112) {
      uint32_t type = u16(e + 2);
      uint32_t v = type == 3 ? u16(e + 8) : (type == 4 ? u32(e + 8) : 0);
      return (v >= 1 && v <= 8) ? static_cast<int>(v) : 1;
    }
  }
  return 1;
}

bool IsSof(uint8_t m) {
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

}  // namespace

namespace internal {

Result<ImageInfo> ProbeJpeg(const uint8_t* d, size_t n) {
  ImageInfo info;
  info.format = ImageFormat::kJpeg;
  size_t p = 2;
  bool have_sof = false;
  bool jfif = false;
  int adobe_transform = -1;
  while (true) {
    // Markers may be preceded by any number of 0xFF fill bytes.
    while (p < n && d[p] != 0xFF) ++p;  // tolerate garbage between segments
    while (p < n && d[p] == 0xFF) ++p;
    if (p >= n) return Status::Corruption("truncated JPEG: no image data (ends inside the header)");
    uint8_t m = d[p++];
    if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue;  // no length
    if (m == 0xD9) return Status::Corruption("JPEG ends before any image data");
    if (p + 2 > n) return Status::Corruption("truncated JPEG header");
    size_t len = Be16(d + p);
    if (len < 2) return Status::Corruption("bad JPEG marker length");
    if (p + len > n) return Status::Corruption("truncated JPEG header");
    const uint8_t* seg = d + p + 2;
    size_t seg_len = len - 2;
    if (m == 0xDA) break;  // start of scan: the header is complete
    if (IsSof(m)) {
      if (seg_len < 6) return Status::Corruption("bad JPEG frame header");
      info.height = Be16(seg + 1);
      info.width = Be16(seg + 3);
      info.components = seg[5];
      info.progressive = (m == 0xC2 || m == 0xC6 || m == 0xCA || m == 0xCE);
      info.arithmetic = (m >= 0xC9);
      have_sof = true;
    } else if (m == 0xE0 && seg_len >= 5 && std::memcmp(seg, "JFIF\0", 5) == 0) {
      jfif = true;
    } else if (m == 0xE1 && seg_len >= 6 && std::memcmp(seg, "Exif\0\0", 6) == 0) {
      info.orientation = ExifOrientation(seg + 6, seg_len - 6);
    } else if (m == 0xEE && seg_len >= 12 && std::memcmp(seg, "Adobe", 5) == 0) {
      info.adobe_marker = true;
      adobe_transform = seg[11];
    }
    p += len;
  }
  if (!have_sof) return Status::Corruption("JPEG has no frame header");
  if (info.width == 0 || info.height == 0)
    return Status::NotSupported("JPEG with zero width or height (DNL marker) is not supported");
  switch (info.components) {
    case 1: info.jpeg_color = JpegColor::kGray; break;
    case 3:
      // libjpeg's rule: JFIF means YCbCr; an Adobe transform of 0 means RGB.
      info.jpeg_color = (!jfif && adobe_transform == 0) ? JpegColor::kRgb : JpegColor::kYCbCr;
      break;
    case 4: info.jpeg_color = adobe_transform == 2 ? JpegColor::kYcck : JpegColor::kCmyk; break;
    default:
      return Status::NotSupported("JPEG with " + std::to_string(info.components) + " components");
  }
  // Complete files end with EOI, possibly followed by padding.
  size_t tail = n > 256 ? n - 256 : 0;
  for (size_t i = n - 1; i > tail; --i) {
    if (d[i - 1] == 0xFF && d[i] == 0xD9) { info.has_eoi = true; break; }
  }
  return info;
}

}  // namespace internal

namespace {

// What CheckJpegStructure has seen of the header so far, and its rules per
// segment: the tables defined, the frame's components, the scans.
class JpegStructure {
 public:
  JpegStructure() {
    for (auto& cls : ht_) cls[0] = cls[1] = {true, true, true};
  }

  bool in_scans() const { return in_scans_; }

  // One segment (marker m, its payload); Ok to go on, or what is wrong.
  Status Segment(uint8_t m, const uint8_t* seg, size_t seg_len) {
    if (m == 0xDB) return Dqt(seg, seg_len);
    if (m == 0xC4) return Dht(seg, seg_len);
    if (m == 0xC0 || m == 0xC1) return Sof(seg, seg_len);  // baseline / extended Huffman frame
    if (IsSof(m)) return Status::NotSupported("JPEG coding process other than baseline Huffman");
    if (m == 0xDD) return seg_len == 2 ? Status::Ok() : Status::Corruption("JPEG: bad restart interval");  // DRI
    if (m == 0xDA) return Sos(seg, seg_len);
    if ((m >= 0xE0 && m <= 0xEF) || m == 0xFE || m == 0xDC) return Status::Ok();
    // libjpeg skips only APPn, COM and DNL; any other marker is a fatal
    // "Unsupported marker type" (found by fuzz_decode: 0xFF72).
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", m);
    return Status::Corruption(std::string("JPEG: unsupported marker ") + hex);
  }

 private:
  // Huffman table slots [DC, AC][0..3]. libjpeg-turbo supplies the standard
  // tables 0 and 1 when a file leaves them out, but not 2 and 3 (found by
  // fuzz_decode: "Huffman table 0x02 was not defined"). When a scan starts,
  // libjpeg builds the tables of its components (jpeg_make_d_derived_tbl)
  // and stops on a "Bogus Huffman table definition" (found by fuzz_decode):
  // codes that do not fit their lengths, or a DC symbol over 15.
  struct HuffSlot {
    bool defined = false, codes_fit = false, dc_symbols_ok = false;
  };
  struct Comp {
    int id, h, v, tq;
  };

  Status Dqt(const uint8_t* seg, size_t seg_len) {  // one or more tables
    for (size_t q = 0; q < seg_len;) {
      const int pq = seg[q] >> 4, tq = seg[q] & 15;
      const size_t size = 1 + (pq ? 128 : 64);
      if (pq > 1 || tq > 3 || q + size > seg_len) return Status::Corruption("JPEG: bad quantisation table");
      qt_defined_[tq] = true;
      q += size;
    }
    return Status::Ok();
  }

  Status Dht(const uint8_t* seg, size_t seg_len) {  // one or more tables
    for (size_t q = 0; q < seg_len;) {
      if (q + 17 > seg_len || (seg[q] >> 4) > 1 || (seg[q] & 15) > 3) return Status::Corruption("JPEG: bad Huffman table");
      size_t count = 0;
      for (int i = 1; i <= 16; ++i) count += seg[q + i];
      if (count > 256 || q + 17 + count > seg_len) return Status::Corruption("JPEG: bad Huffman table");
      const int tc = seg[q] >> 4;
      HuffSlot& slot = ht_[tc][seg[q] & 15];
      slot = {true, true, true};
      // Canonical codes, shortest first: after the codes of length l, the
      // next free code must still be below 2^l.
      uint32_t code = 0;
      for (int l = 1; l <= 16; ++l) {
        code += seg[q + l];
        if (code >= (uint32_t{1} << l)) slot.codes_fit = false;
        code <<= 1;
      }
      if (tc == 0)
        for (size_t i = 0; i < count; ++i) slot.dc_symbols_ok &= seg[q + 17 + i] <= 15;
      q += 17 + count;
    }
    return Status::Ok();
  }

  Status Sof(const uint8_t* seg, size_t seg_len) {
    if (have_sof_) return Status::Corruption("JPEG has two frame headers");
    if (seg_len < 6 || seg[0] != 8) return Status::Corruption("JPEG: bad frame header");
    ncomp_ = seg[5];
    if ((ncomp_ != 1 && ncomp_ != 3) || seg_len != 6 + 3 * size_t(ncomp_))
      return Status::Corruption("JPEG: bad frame header");
    for (int c = 0; c < ncomp_; ++c) {
      const uint8_t* e = seg + 6 + 3 * c;
      comps_[c] = {e[0], e[1] >> 4, e[1] & 15, e[2]};
      if (comps_[c].h < 1 || comps_[c].h > 4 || comps_[c].v < 1 || comps_[c].v > 4 || comps_[c].tq > 3)
        return Status::Corruption("JPEG: bad component in the frame header");
    }
    have_sof_ = true;
    return Status::Ok();
  }

  Status Sos(const uint8_t* seg, size_t seg_len) {
    if (!have_sof_) return Status::Corruption("JPEG scan before the frame header");
    if (seg_len < 1) return Status::Corruption("JPEG: bad scan header");
    const int ns = seg[0];
    if (ns < 1 || ns > ncomp_ || seg_len != 4 + 2 * size_t(ns)) return Status::Corruption("JPEG: bad scan header");
    // libjpeg: a sequential JPEG has several scans only when its first
    // scan leaves components out (found by fuzz_decode: "Didn't expect
    // more than one scan"); each component is scanned once.
    if (!in_scans_) multiple_scans_ = ns < ncomp_;
    else if (!multiple_scans_) return Status::Corruption("JPEG: a second scan in a single-scan image");
    int blocks = 0;
    for (int s = 0; s < ns; ++s) {
      const int id = seg[1 + 2 * s], tables = seg[2 + 2 * s];
      const Comp* c = nullptr;
      for (int k = 0; k < ncomp_; ++k)
        if (comps_[k].id == id) c = &comps_[k];
      if (!c || (tables >> 4) > 3 || (tables & 15) > 3) return Status::Corruption("JPEG: bad scan component");
      const HuffSlot& dc = ht_[0][tables >> 4];
      const HuffSlot& ac = ht_[1][tables & 15];
      if (!dc.defined || !ac.defined) return Status::Corruption("JPEG: a scan uses a Huffman table that is not defined");
      if (!dc.codes_fit || !dc.dc_symbols_ok || !ac.codes_fit)
        return Status::Corruption("JPEG: a scan uses a bogus Huffman table");
      if (scanned_[c - comps_]) return Status::Corruption("JPEG: a component scanned twice");
      scanned_[c - comps_] = true;
      if (!qt_defined_[c->tq])
        return Status::Corruption("JPEG: quantisation table " + std::to_string(c->tq) + " is not defined");
      blocks += ns > 1 ? c->h * c->v : 1;
    }
    if (blocks > 10) return Status::Corruption("JPEG: too many blocks per MCU");
    in_scans_ = true;
    return Status::Ok();
  }

  bool qt_defined_[4] = {false, false, false, false};
  HuffSlot ht_[2][4];
  Comp comps_[4] = {};
  int ncomp_ = 0;
  bool have_sof_ = false, in_scans_ = false, multiple_scans_ = false;
  bool scanned_[4] = {false, false, false, false};
};

}  // namespace

Status CheckJpegStructure(const uint8_t* d, size_t n) {
  if (n < 4 || d[0] != 0xFF || d[1] != 0xD8) return Status::Corruption("JPEG does not start with SOI");
  JpegStructure jpeg;
  size_t p = 2;
  while (true) {
    if (p >= n) return Status::Corruption("JPEG ends before its EOI marker");
    if (d[p] != 0xFF) {
      if (!jpeg.in_scans()) return Status::Corruption("JPEG: bytes between segments at offset " + std::to_string(p));
      // Entropy-coded data: runs to the next marker that is not a stuffed
      // 0xFF00, a restart marker, or fill.
      const void* ff = std::memchr(d + p, 0xFF, n - p);
      if (!ff) return Status::Corruption("JPEG ends inside the scan data (no EOI)");
      p = static_cast<size_t>(static_cast<const uint8_t*>(ff) - d);
    }
    while (p < n && d[p] == 0xFF) ++p;
    if (p >= n) return Status::Corruption("JPEG ends inside a marker");
    const uint8_t m = d[p++];
    if (m == 0x00 || (m >= 0xD0 && m <= 0xD7)) {
      if (!jpeg.in_scans()) return Status::Corruption("JPEG: stray marker in the header");
      continue;  // stuffed byte or restart marker inside scan data
    }
    if (m == 0xD9) {
      if (!jpeg.in_scans()) return Status::Corruption("JPEG ends before any image data");
      return Status::Ok();
    }
    if (m == 0xD8) return Status::Corruption("JPEG has a second SOI marker at offset " + std::to_string(p - 2));
    if (m == 0x01) return Status::Corruption("JPEG: TEM marker");
    if (p + 2 > n) return Status::Corruption("JPEG ends inside a marker");
    const size_t len = Be16(d + p);
    if (len < 2 || p + len > n) return Status::Corruption("JPEG marker length runs past the end of the file");
    const uint8_t* seg = d + p + 2;
    p += len;
    IMAGEPACK_RETURN_IF_ERROR(jpeg.Segment(m, seg, len - 2));
  }
}

}  // namespace imagepack
