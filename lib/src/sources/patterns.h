// File patterns wherever a path is taken: brace patterns and "::" lists
// (formats/braces.h, webdataset's syntax), then shell globs in each name:
// `*` and `?` and `[...]` within one name, `**` as a whole component for
// any number of folders (Python's glob with recursive=True, the syntax of
// the Hub's `data_files` and of huggingface_hub's HfFileSystem). Globs are
// expanded by listing the storage (a local folder, an s3:// prefix);
// hidden names (a leading '.') are matched only by a component that
// starts with '.'. Internal; imagepack/formats.h says IsFilePattern.
#pragma once

#include <string>
#include <vector>

#include "imagepack/status.h"
#include "imagepack/storage.h"

namespace imagepack::internal {

// True when `text` holds a shell glob character outside braces: * ? [.
bool HasGlob(const std::string& text);

// The files `text` names, sorted within each glob, braces expanded first;
// at most limits::kBraceExpansions names, limits::kGlobEntries entries
// listed, "**" at most limits::kGlobDepth folders deep. A glob that
// matches nothing is NotFound naming it; on a storage that cannot list
// (https://), an error saying to name the files with a brace pattern.
Result<std::vector<std::string>> ExpandFilePattern(Storage& storage, const std::string& text);

}  // namespace imagepack::internal
