// Where a dataset's samples come from and how their labels and fields are
// read: the options of every source pack_lmdb reads (image trees with
// paired trees, manifests, COCO, WebDataset shards, folder2lmdb LMDBs,
// imagepack databases). PackOptions holds one; verify --against uses the
// same rules. Formats: docs/USAGE.md.
#pragma once

#include <string>
#include <vector>

#include "imagepack/progress.h"

namespace imagepack {

struct StorageSettings;

struct SourceOptions {
  std::string classes_file;  // class order, one name per line (first word)
  std::string labels_file;   // flat folder: lines "FILENAME LABEL" (class name or index)
  // A fixed class list (verify: the database's), instead of one read from
  // classes_file or found in the tree; an empty list is then allowed.
  const std::vector<std::string>* classes = nullptr;
  bool no_class = false;     // every item label -1, no class list
  // Paired trees matched to the images by relative path: "NAME[:KIND]=DIR"
  // (KIND image, mask or depth; a NAME starting with "mask" is a mask, with
  // "depth" a depth map, any other a second image).
  std::vector<std::string> fields;
  std::string manifest;      // JSON Lines (.jsonl, .json) or CSV (.csv) with a header
  std::string coco;          // COCO instances JSON; the images are below the source path
  std::string mask_classes;  // masks: a classes file, or N (classes "0".."N-1"); empty: 0 .. the largest value
  int mask_bits = 8;         // masks: 8 (uint8) or 16 (uint16: up to 65,536 classes)
  // Masks: the value outside any class (-1: none); kMaskIgnoreTop: the
  // dtype's largest value (255 for uint8, 65535 for uint16).
  static constexpr int kMaskIgnoreTop = -2;
  int mask_ignore = kMaskIgnoreTop;
  double depth_scale = 0;    // depth maps: units per stored value (0.001: mm as m; KITTI 1/256); 0: not declared
  int depth_no_reading = 0;  // depth maps: the value that means "no reading" (padding too)
  std::string box_classes;   // boxes: a classes file (manifests; COCO names its own)
  std::string scratch_dir;   // gzipped shards are inflated here, items spilled (default: the temp folder)
  // Items of a tree labelled by class folders (or without classes) held in
  // memory at most; past this many bytes they wait in a scratch file in
  // scratch_dir, so that any number of inputs packs in bounded memory.
  uint64_t item_memory = uint64_t(256) << 20;
  // An imagepack database as the source: its records are the items, read
  // as they are packed instead of all at open (pack sets this where it
  // needs no path before packing: no --shard).
  bool database_records = false;
  // WebDataset members kept as text fields named by their extension
  // (e.g. "txt" for img2dataset's captions); others are counted.
  std::vector<std::string> keep_members;
  // WebDataset members KEY.NAME.png that are label maps (masks) for these
  // NAMEs, besides NAMEs starting with "mask" (e.g. "seg"); depth maps are
  // NAMEs starting with "depth".
  std::vector<std::string> mask_members;
  // Parquet: the image column (a struct<bytes, path> or binary column) and
  // the label column (integers) by name, where the "huggingface" metadata
  // and the names do not single one out; empty: guessed.
  std::string image_column;
  std::string label_column;
  // Another tool's files: only those of this split, as the Hub names
  // splits (train, validation, test, or NAME of NAME-00000-of-00004);
  // empty: all, unless they hold several splits (then an error).
  std::string split;
  // Manifests and COCO: image paths that leave their folder (absolute, or
  // through "..") are refused unless this is set.
  bool allow_outside = false;
  const CancelFlag* cancel = nullptr;  // checked while inflating shards
  // Remote files (s3://, https://, hf://) are opened with these settings
  // (a Loader's cache_dir, ca_file, ...); null: the process's
  // (StorageSettings::ForProcess).
  const StorageSettings* storage = nullptr;
};

}  // namespace imagepack
