// Where a dataset's samples come from, with their labels and other fields:
// an image tree (ImageFolder classes, or a flat folder with a labels file),
// with paired trees (masks, targets) matched by relative path; a manifest
// (JSON Lines or CSV, one sample per row); a COCO instances file; or an
// existing database. pack_lmdb reads its inputs through these; verify_db --against
// lists the tree it compares with through them. Internal.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "imagepack/byte_source.h"
#include "imagepack/fields.h"
#include "imagepack/files.h"
#include "imagepack/meta.h"
#include "imagepack/progress.h"
#include "imagepack/source_options.h"
#include "imagepack/status.h"
#include "imagepack/store.h"

namespace imagepack {
class Storage;
}

namespace imagepack::internal {

// One field of an item before packing (its slot in DatasetSource::fields):
// a file (image, mask) or a value (ints, floats, boxes, text).
struct SourceField {
  int slot = -1;
  std::string file;  // image, mask: a path (absolute, or relative to the working folder)
  // ... or `size` bytes at `offset` of DatasetSource::archives[archive]
  // (file then names it for messages).
  int archive = -1;
  uint64_t offset = 0;
  uint64_t size = 0;
  std::vector<int32_t> ints;
  std::vector<float> floats;
  std::vector<Box> boxes;
  std::string text;
};

struct SourceItem {
  std::string rel;        // below DatasetSource::root; database: the record's stored path
  int32_t label = -1;
  // The record's index where the source states it: a database's record
  // (read from there), or the "index" export_db writes into a shard's .json
  // (only the order).
  int64_t db_index = -1;
  std::vector<SourceField> fields;  // in slot order, every declared field
  // Archives (tar shards, pickled LMDB): the image is `size` bytes at
  // `offset` of DatasetSource::archives[archive].
  int archive = -1;
  uint64_t offset = 0;
  uint64_t size = 0;
};

// A paired tree: `--field NAME[:KIND]=DIR` (KIND image or mask; a NAME
// starting with "mask" is a mask, any other an image).
struct PairedTree {
  std::string name;
  FieldKind kind = FieldKind::kImage;
  std::string dir;
};
Result<PairedTree> ParsePairedTree(const std::string& text);
// A manifest key's declared kind: `--field NAME:KIND` (any kind, text
// included), which overrides the rule by name and value (KindOfValue).
Result<std::pair<std::string, FieldKind>> ParseDeclaredField(const std::string& text);

using imagepack::SourceOptions;  // imagepack/source_options.h

// The archives as byte sources (one read per item, no open; an
// inflated shard's unnamed scratch file among them), closed when the
// source is dropped.
struct ScratchFiles {
  std::vector<std::unique_ptr<ByteSource>> archives;  // per DatasetSource::archives entry
  std::string dir;       // a staging folder (shards downloaded from object storage), removed with it
  ~ScratchFiles();
};

class ItemSpill;

struct DatasetSource {
  std::string root;                      // where items' `rel` paths are relative to
  std::vector<std::string> classes;
  std::vector<FieldSpec> fields;         // declared fields beyond image and class
  // Labelled inputs: tree, manifest, sorted by path; database, record
  // order; shards, the order of their "index" (else by path).
  std::vector<SourceItem> items;
  // A tree too large to list in memory (SourceOptions::item_memory): its
  // items, in the same order, in a scratch file instead of `items`.
  std::shared_ptr<ItemSpill> spilled;
  // A database read record by record as it is packed
  // (SourceOptions::database_records): its records 0 .. db->size()-1 are
  // the items, their paths and labels their own; `items` stays empty.
  bool db_records = false;
  std::vector<std::string> unlabelled;   // tree images without a label, sorted
  std::vector<FileError> errors;         // items skipped: labels-file misses, images outside the classes, ...
  std::vector<FileError> left_out;       // parts of items left out (COCO annotations without a box)
  // A labels file (LabelFromFile), for verify to tell apart; each is in
  // `errors` too. Images it labels twice differently (skipped), its
  // entries naming no image of the tree (skipped, path as written), and
  // images whose label is not a class of a fixed list (SourceOptions::
  // classes: verify's database's).
  std::vector<FileError> labels_twice, labels_missing, labels_unknown;
  std::vector<std::string> ignored;      // non-images; images outside any class, with why
  std::vector<std::string> problems;     // listing problems (loops, unreadable folders)
  std::map<std::string, int64_t> unpacked_members;  // WebDataset: member extension -> count not packed
  std::unique_ptr<RecordSource> db;      // a database source: where its items are read
  // A database relabelled by --classes: its label -> the new one (-1: its
  // class is not in the list; the record is skipped). Empty: as stored.
  std::vector<int32_t> db_labels;
  std::vector<std::string> archives;     // files items with `archive` >= 0 are read from
  std::shared_ptr<ScratchFiles> scratch;
  // How the records were packed where the source says so: a database's
  // metadata, or the meta.json export_db writes beside its shards. pack
  // keeps its encoding, channels and quality where the caller left them
  // open (PackOptions::from_source).
  std::optional<DatasetMeta> packed_as;
  // The items are in the order of the records they were (a database, or
  // shards whose every sample carries its index), so the stored order,
  // shuffled or not, is kept.
  bool stored_order = false;
};

// A labels file ("FILENAME LABEL" lines), as pack_lmdb and verify_db
// --labels both read it: labels resolved by ResolveLabels through `fixed`
// (the --classes list, else none: an index among names is then a name).
// A line that is not two words, or a label that cannot be resolved, fails
// the whole file naming FILE:LINE. A file named twice with the same label
// is one entry; with different labels it is in `twice` (its reason names
// the file and both lines), not in `entries`.
struct LabelsFile {
  struct Entry {
    int line = 0;
    int32_t label = -1;  // into `classes`
  };
  std::vector<std::string> classes;
  std::map<std::string, Entry> entries;      // file name as written -> its label
  std::map<std::string, std::string> twice;  // file name as written -> why it has no label
};
Result<LabelsFile> ReadLabelsFile(const std::string& path, const std::vector<std::string>& fixed);

// The ImageFolder rule: the first folder of `rel` names its class. Empty for
// a file at the root.
std::string ClassFolderOf(const std::string& rel);

// Why an image of a tree labelled by class folders is left out: it is at
// the root (`folder` empty), or its folder is not in the class list (the
// classes file named when one fixed the list).
std::string OutsideClassReason(const std::string& folder, const SourceOptions& opts);
// A warning naming the classes of a classes file (opts.classes_file) for
// which no image was found (`counts`: images per class); empty when none.
std::string ClassesWithoutImages(const std::vector<std::string>& classes, const std::vector<int64_t>& counts,
                                 const SourceOptions& opts);
// The error for a tree in which no class folder holds an image: naming a
// few of its folders (or saying it has none) and the files ignored for
// their names.
Status NoClassFolders(const std::string& root, size_t ignored);

// Every image below `root`, labelled by `labels`: through the labels file
// when there is one, else by class folder. Classes come from labels.classes,
// else classes_file, else the labels file's names (sorted) or largest index,
// else the class folders (sorted).
// With opts.no_class every image is an item labelled -1. Paired trees then
// add their fields; an image whose partner is missing goes to `errors`.
Result<DatasetSource> OpenTreeSource(const std::string& root, const SourceOptions& opts);
// The same for a tree labelled by class folders or not at all (no labels
// file, no paired trees), in bounded memory: folders are listed one at a
// time, and items past opts.item_memory go to a spill (tree_source.cc).
Result<DatasetSource> OpenTreeSourceBounded(const std::string& root, const SourceOptions& opts);

// One sample per row of a JSON Lines or CSV manifest; paths relative to the
// manifest's folder. Keys: "image" (the image), "label" (class index or
// name), "boxes" ([[x0, y0, x1, y1, class], ...]); any other key is a field
// of the kind opts.fields declares for it ("NAME:KIND"), else of the kind
// KindOfValue gives its first value: only a key named as a file kind
// (mask*, depth*, image*) holds paths that are opened. A row that lacks the
// image or a file field, or whose value does not fit the field's kind,
// goes to `errors` as MANIFEST:LINE.
Result<DatasetSource> OpenManifestSource(const std::string& manifest, const SourceOptions& opts);

// A COCO instances file: every image of "images" (below `images_root`),
// its non-crowd "annotations" as boxes ([x, y, w, h] -> x0, y0, x1, y1),
// its crowd ones as a second boxes field "crowd_boxes" when there are any;
// classes in category id order; no image class (label -1). Annotations
// without a usable bbox or iscrowd, and images listed twice, go to errors.
Result<DatasetSource> OpenCocoSource(const std::string& coco, const std::string& images_root,
                                     const SourceOptions& opts);

// The records of an existing database (labels and paths as stored).
// With `records`, nothing is read at open: DatasetSource::db_records.
// With a class list in `opts` (--classes), records are relabelled by their
// class's name (DatasetSource::db_labels); those of classes it lacks are
// skipped, naming the class.
Result<DatasetSource> OpenDatabaseSource(const std::string& path, bool records = false,
                                         const SourceOptions& opts = {});

// WebDataset shards: SRC a .tar / .tar.gz / .tgz file, a brace pattern
// ("train-{000000..000146}.tar") or a folder holding only shards. Members
// are grouped into samples by webdataset's key rule (the name up to the
// first dot of its last component); a sample's image is its .jpg (.jpeg,
// .png, .webp, ...) member, its label a .cls (or .class, .label) member
// holding an index or a class name, or the "label" of its .json member;
// the .json's "path" names the record. Classes: --classes, else
// classes.txt beside the shards, else sorted names or "0".."max".
// Samples without an image or a label go to `errors` as SHARD:KEY.
Result<DatasetSource> OpenWebDatasetSource(const std::string& src, const SourceOptions& opts);

// TFRecord files (plain or gzipped, tf.io.TFRecordWriter's framing, both
// CRCs checked), each record a tf.train.Example: SRC a file, a brace
// pattern ("train-{00000..01023}"), several joined by "::", or a folder
// of them. The image is image/encoded (TF-slim / Inception) or image
// (TFDS), a byte range of the file; the label image/class/label (counted
// from 1, 0 the background, unless TF-slim's labels.txt beside the files
// starts at a class other than "background") or label (from 0); class
// names from labels.txt, label.labels.txt or classes.txt beside the files,
// else the records' image/class/synset (or text); boxes from
// image/object/bbox/* (normalised, scaled by image/width, height). A
// record whose CRC does not match, whose Example does not parse or that
// lacks an image goes to `errors` as FILE:record N (1000 entries a file,
// then one that counts the rest; a file without labels is one entry); past
// a damaged header the walk goes on where FILE.idx (DALI) says the next
// record starts, else at the next header whose CRC matches. Files are
// recognised by their names (.tfrecord, .tfrec, NAME-NNNNN-of-NNNNN), else
// by a record header in their first 64 KiB.
Result<DatasetSource> OpenTfRecordSource(const std::string& src, const SourceOptions& opts);

// Parquet files in the Hugging Face image layout: SRC a .parquet file, a
// brace pattern, several joined by "::", or a folder of them. The image is
// the struct<bytes, path> (or binary) column the "huggingface" metadata
// declares an Image (else the only such column), the label its ClassLabel
// column (else an integer column "label"), the classes that ClassLabel's
// names (else "0".."max"). Image bytes are copied into an unnamed scratch
// file per parquet file (they sit in compressed pages) and items are its
// ranges. Records are named by the image's path when every row has a
// distinct one, else FILE/ROW.EXT. Other flat columns are fields: strings
// text, integers ints, floats floats. A row group whose pages are damaged
// goes to `errors` as "FILE: row group N"; a codec, encoding or layout not
// read (formats/parquet.h) fails the source, naming it.
Result<DatasetSource> OpenParquetSource(const std::string& src, const SourceOptions& opts);

// An LMDB written the folder2lmdb way: per key a pickled (image bytes,
// label) tuple, `__keys__` (a pickled list of keys, the record order) and
// `__len__`. Only pickles made of bytes, strings, integers, None, tuples
// and lists are read (protocols 3-5); one that calls code is refused. The
// record's path is its key. A file or a folder holding data.mdb.
Result<DatasetSource> OpenPickledLmdbSource(const std::string& path, const SourceOptions& opts);


// A database record's label as the source gives it (DatasetSource::
// db_labels), or why the record is skipped.
Result<int32_t> DatabaseLabel(const DatasetSource& s, int32_t stored, const SourceOptions& opts);

// Opens every DatasetSource::archives file into s->scratch->fds.
Status OpenArchives(DatasetSource* s, const StorageSettings* settings = nullptr);

// An archive item's bytes, with `headroom` free bytes in front; a field's
// file, from its archive or the file system.
Result<std::vector<uint8_t>> ReadArchiveItem(const DatasetSource& s, const SourceItem& item, size_t headroom);
Result<std::vector<uint8_t>> ReadFieldFile(const DatasetSource& s, const SourceField& f);

// Opens another tool's files (a row of the registry, registry.h).
using SourceOpener = Result<DatasetSource> (*)(const std::string&, const SourceOptions&);

// A manifest or COCO file when given; else another tool's files (the
// registry's chooser, registry.h), or a regular file or remote object is
// a database, anything else a tree.
Result<DatasetSource> OpenSource(const std::string& path, const SourceOptions& opts);

// Declares a field of `s` (a unique name; masks and boxes take their
// classes from the options) and returns its slot.
Result<int> Declare(DatasetSource& s, const std::string& name, FieldKind kind, const SourceOptions& opts);

// The kind of a manifest (or WebDataset .json) key's field by rule: boxes
// for "boxes"; a string under a key that starts with a file kind's name
// prefix (KindOfFileField: "mask", "depth", "image") is a path of that
// kind, any other string text, whatever it looks like; a list of integers
// ints, of numbers floats; text otherwise (JSON for objects).
// With `paths` false (a shard's .json, whose values are data), a string is
// always text.
FieldKind KindOfValue(const std::string& key, const nlohmann::json& v, bool paths = true);

// One value as the field of `spec`'s kind (paths relative to `base`); an
// error says why not.
Status FillField(const FieldSpec& spec, const nlohmann::json& v, const std::filesystem::path& base, SourceField* f);

// Paths in a manifest or COCO file stay inside its folder (no absolute
// path, no ".." above it) unless opts.allow_outside.
Status CheckInsideFolder(const std::string& path, const SourceOptions& opts);

// The files a source of container files (Parquet, TFRecord) reads from
// `src`: a shard pattern's expansion, the files of a listable folder that
// `keep` takes (by name, sorted; NotFound "SRC holds no WHAT" when none),
// or `src` itself; then those of opts.split (splits.h: several splits
// without one are refused).
Result<std::vector<std::string>> ContainerFiles(Storage& storage, const std::string& src,
                                                bool (*keep)(const std::string& name), const char* what,
                                                const SourceOptions& opts);

// The storage of `url` with opts.storage's settings, else the process's.
Result<std::shared_ptr<Storage>> SourceStorage(const std::string& url, const SourceOptions& opts);

// Where a source's scratch copies go: --scratch-dir, else the system's
// temporary folder.
std::string ScratchDirOf(const SourceOptions& opts);

// The class list fixed by the options: a given list, or a classes file;
// empty when neither (the source finds its own).
Status FixedClasses(const SourceOptions& opts, std::vector<std::string>* classes);

// Reads a classes file: each non-empty line (trimmed) is one class name,
// whole ('#' is not special), except that a line of ImageNet's synset
// mapping ("n01440764 tench, Tinca tinca") names its WordNet id. Lines are
// UTF-8; duplicates are an error naming the line.
Result<std::vector<std::string>> ReadClassList(const std::string& path);

}  // namespace imagepack::internal
