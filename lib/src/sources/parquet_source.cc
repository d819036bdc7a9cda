// Parquet files in the Hugging Face image layout as a source (sources.h,
// OpenParquetSource): the image a struct<bytes, path> (or binary) column,
// the label a ClassLabel (or integer "label") column, class names from the
// "huggingface" key-value metadata, other columns fields
// (sources/parquet_columns.h).
// Image bytes, which sit in compressed
// pages, are copied once into an unnamed scratch file per parquet file and
// read back from there while packing.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "formats/braces.h"
#include "formats/labels.h"
#include "base/limits.h"
#include "formats/parquet.h"
#include "formats/text.h"
#include "imagepack/fields.h"
#include "imagepack/files.h"
#include "imagepack/probe.h"
#include "imagepack/storage.h"
#include "sources/parquet_columns.h"
#include "sources/registry.h"
#include "sources/sources.h"
#include "storage/fd_io.h"
#include "storage/spill_file.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

bool IsParquetName(const std::string& path) {
  const std::string l = LowerAscii(path);
  return l.size() > 8 && l.compare(l.size() - 8, 8, ".parquet") == 0;
}

bool IsSideName(const std::string& name) {
  const std::string l = LowerAscii(name);
  for (const char* tail : {".json", ".md", ".txt", ".gitattributes"})
    if (l.size() >= std::strlen(tail) && l.compare(l.size() - std::strlen(tail), std::strlen(tail), tail) == 0)
      return true;
  return false;
}

}  // namespace

// A .parquet file is the row's; the Hub's README.md, .gitattributes and
// JSON or text side files may lie beside them; anything else rules a
// folder out.
NameIs ParquetNameIs(const std::string& base_name) {
  if (IsParquetName(base_name)) return NameIs::kMine;
  return IsSideName(base_name) ? NameIs::kSide : NameIs::kForeign;
}

