#include "imagepack/classes.h"

#include <unordered_map>

namespace imagepack {
namespace {

// "'a', 'b', 'c' and 2 more"
std::string Names(const std::vector<std::string>& names, size_t shown = 3) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < shown; ++i) out += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > shown) out += " and " + std::to_string(names.size() - shown) + " more";
  return out;
}

// The first name that appears twice in `names`, or "".
std::string FirstDuplicate(const std::vector<std::string>& names) {
  std::unordered_map<std::string, size_t> seen;
  for (const auto& n : names)
    if (!seen.emplace(n, 0).second) return n;
  return "";
}

}  // namespace

std::string ClassMap::Describe() const {
  if (identity()) return "the same " + std::to_string(reference_classes) + " classes";
  std::string out = std::to_string(other_classes) + " of the " + std::to_string(reference_classes) +
                    " classes, matched by name";
  bool reordered = false;
  for (size_t i = 1; i < to_reference.size(); ++i)
    if (to_reference[i] < to_reference[i - 1]) reordered = true;
  if (reordered) out += " (order differs)";
  if (!absent.empty()) out += "; absent: " + Names(absent);
  return out;
}

Result<ClassMap> MatchClasses(const std::vector<std::string>& reference, const std::string& reference_name,
                              const std::vector<std::string>& other, const std::string& other_name,
                              const std::string& what) {
  ClassMap m;
  m.reference_classes = static_cast<int64_t>(reference.size());
  m.other_classes = static_cast<int64_t>(other.size());
  if (reference == other) return m;
  for (const auto* list : {&reference, &other}) {
    const std::string dup = FirstDuplicate(*list);
    if (!dup.empty())
      return Status::InvalidArgument(
          (list == &reference ? reference_name : other_name) + " names " + what + " '" + dup +
          "' twice, and its " + what + " differ from " + (list == &reference ? other_name : reference_name) +
          "'s: they cannot be matched by name");
  }
  std::unordered_map<std::string, int64_t> index;
  for (size_t i = 0; i < reference.size(); ++i) index.emplace(reference[i], static_cast<int64_t>(i));
  std::vector<bool> present(reference.size(), false);
  m.to_reference.resize(other.size());
  for (size_t i = 0; i < other.size(); ++i) {
    auto it = index.find(other[i]);
    if (it == index.end())
      return Status::InvalidArgument(
          other_name + "'s " + what + " differ from " + reference_name + "'s, and '" + other[i] + "' (label " +
          std::to_string(i) + " of " + std::to_string(other.size()) + ") is not among the " +
          std::to_string(reference.size()) + " " + what + " of " + reference_name + " (" + Names(reference) +
          "): a model trained on " + reference_name + " cannot predict it. Pack " + other_name +
          " with --classes FILE listing " + reference_name + "'s " + what +
          " in their order (records of other classes are then skipped and listed), or train on data that has '" +
          other[i] + "'");
    m.to_reference[i] = it->second;
    present[static_cast<size_t>(it->second)] = true;
  }
  for (size_t i = 0; i < reference.size(); ++i)
    if (!present[i]) m.absent.push_back(reference[i]);
  return m;
}

}  // namespace imagepack
