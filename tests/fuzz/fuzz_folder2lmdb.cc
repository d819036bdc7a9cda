// libFuzzer target: folder2lmdb's values (lib/src/formats/folder2lmdb.cc):
// the input as a record value, a __keys__ list and a __len__. A record's
// image lies inside the value; nothing throws, loops or aborts.
#include "formats/folder2lmdb.h"
#include "fuzz_util.h"

using namespace imagepack;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto v = internal::ParseRecordValue(data, size);
  if (v.ok()) FUZZ_CHECK(v->image_offset <= size && v->image_size <= size - v->image_offset);
  else FUZZ_CHECK(!v.status().message().empty());
  auto keys = internal::ParseKeyList(data, size);
  if (keys.ok())
    for (const auto& k : keys.value()) FUZZ_CHECK(!internal::KeyText(k).empty());
  (void)internal::ParseLen(data, size);
  return 0;
}
