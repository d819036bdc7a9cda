// libFuzzer target: the tar member lister (lib/src/formats/tar.cc). Every
// member it lists lies inside the input; nothing throws or loops.
#include <cstring>

#include "formats/tar.h"
#include "fuzz_util.h"

using namespace imagepack;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto read = [&](void* buf, size_t n, uint64_t at) -> Status {
    if (at > size || n > size - at) return Status::Corruption("short read");
    std::memcpy(buf, data + at, n);
    return Status::Ok();
  };
  auto r = internal::ListTar(read, size, "fuzz.tar");
  if (!r.ok()) {
    FUZZ_CHECK(r.status().message().find("fuzz.tar") != std::string::npos);
    return 0;
  }
  for (const auto& m : r.value()) {
    FUZZ_CHECK(m.offset <= size && m.size <= size - m.offset);
    FUZZ_CHECK(m.offset % 512 == 0);
  }
  return 0;
}
