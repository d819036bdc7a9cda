// libFuzzer target: parquet files (lib/src/formats/parquet.cc,
// parquet_pages.cc). The first byte chooses what the rest is: a whole
// file (footer, then every column of every row group read page by page,
// flat ones by value, repeated ones by rows of lists), a page header, or
// level / DELTA_BINARY_PACKED bytes. Nothing read lies outside the file,
// every column gives its row group's rows or an error with a message, a
// row's lists nest in order, and budgets hold.
#include <cstring>
#include <string>
#include <vector>

#include "base/limits.h"
#include "formats/parquet.h"
#include "fuzz_util.h"

using namespace imagepack;

namespace {

// A row of lists: one list at the top, each list's elements a range of
// the next depth (or of the values) in order, the levels within budget.
void CheckRow(const internal::PqLeaf& leaf, const internal::PqRow& r) {
  FUZZ_CHECK(r.lists.size() == size_t(leaf.max_rep) && r.lists[0].size() == 1);
  FUZZ_CHECK(r.values.size() <= internal::limits::kParquetRowValues);
  for (size_t d = 0; d < r.lists.size(); ++d) {
    const size_t next = d + 1 < r.lists.size() ? r.lists[d + 1].size() : r.values.size();
    uint32_t at = 0;
    for (const auto& l : r.lists[d]) {
      FUZZ_CHECK(l.begin == at);
      FUZZ_CHECK(l.begin <= l.end && l.end <= next && (!l.null || l.begin == l.end));
      at = l.end;
    }
    FUZZ_CHECK(at == next);
  }
}

void ReadFile(const uint8_t* data, size_t size) {
  if (size < 12) return;
  auto n = internal::ParquetFooterLength(data, data + size - 8, size, "fuzz.parquet");
  if (!n.ok()) return;
  FUZZ_CHECK(*n <= size - 12);
  auto f = internal::ParseParquetFooter(data + size - 8 - *n, *n, size, "fuzz.parquet");
  if (!f.ok()) {
    FUZZ_CHECK(!f.status().message().empty());
    return;
  }
  FUZZ_CHECK(f->leaves.size() <= internal::limits::kParquetSchema);
  auto read = [&](void* buf, size_t k, uint64_t at) -> Status {
    FUZZ_CHECK(at <= size && k <= size - at);  // the reader checks every range first
    if (k > 0) std::memcpy(buf, data + at, k);
    return Status::Ok();
  };
  internal::PqBudget budget(size);
  for (const auto& rg : f->row_groups)
    for (size_t c = 0; c < f->leaves.size(); ++c) {
      const internal::PqLeaf& leaf = f->leaves[c];
      FUZZ_CHECK(leaf.rep_defs.size() == size_t(leaf.max_rep));
      int64_t seen = 0;
      Status st;
      if (leaf.max_rep > 0) {
        leaf.logical();  // never past the path
        st = internal::ReadParquetRows(read, size, budget, leaf, rg.columns[c], rg.num_rows, "fuzz",
                                       [&](int64_t row, const internal::PqRow& r) {
                                         FUZZ_CHECK(row == seen++);
                                         CheckRow(leaf, r);
                                         return Status::Ok();
                                       });
      } else {
        st = internal::ReadParquetColumn(read, size, budget, leaf, rg.columns[c], rg.num_rows, "fuzz",
                                         [&](int64_t row, const internal::PqValue& v) {
                                           FUZZ_CHECK(row == seen++);
                                           FUZZ_CHECK(v.null || v.p == nullptr || v.n <= size_t(1) << 30);
                                           return Status::Ok();
                                         });
      }
      FUZZ_CHECK(st.ok() ? seen == rg.num_rows : !st.message().empty());
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
  if (input_size == 0) return 0;
  const uint8_t* data = input + 1;
  const size_t size = input_size - 1;
  switch (input[0] % 3) {
    case 0: ReadFile(data, size); break;
    case 1: {
      size_t used = 0;
      auto h = internal::ParseParquetPageHeader(data, size, &used);
      if (h.ok()) FUZZ_CHECK(used <= size && h->compressed_size >= 0 && h->num_values >= 0);
      break;
    }
    default: {
      if (size < 1) break;
      std::vector<uint32_t> levels;
      if (internal::DecodeRleHybrid(data + 1, size - 1, data[0] % 34, 4096, &levels).ok())
        FUZZ_CHECK(levels.size() == 4096);
      std::vector<int64_t> ints;
      size_t used = 0;
      if (internal::DecodeDeltaBinaryPacked(data, size, 4096, &ints, &used).ok())
        FUZZ_CHECK(ints.size() <= 4096 && used <= size);
    }
  }
  return 0;
}