namespace {

// What one row gave, in item order.
struct Row {
  RawLabel raw;
  std::string where;
  std::string path;  // the image struct's path, if any
};

struct PqListing {
  std::vector<Row> rows;
  ParquetColumns columns;
  bool chosen = false;
  std::vector<std::string> leaf_names;  // the first file's columns, which the others must have
};

std::string ExtOf(const uint8_t* p, size_t n) {
  if (n >= 2 && p[0] == 0xff && p[1] == 0xd8) return "jpg";
  if (n >= 4 && p[0] == 0x89 && p[1] == 'P' && p[2] == 'N' && p[3] == 'G') return "png";
  if (n >= 12 && std::memcmp(p, "RIFF", 4) == 0 && std::memcmp(p + 8, "WEBP", 4) == 0) return "webp";
  if (n >= 3 && std::memcmp(p, "GIF", 3) == 0) return "gif";
  if (n >= 2 && p[0] == 'B' && p[1] == 'M') return "bmp";
  return "img";
}

// Row group `g` of a file: its label and path columns, then its images
// appended to the scratch file `fd` (at *written) as items of `archive`.
Status AddRowGroup(const PqReadFn& read, uint64_t size, PqBudget& budget, const PqFile& f, size_t g, int64_t first_row,
                   const std::string& file, int fd, uint64_t* written, int archive, DatasetSource& s, PqListing& l) {
  const PqRowGroup& rg = f.row_groups[g];
  const ParquetColumns& c = l.columns;
  const std::string where = file + ": row group " + std::to_string(g);
  const size_t n = size_t(rg.num_rows);
  std::vector<RawLabel> labels(n);
  std::vector<std::string> paths(n);
  if (c.label >= 0)
    IMAGEPACK_RETURN_IF_ERROR(ReadParquetColumn(read, size, budget, f.leaves[size_t(c.label)], rg.columns[size_t(c.label)],
                                                rg.num_rows, where + ", column " + f.leaves[size_t(c.label)].dotted(),
                                                [&](int64_t r, const PqValue& v) {
                                                  if (!v.null) labels[size_t(r)] = LabelFromIndex(v.i);
                                                  return Status::Ok();
                                                }));
  if (c.path >= 0)
    IMAGEPACK_RETURN_IF_ERROR(ReadParquetColumn(read, size, budget, f.leaves[size_t(c.path)], rg.columns[size_t(c.path)],
                                                rg.num_rows, where + ", column " + f.leaves[size_t(c.path)].dotted(),
                                                [&](int64_t r, const PqValue& v) {
                                                  if (!v.null && v.n <= limits::kNameBytes)
                                                    paths[size_t(r)].assign(reinterpret_cast<const char*>(v.p), v.n);
                                                  return Status::Ok();
                                                }));
  // The fields, per row in slot order; a value that does not fit its kind
  // skips its row (bad[row]).
  std::vector<std::vector<SourceField>> fields(c.fields.empty() ? 0 : n);
  std::vector<std::string> bad(n);
  IMAGEPACK_RETURN_IF_ERROR(ReadParquetFields(read, size, budget, f, g, c, where, &fields, &bad));
  return ReadParquetColumn(
      read, size, budget, f.leaves[size_t(c.image)], rg.columns[size_t(c.image)], rg.num_rows,
      where + ", column " + f.leaves[size_t(c.image)].dotted(), [&](int64_t r, const PqValue& v) -> Status {
        const std::string row_where = file + ": row " + std::to_string(first_row + r);
        if (v.null || v.n == 0) {
          s.errors.push_back({row_where, "no image (null)"});
          return Status::Ok();
        }
        if (!bad[size_t(r)].empty()) {
          s.errors.push_back({row_where, bad[size_t(r)]});
          return Status::Ok();
        }
        IMAGEPACK_RETURN_IF_ERROR(PwriteAll(fd, v.p, v.n, *written, file + " (scratch copy)"));
        SourceItem item;
        item.archive = archive;
        item.offset = *written;
        item.size = v.n;
        char num[24];
        std::snprintf(num, sizeof num, "%08lld", static_cast<long long>(first_row + r));
        item.rel = BaseNameOf(file) + "/" + num + "." + ExtOf(v.p, v.n);
        *written += v.n;
        if (!fields.empty()) item.fields = std::move(fields[size_t(r)]);
        s.items.push_back(std::move(item));
        l.rows.push_back({labels[size_t(r)], row_where, paths[size_t(r)]});
        return Status::Ok();
      });
}

// The footer of `file` (`size` bytes, read through `read`), parsed.
Result<PqFile> ReadFooter(const PqReadFn& read, uint64_t size, const std::string& file) {
  uint8_t head[4] = {0}, tail[8] = {0};
  if (size >= 12) {
    IMAGEPACK_RETURN_IF_ERROR(read(head, 4, 0));
    IMAGEPACK_RETURN_IF_ERROR(read(tail, 8, size - 8));
  }
  auto footer_size = ParquetFooterLength(head, tail, size, file);
  if (!footer_size.ok()) return footer_size.status();
  std::vector<uint8_t> footer(*footer_size);
  IMAGEPACK_RETURN_IF_ERROR(read(footer.data(), footer.size(), size - 8 - footer.size()));
  return ParseParquetFooter(footer.data(), footer.size(), size, file);
}

// Whether the first value of row group 0 in `leaf` that is not null sniffs as an image (read up to it, no further).
bool HoldsImage(const PqReadFn& read, uint64_t size, PqBudget& budget, const PqFile& f, const std::string& file,
                int leaf) {
  if (f.row_groups.empty()) return false;
  bool image = false, seen = false;
  const PqLeaf& pl = f.leaves[size_t(leaf)];
  const PqRowGroup& rg = f.row_groups[0];
  (void)ReadParquetColumn(read, size, budget, pl, rg.columns[size_t(leaf)], rg.num_rows, file,
                          [&](int64_t, const PqValue& v) {
                            if (v.null || v.n == 0) return Status::Ok();
                            seen = true;
                            image = SniffFormat(v.p, v.n) != ImageFormat::kUnknown;
                            return Status::Cancelled("first value read");
                          });
  return seen && image;
}

// Binds the first file's columns (its fields declared, its notes said); a later file's must be the same.
Status TakeColumns(const PqFile& f, const std::string& file, const SourceOptions& opts,
                   const ParquetColumns& chosen, const std::vector<std::string>& notes, DatasetSource& s,
                   PqListing& l) {
  if (!l.chosen) {
    s.problems.insert(s.problems.end(), notes.begin(), notes.end());
    l.columns = chosen;
    l.chosen = true;
    std::vector<ParquetColumns::Field> declared;
    for (ParquetColumns::Field fc : l.columns.fields) {
      auto slot = Declare(s, fc.name, fc.kind, opts);
      if (!slot.ok()) {
        s.problems.push_back(file + ": column " + fc.name + " not packed: " + slot.status().message());
        continue;
      }
      fc.slot = *slot;
      // Boxes: the category's ClassLabel names unless --box-classes gives them.
      if (fc.kind == FieldKind::kBoxes && s.fields[size_t(fc.slot)].classes.empty())
        s.fields[size_t(fc.slot)].classes = fc.classes;
      declared.push_back(fc);
    }
    l.columns.fields = std::move(declared);
    l.leaf_names.clear();
    for (const auto& leaf : f.leaves) l.leaf_names.push_back(leaf.dotted());
  } else {
    std::vector<std::string> names;
    for (const auto& leaf : f.leaves) names.push_back(leaf.dotted());
    if (names != l.leaf_names)
      return Status::InvalidArgument(file + ": its columns are not the first file's (" + std::to_string(names.size()) +
                                     " columns; parquet files of one source share their schema)");
  }
  return Status::Ok();
}

// Opens a file, reads its footer, chooses its columns (the first file's
// choice binds the rest) and adds its row groups: one whose pages are
// damaged is skipped and listed; a codec or encoding not read fails.
Status AddFile(Storage& storage, const std::string& file, const std::string& scratch_dir, const SourceOptions& opts,
               DatasetSource& s, PqListing& l) {
  auto opened = storage.Open(file);
  if (!opened.ok()) return opened.status();
  const ByteSource& bytes = *opened.value();
  const uint64_t size = bytes.size();
  auto read = [&](void* buf, size_t n, uint64_t at) { return bytes.ReadAt(at, n, static_cast<uint8_t*>(buf)); };
  auto f = ReadFooter(read, size, file);
  if (!f.ok()) return f.status();
  PqBudget budget(size);
  auto holds_image = [&](int leaf) { return HoldsImage(read, size, budget, *f, file, leaf); };
  std::vector<std::string> notes;  // said once, for the first file
  auto chosen = ChooseParquetColumns(*f, file, opts, holds_image, &notes);
  if (!chosen.ok()) return chosen.status();
  IMAGEPACK_RETURN_IF_ERROR(TakeColumns(*f, file, opts, chosen.value(), notes, s, l));
  auto fd = CreateScratchFile(scratch_dir);
  if (!fd.ok()) return fd.status();
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  } closer{*fd};
  const int archive = static_cast<int>(s.archives.size());
  s.archives.push_back(file);
  uint64_t written = 0;
  int64_t first_row = 0;
  for (size_t g = 0; g < f->row_groups.size(); first_row += f->row_groups[g].num_rows, ++g) {
    if (opts.cancel && opts.cancel->load()) return Status::Cancelled("cancelled while reading " + file);
    const size_t items = s.items.size(), rows = l.rows.size();
    Status st = AddRowGroup(read, size, budget, *f, g, first_row, file, *fd, &written, archive, s, l);
    if (st.code() == Status::Code::kNotSupported || st.code() == Status::Code::kIOError ||
        st.code() == Status::Code::kCancelled)
      return st;
    // The file's expansion budget spent: the rest of it is not read (each
    // further row group would say the same).
    if (!st.ok() && st.message().find("expand the file past its budget") != std::string::npos)
      return Status::InvalidArgument(st.message());
    if (!st.ok()) {  // the row group is skipped whole
      s.items.resize(items);
      l.rows.resize(rows);
      const std::string where = file + ": row group " + std::to_string(g);
      std::string why = st.message();
      if (why.compare(0, where.size() + 2, where + ", ") == 0) why = why.substr(where.size() + 2);
      s.errors.push_back({where, why});
    }
  }
  // The copy is read back as packed: its byte source made once written
  // (it takes the descriptor).
  auto copy = AdoptFileSource(closer.fd, file);
  closer.fd = -1;
  if (!copy.ok()) return copy.status();
  s.scratch->archives.push_back(std::move(copy.value()));
  return Status::Ok();
}

}  // namespace

