#include "formats/pickle.h"

#include <cstdio>
#include <string>
#include <unordered_map>

#include "base/limits.h"

namespace imagepack::internal {

namespace {

constexpr uint32_t kMark = UINT32_MAX;       // a MARK on the stack
constexpr uint32_t kUnset = UINT32_MAX - 1;  // a memo id never set

// The pickle machine over p[0, n): a value table, a stack of indices into
// it (kMark for a MARK) and the memo. Each opcode group has its method; an
// error names the opcode's trouble and the byte.
class Unpickler {
 public:
  Unpickler(const uint8_t* p, size_t n, std::vector<PickleValue>* values) : p_(p), n_(n), values_(*values) {
    values_.reserve(8);
  }

  // Runs to STOP: the root value's index, or the first error.
  Result<uint32_t> Run() {
    while (at_ < n_) {
      if (values_.size() >= limits::kPickleValues || stack_.size() >= limits::kPickleValues)
        return Bad("more than " + std::to_string(limits::kPickleValues) + " values (budget)");
      const uint8_t op = p_[at_++];
      if (op == '.') {  // STOP
        if (stack_.size() != 1 || stack_.back() == kMark)
          return Bad("stop with " + std::to_string(stack_.size()) + " values");
        return stack_.back();
      }
      Status st = Step(op);
      if (!st.ok()) return st;
    }
    return Bad("no STOP");
  }

 private:
  Status Step(uint8_t op) {
    switch (op) {
      case 0x80:  // PROTO
        if (!Need(1)) return Bad("truncated");
        if (p_[at_] < 2) return Bad("protocol below 2");
        ++at_;
        return Status::Ok();
      case 0x95:  // FRAME
        if (!Need(8)) return Bad("truncated");
        at_ += 8;
        return Status::Ok();
      case 'C': case 'B': case 0x8e: case 0x96:  // SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8
      case 'X': case 0x8c: case 0x8d:            // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
        return Text(op);
      case 'K': case 'M': case 'J': case 0x8a:  // BININT1, BININT2, BININT, LONG1
      case 'N': case 0x88: case 0x89:           // NONE, NEWTRUE, NEWFALSE
        return Scalar(op);
      case 0x94: case 'q': case 'r': case 'h': case 'j':  // MEMOIZE, BINPUT, LONG_BINPUT, BINGET, LONG_BINGET
        return Memo(op);
      case ')': case ']': case 0x85: case 0x86: case 0x87:  // EMPTY_TUPLE, EMPTY_LIST, TUPLE1..3
      case '(': case '0': case '1':                         // MARK, POP, POP_MARK
      case 't': case 'l': case 'a': case 'e':               // TUPLE, LIST, APPEND, APPENDS
        return Sequence(op);
      case 'c': case 0x93: case 'R': case 'b': case 0x81: case 0x92: case 'i': case 'o':
        return Bad("refusing to call code (opcode " + Hex(op) +
                   "): only (image bytes, label) values are read; e.g. numpy labels must be plain ints");
      default: return Bad("opcode " + Hex(op) + " is outside the accepted subset");
    }
  }

  // Bytes and strings: a range of the input, never copied.
  Status Text(uint8_t op) {
    const bool is_str = op == 'X' || op == 0x8c || op == 0x8d;
    const size_t w = (op == 'C' || op == 0x8c) ? 1 : (op == 'B' || op == 'X') ? 4 : 8;
    if (!Need(w)) return Bad("truncated");
    const uint64_t len = Le(w);
    if (len > n_ - at_)
      return Bad(std::string(is_str ? "string" : "bytes") + " of " + std::to_string(len) + " bytes runs past the end");
    PickleValue v;
    v.kind = is_str ? PickleValue::kStr : PickleValue::kBytes;
    v.off = at_;
    v.len = static_cast<size_t>(len);
    at_ += static_cast<size_t>(len);
    Push(std::move(v));
    return Status::Ok();
  }

  // Integers, None, booleans.
  Status Scalar(uint8_t op) {
    PickleValue v;
    if (op == 'N') {
      Push(std::move(v));
      return Status::Ok();
    }
    if (op == 0x88 || op == 0x89) {
      v.kind = PickleValue::kBool;
      v.i = op == 0x88;
      Push(std::move(v));
      return Status::Ok();
    }
    v.kind = PickleValue::kInt;
    if (op == 0x8a) {  // LONG1: a little-endian two's complement of w bytes
      if (!Need(1)) return Bad("truncated");
      const size_t w = p_[at_++];
      if (w > 8) return Bad("integer wider than 64 bits");
      if (!Need(w)) return Bad("truncated");
      uint64_t u = w ? Le(w) : 0;
      if (w > 0 && w < 8 && ((u >> (8 * w - 1)) & 1)) u |= ~uint64_t(0) << (8 * w);
      v.i = static_cast<int64_t>(u);
    } else {
      const size_t w = op == 'K' ? 1 : op == 'M' ? 2 : 4;
      if (!Need(w)) return Bad("truncated");
      const uint64_t u = Le(w);
      v.i = op == 'J' ? static_cast<int32_t>(static_cast<uint32_t>(u)) : static_cast<int64_t>(u);
    }
    Push(std::move(v));
    return Status::Ok();
  }

