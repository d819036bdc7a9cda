// The options of the trainers and the Loader, each declared once: its
// name, type, default, range or choices, help, and the surfaces that take
// it (the C++ trainer `train`, scripts/train_imagepack.py, imagepack.Loader,
// inspect_db --grid).
// The trainers' flag parsers, their range checks, the Loader's keyword list
// and docstring and the docs' option tables are made from these rows or
// checked against them (docs/ARCHITECTURE.md, "Options").
// Code: lib/src/loader/option_table.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace imagepack {

enum class OptionKind : uint8_t {
  kInt,     // a whole number
  kReal,    // a number
  kText,    // free text (a path, a list)
  kChoice,  // one of `choices`
  kSwitch,  // present or not; no value
  kList,    // text, given again for more (--data): every value kept
};

// Where an option is taken: bits of OptionSpec::surfaces.
enum OptionSurface : unsigned {
  kTrainFlag = 1u,   // `train` (trainer/train.cc)
  kScriptFlag = 2u,  // scripts/train_imagepack.py
  kLoaderKeyword = 4u,  // imagepack.Loader(..., keyword=)
  kInspectFlag = 8u,    // inspect_db --grid (what the loader hands the model)
  kBothTrainers = kTrainFlag | kScriptFlag,
  kEverywhere = kTrainFlag | kScriptFlag | kLoaderKeyword,
};

// An inclusive or open interval; `says` is how a refusal words it
// ("--ra-magnitude 31: must be 0 to 30"). No range when `says` is null.
struct OptionRange {
  double lo = 0, hi = 0;
  bool lo_open = false, hi_open = false;
  const char* says = nullptr;
};

struct OptionSpec {
  const char* name;         // the flag without "--"; the Loader's keyword and the script's dest: '-' -> '_'
  char short_name;          // 'b' for -b, else 0
  OptionKind kind;
  const char* fallback;     // the default as text; "" none (an option that is off unless given)
  const char* choices;      // kChoice: names joined by ','; the first may be the default
  OptionRange range;        // kInt, kReal
  const char* help;         // one sentence or two: what it does, what 0 means
  unsigned surfaces;        // OptionSurface bits
  const char* implicit = "";  // the value of the flag given alone (--amp: "auto"); "" none
  const char* keyword = "";   // the Loader's keyword where it is not the name's (--loader-threads: threads)
};

// Every option, in the order `--help` lists them.
const std::vector<OptionSpec>& OptionTable();

// The row of `name` (a flag name without "--", or a Loader keyword), or
// null.
const OptionSpec* FindOption(const std::string& name);

// The Loader keyword of a row.
std::string OptionKeyword(const OptionSpec& spec);

// "" when `value` is within the row's range, else "--NAME VALUE: must be
// SAYS". Values are printed without trailing zeros (0.5, 31).
std::string OptionProblem(const OptionSpec& spec, double value);

// "" when `value` is one of the row's choices, else "--NAME VALUE: must be
// A, B or C".
std::string OptionChoiceProblem(const OptionSpec& spec, const std::string& value);

// The choices of a kChoice row, in order.
std::vector<std::string> OptionChoices(const OptionSpec& spec);

}  // namespace imagepack
