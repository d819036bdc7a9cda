// One dataset's classes read as another's: a validation set, or a split
// packed apart, whose class list is not the training set's. The training
// data defines the classes; the other set's labels are matched to them by
// name, or refused naming the first class that cannot be matched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "imagepack/status.h"

namespace imagepack {

struct ClassMap {
  // Label in the other dataset -> label in the reference; empty when the
  // two lists are equal (nothing to map).
  std::vector<int64_t> to_reference;
  int64_t reference_classes = 0;
  int64_t other_classes = 0;
  // Reference classes the other dataset does not have (a validation set
  // may lack some; it then never tests them).
  std::vector<std::string> absent;

  bool identity() const { return to_reference.empty(); }
  // The label in the reference for `label` of the other dataset; negative
  // labels (unlabelled records) stay as they are.
  int64_t Map(int64_t label) const {
    if (to_reference.empty() || label < 0 || label >= static_cast<int64_t>(to_reference.size())) return label;
    return to_reference[static_cast<size_t>(label)];
  }
  // One line for a log: "the same 10 classes", "9 of the 10 classes,
  // matched by name (order differs; 1 absent: 'Bag')".
  std::string Describe() const;
};

// Matches `other`'s class names to `reference`'s. Equal lists: the
// identity. Otherwise every class of `other` must appear in `reference`
// (by exact name, each once in both lists): its labels then map to the
// reference's indices, whatever the order, and reference classes it lacks
// are listed in `absent`. A class of `other` that the reference does not
// have is an InvalidArgument naming it, its label, both datasets
// (`reference_name`, `other_name`: paths, for the message) and what to do.
// `what` names the lists in messages ("classes", "mask classes").
Result<ClassMap> MatchClasses(const std::vector<std::string>& reference, const std::string& reference_name,
                              const std::vector<std::string>& other, const std::string& other_name,
                              const std::string& what = "classes");

}  // namespace imagepack
