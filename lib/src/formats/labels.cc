#include "formats/labels.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "base/limits.h"
#include "formats/text.h"

namespace imagepack::internal {

RawLabel LabelFromText(const std::string& text) {
  RawLabel l;
  const std::string t = TrimSpace(text);
  if (t.empty()) return l;
  l.present = true;
  int64_t v = 0;
  const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; }) && r.ec == std::errc() &&
      r.ptr == t.data() + t.size()) {
    l.index = v;
  } else {
    l.is_name = true;
    l.name = t;
  }
  return l;
}

Status ResolveLabels(const std::vector<RawLabel>& raw, const std::vector<std::string>& where,
                     const std::vector<std::string>& fixed, std::vector<std::string>* classes,
                     std::vector<int32_t>* labels, std::vector<std::string>* why) {
  labels->assign(raw.size(), -1);
  why->assign(raw.size(), "");
  *classes = fixed;
  bool names = false;
  if (classes->empty()) {
    std::set<std::string> seen_names;
    std::set<int64_t> seen_indices;
    for (const auto& l : raw)
      if (l.present && l.is_name && CheckName(l.name, "class").ok()) seen_names.insert(l.name);
      else if (l.present && l.index >= 0) seen_indices.insert(l.index);
    if (!seen_names.empty()) {
      names = true;
      for (int64_t i : seen_indices) seen_names.insert(std::to_string(i));
      if (seen_names.size() > limits::kClasses)
        return Status::InvalidArgument("more than " + std::to_string(limits::kClasses) + " distinct class names");
      classes->assign(seen_names.begin(), seen_names.end());
    } else if (!seen_indices.empty()) {
      const int64_t max_index = *seen_indices.rbegin();
      const int64_t allowed = std::max<int64_t>(limits::kSparseClassFloor,
                                                limits::kSparseClassFactor * static_cast<int64_t>(seen_indices.size()));
      if (max_index >= allowed) {
        size_t first = 0;
        while (first < raw.size() && !(raw[first].present && !raw[first].is_name && raw[first].index == max_index))
          ++first;
        return Status::InvalidArgument(
            (first < where.size() ? where[first] + ": " : std::string()) + "label " + std::to_string(max_index) +
            " is far beyond the " + std::to_string(seen_indices.size()) +
            " distinct labels seen (it would make " + std::to_string(uint64_t(max_index) + 1) +
            " classes); name the classes with --classes FILE");
      }
      for (int64_t i = 0; i <= max_index; ++i) classes->push_back(std::to_string(i));
    }
  }
  std::map<std::string, int32_t> index_of;
  for (size_t i = 0; i < classes->size(); ++i) index_of.emplace((*classes)[i], static_cast<int32_t>(i));
  for (size_t i = 0; i < raw.size(); ++i) {
    const RawLabel& l = raw[i];
    if (!l.present) {
      (*why)[i] = "no label";
    } else if (Status bad = l.is_name ? CheckName(l.name, "class") : Status::Ok(); !bad.ok()) {
      (*why)[i] = bad.message();
    } else if (l.is_name || names) {
      const std::string key = l.is_name ? l.name : std::to_string(l.index);
      auto it = index_of.find(key);
      if (it == index_of.end()) (*why)[i] = "class '" + key + "' is not in the class list";
      else (*labels)[i] = it->second;
    } else if (l.index < 0 || l.index >= static_cast<int64_t>(classes->size())) {
      (*why)[i] = "label " + std::to_string(l.index) + " is not a class of the " + std::to_string(classes->size());
    } else {
      (*labels)[i] = static_cast<int32_t>(l.index);
    }
  }
  return Status::Ok();
}

Status ResolveLabelsUnless(bool none, const std::vector<RawLabel>& raw, const std::vector<std::string>& where,
                           const std::vector<std::string>& fixed, std::vector<std::string>* classes,
                           std::vector<int32_t>* labels, std::vector<std::string>* why) {
  if (!none) return ResolveLabels(raw, where, fixed, classes, labels, why);
  classes->clear();
  labels->assign(raw.size(), -1);
  why->assign(raw.size(), "");
  return Status::Ok();
}

}  // namespace imagepack::internal
