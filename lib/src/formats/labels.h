// Class labels as other tools write them (a .cls member, a .json "label",
// a pickled int or str, a manifest or CSV cell, a labels-file line), and
// the one rule that turns a dataset's labels into a class list and
// indices. Internal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "imagepack/status.h"

namespace imagepack::internal {

// A label as written in a sample: an index, or a class name.
struct RawLabel {
  bool present = false;
  bool is_name = false;
  int64_t index = -1;
  std::string name;
};

// Text (trimmed): decimal digits are an index, anything else a name; empty
// is no label.
RawLabel LabelFromText(const std::string& text);
inline RawLabel LabelFromIndex(int64_t i) { return {true, false, i, ""}; }

// The class list and each label's index, by one rule:
//  - `fixed` (from --classes, or the database's own) when not empty: names
//    map through it, indices must fall inside it;
//  - else, when any label is a name: the sorted distinct names (an index
//    label is then looked up as a name too, so "7" and 7 agree);
//  - else the indices: classes "0".."max". The largest index may be at most
//    max(limits::kSparseClassFloor, kSparseClassFactor x the distinct
//    indices seen): beyond that the whole resolution fails with an error
//    naming where[i] of the first such label and saying to pass --classes
//    (one typo must not size a class table of 10^9 names).
// A class name must pass CheckName (UTF-8, no NUL or line break).
// A label that cannot be placed gets -1 and its reason in why[i]; absent
// labels get "no label". `where` names each label's origin (file, line,
// shard:key).
Status ResolveLabels(const std::vector<RawLabel>& raw, const std::vector<std::string>& where,
                     const std::vector<std::string>& fixed, std::vector<std::string>* classes,
                     std::vector<int32_t>* labels, std::vector<std::string>* why);

// ResolveLabels, or with `none` (a class-less dataset) no class list and
// every label -1.
Status ResolveLabelsUnless(bool none, const std::vector<RawLabel>& raw, const std::vector<std::string>& where,
                           const std::vector<std::string>& fixed, std::vector<std::string>* classes,
                           std::vector<int32_t>* labels, std::vector<std::string>* why);

}  // namespace imagepack::internal
