// The safe subset of Python's pickle (protocols 2-5) that folder2lmdb-style
// LMDBs hold: bytes, str, int, None, bool, tuples and lists. Anything that
// names or calls code (GLOBAL, REDUCE, BUILD, ...) is refused: no pickle is
// executed. Values live in one arena and refer to each other by index, so a
// memo entry used many times is shared, as Python's unpickler shares it
// (never copied), and nothing recurses: neither nesting nor a list that
// holds itself can exhaust the stack. Budgets: base/limits.h. Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "imagepack/status.h"

namespace imagepack::internal {

struct PickleValue {
  enum Kind : uint8_t { kBytes, kStr, kInt, kNone, kBool, kSeq } kind = kNone;
  size_t off = 0, len = 0;    // kBytes, kStr: a range of the input
  int64_t i = 0;              // kInt, kBool
  std::vector<uint32_t> items;  // kSeq: indices into Pickle::values
};

class Pickle {
 public:
  // Runs the pickle in `data` (which must outlive the result's ranges).
  // Errors say which opcode and byte.
  static Result<Pickle> Parse(const uint8_t* data, size_t size);

  const PickleValue& root() const { return values_[root_]; }
  const PickleValue& at(uint32_t i) const { return values_[i]; }
  // The bytes of a kBytes or kStr value.
  std::string_view text(const PickleValue& v) const {
    return {reinterpret_cast<const char*>(data_) + v.off, v.len};
  }

 private:
  const uint8_t* data_ = nullptr;
  std::vector<PickleValue> values_;
  uint32_t root_ = 0;
};

}  // namespace imagepack::internal
