// --recipe NAME|FILE: flags read from a file, one flag (with its value) a
// line, '#' comments and blank lines ignored; the command line's own flags
// win over the file's. NAME alone is trainer/recipes/NAME.flags of the
// source tree `train` was built from. No torch here.
#pragma once

#include <string>
#include <vector>

namespace imagepack::trainer {

// The folder NAME.flags is looked up in (the source tree's trainer/recipes).
std::string RecipesDir();

// The file --recipe `what` names: `what` itself when it is a path (holds a
// '/' or ends in .flags) or an existing file, else RecipesDir()/what.flags.
std::string RecipePath(const std::string& what);

// The flags of a recipe file as command-line words. Throws
// std::invalid_argument naming the file and line of anything that is not
// "--flag [value]", or when the file cannot be read.
std::vector<std::string> ReadRecipe(const std::string& path);

// The option name a flag stands for, as the command line's flags are
// compared with a recipe's: torchvision's spellings as ours
// (train-crop-size: size, val-resize-size: val-resize, val-crop-size:
// val-size), -b as batch-size; other names unchanged.
std::string CanonicalFlag(const std::string& name);

// `args` (args[0] the program) with each --recipe (or --recipe=X) replaced
// by the recipe's flags that the command line does not give itself (by
// CanonicalFlag), placed before the command line's. Throws
// std::invalid_argument as ReadRecipe does, or for a --recipe without a
// value.
std::vector<std::string> ExpandRecipes(const std::vector<std::string>& args);

}  // namespace imagepack::trainer
