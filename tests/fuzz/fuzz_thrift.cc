// libFuzzer target: the Thrift compact-protocol reader alone
// (lib/src/formats/parquet.cc), through its two entry points: a footer
// (FileMetaData) and a page header, without the file around them. The
// first byte chooses which (bit 0) and, for a footer, the size of the file
// it came from (the rest of the byte, in MiB beyond the footer: the column
// chunks' sizes must fit in it). The rest is the Thrift bytes.
//
// An independent walk of the same bytes (a loop with a stack of its own,
// no recursion) measures how deep the first structure's containers nest
// and where it ends. What must hold: a structure nested deeper than
// limits::kThriftDepth (every structure, list, set and map counted) is an
// error, never a recursion; what the reader accepts the walk accepts too,
// no deeper than the budget, and a page header's size is where the walk
// ends; a parsed footer is within its budgets.
#include <cstring>
#include <string>
#include <vector>

#include "base/limits.h"
#include "formats/parquet.h"
#include "fuzz_util.h"

using namespace imagepack;

namespace {

namespace limits = internal::limits;

enum : int { kStop = 0, kTrue = 1, kFalse = 2, kByte = 3, kI16 = 4, kI32 = 5, kI64 = 6, kDouble = 7, kBinary = 8,
             kList = 9, kSet = 10, kMap = 11, kStruct = 12 };

// The walk's verdict: ok (the first structure is whole), the deepest
// nesting reached before the end or an error, and where it ended.
struct Walk {
  bool ok = false;
  int deepest = 0;
  size_t end = 0;
};

// Compact protocol, as lenient as the reader or more (so that whatever the
// reader accepts, the walk accepts): a varint of at most 10 bytes, any
// field id, any count. Each container is one frame: a structure reads
// fields until STOP; a list, set or map `left` elements (a map two each).
Walk WalkStruct(const uint8_t* d, size_t size) {
  struct Frame {
    bool structure;
    int elem[2];    // element types (a map: key, value)
    uint64_t left;  // elements still to read (a map: keys and values)
    uint64_t at = 0;
  };
  std::vector<Frame> stack;
  Walk w;
  size_t pos = 0;
  auto varint = [&](uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos >= size) return false;
      const uint8_t b = d[pos++];
      if (shift < 64) *v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  auto open = [&](Frame f) {
    stack.push_back(f);
    if (int(stack.size()) > w.deepest) w.deepest = int(stack.size());
  };
  // Reads one value of `type` (in a container: a bool is a byte), opening
  // a frame for a container. False on an error.
  auto value = [&](int type, bool in_container) -> bool {
    uint64_t n = 0;
    switch (type) {
      case kTrue:
      case kFalse:
        if (!in_container) return true;
        [[fallthrough]];
      case kByte:
        if (pos >= size) return false;
        ++pos;
        return true;
      case kI16:
      case kI32:
      case kI64: return varint(&n);
      case kDouble:
        if (size - pos < 8) return false;
        pos += 8;
        return true;
      case kBinary:
        if (!varint(&n) || n > size - pos) return false;
        pos += size_t(n);
        return true;
      case kList:
      case kSet: {
        open({false, {0, 0}, 0});
        if (pos >= size) return false;
        const uint8_t b = d[pos++];
        n = b >> 4;
        if (n == 15 && !varint(&n)) return false;
        stack.back().elem[0] = stack.back().elem[1] = b & 0x0f;
        stack.back().left = n;
        return true;
      }
      case kMap: {
        open({false, {0, 0}, 0});
        if (!varint(&n)) return false;
        if (n > 0) {
          if (pos >= size) return false;
          stack.back().elem[0] = d[pos] >> 4;
          stack.back().elem[1] = d[pos] & 0x0f;
          ++pos;
        }
        stack.back().left = n > UINT64_MAX / 2 ? UINT64_MAX : 2 * n;
        return true;
      }
      case kStruct: open({true, {0, 0}, 0}); return true;
      default: return false;
    }
  };
  if (!value(kStruct, false)) return w;
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.structure) {
      if (pos >= size) return w;
      const uint8_t b = d[pos++];
      if (b == kStop) {
        stack.pop_back();
        continue;
      }
      uint64_t id;
      if ((b >> 4) == 0 && !varint(&id)) return w;
      if (!value(b & 0x0f, false)) return w;
    } else {
      if (f.left == 0) {
        stack.pop_back();
        continue;
      }
      // Each element takes a byte or more: a count past the bytes left
      // fails when they run out, as the reader's earlier check does.
      const int type = f.elem[f.at++ % 2];
      --f.left;
      if (!value(type, true)) return w;
    }
  }
  w.ok = true;
  w.end = pos;
  return w;
}

