// The registry of other tools' formats (imagepack/formats.h): per format
// its row, how a path is recognised and its opener. OpenSource, verify
// --against and the loader's in-place reading choose through it. Internal.
#pragma once

#include <string>
#include <vector>

#include "imagepack/formats.h"
#include "sources/sources.h"

namespace imagepack::internal {

struct RegisteredFormat {
  SourceFormat row;
  bool (*looks_like)(const std::string& path);
  SourceOpener open;
};

const std::vector<RegisteredFormat>& RegisteredFormats();

// The first format `path` looks like, or null. Local_only rows are asked
// of local paths only; with `capability` (&SourceFormat::in_place, ...)
// only the rows that have it are asked.
const RegisteredFormat* FormatOf(const std::string& path, bool SourceFormat::*capability = nullptr);

}  // namespace imagepack::internal
