// An image tree labelled by its class folders (or --no-class) listed in
// bounded memory: the walk hands out paths in sorted order one folder at a
// time, and past SourceOptions::item_memory the items wait in a scratch
// file (DatasetSource::spilled) instead of memory. The same items, labels,
// errors and ignored files as the listing in memory (sources.cc).
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "formats/text.h"
#include "imagepack/files.h"
#include "sources/item_spill.h"
#include "sources/sources.h"

namespace fs = std::filesystem;

namespace imagepack::internal {
namespace {

// The items so far: in memory until they would take `budget` bytes, then
// all in a spill. The budget counts what the heap holds: the vector's
// capacity (not its size), while it grows the old array beside the new
// one, and each name longer than the string's own inline buffer; so the
// listing's peak stays under it whatever the count.
class Items {
 public:
  Items(std::string dir, uint64_t budget) : dir_(std::move(dir)), budget_(budget) {}
  Status Add(SourceItem item) {
    if (spill_) return spill_->Add(item);
    if (memory_.size() == memory_.capacity()) {
      // Growing moves the items into an array twice the size, both held
      // until the move ends.
      const uint64_t grown = std::max<uint64_t>(2 * memory_.capacity(), 64);
      if (names_ + (memory_.capacity() + grown) * sizeof(SourceItem) > budget_) {
        IMAGEPACK_RETURN_IF_ERROR(Spill());
        return spill_->Add(item);
      }
      memory_.reserve(grown);
    }
    names_ += HeapBytes(item.rel);
    memory_.push_back(std::move(item));
    if (names_ + memory_.capacity() * sizeof(SourceItem) > budget_) return Spill();
    return Status::Ok();
  }
  std::vector<SourceItem>& memory() { return memory_; }
  std::unique_ptr<ItemSpill>& spill() { return spill_; }
  const std::string& dir() const { return dir_; }

 private:
  static uint64_t HeapBytes(const std::string& s) {
    return s.capacity() > std::string().capacity() ? s.capacity() + 1 : 0;
  }
  // Moves every item into a new spill.
  Status Spill() {
    auto spill = ItemSpill::Create(dir_);
    if (!spill.ok()) return spill.status();
    spill_ = std::move(spill.value());
    for (const SourceItem& i : memory_) IMAGEPACK_RETURN_IF_ERROR(spill_->Add(i));
    memory_ = std::vector<SourceItem>();  // `= {}` would keep the capacity
    names_ = 0;
    return Status::Ok();
  }

  std::string dir_;
  uint64_t budget_;
  uint64_t names_ = 0;  // heap bytes of the items' names
  std::vector<SourceItem> memory_;
  std::unique_ptr<ItemSpill> spill_;
};

}  // namespace

Result<DatasetSource> OpenTreeSourceBounded(const std::string& root, const SourceOptions& opts) {
  struct stat st;
  if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::NotFound("source directory " + root + " does not exist or is not a directory");
  DatasetSource s;
  s.root = root;
  const bool fixed = !opts.no_class && opts.classes != nullptr;
  if (!opts.no_class) IMAGEPACK_RETURN_IF_ERROR(FixedClasses(opts, &s.classes));
  const bool known = opts.no_class || fixed || !s.classes.empty();  // labels known while walking
  std::map<std::string, int32_t> index_of;
  for (size_t i = 0; i < s.classes.size(); ++i) index_of[s.classes[i]] = static_cast<int32_t>(i);
  std::set<std::string> found;  // class folders holding images (classes found in the tree)
  std::vector<int64_t> per_class(s.classes.size(), 0);  // a fixed list: images found per class
  std::error_code ec;
  Items items(opts.scratch_dir.empty() ? fs::temp_directory_path(ec).string() : opts.scratch_dir, opts.item_memory);
  std::vector<std::string> others;
  auto image = [&](std::string rel) -> Status {
    // Names are bytes until proven UTF-8: refused here, by name.
    if (Status ok = CheckName(rel, "file name"); !ok.ok()) {
      s.errors.push_back({Shown(rel), ok.message()});
      return Status::Ok();
    }
    if (opts.no_class) return items.Add({std::move(rel), -1, -1, {}});
    const std::string c = ClassFolderOf(rel);
    int32_t label = -1;
    if (known) {
      auto it = index_of.find(c);
      if (it == index_of.end()) {
        s.errors.push_back({rel, OutsideClassReason(c, opts)});
        s.unlabelled.push_back(std::move(rel));
        return Status::Ok();
      }
      label = it->second;
      ++per_class[static_cast<size_t>(label)];
    } else if (c.empty()) {
      s.errors.push_back({rel, OutsideClassReason(c, opts)});
      s.unlabelled.push_back(std::move(rel));
      return Status::Ok();
    } else {
      found.insert(c);
    }
    return items.Add({std::move(rel), label, -1, {}});
  };
  IMAGEPACK_RETURN_IF_ERROR(WalkTree(
      root,
      [&](std::string rel, bool is_image) {
        if (is_image) return image(std::move(rel));
        others.push_back(std::move(rel));
        return Status::Ok();
      },
      &s.problems));
  s.ignored = std::move(others);  // in path order, as the walk hands them out
  if (!known) {
    s.classes.assign(found.begin(), found.end());
    if (s.classes.empty()) return NoClassFolders(root, s.ignored.size());
    for (size_t i = 0; i < s.classes.size(); ++i) index_of[s.classes[i]] = static_cast<int32_t>(i);
  }
  if (std::string empty = ClassesWithoutImages(s.classes, per_class, opts); !empty.empty())
    s.problems.push_back(std::move(empty));
  auto label = [&](SourceItem* item) {
    if (!known) item->label = index_of[ClassFolderOf(item->rel)];
  };
  if (!items.spill()) {
    for (SourceItem& item : items.memory()) label(&item);
    s.items = std::move(items.memory());
    return s;
  }
  IMAGEPACK_RETURN_IF_ERROR(items.spill()->Finish());
  if (known) {
    s.spilled = std::move(items.spill());
    return s;
  }
  // The labels once every class folder is known: one more pass.
  auto labelled = ItemSpill::Create(items.dir());
  if (!labelled.ok()) return labelled.status();
  auto reader = items.spill()->Read();
  SourceItem item;
  for (;;) {
    auto more = reader.Next(&item);
    if (!more.ok()) return more.status();
    if (!more.value()) break;
    label(&item);
    IMAGEPACK_RETURN_IF_ERROR(labelled.value()->Add(item));
  }
  IMAGEPACK_RETURN_IF_ERROR(labelled.value()->Finish());
  s.spilled = std::move(labelled.value());
  return s;
}

}  // namespace imagepack::internal
