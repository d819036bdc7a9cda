// Pictures of a database for a person to look at before training on it:
// the library side of `inspect_db`; docs/USAGE.md. Each writer makes a PNG
// and, beside it, a JSON file with the layout (which record is in which
// tile, where each bar is), so that a test or a script can find things in
// the picture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "imagepack/duplicates.h"
#include "imagepack/loader.h"
#include "imagepack/status.h"

namespace imagepack {

struct InspectOptions {
  std::string db;
  int per_class = 8;      // sheet: records per class
  int max_classes = 20;   // sheet: the first N classes
  int tile = 96;          // sheet, grid, duplicates: tile edge in pixels
  uint64_t seed = 0;      // sheet: which records; grid: the loader's seed
  int64_t epoch = 0;      // grid
  int batch = 32;         // grid: samples shown
  int crop = 0;           // grid: the loader's output size (0: tile)
  // grid: a transform's name (ParseTransform: train, eval, pad_crop, ...),
  // or a policy's (ta_wide, ra, ...: the train transform with it)
  std::string augment = "train";
  int threads = 0;
  // grid: the training Loader's augmentations, as the option table's rows
  // of those names (inspect_db binds them from there; the defaults are
  // LoaderOptions').
  std::string auto_augment = "none", interpolation = "bilinear";
  int ra_magnitude = 9, augmix_severity = 3;
  double random_erase = 0, hflip = 0.5;
};

// The grid's transform and augmentations (InspectOptions::augment and the
// policy's settings) into *lo; an error names an unknown transform or
// policy.
Status GridAugmentations(const InspectOptions& o, LoaderOptions* lo);

// sheet.png: a row per class (its name on the left), `per_class` records
// of it drawn at random (seed) in index order, each fitted into a tile
// (keeping its aspect, upscaled when smaller). sheet.json: tile, pitch,
// the first tile's corner, and per row the class and the record indices.
// Returns a line saying what was written.
Result<std::string> WriteContactSheet(const InspectOptions& opts, const std::string& png);

// grid.png: the first batch of epoch `epoch` as the loader hands it to the
// model (seed, augmentation, output size crop), 8 per row, each with its
// class name; mask fields tinted over the image (one colour per value,
// the ignore value left clear), box fields outlined. grid.json: the
// tiles' corners and dataset indices.
Result<std::string> WriteAugmentedGrid(const InspectOptions& opts, const std::string& png);

// summary.png: the class histogram (from the metadata's counts), the image
// sizes (width against height, up to 20,000 records sampled evenly) and
// the bytes per record (a 40-bin histogram of the same sample).
// summary.json: each panel's plot area and the bars' values.
Result<std::string> WriteSummaryChart(const InspectOptions& opts, const std::string& png);

// duplicates.png: the first `max_pairs` pairs, one per row: both images
// and what they are (exact / near, hash distance, similarity, database,
// index, path, label).
Status WriteDuplicateSheet(const std::vector<std::string>& dbs, const std::vector<DuplicatePair>& pairs,
                           int max_pairs, const std::string& png);

}  // namespace imagepack
