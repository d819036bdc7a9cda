// OpenInPlace (in_place.h): a source's items as a RecordSource whose
// records are made, when read, by the pack's own RecordMaker.
#include "pack/in_place.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <xxhash.h>

#include "fields/pixel_stats.h"
#include "formats/braces.h"
#include "formats/text.h"
#include "imagepack/byte_source.h"
#include "imagepack/fields.h"
#include "imagepack/files.h"
#include "imagepack/storage.h"
#include "pack/record_maker.h"
#include "sources/registry.h"
#include "sources/sources.h"
#include "stores/memory_source.h"
#include "stores/store_internal.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

// What the source holds, kept at one address for the maker's references.
struct Listed {
  DatasetSource source;
  PackOptions options;
  std::unique_ptr<RecordMaker> maker;    // reads: no statistics
  std::unique_ptr<RecordMaker> sampler;  // the open: the pack's sample of statistics
};

class InPlaceCursor : public RecordCursor {
 public:
  explicit InPlaceCursor(const Listed& l) : l_(l) {}
  Status ReadRaw(int64_t index, const uint8_t** data, size_t* size) override {
    const auto& items = l_.source.items;
    if (index < 0 || index >= static_cast<int64_t>(items.size()))
      return Status::InvalidArgument("record " + std::to_string(index) + " is outside the " +
                                     std::to_string(items.size()) + " records of " + l_.options.src);
    Packed p = l_.maker->Make(static_cast<size_t>(index), items[size_t(index)]);
    if (!p.error.empty()) return Status::Corruption(l_.options.src + ": " + p.rel + ": " + p.error);
    record_ = std::move(p.record);
    *data = record_.data();
    *size = record_.size();
    return Status::Ok();
  }

 private:
  const Listed& l_;
  std::vector<uint8_t> record_;
};

class InPlaceSource : public RecordSource {
 public:
  InPlaceSource(std::unique_ptr<Listed> l, DatasetMeta meta, std::string describe)
      : l_(std::move(l)), meta_(std::move(meta)), describe_(std::move(describe)) {}
  const DatasetMeta& meta() const override { return meta_; }
  std::unique_ptr<RecordCursor> NewCursor() const override { return std::make_unique<InPlaceCursor>(*l_); }
  std::string Describe() const override { return describe_; }
  int64_t resident_bytes() const override {
    int64_t n = 0;
    for (const SourceItem& item : l_->source.items) n += int64_t(sizeof item + item.rel.capacity());
    return n;
  }
  void StoredRanges(int64_t first, int64_t last, std::vector<StoredRange>* out) const override {
    const auto& items = l_->source.items;
    const auto& archives = l_->source.scratch->archives;
    first = std::max<int64_t>(first, 0);
    last = std::min<int64_t>(last, int64_t(items.size()) - 1);
    for (int64_t i = first; i <= last; ++i) {
      const SourceItem& item = items[size_t(i)];
      if (item.archive >= 0 && size_t(item.archive) < archives.size())
        AppendRange(archives[size_t(item.archive)].get(), item.offset, item.size, out);
    }
  }
  void ByteSources(std::vector<const ByteSource*>* out) const override {
    for (const auto& a : l_->source.scratch->archives) out->push_back(a.get());
  }
  void DropSharedMeta() override { imagepack::DropSharedMeta(&meta_); }

 private:
  std::unique_ptr<Listed> l_;
  DatasetMeta meta_;
  std::string describe_;
};

// The files' identities (device, inode, size, modification time; an
// object's ETag), hashed: a changed file is another dataset.
Result<std::string> FilesIdentity(const DatasetSource& s) {
  std::string all;
  for (const std::string& file : s.archives) {
    auto bytes = OpenByteSource(file);
    if (!bytes.ok()) return bytes.status();
    all += bytes.value()->identity() + "\n";
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(all.data(), all.size())));
  return std::string(hex);
}

