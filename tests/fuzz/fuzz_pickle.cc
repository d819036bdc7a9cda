// libFuzzer target: the safe pickle subset (lib/src/formats/pickle.cc).
// Every value's range lies inside the input and every index inside the
// arena; a walk of the whole value graph (shared and cyclic values
// included) terminates.
#include <vector>

#include "formats/pickle.h"
#include "fuzz_util.h"

using namespace imagepack;
using internal::Pickle;
using internal::PickleValue;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = Pickle::Parse(data, size);
  if (!r.ok()) {
    FUZZ_CHECK(r.status().message().find("pickle") != std::string::npos);
    return 0;
  }
  // Iterative walk, bounded (shared and cyclic values are visited again).
  const PickleValue* v = &r->root();
  FUZZ_CHECK(v->kind <= PickleValue::kSeq);
  std::vector<const PickleValue*> stack{v};
  size_t visited = 0;
  while (!stack.empty() && visited < 10 * size + 10) {
    const PickleValue* x = stack.back();
    stack.pop_back();
    ++visited;
    if (x->kind == PickleValue::kBytes || x->kind == PickleValue::kStr)
      FUZZ_CHECK(x->off <= size && x->len <= size - x->off);
    if (x->kind == PickleValue::kSeq && visited < size + 10)
      for (uint32_t i : x->items) stack.push_back(&r->at(i));
  }
  return 0;
}
