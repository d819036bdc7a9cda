// COCO instances files as a source (sources.h, OpenCocoSource): each image
// an item, its annotations' boxes its boxes field (crowd regions in a
// crowd_boxes field), the categories the boxes' classes. The file itself
// is parsed by formats/coco.h.
#include <algorithm>
#include <set>

#include "formats/coco.h"
#include "base/limits.h"
#include "imagepack/storage.h"
#include "sources/sources.h"

namespace imagepack::internal {

Result<DatasetSource> OpenCocoSource(const std::string& coco, const std::string& images_root,
                                     const SourceOptions& opts) {
  auto storage = OpenStorage(coco);
  if (!storage.ok()) return storage.status().WithContext("COCO file");
  auto bytes = ReadWhole(*storage.value(), coco, limits::kWholeFile);
  if (!bytes.ok()) return bytes.status().WithContext("COCO file");
  auto parsed = ParseCoco(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()), coco);
  bytes->clear();
  if (!parsed.ok()) return parsed.status();
  const CocoFile& file = parsed.value();
  DatasetSource s;
  s.root = images_root;
  FieldSpec boxes;
  boxes.name = "boxes";
  boxes.kind = FieldKind::kBoxes;
  for (const CocoCategory& c : file.categories) boxes.classes.push_back(c.name);
  s.fields.push_back(boxes);
  std::set<std::string> names;
  std::vector<bool> dropped;
  for (const CocoImage& im : file.images) {
    SourceItem item;
    item.rel = im.file_name;
    item.fields.resize(2);  // boxes, crowd_boxes (dropped below when no annotation is a crowd)
    item.fields[0].slot = 0;
    item.fields[1].slot = 1;
    std::string why;
    if (Status inside = CheckInsideFolder(item.rel, opts); !inside.ok()) why = inside.message();
    else if (!names.insert(item.rel).second) why = "file_name listed twice (image id " + std::to_string(im.id) + ")";
    if (!why.empty()) s.errors.push_back({coco + ": " + item.rel, why});
    dropped.push_back(!why.empty());
    s.items.push_back(std::move(item));
  }
  // An annotation is not a record: its image is packed without it.
  for (const CocoProblem& p : file.problems) s.left_out.push_back({coco + ": " + p.where, p.why});
  bool crowd = false;
  for (const CocoBox& b : file.boxes) {
    s.items[b.image].fields[b.crowd ? 1 : 0].boxes.push_back(
        {b.x0, b.y0, b.x1, b.y1, static_cast<int32_t>(b.category)});
    crowd = crowd || b.crowd;
  }
  if (crowd) {
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
