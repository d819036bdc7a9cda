// Shared by the libFuzzer targets: a private scratch folder per process and
// a hard failure that libFuzzer records as a crash with its input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <xxhash.h>

namespace imagepack::fuzz {

// Aborts (libFuzzer saves the input) when an invariant does not hold.
#define FUZZ_CHECK(cond)                                                            \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

// /dev/shm/imagepack-fuzz-PID (or TMPDIR), removed at exit. The path is
// deliberately never freed: the exit handler runs after static destructors.
inline std::string* scratch_dir = nullptr;

inline const std::string& ScratchDir() {
  if (scratch_dir == nullptr) {
    const char* base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::getenv("TMPDIR");
    scratch_dir = new std::string(std::string(base ? base : "/tmp") + "/imagepack-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(*scratch_dir);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(*scratch_dir, ec);
    });
  }
  return *scratch_dir;
}

inline uint64_t Get64(const uint8_t* p) {
  uint64_t v;
  __builtin_memcpy(&v, p, 8);
  return v;
}
inline void Put64(uint8_t* p, uint64_t v) { __builtin_memcpy(p, &v, 8); }

// Rewrites a record's stored checksum so that it matches its bytes: lets the
// fuzzer reach the checks behind the checksum (the checksum itself is proven
// by the unit tests). Does nothing to buffers shorter than a header.
inline void RepairRecordChecksum(uint8_t* rec, size_t size) {
  if (size >= 40) Put64(rec, XXH3_64bits(rec + 8, size - 8));
}

}  // namespace imagepack::fuzz
