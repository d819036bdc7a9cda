// Parquet's footer and page headers: the Thrift compact protocol read by
// hand (formats/parquet.h). Pages and their encodings: parquet_pages.cc.
#include "formats/parquet.h"

#include <cstring>

#include "base/le.h"
#include "formats/text.h"

namespace imagepack::internal {

std::string PqLeaf::dotted() const {
  std::string out;
  for (const auto& p : path) out += (out.empty() ? "" : ".") + p;
  return out;
}

std::vector<std::string> PqLeaf::logical() const {
  std::vector<std::string> out;
  bool element_next = false;  // the one child of a list's repeated group is its element
  for (size_t i = 0; i < path.size() && i < nodes.size(); ++i) {
    const bool in_list = i > 0 && nodes[i - 1].list && nodes[i].repetition == 2;
    if (element_next && !in_list) {
      element_next = false;
      continue;
    }
    element_next = false;
    if (!in_list) {
      out.push_back(path[i]);
      continue;
    }
    // A repeated group of one child is the element's holder unless it is
    // named "array" or LIST_tuple, where it is the element (a struct).
    element_next = nodes[i].children == 1 && path[i] != "array" && path[i] != path[i - 1] + "_tuple";
  }
  return out;
}

namespace {

// Thrift compact protocol types.
enum : int { kStop = 0, kTrue = 1, kFalse = 2, kByte = 3, kI16 = 4, kI32 = 5, kI64 = 6, kDouble = 7, kBinary = 8,
             kList = 9, kSet = 10, kMap = 11, kStruct = 12 };

// Bytes [pos, end) read as Thrift compact values; errors name the byte.
struct Thrift {
  const uint8_t* d;
  size_t pos;
  size_t end;
  const std::string& shown;
  int depth = 0;
  bool bool_value = false;  // a bool field's value, carried by its type
  // Memory the parsed structures may take (ParseParquetFooter's budget),
  // charged before each element is made.
  uint64_t memory_left = UINT64_MAX;

