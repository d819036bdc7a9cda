// folder2lmdb-style LMDBs (Efficient-PyTorch's folder2lmdb.py and its
// kind): per key a pickled (image bytes, label), a pickled __keys__ list
// and an optional __len__, all read by the safe pickle subset
// (formats/pickle.h) within its budgets. Opening the LMDB and locating
// values in its file is the folder2lmdb source's (sources.h). Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "formats/labels.h"
#include "imagepack/status.h"

namespace imagepack::internal {

// A key as a record path: itself when it is printable ASCII without '/',
// else "key-" and its bytes in hex.
std::string KeyText(std::string_view key);

// __keys__: a pickled list of bytes or str keys, in the order packed.
Result<std::vector<std::string>> ParseKeyList(const uint8_t* data, size_t size);

// __len__: the pickled record count, when it is an int (nothing otherwise:
// a __len__ of another kind says nothing).
std::optional<int64_t> ParseLen(const uint8_t* data, size_t size);

// One record's value: a pickled tuple or list of (image bytes[, label]),
// the label an int, a str or None. The image is bytes
// [image_offset, image_offset + image_size) of the value.
struct Folder2LmdbValue {
  uint64_t image_offset = 0, image_size = 0;
  RawLabel label;
};
// An error says what the value is not.
Result<Folder2LmdbValue> ParseRecordValue(const uint8_t* data, size_t size);

}  // namespace imagepack::internal
