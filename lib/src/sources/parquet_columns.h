// The parquet source's columns (sources/parquet_source.cc): which leaves
// hold the image, its path and the label, and which become fields, chosen
// from the "huggingface" key-value metadata and the schema; and a row
// group's fields read into SourceFields. Internal.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "formats/parquet.h"
#include "imagepack/fields.h"
#include "imagepack/source_options.h"
#include "sources/sources.h"

namespace imagepack::internal {

struct ParquetColumns {
  int image = -1, path = -1, label = -1;
  std::vector<std::string> names;  // ClassLabel names
  // Columns as fields, by the manifest's kind rules: flat strings text,
  // flat integers and booleans ints, flat floats floats; top-level lists
  // of integers ints, of floats floats; bbox lists with their category
  // list boxes.
  struct Field {
    int leaf = -1;
    FieldKind kind = FieldKind::kInts;
    std::string name;
    int slot = -1;
    int category = -1;                // boxes: the category leaf
    bool xyxy = false;                // boxes: stored [x0, y0, x1, y1] (else [x, y, w, h])
    std::vector<std::string> classes;  // boxes: the category's ClassLabel names
  };
  std::vector<Field> fields;
  std::vector<std::string> unused;
};

// Chooses the columns of `f` (`shown` names it in messages); warnings go
// to `problems`. The "huggingface" features in their dict form or the
// dataset card's list form; where they declare no Image, a struct
// column's bytes leaf for which `holds_image(leaf)` (its first value's
// magic is an image's) is the image.
Result<ParquetColumns> ChooseParquetColumns(const PqFile& f, const std::string& shown, const SourceOptions& opts,
                                            const std::function<bool(int leaf)>& holds_image,
                                            std::vector<std::string>* problems);

// Every declared field of row group `g`, per row in slot order (`fields`
// has a row per row of the group); a value that does not fit its kind sets
// bad[row] to why. `where` starts every error.
Status ReadParquetFields(const PqReadFn& read, uint64_t size, PqBudget& budget, const PqFile& f, size_t g,
                         const ParquetColumns& c,
                         const std::string& where, std::vector<std::vector<SourceField>>* fields,
                         std::vector<std::string>* bad);

}  // namespace imagepack::internal