  Status Bad(const std::string& what) const {
    return Status::Corruption(shown + ": " + what + " at byte " + std::to_string(pos));
  }
  // Every container (structure, list, set, map) counts toward one depth:
  // a crafted footer of nested lists is refused, never recursed into.
  Status Enter(const char* kind) {
    if (++depth > limits::kThriftDepth)
      return Bad(std::string("Thrift: ") + kind + " nested deeper than " + std::to_string(limits::kThriftDepth));
    return Status::Ok();
  }
  Status Charge(uint64_t bytes, const char* what) {
    if (bytes > memory_left)
      return Status::InvalidArgument(shown + ": the footer's " + what + " at byte " + std::to_string(pos) +
                                     " take more memory than its budget (" +
                                     std::to_string(limits::kParquetFooterMemoryFactor) + " x the footer's " +
                                     std::to_string(end) + " bytes + " +
                                     std::to_string(limits::kParquetFooterMemoryFloor) + ")");
    memory_left -= bytes;
    return Status::Ok();
  }
  Result<uint64_t> Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos >= end) return Bad("Thrift: a varint cut short");
      const uint8_t b = d[pos++];
      if (shift == 63 && (b & 0x7e)) return Bad("Thrift: a varint over 64 bits");
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    return Bad("Thrift: a varint over 10 bytes");
  }
  Result<int64_t> Zigzag() {
    auto v = Varint();
    if (!v.ok()) return v.status();
    return int64_t(*v >> 1) ^ -int64_t(*v & 1);
  }
  Result<int32_t> I32() {
    auto v = Zigzag();
    if (!v.ok()) return v.status();
    if (*v < INT32_MIN || *v > INT32_MAX) return Bad("Thrift: an i32 out of range");
    return int32_t(*v);
  }
  Result<std::string> Binary() {
    auto n = Varint();
    if (!n.ok()) return n.status();
    if (*n > end - pos) return Bad("Thrift: a string of " + std::to_string(*n) + " bytes past the end");
    std::string s(reinterpret_cast<const char*>(d + pos), size_t(*n));
    pos += size_t(*n);
    return s;
  }
  // A list's element type and size (each element at least one byte).
  Status ListHeader(int* type, size_t* size) {
    if (pos >= end) return Bad("Thrift: a list cut short");
    const uint8_t b = d[pos++];
    *type = b & 0x0f;
    uint64_t n = b >> 4;
    if (n == 15) {
      auto v = Varint();
      if (!v.ok()) return v.status();
      n = *v;
    }
    if (n > end - pos) return Bad("Thrift: a list of " + std::to_string(n) + " elements past the end");
    *size = size_t(n);
    return Status::Ok();
  }
  Status Skip(int type) {
    switch (type) {
      case kTrue:
      case kFalse: return Status::Ok();
      case kByte:
        if (pos >= end) return Bad("Thrift: a byte cut short");
        ++pos;
        return Status::Ok();
      case kI16:
      case kI32:
      case kI64: return Varint().status();
      case kDouble:
        if (end - pos < 8) return Bad("Thrift: a double cut short");
        pos += 8;
        return Status::Ok();
      case kBinary: return Binary().status();
      case kList:
      case kSet: {
        int et;
        size_t n;
        IMAGEPACK_RETURN_IF_ERROR(Enter(type == kList ? "lists" : "sets"));
        IMAGEPACK_RETURN_IF_ERROR(ListHeader(&et, &n));
        for (size_t i = 0; i < n; ++i) IMAGEPACK_RETURN_IF_ERROR(SkipElement(et));
        --depth;
        return Status::Ok();
      }
      case kMap: {
        IMAGEPACK_RETURN_IF_ERROR(Enter("maps"));
        auto n = Varint();
        if (!n.ok()) return n.status();
        if (*n == 0) {
          --depth;
          return Status::Ok();
        }
        if (pos >= end || *n > end - pos) return Bad("Thrift: a map past the end");
        const uint8_t kv = d[pos++];
        for (uint64_t i = 0; i < *n; ++i) {
          IMAGEPACK_RETURN_IF_ERROR(SkipElement(kv >> 4));
          IMAGEPACK_RETURN_IF_ERROR(SkipElement(kv & 0x0f));
        }
        --depth;
        return Status::Ok();
      }
      case kStruct: return Struct([&](int, int t) { return Skip(t); });
      default: return Bad("Thrift: unknown type " + std::to_string(type));
    }
  }
  // A container's element: a bool is a byte there.
  Status SkipElement(int type) {
    if (type == kTrue || type == kFalse) return Skip(kByte);
    return Skip(type);
  }
  // Reads a struct's fields until STOP, each through `field(id, type)`,
  // which reads its value (or skips it). A field id is an i16: one written
  // whole or reached by deltas beyond that range is damage (an id of
  // 2^31 - 1 plus a delta overflowed int; so did a 256 MiB footer of
  // 1-byte bool fields, each 15 past the last).
  template <typename Fn>
  Status Struct(Fn&& field) {
    IMAGEPACK_RETURN_IF_ERROR(Enter("structures"));
    int last = 0;
    for (;;) {
      if (pos >= end) return Bad("Thrift: a structure cut short");
      const uint8_t b = d[pos++];
      if (b == kStop) break;
      const int type = b & 0x0f;
      int64_t id = int64_t(last) + (b >> 4);
      if ((b >> 4) == 0) {
        auto v = Zigzag();
        if (!v.ok()) return v.status();
        id = *v;
      }
      if (id < INT16_MIN || id > INT16_MAX) return Bad("Thrift: a field id of " + std::to_string(id) + " (an i16)");
      last = int(id);
      bool_value = type == kTrue;
      IMAGEPACK_RETURN_IF_ERROR(field(last, type));
    }
    --depth;
    return Status::Ok();
  }
  // A list of structs, each read by `element`, at most `budget` of them.
  template <typename Fn>
  Status StructList(int type, size_t budget, const char* what, Fn&& element) {
    if (type != kList) return Skip(type);
    int et;
    size_t n;
    IMAGEPACK_RETURN_IF_ERROR(ListHeader(&et, &n));
    if (n > budget) return Bad(std::string("more than ") + std::to_string(budget) + " " + what);
    IMAGEPACK_RETURN_IF_ERROR(Enter("lists"));
    for (size_t i = 0; i < n; ++i) {
      if (et != kStruct) {
        IMAGEPACK_RETURN_IF_ERROR(SkipElement(et));
        continue;
      }
      IMAGEPACK_RETURN_IF_ERROR(element());
    }
    --depth;
    return Status::Ok();
  }
};

// Reads an integer field of any integer type into *out.
template <typename T>
Status Int(Thrift& t, int type, T* out) {
  if (type != kI16 && type != kI32 && type != kI64) return t.Skip(type);
  auto v = t.Zigzag();
  if (!v.ok()) return v.status();
  *out = T(*v);
  return Status::Ok();
}

