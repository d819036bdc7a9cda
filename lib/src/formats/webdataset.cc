#include "formats/webdataset.h"

#include <algorithm>

#include "formats/text.h"
#include "imagepack/files.h"

namespace imagepack::internal {
namespace {

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

bool IsGzipName(const std::string& path) {
  const std::string l = LowerAscii(path);
  return EndsWith(l, ".tar.gz") || EndsWith(l, ".tgz");
}

bool IsShardName(const std::string& path) { return EndsWith(LowerAscii(path), ".tar") || IsGzipName(path); }

std::pair<std::string, std::string> KeyAndExtension(const std::string& member) {
  const auto slash = member.rfind('/');
  const auto dot = member.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) return {member, ""};
  return {member.substr(0, dot), LowerAscii(member.substr(dot + 1))};
}

const std::vector<std::string>& ImageExtensions() {
  static const std::vector<std::string> exts = {"jpg", "jpeg", "png", "webp", "ppm",
                                                "pgm", "bmp",  "tif", "tiff", "gif"};
  return exts;
}

bool IsImageExtension(const std::string& ext) {
  const auto& exts = ImageExtensions();
  return std::find(exts.begin(), exts.end(), ext) != exts.end();
}

const std::vector<std::string>& LabelExtensions() {
  static const std::vector<std::string> exts = {"cls", "cls.txt", "class", "label", "label.txt"};
  return exts;
}

std::vector<WdsSample> GroupSamples(const std::vector<TarMember>& members) {
  std::vector<WdsSample> out;
  std::map<std::string, size_t> index;
  for (const TarMember& m : members) {
    auto [key, ext] = KeyAndExtension(m.name);
    if (ext.empty()) continue;
    auto [it, fresh] = index.try_emplace(key, out.size());
    if (fresh) {
      out.emplace_back();
      out.back().key = key;
    }
    WdsSample& s = out[it->second];
    if (!s.parts.emplace(ext, m).second && s.error.empty())
      s.error = "member " + Shown(key + "." + ext) + " appears twice in the shard";
  }
  return out;
}

Result<WdsJson> ParseSampleJson(std::string_view text, const std::string& key) {
  auto parsed = ParseJsonBounded(text, Shown(key) + ".json");
  if (!parsed.ok()) return parsed.status();
  if (!parsed->is_object()) return Status::InvalidArgument(Shown(key) + ".json is not a JSON object");
  const nlohmann::json& j = parsed.value();
  WdsJson out;
  if (j.contains("path") && j["path"].is_string()) out.path = j["path"].get<std::string>();
  if (auto at = j.find("index"); at != j.end() && !at->is_null()) {
    if (!at->is_number_integer() || at->get<int64_t>() < 0)
      return Status::InvalidArgument(Shown(key) + ".json: \"index\" is not a record index (an integer >= 0)");
    out.index = at->get<int64_t>();
  }
  if (auto at = j.find("label"); at != j.end()) {
    if (at->is_number_integer()) out.label = LabelFromIndex(at->get<int64_t>());
    else if (at->is_string()) out.label = LabelFromText(at->get<std::string>());
    else if (!at->is_null()) out.label_error = Shown(key) + ".json: \"label\" is not an integer or a string";
  }
  for (auto& [k, v] : j.items())
    if (k != "path" && k != "label" && k != "class" && k != "index" && !v.is_null()) out.values[k] = v;
  return out;
}

}  // namespace imagepack::internal