// The first few of the records the source could not give, as one error
// (`rest`: the records it could).
Status Unreadable(const std::string& path, const std::vector<FileError>& errors, size_t rest) {
  std::string text;
  for (size_t i = 0; i < errors.size() && i < 3; ++i)
    text += (i ? "; " : "") + errors[i].path + ": " + errors[i].reason;
  const int64_t n = SkippedCount(errors);
  return Status::Corruption(path + ": " + std::to_string(n) + " record" + (n == 1 ? "" : "s") +
                            " cannot be read in place (" + text +
                            (errors.size() > 3 ? "; ..." : "") +
                            (rest > 0 ? "); pack_lmdb imports the rest and lists every one"
                                      : "); pack_lmdb lists every one; nothing else is left to read"));
}

// The metadata a default pack of the source would write, but for when it
// was made: labels counted from the items, statistics from the pack's own
// sample (every stride-th record, pooled in record order).
Result<DatasetMeta> MetaOf(const std::string& path, Listed& l) {
  const DatasetSource& s = l.source;
  DatasetMeta meta;
  meta.count = static_cast<int64_t>(s.items.size());
  meta.classes = s.classes;
  meta.encoding = l.options.encoding;
  meta.channels = l.options.prepare.decode.channels;
  meta.fields = s.fields;
  meta.label_counts.assign(s.classes.size(), 0);
  for (const SourceItem& item : s.items)
    if (item.label >= 0 && size_t(item.label) < meta.label_counts.size()) ++meta.label_counts[size_t(item.label)];
  auto identity = FilesIdentity(s);
  if (!identity.ok()) return identity.status();
  meta.tool = "imagepack (read in place)";
  meta.source = path;
  meta.options_json = nlohmann::json{{"in_place", true}, {"files", s.archives.size()}, {"identity", *identity}}.dump();
  const int64_t n = meta.count;
  const int64_t sample = PackOptions().stats_sample;  // raw too: the pack takes every image, an open 1,024
  const int64_t stride = std::max<int64_t>(1, (n + sample - 1) / sample);
  const int64_t sampled = (n + stride - 1) / stride;
  std::vector<Packed> made(static_cast<size_t>(sampled));
  tbb::parallel_for(int64_t(0), sampled, [&](int64_t k) {
    made[size_t(k)] = l.sampler->Make(size_t(k * stride), s.items[size_t(k * stride)]);
  });
  PixelMoments moments;
  for (const Packed& p : made) {
    if (!p.error.empty()) return Status::Corruption(path + ": " + p.rel + ": " + p.error);
    meta.payload_bytes += p.payload;
    moments.Merge(p.moments);
  }
  // The sample's payload, scaled to the whole: an estimate, as it says.
  meta.payload_bytes = sampled > 0 ? meta.payload_bytes * n / sampled : 0;
  meta.stats_images = moments.images;
  moments.MeanStd(meta.channels, &meta.mean, &meta.std);
  return meta;
}

}  // namespace

// The rows read in place; a remote object is asked by its name alone, so
// that a blob's open costs no request more (nor fails offline, from a
// pinned cache).
Result<Choice> ChooseInPlace(const std::string& path) {
  return Choose(path, Ask{&SourceFormat::in_place, /*remote_names_only=*/true});
}

bool ReadsInPlace(const std::string& path) {
  auto c = ChooseInPlace(path);
  return c.ok() && c->format != nullptr;
}

