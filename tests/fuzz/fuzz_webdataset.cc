// libFuzzer target: WebDataset's rules over a shard (lib/src/formats/
// webdataset.cc, after formats/tar.cc lists it): samples are grouped with
// every member inside the shard and keyed as their names say, and each
// sample's .json parses or is refused naming the sample.
#include <cstring>
#include <string_view>

#include "base/limits.h"
#include "formats/webdataset.h"
#include "fuzz_util.h"

using namespace imagepack;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto read = [&](void* buf, size_t n, uint64_t at) -> Status {
    if (at > size || n > size - at) return Status::Corruption("short read");
    std::memcpy(buf, data + at, n);
    return Status::Ok();
  };
  auto members = internal::ListTar(read, size, "fuzz.tar");
  if (!members.ok()) return 0;
  size_t grouped = 0;
  for (const auto& s : internal::GroupSamples(members.value())) {
    grouped += s.parts.size();
    for (const auto& [ext, m] : s.parts) {
      FUZZ_CHECK(m.offset <= size && m.size <= size - m.offset);
      FUZZ_CHECK(internal::KeyAndExtension(m.name) == std::make_pair(s.key, ext));
    }
    auto json = s.parts.find("json");
    if (json == s.parts.end() || json->second.size > internal::limits::kValueMember) continue;
    auto j = internal::ParseSampleJson(
        std::string_view(reinterpret_cast<const char*>(data + json->second.offset), json->second.size), s.key);
    if (j.ok()) FUZZ_CHECK(j->values.is_object() && j->index >= -1);
  }
  FUZZ_CHECK(grouped <= members->size());
  return 0;
}
