#include "formats/pickle.h"

#include <cstdio>
#include <string>
#include <unordered_map>

#include "formats/limits.h"

namespace imagepack::internal {

Result<Pickle> Pickle::Parse(const uint8_t* p, size_t n) {
  Pickle out;
  out.data_ = p;
  std::vector<PickleValue>& values = out.values_;
  constexpr uint32_t kMark = UINT32_MAX;
  std::vector<uint32_t> stack;  // indices into values; kMark for a MARK
  // Memo ids are small and dense as Python writes them (MEMOIZE counts up):
  // a vector for those, a map for any other id a file may name.
  std::vector<uint32_t> memo_small;
  std::unordered_map<uint64_t, uint32_t> memo_other;
  constexpr uint32_t kUnset = UINT32_MAX - 1;
  size_t memo_count = 0;
  auto memo_put = [&](uint64_t id, uint32_t v) {
    if (id < 4096 + n) {
      if (id >= memo_small.size()) memo_small.resize(id + 1, kUnset);
      memo_count += memo_small[id] == kUnset;
      memo_small[id] = v;
    } else {
      memo_count += memo_other.insert_or_assign(id, v).second;
    }
  };
  auto memo_get = [&](uint64_t id) -> uint32_t {
    if (id < memo_small.size()) return memo_small[id];
    auto it = memo_other.find(id);
    return it == memo_other.end() ? kUnset : it->second;
  };
  values.reserve(8);
  size_t at = 0;
  auto need = [&](size_t k) { return k <= n - at; };
  auto le = [&](size_t k) {
    uint64_t v = 0;
    for (size_t b = 0; b < k; ++b) v |= uint64_t(p[at + b]) << (8 * b);
    at += k;
    return v;
  };
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("pickle: " + why + " at byte " + std::to_string(at));
  };
  auto make = [&](PickleValue v) -> uint32_t {
    values.push_back(std::move(v));
    return static_cast<uint32_t>(values.size() - 1);
  };
  auto top_seq = [&]() -> PickleValue* {
    if (stack.empty() || stack.back() == kMark || values[stack.back()].kind != PickleValue::kSeq) return nullptr;
    return &values[stack.back()];
  };
  auto pop_to_mark = [&](std::vector<uint32_t>* items) -> bool {
    for (size_t k = stack.size(); k-- > 0;)
      if (stack[k] == kMark) {
        items->assign(stack.begin() + static_cast<std::ptrdiff_t>(k) + 1, stack.end());
        stack.resize(k);
        return true;
      }
    return false;
  };
  while (at < n) {
    if (values.size() >= limits::kPickleValues || stack.size() >= limits::kPickleValues)
      return bad("more than " + std::to_string(limits::kPickleValues) + " values (budget)");
    const uint8_t op = p[at++];
    switch (op) {
      case 0x80:  // PROTO
        if (!need(1)) return bad("truncated");
        if (p[at] < 2) return bad("protocol below 2");
        ++at;
        break;
      case 0x95:  // FRAME
        if (!need(8)) return bad("truncated");
        at += 8;
        break;
      case 'C': case 'B': case 0x8e: case 0x96:  // SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8
      case 'X': case 0x8c: case 0x8d: {           // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
        const bool is_str = op == 'X' || op == 0x8c || op == 0x8d;
        const size_t w = (op == 'C' || op == 0x8c) ? 1 : (op == 'B' || op == 'X') ? 4 : 8;
        if (!need(w)) return bad("truncated");
        const uint64_t len = le(w);
        if (len > n - at) return bad(std::string(is_str ? "string" : "bytes") + " of " + std::to_string(len) +
                                     " bytes runs past the end");
        PickleValue v;
        v.kind = is_str ? PickleValue::kStr : PickleValue::kBytes;
        v.off = at;
        v.len = static_cast<size_t>(len);
        at += static_cast<size_t>(len);
        stack.push_back(make(std::move(v)));
        break;
      }
      case 'K': case 'M': case 'J': {  // BININT1, BININT2, BININT
        const size_t w = op == 'K' ? 1 : op == 'M' ? 2 : 4;
        if (!need(w)) return bad("truncated");
        PickleValue v;
        v.kind = PickleValue::kInt;
        const uint64_t u = le(w);
        v.i = op == 'J' ? static_cast<int32_t>(static_cast<uint32_t>(u)) : static_cast<int64_t>(u);
        stack.push_back(make(std::move(v)));
        break;
      }
      case 0x8a: {  // LONG1
        if (!need(1)) return bad("truncated");
        const size_t w = p[at++];
        if (w > 8) return bad("integer wider than 64 bits");
        if (!need(w)) return bad("truncated");
        uint64_t u = w ? le(w) : 0;
        if (w > 0 && w < 8 && ((u >> (8 * w - 1)) & 1)) u |= ~uint64_t(0) << (8 * w);
        PickleValue v;
        v.kind = PickleValue::kInt;
        v.i = static_cast<int64_t>(u);
        stack.push_back(make(std::move(v)));
        break;
      }
      case 'N': stack.push_back(make(PickleValue{})); break;
      case 0x88: case 0x89: {  // NEWTRUE, NEWFALSE
        PickleValue v;
        v.kind = PickleValue::kBool;
        v.i = op == 0x88;
        stack.push_back(make(std::move(v)));
        break;
      }
      case 0x94:  // MEMOIZE
        if (stack.empty() || stack.back() == kMark) return bad("memo of nothing");
        memo_put(memo_count, stack.back());
        break;
      case 'q': case 'r': {  // BINPUT, LONG_BINPUT
        const size_t w = op == 'q' ? 1 : 4;
        if (!need(w)) return bad("truncated");
        if (stack.empty() || stack.back() == kMark) return bad("memo of nothing");
        memo_put(le(w), stack.back());
        break;
      }
      case 'h': case 'j': {  // BINGET, LONG_BINGET: the same value, shared
        const size_t w = op == 'h' ? 1 : 4;
        if (!need(w)) return bad("truncated");
        const uint32_t v = memo_get(le(w));
        if (v == kUnset) return bad("memo entry not set");
        stack.push_back(v);
        break;
      }
      case ')': case ']': {  // EMPTY_TUPLE, EMPTY_LIST
        PickleValue v;
        v.kind = PickleValue::kSeq;
        stack.push_back(make(std::move(v)));
        break;
      }
      case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
        const size_t k = op - 0x84u;
        if (stack.size() < k) return bad("tuple of missing values");
        PickleValue v;
        v.kind = PickleValue::kSeq;
        v.items.assign(stack.end() - static_cast<std::ptrdiff_t>(k), stack.end());
        for (uint32_t x : v.items)
          if (x == kMark) return bad("tuple of a mark");
        stack.resize(stack.size() - k);
        stack.push_back(make(std::move(v)));
        break;
      }
      case '(': stack.push_back(kMark); break;
      case '0':  // POP
        if (stack.empty()) return bad("pop of nothing");
        stack.pop_back();
        break;
      case '1': {  // POP_MARK
        std::vector<uint32_t> dropped;
        if (!pop_to_mark(&dropped)) return bad("no mark");
        break;
      }
      case 't': case 'l': {  // TUPLE, LIST
        PickleValue v;
        v.kind = PickleValue::kSeq;
        if (!pop_to_mark(&v.items)) return bad("no mark");
        stack.push_back(make(std::move(v)));
        break;
      }
      case 'a': {  // APPEND
        if (stack.size() < 2 || stack.back() == kMark) return bad("append of nothing");
        const uint32_t x = stack.back();
        stack.pop_back();
        PickleValue* list = top_seq();
        if (!list) return bad("append to a non-list");
        list->items.push_back(x);
        break;
      }
      case 'e': {  // APPENDS
        std::vector<uint32_t> xs;
        if (!pop_to_mark(&xs)) return bad("no mark");
        PickleValue* list = top_seq();
        if (!list) return bad("appends to a non-list");
        list->items.insert(list->items.end(), xs.begin(), xs.end());
        break;
      }
      case '.':  // STOP
        if (stack.size() != 1 || stack.back() == kMark) return bad("stop with " + std::to_string(stack.size()) + " values");
        out.root_ = stack.back();
        return out;
      case 'c': case 0x93: case 'R': case 'b': case 0x81: case 0x92: case 'i': case 'o': {
        char b[8];
        std::snprintf(b, sizeof b, "0x%02x", op);
        return bad(std::string("refusing to call code (opcode ") + b +
                   "): only (image bytes, label) values are read; e.g. numpy labels must be plain ints");
      }
      default: {
        char b[8];
        std::snprintf(b, sizeof b, "0x%02x", op);
        return bad(std::string("opcode ") + b + " is outside the accepted subset");
      }
    }
  }
  return bad("no STOP");
}

}  // namespace imagepack::internal