Result<std::unique_ptr<RecordSource>> OpenInPlace(const std::string& path, const OpenOptions& opts) {
  if (opts.in_ram)
    return Status::NotSupported(path + ": files read in place are not held in RAM (pack them with pack_lmdb, "
                                       "then hold the database in RAM)");
  auto choice = ChooseInPlace(path);
  if (!choice.ok()) return choice.status();
  const RegisteredFormat* format = choice->format;
  if (!format) return Status::InvalidArgument(path + " names no files of a format read in place");
  auto l = std::make_unique<Listed>();
  SourceOptions so;
  // The cache folder given, else the storage settings' (IMAGEPACK_CACHE_DIR,
  // read by storage/ alone), else the temporary folder.
  auto settings = SettingsFor(opts);
  if (!settings.ok()) return settings.status();
  so.storage = &settings.value();
  so.scratch_dir = !opts.cache_dir.empty()            ? opts.cache_dir
                   : !settings->cache_dir.empty()     ? settings->cache_dir
                                                      : fs::temp_directory_path().string();
  if (so.scratch_dir != fs::temp_directory_path().string()) {  // the cache folder, made as the block cache makes it
    std::error_code ec;
    fs::create_directories(so.scratch_dir, ec);
    if (ec) return Status::IOError("cannot create the cache folder " + so.scratch_dir + ": " + ec.message());
  }
  so.split = opts.split;
  so.image_column = opts.image_column;
  so.label_column = opts.label_column;
  so.no_class = opts.no_class;
  auto source = format->open(choice->shape.path, so);
  if (!source.ok()) return source.status();
  l->source = std::move(source.value());
  DatasetSource& s = l->source;
  for (const SourceItem& item : s.items)
    if (Status ok = CheckName(item.rel, "record path"); !ok.ok() || item.rel.size() > 65535)
      s.errors.push_back({Shown(item.rel.substr(0, 200)), ok.ok() ? "record path over 65535 bytes" : ok.message()});
  if (!s.errors.empty()) {
    Status why = Unreadable(path, s.errors, s.items.size());
    if (!opts.skip_unreadable || s.items.empty()) return why;
    Warn(why.message() + "; on_corrupt=skip: read without them");  // never in silence
  }
  if (s.items.empty()) return Status::NotFound(path + " holds no images");
  for (const FieldSpec& f : s.fields)
    if (InfoOf(f.kind).layout == FieldLayout::kMap && InfoOf(f.kind).classes && f.classes.empty())
      return Status::NotSupported(path + ": field " + f.name +
                                  " is a mask without declared classes; read in place, its class count is unknown "
                                  "(pack the files with pack_lmdb)");
  if (!s.scratch) s.scratch = std::make_shared<ScratchFiles>();
  if (s.scratch->archives.size() < s.archives.size()) {
    s.scratch->archives.clear();
    IMAGEPACK_RETURN_IF_ERROR(OpenArchives(&s, &settings.value()));
  }
  // JPEG bytes are records as they are; a lossless first image (PNG, ...)
  // makes the records raw pixels, decoded exactly, not re-encoded as JPEG.
  auto first = ReadArchiveItem(s, s.items[0], 0);
  if (!first.ok()) return first.status();
  const bool jpeg = first->size() >= 2 && (*first)[0] == 0xff && (*first)[1] == 0xd8;
  l->options.src = path;
  l->options.tool = "imagepack (read in place)";
  l->options.encoding = jpeg ? Encoding::kJpeg : Encoding::kRaw;
  // Lossless rows cost a full decode per record per epoch, which a pack
  // pays once: said at every open, with the figure (docs/LOADER.md).
  if (!jpeg)
    Warn(path + ": its images are lossless (PNG, ...): read in place, each is decoded again every epoch, "
                "about a tenth of the speed of a pack of the same rows (1,132 against 13,041 images/s, "
                "docs/LOADER.md); pack_lmdb decodes them once");
  const int64_t n = static_cast<int64_t>(s.items.size());
  l->sampler = std::make_unique<RecordMaker>(l->options, n, s);
  l->options.stats_sample = 0;
  l->maker = std::make_unique<RecordMaker>(l->options, n, s);
  auto meta = MetaOf(path, *l);
  if (!meta.ok()) return meta.status();
  const std::string describe = path + " (read in place, " + std::to_string(meta->count) + " records)";
  return std::unique_ptr<RecordSource>(new InPlaceSource(std::move(l), std::move(meta.value()), describe));
}

}  // namespace imagepack::internal

namespace imagepack {

// store.h's entry points live here, in the top room: other tools' files
// are read in place (OpenInPlace), anything else is a container
// (stores/, which knows nothing of pack).
Result<std::unique_ptr<RecordSource>> OpenDatabase(const std::string& path, const OpenOptions& opts) {
  // A path that cannot be looked at (an unreachable server, a refused
  // listing) is that error, not a container's failure to open.
  auto choice = internal::ChooseInPlace(path);
  if (!choice.ok()) return choice.status();
  if (choice->format) return internal::OpenInPlace(path, opts);
  return internal::OpenContainer(path, opts);
}

Result<std::unique_ptr<RecordSource>> OpenDatabases(const std::vector<std::string>& paths, const OpenOptions& opts) {
  return internal::OpenShards(paths, opts, [](const std::string& path, const OpenOptions& o) { return OpenDatabase(path, o); });
}

}  // namespace imagepack