  // The memo: a GET pushes the same value again, shared, not copied.
  Status Memo(uint8_t op) {
    if (op == 'h' || op == 'j') {
      const size_t w = op == 'h' ? 1 : 4;
      if (!Need(w)) return Bad("truncated");
      const uint32_t v = MemoGet(Le(w));
      if (v == kUnset) return Bad("memo entry not set");
      stack_.push_back(v);
      return Status::Ok();
    }
    const size_t w = op == 0x94 ? 0 : op == 'q' ? 1 : 4;
    if (!Need(w)) return Bad("truncated");
    if (stack_.empty() || stack_.back() == kMark) return Bad("memo of nothing");
    MemoPut(w == 0 ? memo_count_ : Le(w), stack_.back());
    return Status::Ok();
  }

  // Tuples and lists, marks and pops.
  Status Sequence(uint8_t op) {
    PickleValue v;
    v.kind = PickleValue::kSeq;
    std::vector<uint32_t> xs;
    switch (op) {
      case ')': case ']': Push(std::move(v)); return Status::Ok();
      case 0x85: case 0x86: case 0x87: {
        const size_t k = op - 0x84u;
        if (stack_.size() < k) return Bad("tuple of missing values");
        v.items.assign(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
        for (uint32_t x : v.items)
          if (x == kMark) return Bad("tuple of a mark");
        stack_.resize(stack_.size() - k);
        Push(std::move(v));
        return Status::Ok();
      }
      case '(': stack_.push_back(kMark); return Status::Ok();
      case '0':
        if (stack_.empty()) return Bad("pop of nothing");
        stack_.pop_back();
        return Status::Ok();
      case '1': return PopToMark(&xs) ? Status::Ok() : Bad("no mark");
      case 't': case 'l':
        if (!PopToMark(&v.items)) return Bad("no mark");
        Push(std::move(v));
        return Status::Ok();
      case 'a': {
        if (stack_.size() < 2 || stack_.back() == kMark) return Bad("append of nothing");
        const uint32_t x = stack_.back();
        stack_.pop_back();
        PickleValue* list = TopSeq();
        if (!list) return Bad("append to a non-list");
        list->items.push_back(x);
        return Status::Ok();
      }
      default: {  // 'e', APPENDS
        if (!PopToMark(&xs)) return Bad("no mark");
        PickleValue* list = TopSeq();
        if (!list) return Bad("appends to a non-list");
        list->items.insert(list->items.end(), xs.begin(), xs.end());
        return Status::Ok();
      }
    }
  }

  bool Need(size_t k) const { return k <= n_ - at_; }
  uint64_t Le(size_t k) {
    uint64_t v = 0;
    for (size_t b = 0; b < k; ++b) v |= uint64_t(p_[at_ + b]) << (8 * b);
    at_ += k;
    return v;
  }
  Status Bad(const std::string& why) const {
    return Status::InvalidArgument("pickle: " + why + " at byte " + std::to_string(at_));
  }
  static std::string Hex(uint8_t op) {
    char b[8];
    std::snprintf(b, sizeof b, "0x%02x", op);
    return b;
  }
  void Push(PickleValue v) {
    values_.push_back(std::move(v));
    stack_.push_back(static_cast<uint32_t>(values_.size() - 1));
  }
  PickleValue* TopSeq() {
    if (stack_.empty() || stack_.back() == kMark || values_[stack_.back()].kind != PickleValue::kSeq) return nullptr;
    return &values_[stack_.back()];
  }
  bool PopToMark(std::vector<uint32_t>* items) {
    for (size_t k = stack_.size(); k-- > 0;)
      if (stack_[k] == kMark) {
        items->assign(stack_.begin() + static_cast<std::ptrdiff_t>(k) + 1, stack_.end());
        stack_.resize(k);
        return true;
      }
    return false;
  }
  // Memo ids are small and dense as Python writes them (MEMOIZE counts up):
  // a vector for those, a map for any other id a file may name.
  void MemoPut(uint64_t id, uint32_t v) {
    if (id < 4096 + n_) {
      if (id >= memo_small_.size()) memo_small_.resize(id + 1, kUnset);
      memo_count_ += memo_small_[id] == kUnset;
      memo_small_[id] = v;
    } else {
      memo_count_ += memo_other_.insert_or_assign(id, v).second;
    }
  }
  uint32_t MemoGet(uint64_t id) const {
    if (id < memo_small_.size()) return memo_small_[id];
    auto it = memo_other_.find(id);
    return it == memo_other_.end() ? kUnset : it->second;
  }

  const uint8_t* p_;
  size_t n_;
  size_t at_ = 0;
  std::vector<PickleValue>& values_;
  std::vector<uint32_t> stack_;
  std::vector<uint32_t> memo_small_;
  std::unordered_map<uint64_t, uint32_t> memo_other_;
  size_t memo_count_ = 0;
};

}  // namespace

Result<Pickle> Pickle::Parse(const uint8_t* p, size_t n) {
  Pickle out;
  out.data_ = p;
  Unpickler machine(p, n, &out.values_);
  auto root = machine.Run();
  if (!root.ok()) return root.status();
  out.root_ = root.value();
  return out;
}

}  // namespace imagepack::internal
