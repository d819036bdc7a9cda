#include "recipe_file.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#ifndef IMAGEPACK_RECIPES_DIR
#define IMAGEPACK_RECIPES_DIR "trainer/recipes"
#endif

namespace fs = std::filesystem;

namespace imagepack::trainer {
namespace {

// The name of a command-line word that is a flag ("--lr=0.1": lr), "" if
// the word is not one.
std::string FlagName(const std::string& word) {
  if (word == "-b") return "batch-size";
  if (word.size() < 3 || word.compare(0, 2, "--") != 0) return "";
  return CanonicalFlag(word.substr(2, word.find('=') == std::string::npos ? std::string::npos : word.find('=') - 2));
}

}  // namespace

std::string RecipesDir() { return IMAGEPACK_RECIPES_DIR; }

std::string RecipePath(const std::string& what) {
  std::error_code ec;
  if (what.find('/') != std::string::npos || (what.size() > 6 && what.compare(what.size() - 6, 6, ".flags") == 0) ||
      fs::is_regular_file(what, ec))
    return what;
  return (fs::path(RecipesDir()) / (what + ".flags")).string();
}

std::vector<std::string> ReadRecipe(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::invalid_argument("--recipe " + path + ": cannot read it (the recipes: " + RecipesDir() + ")");
  std::vector<std::string> words;
  int n = 0;
  for (std::string line; std::getline(f, line);) {
    ++n;
    line = line.substr(0, line.find('#'));
    std::istringstream in(line);
    std::vector<std::string> parts;
    for (std::string w; in >> w;) parts.push_back(w);
    if (parts.empty()) continue;
    if (FlagName(parts[0]).empty() || parts[0].find('=') != std::string::npos || parts.size() > 2)
      throw std::invalid_argument("--recipe " + path + " line " + std::to_string(n) + ": '" + line +
                                  "' is not one flag with at most one value (--name VALUE)");
    if (parts[0] == "--recipe")
      throw std::invalid_argument("--recipe " + path + " line " + std::to_string(n) + ": a recipe names no recipe");
    words.insert(words.end(), parts.begin(), parts.end());
  }
  return words;
}

std::string CanonicalFlag(const std::string& name) {
  if (name == "train-crop-size") return "size";
  if (name == "val-resize-size") return "val-resize";
  if (name == "val-crop-size") return "val-size";
  return name;
}

std::vector<std::string> ExpandRecipes(const std::vector<std::string>& args) {
  std::vector<std::string> own{args.empty() ? std::string("train") : args[0]}, recipes;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--recipe" || args[i].rfind("--recipe=", 0) == 0) {
      if (args[i] == "--recipe" && i + 1 >= args.size()) throw std::invalid_argument("--recipe needs NAME or FILE");
      recipes.push_back(args[i] == "--recipe" ? args[++i] : args[i].substr(9));
    } else {
      own.push_back(args[i]);
    }
  }
  if (recipes.empty()) return args;
  std::set<std::string> given;
  for (size_t i = 1; i < own.size(); ++i)
    if (std::string name = FlagName(own[i]); !name.empty()) given.insert(name);
  std::vector<std::string> out{own[0]};
  for (const auto& r : recipes) {
    const std::vector<std::string> words = ReadRecipe(RecipePath(r));
    bool keep = false;
    for (const auto& w : words) {
      if (std::string name = FlagName(w); !name.empty()) keep = !given.count(name);
      if (keep) out.push_back(w);
    }
  }
  out.insert(out.end(), own.begin() + 1, own.end());
  return out;
}

}  // namespace imagepack::trainer
