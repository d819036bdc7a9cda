#include "formats/folder2lmdb.h"

#include <algorithm>

#include "formats/pickle.h"

namespace imagepack::internal {

std::string KeyText(std::string_view key) {
  if (!key.empty() && std::all_of(key.begin(), key.end(), [](char ch) { return ch >= 0x21 && ch < 0x7f && ch != '/'; }))
    return std::string(key);
  static const char* hex = "0123456789abcdef";
  std::string h = "key-";
  for (unsigned char ch : key) h += hex[ch >> 4], h += hex[ch & 15];
  return h;
}

Result<std::vector<std::string>> ParseKeyList(const uint8_t* data, size_t size) {
  auto list = Pickle::Parse(data, size);
  if (!list.ok()) return Status::InvalidArgument("__keys__: " + list.status().message());
  if (list->root().kind != PickleValue::kSeq) return Status::InvalidArgument("__keys__ is not a list");
  std::vector<std::string> keys;
  for (uint32_t i : list->root().items) {
    const PickleValue& k = list->at(i);
    if (k.kind != PickleValue::kBytes && k.kind != PickleValue::kStr)
      return Status::InvalidArgument("__keys__ holds a value that is not bytes or str");
    keys.emplace_back(list->text(k));
  }
  return keys;
}

std::optional<int64_t> ParseLen(const uint8_t* data, size_t size) {
  auto len = Pickle::Parse(data, size);
  if (len.ok() && len->root().kind == PickleValue::kInt) return len->root().i;
  return std::nullopt;
}

Result<Folder2LmdbValue> ParseRecordValue(const uint8_t* data, size_t size) {
  auto val = Pickle::Parse(data, size);
  if (!val.ok()) return val.status();
  const PickleValue& root = val->root();
  if (root.kind != PickleValue::kSeq || root.items.empty() || root.items.size() > 2 ||
      val->at(root.items[0]).kind != PickleValue::kBytes)
    return Status::InvalidArgument("value is not a pickled (image bytes, label)");
  const PickleValue& image = val->at(root.items[0]);
  Folder2LmdbValue out;
  out.image_offset = image.off;
  out.image_size = image.len;
  if (root.items.size() == 2) {
    const PickleValue& l = val->at(root.items[1]);
    if (l.kind == PickleValue::kInt) out.label = LabelFromIndex(l.i);
    else if (l.kind == PickleValue::kStr) out.label = LabelFromText(std::string(val->text(l)));
    else if (l.kind != PickleValue::kNone) return Status::InvalidArgument("label is not an int, a str or None");
  }
  return out;
}

}  // namespace imagepack::internal