void Footer(const uint8_t* data, size_t size, uint64_t file_size) {
  const Walk w = WalkStruct(data, size);
  auto f = internal::ParseParquetFooter(data, size, file_size, "fuzz.thrift");
  if (w.deepest > limits::kThriftDepth) FUZZ_CHECK(!f.ok());
  if (!f.ok()) {
    FUZZ_CHECK(!f.status().message().empty());
    return;
  }
  FUZZ_CHECK(w.ok && w.deepest <= limits::kThriftDepth);
  FUZZ_CHECK(f->leaves.size() <= limits::kParquetSchema);
  FUZZ_CHECK(f->row_groups.size() <= limits::kParquetRowGroups);
  int64_t rows = 0;
  uint64_t chunk_bytes = 0;
  for (const auto& rg : f->row_groups) {
    FUZZ_CHECK(rg.columns.size() == f->leaves.size());
    FUZZ_CHECK(rg.num_rows >= 0 && rg.num_rows <= limits::kParquetGroupRows);
    rows += rg.num_rows;
    for (const auto& c : rg.columns) {
      FUZZ_CHECK(c.total_compressed_size >= 0);
      chunk_bytes += uint64_t(c.total_compressed_size);
    }
  }
  FUZZ_CHECK(rows <= limits::kParquetFileRows);
  FUZZ_CHECK(chunk_bytes <= file_size);
  for (const auto& leaf : f->leaves) {
    FUZZ_CHECK(!leaf.path.empty() && leaf.path.size() <= size_t(limits::kThriftDepth));
    FUZZ_CHECK(leaf.nodes.size() == leaf.path.size());
    FUZZ_CHECK(leaf.rep_defs.size() == size_t(leaf.max_rep) && leaf.max_def <= int(leaf.path.size()));
    for (size_t k = 1; k < leaf.rep_defs.size(); ++k) FUZZ_CHECK(leaf.rep_defs[k - 1] < leaf.rep_defs[k]);
    FUZZ_CHECK(leaf.logical().size() <= leaf.path.size());
  }
}

void PageHeader(const uint8_t* data, size_t size) {
  const Walk w = WalkStruct(data, size);
  size_t used = 0;
  auto h = internal::ParseParquetPageHeader(data, size, &used);
  if (w.deepest > limits::kThriftDepth) FUZZ_CHECK(!h.ok());
  if (!h.ok()) {
    FUZZ_CHECK(!h.status().message().empty());
    return;
  }
  FUZZ_CHECK(w.ok && w.deepest <= limits::kThriftDepth);
  FUZZ_CHECK(used == w.end && used <= size);
  FUZZ_CHECK(h->compressed_size >= 0 && h->uncompressed_size >= 0 && h->num_values >= 0);
  FUZZ_CHECK(h->def_length >= 0 && h->rep_length >= 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
  if (input_size == 0) return 0;
  const uint8_t* data = input + 1;
  const size_t size = input_size - 1;
  if (input[0] & 1) PageHeader(data, size);
  else Footer(data, size, 12 + uint64_t(size) + (uint64_t(input[0] >> 1) << 20));
  return 0;
}
