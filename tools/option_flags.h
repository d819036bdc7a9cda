// A tool's flags made from the option table (imagepack/option_table.h):
// each row of the tool's surface (`train`: kTrainFlag; inspect_db:
// kInspectFlag) is bound to a field of the tool's options, with the row's
// default, help, range and choices. A row left unbound, or a field bound to
// no row, is a programming error found when the tool starts (and by its
// tests).
#pragma once

#include <boost/program_options.hpp>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "imagepack/option_table.h"

namespace imagepack::cli {

class OptionFlags {
 public:
  OptionFlags(boost::program_options::options_description* opts, OptionSurface surface)
      : opts_(opts), surface_(surface) {}

  // A valued row, bound to `field` (int, int64_t, double, std::string, or
  // std::vector<std::string> for a kList row).
  template <class T>
  void Bind(const char* name, T* field);
  // A kSwitch row: read by vm.count(name).
  void Switch(const char* name);
  // Throws std::logic_error naming the rows of the surface not bound.
  void CheckAllBound() const;

  // The first value out of its row's range or choices, "" if none: rows
  // without a default only when given; those in `skip` not at all.
  std::string Problem(const boost::program_options::variables_map& vm, const std::set<std::string>& skip) const;

 private:
  const OptionSpec& Row(const char* name, bool valued);
  std::string Flag(const OptionSpec& spec) const;

  boost::program_options::options_description* opts_;
  OptionSurface surface_;
  std::set<std::string> bound_;
  std::vector<std::pair<const OptionSpec*, std::function<std::string()>>> checks_;
};

}  // namespace imagepack::cli
