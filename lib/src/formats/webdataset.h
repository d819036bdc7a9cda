// WebDataset shards' rules (webdataset, img2dataset): which files are
// shards, how a shard's tar members group into samples, which members are
// images, labels or a sample's .json, and what that .json says. Reading
// the members' bytes and turning samples into items is the WebDataset
// source's (sources.h). Internal.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/labels.h"
#include "formats/tar.h"
#include "imagepack/status.h"

namespace imagepack::internal {

// .tar, .tar.gz or .tgz (any case); .tar.gz or .tgz.
bool IsShardName(const std::string& path);
bool IsGzipName(const std::string& path);

// webdataset's rule: a member "dir/base.ext1.ext2" belongs to sample
// "dir/base" as its "ext1.ext2" (lower case); "" for a name without one.
std::pair<std::string, std::string> KeyAndExtension(const std::string& member);

// The extensions an image member may have, in the order a sample's image
// is looked for: jpg, jpeg, png, webp, ppm, pgm, bmp, tif, tiff, gif.
const std::vector<std::string>& ImageExtensions();
bool IsImageExtension(const std::string& ext);
// A label member: cls, cls.txt, class, label, label.txt (in that order of
// preference).
const std::vector<std::string>& LabelExtensions();

// One sample: its key and members by extension, or why it is refused (a
// member that appears twice, as webdataset's own reader refuses it).
struct WdsSample {
  std::string key;
  std::map<std::string, TarMember> parts;
  std::string error;
};

// A shard's members grouped into samples, in the order each sample's first
// member appears; members without an extension are not a sample's.
// Bounded by the members (limits::kTarMembers, ListTar's budget).
std::vector<WdsSample> GroupSamples(const std::vector<TarMember>& members);

// What a sample's .json says: its record path ("path"), export_db's record
// index ("index", -1 when absent), a label ("label": an integer or a class
// name; label_error says why another value is none, for a sample with no
// label member, which would take it) and every other non-null value.
struct WdsJson {
  std::string path;
  int64_t index = -1;
  RawLabel label;
  std::string label_error;
  nlohmann::json values = nlohmann::json::object();
};
// `text` is sample `key`'s .json, within limits::kJsonDepth (the member
// itself is read within limits::kValueMember). An error names the key.
Result<WdsJson> ParseSampleJson(std::string_view text, const std::string& key);

}  // namespace imagepack::internal
