// hf:// URLs as huggingface_hub's HfFileSystem writes them
// (hf_file_system.py, resolve_path): hf://datasets/ORG/NAME[@REVISION]
// [/PATH], REVISION a branch, tag or commit, "%2F"-quoted, or a special
// ref holding '/' as it is (refs/convert/NAME, refs/pr/N:
// SPECIAL_REFS_REVISION_REGEX). Internal to the Hub's backend.
#pragma once

#include <string>

#include "imagepack/status.h"

namespace imagepack::internal {

struct HubPath {
  std::string repo;      // ORG/NAME
  std::string revision;  // as given, unquoted; "main" when none
  std::string path;      // in the repository, without leading or trailing '/'
};

// A malformed URL is an error naming it and what is expected: another
// kind of repository (models, spaces), ORG/NAME outside the Hub's rule
// (huggingface_hub's validate_repo_id), a control character in the
// revision, an empty, "." or ".." path component.
Result<HubPath> ParseHubUrl(const std::string& url);

// A full commit id: 40 lowercase hexadecimal digits.
bool IsCommit(const std::string& revision);

}  // namespace imagepack::internal
