// Reading items and fields that sit inside other containers (WebDataset
// shards, folder2lmdb LMDBs): DatasetSource's archives opened as byte
// sources, and reads of a byte range. Part of the sources module
// (sources.h).
#include <cerrno>
#include <filesystem>
#include <cstring>

#include "sources/sources.h"
#include "imagepack/storage.h"

namespace imagepack::internal {

ScratchFiles::~ScratchFiles() {
  archives.clear();  // closed before their folder goes
  std::error_code ec;
  if (!dir.empty()) std::filesystem::remove_all(dir, ec);
}

Status OpenArchives(DatasetSource* s, const StorageSettings* settings) {
  if (!s->scratch) s->scratch = std::make_shared<ScratchFiles>();
  for (const auto& file : s->archives) {
    auto storage = settings ? OpenStorage(file, *settings) : OpenStorage(file);
    if (!storage.ok()) return storage.status();
    auto bytes = storage.value()->Open(file);
    if (!bytes.ok()) return bytes.status();
    s->scratch->archives.push_back(std::move(bytes.value()));
  }
  return Status::Ok();
}

namespace {

// `size` bytes at `offset` of archive `archive`, after `headroom` free bytes.
Result<std::vector<uint8_t>> ReadArchiveRange(const DatasetSource& s, int archive, uint64_t offset, uint64_t size,
                                              size_t headroom, const std::string& shown) {
  std::vector<uint8_t> out(headroom + size);
  Status st = s.scratch->archives.at(size_t(archive))->ReadAt(offset, size, out.data() + headroom);
  if (!st.ok()) return st.WithContext(shown);
  return out;
}

}  // namespace

Result<std::vector<uint8_t>> ReadFieldFile(const DatasetSource& s, const SourceField& f) {
  if (f.archive < 0) return ReadFile(f.file);
  return ReadArchiveRange(s, f.archive, f.offset, f.size, 0, f.file);
}

Result<std::vector<uint8_t>> ReadArchiveItem(const DatasetSource& s, const SourceItem& item, size_t headroom) {
  return ReadArchiveRange(s, item.archive, item.offset, item.size, headroom, s.archives.at(size_t(item.archive)));
}

}  // namespace imagepack::internal
