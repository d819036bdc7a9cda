// libFuzzer target: labels as text and the one class-list rule
// (lib/src/formats/labels.cc). Each line of the input is one sample's
// label; a resolution that succeeds gives every placed label an index
// inside the class list and never more classes than the budget allows.
#include <set>
#include <string>
#include <vector>

#include "formats/labels.h"
#include "base/limits.h"
#include "fuzz_util.h"

using namespace imagepack;
using namespace imagepack::internal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<RawLabel> raw;
  std::vector<std::string> where;
  std::vector<std::string> fixed;
  size_t at = 0;
  // A first line "@a,b,c" is a fixed class list.
  if (!text.empty() && text[0] == '@') {
    size_t end = text.find('\n');
    std::string list = text.substr(1, end == std::string::npos ? std::string::npos : end - 1);
    for (size_t p = 0; p <= list.size();) {
      size_t c = list.find(',', p);
      if (c == std::string::npos) c = list.size();
      fixed.push_back(list.substr(p, c - p));
      p = c + 1;
    }
    at = end == std::string::npos ? text.size() : end + 1;
  }
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    raw.push_back(LabelFromText(text.substr(at, end - at)));
    where.push_back("line " + std::to_string(raw.size()));
    at = end + 1;
  }
  std::vector<std::string> classes, why;
  std::vector<int32_t> labels;
  Status st = ResolveLabels(raw, where, fixed, &classes, &labels, &why);
  if (!st.ok()) return 0;
  FUZZ_CHECK(labels.size() == raw.size() && why.size() == raw.size());
  std::set<int64_t> distinct;
  for (const auto& l : raw)
    if (l.present && !l.is_name) distinct.insert(l.index);
  if (fixed.empty())
    FUZZ_CHECK(static_cast<int64_t>(classes.size()) <=
               std::max<int64_t>(limits::kSparseClassFloor, limits::kSparseClassFactor * int64_t(raw.size())));
  for (size_t i = 0; i < raw.size(); ++i) {
    FUZZ_CHECK((labels[i] >= 0) == why[i].empty());
    if (labels[i] >= 0) FUZZ_CHECK(static_cast<size_t>(labels[i]) < classes.size());
  }
  return 0;
}