Result<DatasetSource> OpenParquetSource(const std::string& src, const SourceOptions& opts) {
  auto storage = SourceStorage(src, opts);
  if (!storage.ok()) return storage.status();
  auto files = ContainerFiles(*storage.value(), src, IsParquetName, ".parquet files", opts);
  if (!files.ok()) return files.status();
  DatasetSource s;
  s.root = src;
  s.scratch = std::make_shared<ScratchFiles>();
  const std::string scratch_dir = ScratchDirOf(opts);
  PqListing l;
  for (const std::string& file : *files) IMAGEPACK_RETURN_IF_ERROR(AddFile(*storage.value(), file, scratch_dir, opts, s, l));
  // The image struct's paths name the records when every row has one and
  // no two share it (else FILE/ROW.EXT).
  std::set<std::string> paths;
  bool named = !l.rows.empty();
  for (const Row& r : l.rows) named = named && !r.path.empty() && CheckName(r.path, "record path").ok() && paths.insert(r.path).second;
  if (named)
    for (size_t i = 0; i < s.items.size(); ++i) s.items[i].rel = l.rows[i].path;
  std::vector<std::string> fixed;
  const bool given = opts.classes || !opts.classes_file.empty();
  if (given) IMAGEPACK_RETURN_IF_ERROR(FixedClasses(opts, &fixed));
  else fixed = l.columns.names;
  std::vector<RawLabel> raw;
  std::vector<std::string> where;
  for (const Row& r : l.rows) {
    RawLabel x = r.raw;
    // With --classes, a class is found by its ClassLabel name.
    if (given && x.present && x.index >= 0 && x.index < int64_t(l.columns.names.size()))
      x = {true, true, -1, l.columns.names[size_t(x.index)]};
    raw.push_back(x);
    where.push_back(r.where);
  }
  std::vector<int32_t> labels;
  std::vector<std::string> why;
  IMAGEPACK_RETURN_IF_ERROR(ResolveLabelsUnless(opts.no_class, raw, where, fixed, &s.classes, &labels, &why));
  // Files none of whose rows has a label: one entry each, counting its
  // rows and naming --no-class, not one a row.
  std::vector<int64_t> rows(s.archives.size(), 0), unlabelled(s.archives.size(), 0);
  if (!opts.no_class)
    for (size_t i = 0; i < s.items.size(); ++i) {
      ++rows[size_t(s.items[i].archive)];
      if (!l.rows[i].raw.present) ++unlabelled[size_t(s.items[i].archive)];
    }
  auto whole = [&](size_t i) {
    const size_t a = size_t(s.items[i].archive);
    return rows[a] > 0 && unlabelled[a] == rows[a];
  };
  for (size_t a = 0; a < s.archives.size(); ++a) {
    if (rows[a] == 0 || unlabelled[a] != rows[a]) continue;
    const std::string none = l.columns.label < 0
                                 ? "no ClassLabel or integer label column"
                                 : "column " + l.leaf_names[size_t(l.columns.label)] + " is null in each";
    FileError e{s.archives[a], "no label in any of its " + std::to_string(rows[a]) + " rows (" + none +
                                   "): its rows are skipped; --no-class (no_class=True in Python) reads them without classes, "
                                   "--label-column NAME names the label column"};
    e.count = rows[a];
    s.errors.push_back(std::move(e));
  }
  std::vector<SourceItem> kept;
  for (size_t i = 0; i < s.items.size(); ++i) {
    if (!opts.no_class && whole(i)) continue;  // its file's entry
    if (!why[i].empty()) {
      s.errors.push_back({l.rows[i].where, why[i] + (why[i] == "no label" ? " (a ClassLabel or integer label column)" : "")});
      continue;
    }
    s.items[i].label = labels[i];
    kept.push_back(std::move(s.items[i]));
  }
  s.items = std::move(kept);
  if (!l.columns.unused.empty()) {
    std::string cols;
    for (const auto& c : l.columns.unused) cols += (cols.empty() ? "" : ", ") + c;
    s.problems.push_back("columns not packed: " + cols);
  }
  return s;
}

}  // namespace imagepack::internal
