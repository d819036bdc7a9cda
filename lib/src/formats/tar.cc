#include "formats/tar.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include <sys/stat.h>

#include "base/limits.h"

namespace imagepack::internal {

bool ParseTarNumber(const char* p, size_t n, uint64_t* out) {
  if (n > 0 && (static_cast<unsigned char>(p[0]) & 0x80)) {  // GNU base-256, big-endian
    if (static_cast<unsigned char>(p[0]) & 0x40) return false;  // negative
    uint64_t v = static_cast<unsigned char>(p[0]) & 0x3f;
    for (size_t i = 1; i < n; ++i) {
      if (v >> 55) return false;  // would pass 63 bits
      v = (v << 8) | static_cast<unsigned char>(p[i]);
    }
    *out = v;
    return true;
  }
  size_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == '\0')) ++i;
  uint64_t v = 0;
  size_t digits = 0;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; ++i, ++digits) {
    if (v >> 60) return false;
    v = v * 8 + uint64_t(p[i] - '0');
  }
  for (; i < n; ++i)
    if (p[i] != ' ' && p[i] != '\0') return false;  // junk after the digits
  *out = v;
  return digits > 0 || n == 0 || p[0] == '\0' || p[0] == ' ';
}

namespace {

std::string CString(const char* p, size_t n) { return std::string(p, strnlen(p, n)); }

std::string At(const std::string& shown, uint64_t at) { return shown + ": tar header at byte " + std::to_string(at); }

// pax records "LEN key=value\n" (LEN counts the whole record). Sets the
// path and size they carry; any other key is ignored.
Status ParsePax(const std::string& body, const std::string& where, std::string* path, uint64_t* size, bool* has_size) {
  for (size_t p = 0; p < body.size();) {
    if (body[p] == '\0') break;  // some writers pad the body with NULs
    const size_t sp = body.find(' ', p);
    if (sp == std::string::npos || sp == p || sp - p > 20)
      return Status::Corruption(where + ": pax record at body byte " + std::to_string(p) + " has no length");
    uint64_t len = 0;
    const auto r = std::from_chars(body.data() + p, body.data() + sp, len);
    if (r.ec != std::errc() || r.ptr != body.data() + sp || len <= sp - p + 1 || len > body.size() - p)
      return Status::Corruption(where + ": pax record at body byte " + std::to_string(p) + " has a bad length '" +
                                body.substr(p, sp - p) + "'");
    if (body[p + len - 1] != '\n')
      return Status::Corruption(where + ": pax record at body byte " + std::to_string(p) + " does not end in a newline");
    const std::string rec = body.substr(sp + 1, p + len - sp - 2);
    const size_t eq = rec.find('=');
    if (eq == std::string::npos)
      return Status::Corruption(where + ": pax record at body byte " + std::to_string(p) + " has no '='");
    const std::string key = rec.substr(0, eq), value = rec.substr(eq + 1);
    if (key == "path") {
      *path = value;
    } else if (key == "size") {
      const auto s = std::from_chars(value.data(), value.data() + value.size(), *size);
      if (s.ec != std::errc() || s.ptr != value.data() + value.size() || *size > (uint64_t(1) << 62))
        return Status::Corruption(where + ": pax size '" + value + "' is not a number");
      *has_size = true;
    }
    p += len;
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<TarMember>> ListTar(const ReadAtFn& read, uint64_t file_size, const std::string& shown) {
  std::vector<TarMember> out;
  std::string long_name;
  uint64_t pax_size = 0;
  bool has_pax_size = false;
  uint64_t at = 0;
  char h[512];
  while (file_size >= 512 && at <= file_size - 512) {
    IMAGEPACK_RETURN_IF_ERROR(read(h, 512, at));
    if (std::all_of(h, h + 512, [](char c) { return c == 0; })) return out;  // end of archive
    uint64_t stored = 0;
    if (!ParseTarNumber(h + 148, 8, &stored))
      return Status::Corruption(At(shown, at) + ": not a tar file, or damaged (checksum field is not a number)");
    uint64_t sum = 0;
    int64_t signed_sum = 0;  // some old writers summed signed chars
    for (int i = 0; i < 512; ++i) {
      const bool in_field = i >= 148 && i < 156;
      sum += in_field ? ' ' : static_cast<unsigned char>(h[i]);
      signed_sum += in_field ? ' ' : static_cast<signed char>(h[i]);
    }
    if (sum != stored && static_cast<uint64_t>(signed_sum) != stored)
      return Status::Corruption(At(shown, at) + ": not a tar file, or damaged (bad header checksum)");
    uint64_t size = 0;
    if (!ParseTarNumber(h + 124, 12, &size))
      return Status::Corruption(At(shown, at) + ": member size is not a number");
    const char type = h[156];
    if (has_pax_size && (type == '0' || type == '\0' || type == '7')) size = pax_size;
    const uint64_t data = at + 512;
    if (size > file_size - data)
      return Status::Corruption(At(shown, at) + ": member of " + std::to_string(size) + " bytes runs past the end (" +
                                std::to_string(file_size) + " bytes): the shard is truncated");
    const uint64_t next = data + (size + 511) / 512 * 512;  // <= file_size + 511: no overflow
    if (type == 'L' || type == 'x') {
      if (size > limits::kTarHeaderBody)
        return Status::Corruption(At(shown, at) + ": a " + std::string(type == 'L' ? "GNU long-name" : "pax") +
                                  " header of " + std::to_string(size) + " bytes (budget " +
                                  std::to_string(limits::kTarHeaderBody) + ")");
      std::string body(size, '\0');
      IMAGEPACK_RETURN_IF_ERROR(read(body.data(), body.size(), data));
      if (type == 'L') {
        long_name = CString(body.data(), body.size());
      } else {
        IMAGEPACK_RETURN_IF_ERROR(ParsePax(body, At(shown, at), &long_name, &pax_size, &has_pax_size));
      }
    } else if (type == '0' || type == '\0' || type == '7') {
      std::string name = long_name;
      if (name.empty()) {
        name = CString(h, 100);
        if (std::memcmp(h + 257, "ustar", 5) == 0 && h[345] != '\0') name = CString(h + 345, 155) + "/" + name;
      }
      if (name.size() > limits::kNameBytes)
        return Status::Corruption(At(shown, at) + ": a member name of " + std::to_string(name.size()) +
                                  " bytes (budget " + std::to_string(limits::kNameBytes) + ")");
      if (out.size() >= limits::kTarMembers)
        return Status::Corruption(At(shown, at) + ": more than " + std::to_string(limits::kTarMembers) +
                                  " members in one shard");
      out.push_back({std::move(name), data, size});
      long_name.clear();
      has_pax_size = false;
    } else if (type != 'g') {
      long_name.clear();  // directories, links, devices: nothing to pack
      has_pax_size = false;
    }
    at = next;
  }
  return Status::Corruption(shown + ": no end-of-archive block after byte " + std::to_string(at) +
                            ": the shard is truncated");
}

Result<std::vector<TarMember>> ListTarFile(const ByteSource& src, const std::string& shown) {
  auto read = [&](void* buf, size_t n, uint64_t at) -> Status {
    Status st = src.ReadAt(at, n, static_cast<uint8_t*>(buf));
    return st.ok() ? st : st.WithContext(shown);
  };
  return ListTar(read, src.size(), shown);
}

}  // namespace imagepack::internal
