#include "formats/coco.h"

#include <algorithm>
#include <climits>
#include <map>

#include "formats/text.h"

namespace imagepack::internal {
namespace {

using nlohmann::json;

bool IsNumber(const json& e) { return e.is_number(); }

}  // namespace

Result<CocoFile> ParseCoco(std::string_view text, const std::string& name) {
  auto parsed = ParseJsonBounded(text, name);
  if (!parsed.ok()) return parsed.status();
  const json& j = parsed.value();
  if (!j.is_object() || !j.contains("images") || !j["images"].is_array() || !j.contains("categories") ||
      !j["categories"].is_array())
    return Status::InvalidArgument(name + " is not a COCO instances file (no \"images\" and \"categories\")");
  CocoFile out;
  for (const auto& c : j["categories"]) {
    if (!c.is_object() || !c.contains("id") || !c["id"].is_number_integer() || !c.contains("name") ||
        !c["name"].is_string())
      return Status::InvalidArgument(name + ": a category lacks an integer id or a name: " + c.dump());
    out.categories.push_back({c["id"].get<int64_t>(), c["name"].get<std::string>()});
  }
  std::sort(out.categories.begin(), out.categories.end(),
            [](const CocoCategory& a, const CocoCategory& b) { return a.id < b.id; });
  std::map<int64_t, size_t> category_of, image_of;
  for (size_t i = 0; i < out.categories.size(); ++i)
    if (!category_of.emplace(out.categories[i].id, i).second)
      return Status::InvalidArgument(name + ": category id " + std::to_string(out.categories[i].id) +
                                     " is listed twice");
  for (const auto& im : j["images"]) {
    if (!im.is_object() || !im.contains("id") || !im["id"].is_number_integer() || !im.contains("file_name") ||
        !im["file_name"].is_string())
      return Status::InvalidArgument(name + ": an image lacks an integer id or a file_name: " + im.dump());
    if (!image_of.emplace(im["id"].get<int64_t>(), out.images.size()).second)
      return Status::InvalidArgument(name + ": image id " + im["id"].dump() + " listed twice");
    out.images.push_back({im["id"].get<int64_t>(), im["file_name"].get<std::string>()});
  }
  if (!j.contains("annotations") || !j["annotations"].is_array()) return out;
  for (const auto& a : j["annotations"]) {
    const std::string where = "annotation " + (a.is_object() && a.contains("id") ? a["id"].dump() : "?");
    auto problem = [&](const std::string& why) { out.problems.push_back({where, why}); };
    if (!a.is_object() || !a.contains("image_id") || !a.contains("category_id")) {
      problem("has no image_id or category_id");
      continue;
    }
    // iscrowd: 0/1 as COCO writes it; null, false or absent is 0.
    const json crowd = a.value("iscrowd", json(0));
    if (!(crowd.is_null() || crowd.is_boolean() || crowd.is_number_integer())) {
      problem("iscrowd is " + crowd.dump() + ", not 0 or 1");
      continue;
    }
    auto im = image_of.find(a["image_id"].is_number_integer() ? a["image_id"].get<int64_t>() : INT64_MIN);
    auto cat = category_of.find(a["category_id"].is_number_integer() ? a["category_id"].get<int64_t>() : INT64_MIN);
    if (im == image_of.end() || cat == category_of.end()) {
      problem("names no known image or category");
      continue;
    }
    if (!a.contains("bbox")) {
      problem("has no bbox (keypoint- or segmentation-only annotations carry no box here)");
      continue;
    }
    const json& b = a["bbox"];
    if (!b.is_array() || b.size() != 4 || !std::all_of(b.begin(), b.end(), IsNumber)) {
      problem("bbox " + b.dump() + " is not [x, y, w, h]");
      continue;
    }
    CocoBox box;
    box.image = im->second;
    box.category = cat->second;
    box.x0 = b[0].get<float>();
    box.y0 = b[1].get<float>();
    box.x1 = box.x0 + b[2].get<float>();
    box.y1 = box.y0 + b[3].get<float>();
    box.crowd = (crowd.is_boolean() && crowd.get<bool>()) || (crowd.is_number_integer() && crowd.get<int64_t>() != 0);
    out.boxes.push_back(box);
  }
  return out;
}

}  // namespace imagepack::internal
