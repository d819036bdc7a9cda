#include "option_flags.h"

#include <stdexcept>

namespace po = boost::program_options;

namespace imagepack::cli {
namespace {

template <class T>
T Parsed(const OptionSpec& spec) {
  if constexpr (std::is_same_v<T, std::string>) {
    return spec.fallback;
  } else {
    size_t used = 0;
    const std::string text = spec.fallback;
    const double v = std::stod(text, &used);
    if (used != text.size()) throw std::logic_error(std::string("option table: --") + spec.name + "'s default");
    return static_cast<T>(v);
  }
}

template <class T>
std::string CheckOf(const OptionSpec& spec, const T* field) {
  if constexpr (std::is_same_v<T, std::string>) {
    return spec.kind == OptionKind::kChoice && !field->empty() ? OptionChoiceProblem(spec, *field) : "";
  } else if constexpr (std::is_arithmetic_v<T>) {
    return OptionProblem(spec, static_cast<double>(*field));
  } else {
    return "";
  }
}

}  // namespace

// The row's help, with its choices when it has them (as the script's
// --help shows them).
static std::string Help(const OptionSpec& spec) {
  std::string help = spec.help;
  const std::vector<std::string> choices = OptionChoices(spec);
  for (size_t i = 0; i < choices.size(); ++i) help += (i == 0 ? " [one of " : ", ") + choices[i];
  return choices.empty() ? help : help + "]";
}

std::string OptionFlags::Flag(const OptionSpec& spec) const {
  return spec.short_name ? std::string(spec.name) + "," + spec.short_name : std::string(spec.name);
}

const OptionSpec& OptionFlags::Row(const char* name, bool valued) {
  const OptionSpec* spec = FindOption(name);
  if (!spec || !(spec->surfaces & surface_) || spec->name != std::string(name))
    throw std::logic_error(std::string("--") + name + " is no row of the option table for this tool");
  if (valued == (spec->kind == OptionKind::kSwitch))
    throw std::logic_error(std::string("--") + name + ": bound as " + (valued ? "a value" : "a switch") +
                           ", declared otherwise");
  if (!bound_.insert(name).second) throw std::logic_error(std::string("--") + name + " bound twice");
  return *spec;
}

template <class T>
void OptionFlags::Bind(const char* name, T* field) {
  const OptionSpec& spec = Row(name, true);
  auto* value = po::value(field);
  if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    value->composing();
  } else {
    if (*spec.fallback) value->default_value(Parsed<T>(spec), spec.fallback);
    if constexpr (std::is_same_v<T, std::string>)
      if (*spec.implicit) value->implicit_value(spec.implicit);
    checks_.emplace_back(&spec, [&spec, field] { return CheckOf(spec, field); });
  }
  opts_->add_options()(Flag(spec).c_str(), value, Help(spec).c_str());
}

void OptionFlags::Switch(const char* name) {
  const OptionSpec& spec = Row(name, false);
  opts_->add_options()(Flag(spec).c_str(), spec.help);
}

void OptionFlags::CheckAllBound() const {
  std::string missing;
  for (const OptionSpec& s : OptionTable())
    if ((s.surfaces & surface_) && !bound_.count(s.name)) missing += std::string(" --") + s.name;
  if (!missing.empty()) throw std::logic_error("option table rows for this tool not bound:" + missing);
}

std::string OptionFlags::Problem(const po::variables_map& vm, const std::set<std::string>& skip) const {
  for (const auto& [spec, check] : checks_) {
    if (skip.count(spec->name) || (!*spec->fallback && !vm.count(spec->name))) continue;
    if (std::string p = check(); !p.empty()) return p;
  }
  return "";
}

template void OptionFlags::Bind(const char*, int*);
template void OptionFlags::Bind(const char*, int64_t*);
template void OptionFlags::Bind(const char*, double*);
template void OptionFlags::Bind(const char*, std::string*);
template void OptionFlags::Bind(const char*, std::vector<std::string>*);

}  // namespace imagepack::cli
