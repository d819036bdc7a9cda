// The parquet source's columns (sources/parquet_columns.h): the image,
// path and label leaves, and fields from the other columns: flat ones,
// top-level lists of numbers, and boxes from bbox lists.
#include "sources/parquet_columns.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "base/limits.h"
#include "formats/text.h"

namespace imagepack::internal {
namespace {

// The dataset card's list form of the features (dataset_info.features of
// a README's YAML, which some writers put in the metadata as it is) in the
// dict form datasets writes, {NAME: SPEC}: an entry {"name": N, ...} says
// its type by "dtype" (a string: "image" an Image, anything else a Value;
// an object: {"class_label": {"names": ...}} and the like), "struct" (a
// list of entries), or "list" / "large_list" / "sequence" (a dtype string,
// an entry or a list of entries: the "feature" of a List). ClassLabel
// names written {"0": a, "1": b} become [a, b] (dropped unless 0..n-1 are
// all there). Each entry, at any depth, spends one of *left; false once
// none is left. Recursion follows the JSON's nesting (ParseJsonBounded
// bounds it).
bool SpecOfEntry(const nlohmann::json& e, size_t* left, nlohmann::json* out);

bool DictOfList(const nlohmann::json& list, size_t* left, nlohmann::json* out) {
  *out = nlohmann::json::object();
  for (const auto& e : list) {
    if (*left == 0) return false;
    --*left;
    auto name = e.is_object() ? e.find("name") : e.end();
    if (!e.is_object() || name == e.end() || !name->is_string()) continue;
    nlohmann::json spec;
    if (!SpecOfEntry(e, left, &spec)) return false;
    (*out)[name->get<std::string>()] = std::move(spec);
  }
  return true;
}

// "class_label" -> "ClassLabel"
std::string CamelOf(const std::string& snake) {
  std::string out;
  bool up = true;
  for (char ch : snake) {
    if (ch == '_') {
      up = true;
      continue;
    }
    out += up ? char(std::toupper(static_cast<unsigned char>(ch))) : ch;
    up = false;
  }
  return out;
}

// {"class_label": {"names": ...}}, {"image": {"decode": true}}: the type
// its key names, its members beside it.
nlohmann::json SpecOfTyped(const nlohmann::json& typed) {
  for (const auto& [k, v] : typed.items()) {
    if (!v.is_object()) continue;
    nlohmann::json spec = nlohmann::json::object();
    spec["_type"] = CamelOf(k);
    if (auto n = v.find("names"); n != v.end() && n->is_array()) spec["names"] = *n;
    if (auto n = v.find("names"); n != v.end() && n->is_object()) {
      std::vector<std::string> by_index(n->size());
      size_t placed = 0;
      for (const auto& [key, name] : n->items()) {
        size_t i = 0;
        bool digits = !key.empty() && key.size() <= 9;
        for (char ch : key) digits = digits && ch >= '0' && ch <= '9';
        if (digits) i = std::stoul(key);
        if (!digits || i >= by_index.size() || !name.is_string() || !by_index[i].empty()) break;
        by_index[i] = name.get<std::string>();
        ++placed;
      }
      if (placed == by_index.size()) spec["names"] = by_index;
    }
    return spec;
  }
  return nlohmann::json::object();
}

nlohmann::json SpecOfDtype(const std::string& dtype) {
  for (const char* media : {"image", "audio", "video", "pdf"})
    if (dtype == media) return {{"_type", CamelOf(dtype)}};
  return {{"dtype", dtype}, {"_type", "Value"}};
}

bool SpecOfEntry(const nlohmann::json& e, size_t* left, nlohmann::json* out) {
  for (const char* kind : {"large_list", "list", "sequence"}) {
    auto v = e.find(kind);
    if (v == e.end()) continue;
    nlohmann::json inner = nlohmann::json::object();
    if (v->is_string()) inner = SpecOfDtype(v->get<std::string>());
    else if (v->is_array() && !DictOfList(*v, left, &inner)) return false;
    else if (v->is_object() && !SpecOfEntry(*v, left, &inner)) return false;
    const std::string k = kind;
    *out = {{"feature", std::move(inner)},
            {"_type", k == "large_list" ? "LargeList" : k == "list" ? "List" : "Sequence"}};
    if (auto n = e.find("length"); n != e.end() && n->is_number_integer()) (*out)["length"] = *n;
    return true;
  }
  *out = nlohmann::json::object();
  if (auto v = e.find("struct"); v != e.end()) return !v->is_array() || DictOfList(*v, left, out);
  if (auto v = e.find("dtype"); v != e.end()) {
    if (v->is_string()) *out = SpecOfDtype(v->get<std::string>());
    else if (v->is_object()) *out = SpecOfTyped(*v);
    return true;
  }
  *out = SpecOfTyped(e);
  return true;
}

// The "huggingface" key's features (the dict form, or the list form made
// one): name -> _type, ClassLabel names, and the features object itself.
// At most limits::kParquetSchema features, at any depth (no file has
// more columns to describe).
void HfFeatures(const PqFile& f, const std::string& shown, std::map<std::string, std::string>* type_of,
                std::map<std::string, std::vector<std::string>>* names, nlohmann::json* all,
                std::vector<std::string>* problems) {
  for (const auto& [k, v] : f.key_values) {
    if (k != "huggingface") continue;
    auto j = ParseJsonBounded(v, shown + ": huggingface metadata");
    if (!j.ok() || !j->is_object()) {
      problems->push_back(shown + ": the huggingface metadata is not a JSON object (ignored)");
      return;
    }
    const nlohmann::json* feats = nullptr;
    if (auto info = j->find("info"); info != j->end() && info->is_object() && info->contains("features"))
      feats = &(*info)["features"];
    if (!feats) return;
    nlohmann::json dict;
    size_t left = limits::kParquetSchema;
    const std::string over = shown + ": the huggingface metadata has over " +
                             std::to_string(limits::kParquetSchema) + " features (ignored)";
    if (feats->is_array() && !DictOfList(*feats, &left, &dict)) {
      problems->push_back(over);
      return;
    }
    if (feats->is_array()) feats = &dict;
    if (!feats->is_object()) return;
    if (feats->size() > limits::kParquetSchema) {
      problems->push_back(over);
      return;
    }
    *all = *feats;
    for (const auto& [name, spec] : feats->items()) {
      if (!spec.is_object()) continue;
      if (auto t = spec.find("_type"); t != spec.end() && t->is_string()) (*type_of)[name] = t->get<std::string>();
      if (auto n = spec.find("names"); n != spec.end() && n->is_array()) {
        std::vector<std::string> list;
        for (const auto& x : *n)
          if (x.is_string()) list.push_back(x.get<std::string>());
        if (list.size() == n->size()) (*names)[name] = std::move(list);
      }
    }
  }
}

// A ClassLabel's names at a logical path of the features (through
// Sequence / List wrappers: their "feature"); empty if none.
std::vector<std::string> NestedClassNames(const nlohmann::json& feats, const std::vector<std::string>& path) {
  const nlohmann::json* spec = &feats;
  auto unwrap = [&] {
    for (int depth = 0; depth < limits::kJsonDepth && spec->is_object() && spec->contains("feature"); ++depth)
      spec = &(*spec)["feature"];
  };
  for (const std::string& p : path) {
    unwrap();
    if (!spec->is_object() || !spec->contains(p)) return {};
    spec = &(*spec)[p];
  }
  unwrap();
  std::vector<std::string> out;
  if (!spec->is_object() || !spec->contains("names") || !(*spec)["names"].is_array()) return {};
  for (const auto& x : (*spec)["names"])
    if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

bool IsInteger(const PqLeaf& l) { return l.type == PqType::kInt32 || l.type == PqType::kInt64; }
bool IsNumber(const PqLeaf& l) {
  return IsInteger(l) || l.type == PqType::kBoolean || l.type == PqType::kFloat || l.type == PqType::kDouble;
}
bool OneOf(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}
std::string Joined(const std::vector<std::string>& path) {
  std::string out;
  for (const auto& p : path) out += (out.empty() ? "" : ".") + p;
  return out;
}

ParquetColumns::Field Make(int leaf, FieldKind kind, const std::string& name) {
  ParquetColumns::Field f;
  f.leaf = leaf;
  f.kind = kind;
  f.name = name;
  return f;
}

// The boxes' layout from the file's key-value "bbox_format": xywh / coco
// (the default), xyxy / pascal_voc; -1 for anything else.
int BoxFormat(const PqFile& f) {
  for (const auto& [k, v] : f.key_values) {
    if (k != "bbox_format") continue;
    const std::string l = LowerAscii(v);
    if (l == "xywh" || l == "coco") return 0;
    if (l == "xyxy" || l == "pascal_voc") return 1;
    return -1;
  }
  return 0;
}

// Boxes: a list of lists of numbers named bbox, bboxes or boxes, at the
// top level or in a top-level struct, with an integer list named category,
// categories, category_id, label or labels beside it.
void ChooseBoxes(const PqFile& f, const nlohmann::json& feats, const std::string& shown,
                 std::vector<std::string>* problems, std::map<int, ParquetColumns::Field>* boxes, std::vector<bool>* taken) {
  const int format = BoxFormat(f);
  for (size_t i = 0; i < f.leaves.size(); ++i) {
    const PqLeaf& b = f.leaves[i];
    const auto lb = b.logical();
    if ((*taken)[i] || b.max_rep != 2 || lb.empty() || lb.size() > 2 || !IsNumber(b) || b.type == PqType::kBoolean ||
        !OneOf(lb.back(), {"bbox", "bboxes", "boxes"}))
      continue;
    for (size_t j = 0; j < f.leaves.size(); ++j) {
      const PqLeaf& c = f.leaves[j];
      const auto lc = c.logical();
      if ((*taken)[j] || c.max_rep != 1 || !IsInteger(c) || lc.size() != lb.size() ||
          !std::equal(lb.begin(), lb.end() - 1, lc.begin()) ||
          !OneOf(lc.back(), {"category", "categories", "category_id", "label", "labels"}))
        continue;
      if (format < 0) {
        problems->push_back(shown + ": column " + Joined(lb) +
                            " not packed as boxes: key-value bbox_format is not xywh, coco, xyxy or pascal_voc");
        break;
      }
      ParquetColumns::Field fc = Make(int(i), FieldKind::kBoxes, Joined(lb));
      fc.category = int(j);
      fc.xyxy = format == 1;
      fc.classes = NestedClassNames(feats, lc);
      (*boxes)[int(i)] = fc;
      (*taken)[i] = (*taken)[j] = true;
      break;
    }
  }
}

// The leaves that may be the image and the label, and whether the options named them.
struct Candidates {
  std::vector<int> images, labels;
  bool named_image = false, named_label = false;
};

// The image and label leaves: named by the options, else declared by the features, else found by rule.
Candidates ImageAndLabelCandidates(const PqFile& f, const std::map<std::string, std::string>& type_of,
                                   bool any_classlabel, const SourceOptions& opts,
                                   const std::function<bool(int leaf)>& holds_image) {
  Candidates k;
  // Features that declare no Image (a dataset saved without the Image
  // feature: the image a struct of Values, bytes and path): a struct
  // column's bytes leaf is the image where its first value's magic says
  // an image.
  const bool any_image =
      std::count_if(type_of.begin(), type_of.end(), [](const auto& t) { return t.second == "Image"; }) > 0;
  for (size_t i = 0; i < f.leaves.size(); ++i) {
    const PqLeaf& l = f.leaves[i];
    if (l.max_rep > 0) continue;  // lists are fields, never the image or the label
    const std::string& top = l.path.front();
    const bool bytes_leaf = l.type == PqType::kByteArray &&
                            ((l.path.size() == 2 && l.path[1] == "bytes") || (l.path.size() == 1 && !l.text));
    const bool integer = l.path.size() == 1 && IsInteger(l);
    // Columns the options name are taken whatever the metadata says.
    if (!opts.image_column.empty() && top == opts.image_column && l.type == PqType::kByteArray &&
        ((l.path.size() == 2 && l.path[1] == "bytes") || l.path.size() == 1)) {
      if (!k.named_image) k.images.clear();
      k.named_image = true;
      k.images.push_back(int(i));
    }
    if (!opts.label_column.empty() && top == opts.label_column && integer) {
      if (!k.named_label) k.labels.clear();
      k.named_label = true;
      k.labels.push_back(int(i));
    }
    const auto type = type_of.find(top);
    const bool declared_image = type != type_of.end() && type->second == "Image";
    const bool struct_bytes = bytes_leaf && l.path.size() == 2 && type == type_of.end();
    if (!k.named_image && opts.image_column.empty() && bytes_leaf &&
        (declared_image || type_of.empty() || (!any_image && struct_bytes && holds_image && holds_image(int(i)))))
      k.images.push_back(int(i));
    const bool declared_label = type != type_of.end() && type->second == "ClassLabel";
    if (!k.named_label && opts.label_column.empty() && integer &&
        (declared_label || (!any_classlabel && (top == "label" || top == "labels"))))
      k.labels.push_back(int(i));
  }
  return k;
}

// The fields of the leaves not taken (boxes at their bbox leaf), the others into c->unused.
void FieldsOfLeaves(const PqFile& f, const std::map<int, ParquetColumns::Field>& boxes,
                    const std::vector<bool>& taken, ParquetColumns* c) {
  for (size_t i = 0; i < f.leaves.size(); ++i) {
    if (auto b = boxes.find(int(i)); b != boxes.end()) c->fields.push_back(b->second);
    if (taken[i]) continue;
    const PqLeaf& l = f.leaves[i];
    const auto lg = l.logical();
    const bool flat = l.path.size() == 1 && l.max_rep == 0;
    const bool list = l.max_rep == 1 && lg.size() == 1 && IsNumber(l);
    const bool floats = l.type == PqType::kFloat || l.type == PqType::kDouble;
    if (flat && l.type == PqType::kByteArray && l.text) c->fields.push_back(Make(int(i), FieldKind::kText, l.dotted()));
    else if ((flat || list) && IsNumber(l)) c->fields.push_back(Make(int(i), floats ? FieldKind::kFloats : FieldKind::kInts, lg[0]));
    else c->unused.push_back(l.dotted());
  }
}

}  // namespace

Result<ParquetColumns> ChooseParquetColumns(const PqFile& f, const std::string& shown, const SourceOptions& opts,
                                            const std::function<bool(int leaf)>& holds_image,
                                            std::vector<std::string>* problems) {
  std::map<std::string, std::string> type_of;
  std::map<std::string, std::vector<std::string>> names;
  nlohmann::json feats = nlohmann::json::object();
  HfFeatures(f, shown, &type_of, &names, &feats, problems);
  ParquetColumns c;
  const bool any_classlabel =
      std::count_if(type_of.begin(), type_of.end(), [](const auto& t) { return t.second == "ClassLabel"; }) > 0;
  const Candidates k = ImageAndLabelCandidates(f, type_of, any_classlabel, opts, holds_image);
  const std::vector<int>& images = k.images;
  const std::vector<int>& labels = k.labels;
  const bool named_image = k.named_image, named_label = k.named_label;
  auto list = [&](const std::vector<int>& idx) {
    std::string s;
    for (int i : idx) s += (s.empty() ? "" : ", ") + f.leaves[size_t(i)].dotted();
    return s;
  };
  std::string all;
  for (const auto& l : f.leaves) all += (all.empty() ? "" : ", ") + l.dotted();
  if (!opts.image_column.empty() && !named_image)
    return Status::InvalidArgument(shown + ": --image-column " + opts.image_column +
                                   " is not a struct<bytes, path> or binary column; the columns: " + all);
  if (!opts.label_column.empty() && !named_label)
    return Status::InvalidArgument(shown + ": --label-column " + opts.label_column +
                                   " is not an integer column; the columns: " + all);
  if (images.empty())
    return Status::InvalidArgument(shown + ": no image column (a struct<bytes, path> or binary column) among " + all);
  if (images.size() > 1)
    return Status::InvalidArgument(shown + ": several image columns: " + list(images) + " (--image-column NAME chooses)");
  if (labels.size() > 1)
    return Status::InvalidArgument(shown + ": several label columns: " + list(labels) + " (--label-column NAME chooses)");
  c.image = images[0];
  const PqLeaf& img = f.leaves[size_t(c.image)];
  for (size_t i = 0; i < f.leaves.size(); ++i)
    if (img.path.size() == 2 && f.leaves[i].path.size() == 2 && f.leaves[i].path[0] == img.path[0] &&
        f.leaves[i].path[1] == "path" && f.leaves[i].type == PqType::kByteArray && f.leaves[i].max_rep == 0)
      c.path = int(i);
  if (!labels.empty()) {
    c.label = labels[0];
    if (auto it = names.find(f.leaves[size_t(c.label)].path.front()); it != names.end()) c.names = it->second;
  } else if (!any_classlabel) {
    // No label column named or declared: say which integer columns there are.
    std::string ints;
    for (const auto& l : f.leaves)
      if (l.path.size() == 1 && l.max_rep == 0 && IsInteger(l)) ints += (ints.empty() ? "" : ", ") + l.dotted();
    if (!ints.empty()) problems->push_back(shown + ": no label column (--label-column NAME takes one of " + ints + ")");
  }
  std::vector<bool> taken(f.leaves.size(), false);
  for (int i : {c.image, c.path, c.label})
    if (i >= 0) taken[size_t(i)] = true;
  std::map<int, ParquetColumns::Field> boxes;
  ChooseBoxes(f, feats, shown, problems, &boxes, &taken);
  FieldsOfLeaves(f, boxes, taken, &c);
  return c;
}

namespace {

using Fields = std::vector<std::vector<SourceField>>;

std::string ColumnWhere(const PqFile& f, int leaf, const std::string& where) {
  return where + ", column " + f.leaves[size_t(leaf)].dotted();
}

// A flat column: one value a row (null: an empty field).
Status ReadFlat(const PqReadFn& read, uint64_t size, PqBudget& budget, const PqFile& f, const PqRowGroup& rg,
                const ParquetColumns::Field& fc, const std::string& where, Fields* fields, std::vector<std::string>* bad) {
  const PqLeaf& leaf = f.leaves[size_t(fc.leaf)];
  return ReadParquetColumn(
      read, size, budget, leaf, rg.columns[size_t(fc.leaf)], rg.num_rows, ColumnWhere(f, fc.leaf, where),
      [&](int64_t r, const PqValue& v) {
        SourceField sf;
        sf.slot = fc.slot;
        if (!v.null && fc.kind == FieldKind::kText) {
          sf.text.assign(reinterpret_cast<const char*>(v.p), v.n);
          if (v.n > limits::kValueMember || !IsUtf8(sf.text)) {
            (*bad)[size_t(r)] = "column " + leaf.dotted() + " is not UTF-8 text within " +
                                std::to_string(limits::kValueMember) + " bytes";
            sf.text.clear();
          }
        } else if (!v.null && fc.kind == FieldKind::kInts) {
          if (v.i < INT32_MIN || v.i > INT32_MAX) (*bad)[size_t(r)] = "column " + leaf.dotted() + ": " + std::to_string(v.i) + " does not fit int32";
          else sf.ints.push_back(int32_t(v.i));
        } else if (!v.null) {
          sf.floats.push_back(float(v.f));
        }
        (*fields)[size_t(r)].push_back(std::move(sf));
        return Status::Ok();
      });
}

// The elements of list `l` at `depth` of a row as numbers; false (and
// *why) for a null element or an integer beyond int32 where `ints`.
bool Numbers(const PqLeaf& leaf, const PqRow& row, const PqList& l, bool ints, std::vector<double>* out,
             std::string* why) {
  out->clear();
  const bool floats = leaf.type == PqType::kFloat || leaf.type == PqType::kDouble;
  for (uint32_t k = l.begin; k < l.end; ++k) {
    const PqValue& v = row.values[k];
    if (v.null) {
      *why = "column " + Joined(leaf.logical()) + ": a null in a list";
      return false;
    }
    if (ints && (v.i < INT32_MIN || v.i > INT32_MAX)) {
      *why = "column " + Joined(leaf.logical()) + ": " + std::to_string(v.i) + " does not fit int32";
      return false;
    }
    out->push_back(floats ? v.f : double(v.i));
  }
  return true;
}

// A top-level list of numbers: the list a row (null: an empty field).
Status ReadList(const PqReadFn& read, uint64_t size, PqBudget& budget, const PqFile& f, const PqRowGroup& rg,
                const ParquetColumns::Field& fc, const std::string& where, Fields* fields, std::vector<std::string>* bad) {
  const PqLeaf& leaf = f.leaves[size_t(fc.leaf)];
  std::vector<double> nums;
  return ReadParquetRows(read, size, budget, leaf, rg.columns[size_t(fc.leaf)], rg.num_rows, ColumnWhere(f, fc.leaf, where),
                         [&](int64_t r, const PqRow& row) {
                           SourceField sf;
                           sf.slot = fc.slot;
                           const PqList& l = row.lists[0][0];
                           const bool ints = fc.kind == FieldKind::kInts;
                           if (!l.null && Numbers(leaf, row, l, ints, &nums, &(*bad)[size_t(r)]))
                             for (double x : nums) ints ? sf.ints.push_back(int32_t(x)) : sf.floats.push_back(float(x));
                           (*fields)[size_t(r)].push_back(std::move(sf));
                           return Status::Ok();
                         });
}

// Boxes: the bbox list of lists (4 numbers each) and its category list,
// as long as it, in each row (null lists: no boxes).
Status ReadBoxes(const PqReadFn& read, uint64_t size, PqBudget& budget, const PqFile& f, const PqRowGroup& rg,
                 const ParquetColumns::Field& fc, const std::string& where, Fields* fields, std::vector<std::string>* bad) {
  const PqLeaf& bl = f.leaves[size_t(fc.leaf)];
  const PqLeaf& cl = f.leaves[size_t(fc.category)];
  const size_t n = size_t(rg.num_rows);
  std::vector<std::vector<std::array<float, 4>>> boxes(n);
  std::vector<std::vector<double>> cats(n);
  std::vector<double> nums;
  IMAGEPACK_RETURN_IF_ERROR(ReadParquetRows(
      read, size, budget, bl, rg.columns[size_t(fc.leaf)], rg.num_rows, ColumnWhere(f, fc.leaf, where),
      [&](int64_t r, const PqRow& row) {
        const PqList& outer = row.lists[0][0];
        for (uint32_t k = outer.null ? 0 : outer.begin; k < (outer.null ? 0 : outer.end) && (*bad)[size_t(r)].empty(); ++k) {
          const PqList& box = row.lists[1][k];
          if (box.null || !Numbers(bl, row, box, false, &nums, &(*bad)[size_t(r)]) || nums.size() != 4) {
            if ((*bad)[size_t(r)].empty())
              (*bad)[size_t(r)] = "column " + fc.name + ": a box of " + (box.null ? std::string("null") : std::to_string(nums.size()) + " numbers") + " (4 expected)";
            break;
          }
          boxes[size_t(r)].push_back({float(nums[0]), float(nums[1]), float(nums[2]), float(nums[3])});
        }
        return Status::Ok();
      }));
  IMAGEPACK_RETURN_IF_ERROR(ReadParquetRows(read, size, budget, cl, rg.columns[size_t(fc.category)], rg.num_rows,
                                            ColumnWhere(f, fc.category, where), [&](int64_t r, const PqRow& row) {
                                              const PqList& l = row.lists[0][0];
                                              if (!l.null && (*bad)[size_t(r)].empty())
                                                Numbers(cl, row, l, true, &cats[size_t(r)], &(*bad)[size_t(r)]);
                                              return Status::Ok();
                                            }));
  for (size_t r = 0; r < n; ++r) {
    SourceField sf;
    sf.slot = fc.slot;
    if ((*bad)[r].empty() && boxes[r].size() != cats[r].size())
      (*bad)[r] = "column " + fc.name + ": " + std::to_string(boxes[r].size()) + " boxes for " +
                  std::to_string(cats[r].size()) + " categories";
    for (size_t k = 0; k < boxes[r].size() && (*bad)[r].empty(); ++k) {
      const auto& b = boxes[r][k];
      // [x, y, w, h] (COCO) or [x0, y0, x1, y1]
      sf.boxes.push_back({b[0], b[1], fc.xyxy ? b[2] : b[0] + b[2], fc.xyxy ? b[3] : b[1] + b[3], int32_t(cats[r][k])});
    }
    (*fields)[r].push_back(std::move(sf));
  }
  return Status::Ok();
}

}  // namespace

Status ReadParquetFields(const PqReadFn& read, uint64_t size, PqBudget& budget, const PqFile& f, size_t g, const ParquetColumns& c,
                         const std::string& where, std::vector<std::vector<SourceField>>* fields,
                         std::vector<std::string>* bad) {
  const PqRowGroup& rg = f.row_groups[g];
  for (const ParquetColumns::Field& fc : c.fields) {
    const PqLeaf& leaf = f.leaves[size_t(fc.leaf)];
    if (fc.kind == FieldKind::kBoxes) IMAGEPACK_RETURN_IF_ERROR(ReadBoxes(read, size, budget, f, rg, fc, where, fields, bad));
    else if (leaf.max_rep > 0) IMAGEPACK_RETURN_IF_ERROR(ReadList(read, size, budget, f, rg, fc, where, fields, bad));
    else IMAGEPACK_RETURN_IF_ERROR(ReadFlat(read, size, budget, f, rg, fc, where, fields, bad));
  }
  return Status::Ok();
}

}  // namespace imagepack::internal
