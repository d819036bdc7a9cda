// `train`'s flags made from the option table (imagepack/option_table.h):
// each row that `train` takes is bound here to a field of TrainOptions, with
// the row's default, help, range and choices. A row left unbound, or a
// field bound to no row, is a programming error found when `train` starts
// (and by the trainer tests).
#pragma once

#include <boost/program_options.hpp>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "imagepack/option_table.h"

namespace imagepack::trainer {

class OptionFlags {
 public:
  explicit OptionFlags(boost::program_options::options_description* opts) : opts_(opts) {}

  // A valued row, bound to `field` (int, int64_t, double, std::string, or
  // std::vector<std::string> for a kList row).
  template <class T>
  void Bind(const char* name, T* field);
  // A kSwitch row: read by vm.count(name).
  void Switch(const char* name);
  // Throws std::logic_error naming the rows for `train` that were not bound.
  void CheckAllBound() const;

  // The first value out of its row's range or choices, "" if none: rows
  // without a default only when given; those in `skip` not at all.
  std::string Problem(const boost::program_options::variables_map& vm, const std::set<std::string>& skip) const;

 private:
  const OptionSpec& Row(const char* name, bool valued);
  std::string Flag(const OptionSpec& spec) const;

  boost::program_options::options_description* opts_;
  std::set<std::string> bound_;
  std::vector<std::pair<const OptionSpec*, std::function<std::string()>>> checks_;
};

}  // namespace imagepack::trainer
