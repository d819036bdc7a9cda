#include "run_info.h"

#include <algorithm>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace imagepack::trainer {

using nlohmann::json;

namespace {

std::string Joined(const std::vector<std::string>& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : " ") + v;
  return out;
}

}  // namespace

std::string RunInfo::ToJson() const {
  json opts = json::array();
  for (const auto& [name, values] : options) opts.push_back({{"name", name}, {"values", values}});
  json j = {{"version", 1},       {"arch", arch},   {"task", task},
            {"size", size},       {"channels", channels},
            {"mean", mean},       {"std", std},     {"normalisation", normalisation},
            {"data", data},       {"pinned", pinned}, {"train_meta", train_meta}, {"options", opts}};
  return j.dump();
}

RunInfo RunInfo::FromJson(const std::string& text, const std::string& where) {
  RunInfo r;
  try {
    const json j = json::parse(text);
    r.arch = j.at("arch").get<std::string>();
    r.task = j.at("task").get<std::string>();
    r.size = j.at("size").get<int>();
    r.channels = j.at("channels").get<int>();
    r.mean = j.at("mean").get<std::vector<double>>();
    r.std = j.at("std").get<std::vector<double>>();
    r.normalisation = j.value("normalisation", "");
    r.data = j.at("data").get<std::string>();
    if (j.contains("pinned")) r.pinned = j.at("pinned").get<std::vector<std::string>>();
    r.train_meta = j.at("train_meta").get<std::string>();
    for (const auto& o : j.at("options"))
      r.options.emplace_back(o.at("name").get<std::string>(), o.at("values").get<std::vector<std::string>>());
  } catch (const json::exception& e) {
    throw std::runtime_error(where + ": the checkpoint's run description is damaged (" + std::string(e.what()) + ")");
  }
  return r;
}

bool OptionIsPerInvocation(const std::string& name) {
  return name == "resume" || name == "evaluate" || name == "stop-at-step" || name == "overwrite" ||
         name == "resume-other-commit" || name == "help" ||
         name == "version";
}

GivenOptions MergeWithCheckpoint(const GivenOptions& given, const GivenOptions& saved, const std::string& checkpoint,
                                 std::vector<std::string>* notes) {
  GivenOptions out = given;
  for (const auto& [name, values] : saved) {
    if (OptionIsPerInvocation(name)) continue;
    auto now = std::find_if(given.begin(), given.end(), [&](const auto& g) { return g.first == name; });
    if (now == given.end()) {
      out.emplace_back(name, values);
      continue;
    }
    if (now->second == values) continue;
    const std::string was = values.empty() ? "given" : Joined(values);
    const std::string is = now->second.empty() ? "" : " " + Joined(now->second);
    if (name == "arch" || name == "task")
      throw std::runtime_error("--" + name + is + " contradicts " + checkpoint + ", whose model was trained with --" +
                               name + " " + was + ": leave --" + name +
                               " out to resume or evaluate it, or start a new run in another --output");
    notes->push_back("--" + name + is + " (the checkpoint's run: " + was + ")");
  }
  return out;
}

std::vector<std::string> ToArgs(const std::string& program, const GivenOptions& opts) {
  std::vector<std::string> args{program};
  // "--name=value": an option with an implicit value (--amp) takes no
  // separate word.
  for (const auto& [name, values] : opts) {
    if (values.empty()) args.push_back("--" + name);
    for (const auto& v : values) args.push_back("--" + name + "=" + v);
  }
  return args;
}

}  // namespace imagepack::trainer
