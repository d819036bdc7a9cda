// COCO instances files (pack_lmdb --coco): images, categories and the
// boxes of their annotations, parsed and checked within the budgets of
// limits.h. Which images are packed, and as which items, is the COCO
// source's (sources.h). Internal.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "imagepack/status.h"

namespace imagepack::internal {

struct CocoCategory {
  int64_t id = 0;
  std::string name;
};

struct CocoImage {
  int64_t id = 0;
  std::string file_name;
};

// An annotation's box as corners in pixels (COCO's [x, y, w, h] made
// x0, y0, x1, y1) on image `image` with class `category` (indices into
// CocoFile's images and categories). A crowd region (iscrowd) is not an
// instance: detectron2 and torchvision keep such regions apart.
struct CocoBox {
  size_t image = 0, category = 0;
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool crowd = false;
};

// An annotation that gives no box, and why ("annotation ID" as `where`).
struct CocoProblem {
  std::string where, why;
};

struct CocoFile {
  std::vector<CocoCategory> categories;  // in id order: a category's class is its index here
  std::vector<CocoImage> images;         // in the file's order
  std::vector<CocoBox> boxes;            // in the file's order
  std::vector<CocoProblem> problems;
};

// The instances file `text` (named `name` in messages). A file without
// "images" and "categories" lists, a category or image without an integer
// id and a name (file_name), or an id listed twice is an error; an
// annotation without an image, a category or a bbox of four numbers (a
// keypoint- or segmentation-only one), or with an iscrowd other than
// 0/1/bool/null, is a problem, and the others go on. Budgets: JSON at
// most limits::kJsonDepth deep (the file itself is read within
// limits::kWholeFile).
Result<CocoFile> ParseCoco(std::string_view text, const std::string& name);

}  // namespace imagepack::internal
