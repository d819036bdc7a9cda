// COCO instances files: images, their boxes and the categories
// (sources.h, OpenCocoSource).
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "formats/labels.h"
#include "formats/limits.h"
#include "formats/text.h"
#include "sources.h"

namespace fs = std::filesystem;

namespace imagepack::internal {

using nlohmann::json;

namespace {

// The categories as the boxes field's classes, in id order; *class_of maps
// a category id to its class.
Result<FieldSpec> CocoBoxesField(const json& j, const std::string& coco, std::map<int64_t, int32_t>* class_of) {
  std::vector<std::pair<int64_t, std::string>> cats;
  std::set<int64_t> cat_ids;
  for (const auto& c : j["categories"]) {
    if (!c.is_object() || !c.contains("id") || !c["id"].is_number_integer() || !c.contains("name") ||
        !c["name"].is_string())
      return Status::InvalidArgument(coco + ": a category lacks an integer id or a name: " + c.dump());
    if (!cat_ids.insert(c["id"].get<int64_t>()).second)
      return Status::InvalidArgument(coco + ": category id " + c["id"].dump() + " is listed twice");
    cats.emplace_back(c["id"].get<int64_t>(), c["name"].get<std::string>());
  }
  std::sort(cats.begin(), cats.end());
  FieldSpec boxes;
  boxes.name = "boxes";
  boxes.kind = FieldKind::kBoxes;
  for (auto& [id, name] : cats) {
    (*class_of)[id] = static_cast<int32_t>(boxes.classes.size());
    boxes.classes.push_back(name);
  }
  return boxes;
}

// Each annotation's box onto its image's item: field 0 (boxes), or 1
// (crowd_boxes) for a crowd region; a malformed one is an error naming it.
// Returns the crowd regions' count.
int64_t AddAnnotations(const json& j, const std::string& coco, const std::map<int64_t, size_t>& item_of,
                       const std::map<int64_t, int32_t>& class_of, DatasetSource& s) {
  int64_t crowd = 0;
  if (!j.contains("annotations") || !j["annotations"].is_array()) return 0;
  for (const auto& a : j["annotations"]) {
    const std::string id = a.is_object() && a.contains("id") ? a["id"].dump() : "?";
    auto report = [&](const std::string& why) { s.errors.push_back({coco + ": annotation " + id, why}); };
    if (!a.is_object() || !a.contains("image_id") || !a.contains("category_id")) {
      report("has no image_id or category_id");
      continue;
    }
    // iscrowd: 0/1 as COCO writes it; null, false or absent is 0.
    const json crowd_v = a.value("iscrowd", json(0));
    if (!(crowd_v.is_null() || crowd_v.is_boolean() || crowd_v.is_number_integer())) {
      report("iscrowd is " + crowd_v.dump() + ", not 0 or 1");
      continue;
    }
    const bool is_crowd =
        (crowd_v.is_boolean() && crowd_v.get<bool>()) || (crowd_v.is_number_integer() && crowd_v.get<int64_t>() != 0);
    auto it = item_of.find(a["image_id"].is_number_integer() ? a["image_id"].get<int64_t>() : INT64_MIN);
    auto cls = class_of.find(a["category_id"].is_number_integer() ? a["category_id"].get<int64_t>() : INT64_MIN);
    if (it == item_of.end() || cls == class_of.end()) {
      report("names no known image or category");
      continue;
    }
    if (!a.contains("bbox")) {
      report("has no bbox (keypoint- or segmentation-only annotations carry no box here)");
      continue;
    }
    const json& b = a["bbox"];
    if (!b.is_array() || b.size() != 4 || !std::all_of(b.begin(), b.end(), [](const json& e) { return e.is_number(); })) {
      report("bbox " + b.dump() + " is not [x, y, w, h]");
      continue;
    }
    const float x = b[0].get<float>(), y = b[1].get<float>();
    // Crowd regions are not instances: detectron2 and torchvision keep
    // them as regions to ignore, so they go to their own boxes field.
    s.items[it->second].fields[is_crowd ? 1 : 0].boxes.push_back(
        {x, y, x + b[2].get<float>(), y + b[3].get<float>(), cls->second});
    crowd += is_crowd;
  }
  return crowd;
}

}  // namespace

Result<DatasetSource> OpenCocoSource(const std::string& coco, const std::string& images_root,
                                     const SourceOptions& opts) {
  auto bytes = ReadFile(coco);
  if (!bytes.ok()) return bytes.status().WithContext("COCO file");
  auto parsed = ParseJsonBounded(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()), coco);
  bytes->clear();
  if (!parsed.ok()) return parsed.status();
  const json& j = parsed.value();
  if (!j.is_object() || !j.contains("images") || !j["images"].is_array() || !j.contains("categories") ||
      !j["categories"].is_array())
    return Status::InvalidArgument(coco + " is not a COCO instances file (no \"images\" and \"categories\")");
  DatasetSource s;
  s.root = images_root;
  std::map<int64_t, int32_t> class_of;
  auto boxes = CocoBoxesField(j, coco, &class_of);
  if (!boxes.ok()) return boxes.status();
  s.fields.push_back(boxes.value());
  std::map<int64_t, size_t> item_of;  // image id -> item
  std::set<std::string> names;
  std::vector<bool> dropped;
  for (const auto& im : j["images"]) {
    if (!im.is_object() || !im.contains("id") || !im["id"].is_number_integer() || !im.contains("file_name") ||
        !im["file_name"].is_string())
      return Status::InvalidArgument(coco + ": an image lacks an integer id or a file_name: " + im.dump());
    SourceItem item;
    item.rel = im["file_name"].get<std::string>();
    item.fields.resize(2);  // boxes, crowd_boxes (dropped below when no annotation is a crowd)
    item.fields[0].slot = 0;
    item.fields[1].slot = 1;
    if (!item_of.emplace(im["id"].get<int64_t>(), s.items.size()).second)
      return Status::InvalidArgument(coco + ": image id " + im["id"].dump() + " listed twice");
    std::string why;
    if (Status inside = CheckInsideFolder(item.rel, opts); !inside.ok()) why = inside.message();
    else if (!names.insert(item.rel).second) why = "file_name listed twice (image id " + im["id"].dump() + ")";
    if (!why.empty()) s.errors.push_back({coco + ": " + item.rel, why});
    dropped.push_back(!why.empty());
    s.items.push_back(std::move(item));
  }
  const int64_t crowd = AddAnnotations(j, coco, item_of, class_of, s);
  if (crowd > 0) {
    FieldSpec crowd_boxes = s.fields[0];
    crowd_boxes.name = "crowd_boxes";
    s.fields.push_back(std::move(crowd_boxes));
  } else {
    for (auto& item : s.items) item.fields.resize(1);
  }
  std::vector<SourceItem> kept;
  for (size_t i = 0; i < s.items.size(); ++i)
    if (!dropped[i]) kept.push_back(std::move(s.items[i]));
  s.items = std::move(kept);
  std::sort(s.items.begin(), s.items.end(), [](const SourceItem& a, const SourceItem& b) { return a.rel < b.rel; });
  return s;
}

}  // namespace imagepack::internal
