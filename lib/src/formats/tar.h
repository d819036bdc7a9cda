// The members of a tar file as WebDataset writers make them: POSIX ustar
// (with its 155-byte prefix), GNU ('L' long names, base-256 sizes) and pax
// ('x' per-member records; 'g' global records are skipped). Only regular
// members are listed; directories, links and devices are skipped. Budgets:
// base/limits.h. Internal.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "imagepack/byte_source.h"
#include "imagepack/status.h"

namespace imagepack::internal {

struct TarMember {
  std::string name;     // as stored: bytes, not checked for UTF-8 here
  uint64_t offset = 0;  // of its data in the file
  uint64_t size = 0;
};

// Reads exactly `n` bytes at `at` (an error otherwise).
using ReadAtFn = std::function<Status(void* buf, size_t n, uint64_t at)>;

// Lists the regular members of a tar of `file_size` bytes. Every offset and
// size is checked against `file_size` before use; errors name `shown` and
// the header's byte offset. A missing end-of-archive block is an error (a
// truncated shard).
Result<std::vector<TarMember>> ListTar(const ReadAtFn& read, uint64_t file_size, const std::string& shown);

// The same over a byte source (a file: pread).
Result<std::vector<TarMember>> ListTarFile(const ByteSource& src, const std::string& shown);

// Parses a tar numeric field: octal digits (leading spaces or NULs, ended
// by a space or NUL), or GNU base-256 (high bit of the first byte set).
// False when it is neither, or does not fit 63 bits.
bool ParseTarNumber(const char* p, size_t n, uint64_t* out);

}  // namespace imagepack::internal