struct SchemaElement {
  int type = -1;
  int type_length = 0;
  int repetition = 0;  // REQUIRED, OPTIONAL, REPEATED
  std::string name;
  int num_children = 0;
  bool text = false;
  bool list = false;
};

Status ReadSchemaElement(Thrift& t, SchemaElement* e) {
  return t.Struct([&](int id, int type) -> Status {
    switch (id) {
      case 1: return Int(t, type, &e->type);
      case 2: return Int(t, type, &e->type_length);
      case 3: return Int(t, type, &e->repetition);
      case 4: {
        if (type != kBinary) return t.Skip(type);
        auto s = t.Binary();
        if (!s.ok()) return s.status();
        e->name = std::move(s.value());
        return Status::Ok();
      }
      case 5: return Int(t, type, &e->num_children);
      case 6: {
        int converted = -1;
        IMAGEPACK_RETURN_IF_ERROR(Int(t, type, &converted));
        e->text = e->text || converted == 0;  // UTF8
        e->list = e->list || converted == 3;  // LIST
        return Status::Ok();
      }
      case 10:  // LogicalType, a union: STRING is its field 1
        if (type != kStruct) return t.Skip(type);
        return t.Struct([&](int lid, int ltype) {
          e->text = e->text || lid == 1;
          e->list = e->list || lid == 3;
          return t.Skip(ltype);
        });
      default: return t.Skip(type);
    }
  });
}

Status ReadColumnMeta(Thrift& t, PqChunk* c) {
  return t.Struct([&](int id, int type) -> Status {
    switch (id) {
      case 4: return Int(t, type, &c->codec);
      case 5: return Int(t, type, &c->num_values);
      case 7: return Int(t, type, &c->total_compressed_size);
      case 9: return Int(t, type, &c->data_page_offset);
      case 11: return Int(t, type, &c->dictionary_page_offset);
      default: return t.Skip(type);
    }
  });
}

Status ReadColumnChunk(Thrift& t, PqChunk* c) {
  return t.Struct([&](int id, int type) -> Status {
    if (id == 1 && type == kBinary) {
      auto s = t.Binary();
      if (!s.ok()) return s.status();
      c->file_path = std::move(s.value());
      return Status::Ok();
    }
    if (id == 3 && type == kStruct) return ReadColumnMeta(t, c);
    if (id == 8 || id == 9) c->encrypted = true;
    return t.Skip(type);
  });
}

Status ReadRowGroup(Thrift& t, PqRowGroup* g) {
  return t.Struct([&](int id, int type) -> Status {
    if (id == 1)
      return t.StructList(type, limits::kParquetSchema, "column chunks", [&] {
        IMAGEPACK_RETURN_IF_ERROR(t.Charge(sizeof(PqChunk), "column chunks"));
        g->columns.emplace_back();
        return ReadColumnChunk(t, &g->columns.back());
      });
    if (id == 3) return Int(t, type, &g->num_rows);
    return t.Skip(type);
  });
}

Status ReadKeyValue(Thrift& t, std::pair<std::string, std::string>* kv) {
  return t.Struct([&](int id, int type) -> Status {
    if ((id == 1 || id == 2) && type == kBinary) {
      auto s = t.Binary();
      if (!s.ok()) return s.status();
      (id == 1 ? kv->first : kv->second) = std::move(s.value());
      return Status::Ok();
    }
    return t.Skip(type);
  });
}

// The schema's depth-first list as leaves: element `*at` and its children.
// `nodes` and `rep_defs` go along the path (PqLeaf).
Status AddLeaves(const std::vector<SchemaElement>& schema, size_t* at, std::vector<std::string>& path,
                 std::vector<PqNode>& nodes, std::vector<int>& rep_defs, int def, int depth, const std::string& shown,
                 Thrift& t, std::vector<PqLeaf>* out) {
  if (*at >= schema.size()) return Status::Corruption(shown + ": the schema's children run past its end");
  if (depth > limits::kThriftDepth) return Status::Corruption(shown + ": a schema nested too deep");
  const SchemaElement& e = schema[(*at)++];
  if (depth > 0) {
    path.push_back(e.name);
    nodes.push_back({e.repetition, e.list, e.num_children});
    def += e.repetition != 0 ? 1 : 0;
    if (e.repetition == 2) rep_defs.push_back(def);
  }
  if (e.num_children < 0) return Status::Corruption(shown + ": schema element '" + Shown(e.name) + "' has negative children");
  if (e.num_children == 0 && depth > 0) {
    if (e.type < 0 || e.type > 7) return Status::Corruption(shown + ": column " + Shown(e.name) + " has no physical type");
    // Each leaf copies its path: a deep schema of many leaves is charged.
    uint64_t bytes = sizeof(PqLeaf) + path.size() * (sizeof(std::string) + sizeof(PqNode) + sizeof(int));
    for (const auto& p : path) bytes += p.size();
    IMAGEPACK_RETURN_IF_ERROR(t.Charge(bytes, "leaf columns"));
    PqLeaf leaf;
    leaf.path = path;
    leaf.nodes = nodes;
    leaf.type = PqType(e.type);
    leaf.type_length = e.type_length;
    leaf.max_def = def;
    leaf.max_rep = int(rep_defs.size());
    leaf.rep_defs = rep_defs;
    leaf.text = e.text;
    out->push_back(std::move(leaf));
  }
  for (int i = 0; i < e.num_children; ++i)
    IMAGEPACK_RETURN_IF_ERROR(AddLeaves(schema, at, path, nodes, rep_defs, def, depth + 1, shown, t, out));
  if (depth > 0) {
    path.pop_back();
    nodes.pop_back();
    if (e.repetition == 2) rep_defs.pop_back();
  }
  return Status::Ok();
}

}  // namespace

Result<uint32_t> ParquetFooterLength(const uint8_t head[4], const uint8_t tail[8], uint64_t file_size,
                                     const std::string& shown) {
  if (std::memcmp(tail + 4, "PARE", 4) == 0)
    return Status::NotSupported(shown + ": an encrypted parquet file (its footer is encrypted); not read");
  if (file_size < 12 || std::memcmp(head, "PAR1", 4) != 0 || std::memcmp(tail + 4, "PAR1", 4) != 0)
    return Status::Corruption(shown + ": not a parquet file (no PAR1 at its start and end)");
  const uint32_t n = Get<uint32_t>(tail);
  if (n > file_size - 12 || n > limits::kParquetFooterBytes)
    return Status::Corruption(shown + ": a footer of " + std::to_string(n) + " bytes in a file of " +
                              std::to_string(file_size) + " (budget " + std::to_string(limits::kParquetFooterBytes) +
                              ")");
  return n;
}

Result<PqFile> ParseParquetFooter(const uint8_t* data, size_t size, uint64_t file_size, const std::string& shown) {
  Thrift t{data, 0, size, shown};
  t.memory_left = limits::kParquetFooterMemoryFloor + limits::kParquetFooterMemoryFactor * uint64_t(size);
  PqFile f;
  std::vector<SchemaElement> schema;
  IMAGEPACK_RETURN_IF_ERROR(t.Struct([&](int id, int type) -> Status {
    switch (id) {
      case 2:
        return t.StructList(type, limits::kParquetSchema, "schema elements", [&] {
          IMAGEPACK_RETURN_IF_ERROR(t.Charge(sizeof(SchemaElement), "schema elements"));
          schema.emplace_back();
          return ReadSchemaElement(t, &schema.back());
        });
      case 3: return Int(t, type, &f.num_rows);
      case 4:
        return t.StructList(type, limits::kParquetRowGroups, "row groups", [&] {
          IMAGEPACK_RETURN_IF_ERROR(t.Charge(sizeof(PqRowGroup), "row groups"));
          f.row_groups.emplace_back();
          return ReadRowGroup(t, &f.row_groups.back());
        });
      case 5:
        return t.StructList(type, limits::kParquetSchema, "key-value pairs", [&] {
          IMAGEPACK_RETURN_IF_ERROR(t.Charge(sizeof(f.key_values[0]), "key-value pairs"));
          f.key_values.emplace_back();
          return ReadKeyValue(t, &f.key_values.back());
        });
      case 6: {
        if (type != kBinary) return t.Skip(type);
        auto s = t.Binary();
        if (!s.ok()) return s.status();
        f.created_by = std::move(s.value());
        return Status::Ok();
      }
      case 8: return Status::NotSupported(shown + ": an encrypted parquet file; not read");
      default: return t.Skip(type);
    }
  }));
  if (schema.empty()) return Status::Corruption(shown + ": the footer has no schema");
  size_t at = 0;
  std::vector<std::string> path;
  std::vector<PqNode> nodes;
  std::vector<int> rep_defs;
  IMAGEPACK_RETURN_IF_ERROR(AddLeaves(schema, &at, path, nodes, rep_defs, 0, 0, shown, t, &f.leaves));
  if (at != schema.size()) return Status::Corruption(shown + ": the schema has elements outside its root");
  int64_t rows = 0;
  for (size_t g = 0; g < f.row_groups.size(); ++g) {
    const PqRowGroup& rg = f.row_groups[g];
    if (rg.columns.size() != f.leaves.size())
      return Status::Corruption(shown + ": row group " + std::to_string(g) + " has " + std::to_string(rg.columns.size()) +
                                " column chunks for " + std::to_string(f.leaves.size()) + " columns");
    if (rg.num_rows < 0) return Status::Corruption(shown + ": row group " + std::to_string(g) + " has negative rows");
    if (rg.num_rows > limits::kParquetGroupRows)
      return Status::InvalidArgument(shown + ": row group " + std::to_string(g) + " has " + std::to_string(rg.num_rows) +
                                     " rows (budget " + std::to_string(limits::kParquetGroupRows) + ")");
    rows += rg.num_rows;
    if (rows > limits::kParquetFileRows)
      return Status::InvalidArgument(shown + ": more than " + std::to_string(limits::kParquetFileRows) +
                                     " rows in its row groups (budget)");
  }
  // Column chunks hold bytes of their own: together they fit in the file.
  // Row groups that share one chunk (a million times over) would read it
  // again for each; work per byte of the file stays bounded.
  uint64_t chunk_bytes = 0;
  for (size_t g = 0; g < f.row_groups.size(); ++g)
    for (const PqChunk& c : f.row_groups[g].columns) {
      if (c.total_compressed_size < 0)
        return Status::Corruption(shown + ": row group " + std::to_string(g) + " has a column chunk of negative size");
      chunk_bytes += uint64_t(c.total_compressed_size);
      if (chunk_bytes > file_size)
        return Status::Corruption(shown + ": its column chunks add up to more bytes than the file's " +
                                  std::to_string(file_size) + " (by row group " + std::to_string(g) +
                                  "; chunks that share bytes are not read)");
    }
  return f;
}

Result<PqPageHeader> ParseParquetPageHeader(const uint8_t* data, size_t size, size_t* used) {
  static const std::string kShown = "page header";
  Thrift t{data, 0, size, kShown};
  PqPageHeader h;
  IMAGEPACK_RETURN_IF_ERROR(t.Struct([&](int id, int type) -> Status {
    switch (id) {
      case 1: return Int(t, type, &h.type);
      case 2: return Int(t, type, &h.uncompressed_size);
      case 3: return Int(t, type, &h.compressed_size);
      case 4:
        h.has_crc = type == kI32;
        return Int(t, type, &h.crc);
      case 5:  // DataPageHeader
      case 7:  // DictionaryPageHeader
        if (type != kStruct) return t.Skip(type);
        return t.Struct([&](int sid, int stype) -> Status {
          if (sid == 1) return Int(t, stype, &h.num_values);
          if (sid == 2) return Int(t, stype, &h.encoding);
          if (id == 5 && sid == 3) return Int(t, stype, &h.def_encoding);
          if (id == 5 && sid == 4) return Int(t, stype, &h.rep_encoding);
          return t.Skip(stype);
        });
      case 8:  // DataPageHeaderV2
        if (type != kStruct) return t.Skip(type);
        return t.Struct([&](int sid, int stype) -> Status {
          switch (sid) {
            case 1: return Int(t, stype, &h.num_values);
            case 2: return Int(t, stype, &h.num_nulls);
            case 3: return Int(t, stype, &h.num_rows);
            case 4: return Int(t, stype, &h.encoding);
            case 5: return Int(t, stype, &h.def_length);
            case 6: return Int(t, stype, &h.rep_length);
            case 7:
              if (stype == kTrue || stype == kFalse) h.v2_compressed = t.bool_value;
              return t.Skip(stype);
            default: return t.Skip(stype);
          }
        });
      default: return t.Skip(type);
    }
  }));
  if (h.compressed_size < 0 || h.uncompressed_size < 0 || h.num_values < 0 || h.def_length < 0 || h.rep_length < 0)
    return Status::Corruption("page header: a negative size or count");
  *used = t.pos;
  return h;
}

}  // namespace imagepack::internal
