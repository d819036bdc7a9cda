#include "imagepack/meta.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <ctime>
#include <limits>
#include <type_traits>
#include <utility>

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/limits.h"
#include "formats/text.h"

namespace imagepack {

using nlohmann::json;

namespace {

// Class names that are their own indices, "0" .. "N-1" (N >= 1).
bool IsCount(const std::vector<std::string>& classes) {
  for (size_t i = 0; i < classes.size(); ++i)
    if (classes[i] != std::to_string(i)) return false;
  return !classes.empty();
}

// How the checksum entry is written, and found again in the text.
constexpr std::string_view kChecksumKey = "\"meta_checksum\": \"";
constexpr size_t kChecksumDigits = 16;

// Where the 16 digits of the one checksum entry start, or npos.
size_t FindChecksumDigits(std::string_view text) {
  const size_t at = text.find(kChecksumKey);
  if (at == std::string_view::npos || text.find(kChecksumKey, at + 1) != std::string_view::npos)
    return std::string_view::npos;
  const size_t digits = at + kChecksumKey.size();
  if (text.size() < digits + kChecksumDigits + 1 || text[digits + kChecksumDigits] != '"')
    return std::string_view::npos;
  return digits;
}

}  // namespace

bool MetaChecksum(const uint8_t* data, size_t size, uint64_t* checksum, uint64_t* stored) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\r' || text.back() == '\t'))
    text.remove_suffix(1);
  const size_t digits = FindChecksumDigits(text);
  if (digits == std::string_view::npos) return false;
  uint64_t value = 0;
  for (size_t i = 0; i < kChecksumDigits; ++i) {
    const char c = text[digits + i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    value = value << 4 | static_cast<uint64_t>(d);
  }
  *stored = value;
  // The text with the digits read as zeros, hashed in three parts.
  static const char kZeros[kChecksumDigits + 1] = "0000000000000000";
  XXH3_state_t* state = XXH3_createState();
  if (state == nullptr) return false;
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, text.data(), digits);
  XXH3_64bits_update(state, kZeros, kChecksumDigits);
  XXH3_64bits_update(state, text.data() + digits + kChecksumDigits, text.size() - digits - kChecksumDigits);
  *checksum = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return true;
}

std::string DatasetMeta::ToJson() const {
  json j;
  j["format"] = "imagepack";
  const bool checked = format_version >= kFormatVersionChecked;
  // The oldest version that holds every field (the kind table says each
  // kind's first; 16-bit samples need 5): readers of older versions refuse
  // the file by its version.
  int version = kFormatVersionChecked;
  for (const FieldSpec& f : fields) version = std::max(version, FirstFormatOf(f));
  j["format_version"] = checked ? version : fields.empty() ? format_version : kFormatVersionFields;
  if (checked) j["meta_checksum"] = std::string(kChecksumDigits, '0');
  j["count"] = count;
  j["classes"] = classes;
  j["encoding"] = EncodingName(encoding);
  j["channels"] = channels;
  j["key_width"] = kKeyWidth;
  if (records_per_value > 0) j["records_per_value"] = records_per_value;
  j["shard"] = {{"index", shard.index}, {"count", shard.count}};
  j["label_counts"] = label_counts;
  j["mean"] = mean;
  j["std"] = std;
  j["stats_images"] = stats_images;
  j["payload_bytes"] = payload_bytes;
  j["checksum"] = "xxh3-64";
  if (!fields.empty()) {
    json fs = json::array();
    for (const auto& f : fields) {
      const KindInfo& info = InfoOf(f.kind);
      json e = {{"name", f.name}, {"kind", info.name}};
      if (IsCount(f.classes) && f.bits > 8)
        e["classes"] = f.classes.size();  // format 5: N for "0".."N-1" (a 16-bit mask may have 65,536)
      else if (!f.classes.empty())
        e["classes"] = f.classes;
      if (info.fill_key != nullptr) e[info.fill_key] = f.ignore;
      if (info.layout == FieldLayout::kMap && info.fixed_bits == 0 && f.bits != 8) e["dtype"] = "uint16";
      if (f.scale > 0) e["scale"] = f.scale;
      fs.push_back(e);
    }
    j["fields"] = fs;
  }
  j["tool"] = tool;
  j["options"] = json::parse(options_json, nullptr, /*allow_exceptions=*/false);
  if (j["options"].is_discarded()) j["options"] = json::object();
  j["source"] = source;
  j["created"] = created;
  // Names are checked where they enter; paths from the command line are
  // bytes: never an abort here, at the end of a long pack.
  std::string text = j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!checked) return text;
  // Strings are escaped in JSON, so the key's unescaped quotes occur once.
  const size_t digits = FindChecksumDigits(text);
  uint64_t sum = 0, zeros = 0;
  if (digits == std::string::npos ||
      !MetaChecksum(reinterpret_cast<const uint8_t*>(text.data()), text.size(), &sum, &zeros))
    return text;  // unreachable: the entry was written above
  char hex[kChecksumDigits + 1];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(sum));
  std::memcpy(&text[digits], hex, kChecksumDigits);
  return text;
}

namespace {

// An integer field within [lo, hi]. nlohmann's get<int>() converts floats
// and out-of-range values with undefined behaviour (found by fuzz_meta:
// 5.6e70 as a label count), and wraps large unsigned values silently.
Result<int64_t> IntIn(const json& v, const std::string& what, int64_t lo, int64_t hi) {
  bool ok = false;
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    ok = u <= static_cast<uint64_t>(hi);
    x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
    ok = true;
  }
  if (!ok || x < lo || x > hi) return Status::Corruption("metadata " + what + " is not an integer in [" +
                                                         std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

// The checksum first: damaged metadata is named as such, not as whatever
// its damage happens to look like. Whatever the version says (a damaged
// version number is damage like any other).
Status CheckMetaChecksum(const uint8_t* data, size_t size, const json& j) {
  if (!j.contains("meta_checksum")) return Status::Ok();
  uint64_t sum = 0, stored = 0;
  if (!MetaChecksum(data, size, &sum, &stored))
    return Status::Corruption("metadata checksum entry is malformed (\"meta_checksum\": 16 hex digits, once)");
  if (sum == stored) return Status::Ok();
  char msg[160];
  std::snprintf(msg, sizeof msg, "metadata checksum mismatch (stored %016llx, computed %016llx)",
                static_cast<unsigned long long>(stored), static_cast<unsigned long long>(sum));
  return Status::Corruption(std::string(msg) + ": the metadata was changed or damaged after packing");
}

// A map field's own entries: its sample width (depth 16 bits; a mask
// "dtype" uint8 or, from format 5, uint16), its fill value within that
// width (a mask's "ignore" may be -1, none), a depth map's "scale".
Status ParseMapSpec(const json& e, int version, FieldSpec* f) {
  const KindInfo& info = InfoOf(f->kind);
  const std::string what = "metadata field '" + f->name + "'";
  if (info.layout != FieldLayout::kMap) {
    if (e.contains("ignore") || e.contains("dtype") || e.contains("scale"))
      return Status::Corruption(what + " (" + info.name + ") has map entries (ignore, dtype, scale)");
    return Status::Ok();
  }
  f->bits = info.fixed_bits > 0 ? info.fixed_bits : 8;
  if (e.contains("dtype")) {
    if (info.fixed_bits > 0 || !e["dtype"].is_string() ||
        (e["dtype"] != "uint8" && e["dtype"] != "uint16"))
      return Status::Corruption(what + " dtype is not uint8 or uint16");
    f->bits = e["dtype"] == "uint16" ? 16 : 8;
  }
  if (f->bits > 8 && version < kFormatVersionWide)
    return Status::Corruption(what + " is 16-bit in format " + std::to_string(version) + " metadata (format 5 and later)");
  const int top = f->bits > 8 ? 65535 : 255;
  f->ignore = info.default_fill;
  if (e.contains(info.fill_key)) {
    auto fill = IntIn(e[info.fill_key], "field '" + f->name + "' " + info.fill_key, info.default_fill < 0 ? -1 : 0, top);
    if (!fill.ok()) return fill.status();
    f->ignore = static_cast<int>(*fill);
  }
  if (e.contains("scale")) {
    if (info.classes || !e["scale"].is_number() || !(e["scale"].get<double>() > 0) ||
        !std::isfinite(e["scale"].get<double>()))
      return Status::Corruption(what + " scale is not a positive number");
    f->scale = e["scale"].get<double>();
  }
  if (info.classes && f->classes.size() > size_t(top) + 1)
    return Status::Corruption(what + " declares " + std::to_string(f->classes.size()) + " classes for " +
                              std::to_string(f->bits) + "-bit values");
  return Status::Ok();
}

// The "fields" array (format 3 and later): names unique and non-empty,
// kinds known, classes strings, map entries as ParseMapSpec; 1 to 255 of
// them in format 3.
Status ParseFieldSpecs(const json& fields, int version, std::vector<FieldSpec>* out) {
  for (const auto& e : fields) {
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("kind") ||
        !e["kind"].is_string())
      return Status::Corruption("metadata fields entry lacks a name or kind");
    FieldSpec f;
    f.name = e["name"].get<std::string>();
    auto kind = ParseFieldKind(e["kind"].get<std::string>());
    if (!kind.ok()) return Status::Corruption("metadata field '" + f.name + "': " + kind.status().message());
    f.kind = kind.value();
    if (f.name.empty()) return Status::Corruption("metadata field with an empty name");
    for (const auto& other : *out)
      if (other.name == f.name) return Status::Corruption("metadata field '" + f.name + "' declared twice");
    if (e.contains("classes") && e["classes"].is_number() && version >= kFormatVersionWide) {
      auto n = IntIn(e["classes"], "field '" + f.name + "' class count", 1, 65536);
      if (!n.ok()) return n.status();
      for (int64_t i = 0; i < *n; ++i) f.classes.push_back(std::to_string(i));
    } else if (e.contains("classes")) {
      if (!e["classes"].is_array()) return Status::Corruption("metadata field '" + f.name + "' classes not a list");
      for (const auto& c : e["classes"]) {
        if (!c.is_string()) return Status::Corruption("metadata field '" + f.name + "' class names must be strings");
        f.classes.push_back(c.get<std::string>());
      }
    }
    IMAGEPACK_RETURN_IF_ERROR(ParseMapSpec(e, version, &f));
    if (InfoOf(f.kind).first_format > version)
      return Status::Corruption("metadata field '" + f.name + "' is a " + InfoOf(f.kind).name + " (format " +
                                std::to_string(InfoOf(f.kind).first_format) + " and later) in format " +
                                std::to_string(version) + " metadata");
    out->push_back(std::move(f));
  }
  if ((version == kFormatVersionFields && out->empty()) || out->size() > 255)
    return Status::Corruption("metadata format 3 declares " + std::to_string(out->size()) + " fields (1 to 255)");
  return Status::Ok();
}

// label_counts (one per class, each and their sum at most count), mean,
// std, stats_images, payload_bytes.
Status ParseStatistics(const json& j, DatasetMeta* mp) {
  DatasetMeta& m = *mp;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto numbers = [&](const char* key, auto& out) -> Status {
    if (!j.contains(key)) return Status::Ok();
    if (!j[key].is_array()) return Status::Corruption(std::string("metadata '") + key + "' is not an array");
    using T = typename std::decay_t<decltype(out)>::value_type;
    for (const auto& v : j[key]) {
      if (!v.is_number()) return Status::Corruption(std::string("metadata '") + key + "' holds a non-number");
      if constexpr (std::is_integral_v<T>) {
        auto x = IntIn(v, std::string("'") + key + "' entry", 0, kMax);
        if (!x.ok()) return x.status();
        out.push_back(*x);
      } else {
        out.push_back(v.get<T>());
      }
    }
    return Status::Ok();
  };
  IMAGEPACK_RETURN_IF_ERROR(numbers("label_counts", m.label_counts));
  IMAGEPACK_RETURN_IF_ERROR(numbers("mean", m.mean));
  IMAGEPACK_RETURN_IF_ERROR(numbers("std", m.std));
  if (!m.label_counts.empty()) {
    if (m.label_counts.size() != m.classes.size())
      return Status::Corruption("metadata label_counts has " + std::to_string(m.label_counts.size()) +
                                " entries for " + std::to_string(m.classes.size()) + " classes");
    int64_t sum = 0;
    for (auto c : m.label_counts) {
      if (c < 0 || c > m.count) return Status::Corruption("metadata label_counts holds " + std::to_string(c));
      sum += c;
    }
    if (sum > m.count) return Status::Corruption("metadata label_counts add up to more than count");
  }
  for (auto [key, field] : {std::pair<const char*, int64_t*>{"stats_images", &m.stats_images},
                            std::pair<const char*, int64_t*>{"payload_bytes", &m.payload_bytes}}) {
    if (!j.contains(key)) continue;
    auto x = IntIn(j[key], key, 0, kMax);
    if (!x.ok()) return x.status();
    *field = *x;
  }
  return Status::Ok();
}

// The top-level "classes" and "label_counts" arrays: most of a large
// dataset's metadata (1,000 names and counts are 20 KB, and every shard
// repeats them: 10,000 shards are 200 MB of JSON), read by a tight scan;
// the rest of the text goes to nlohmann with those two arrays as []. Only
// plain entries are taken (ASCII names without escapes, integers without
// sign, fraction or leading zero); anything else, or a key seen twice,
// leaves the whole text to nlohmann: the same result, more slowly.
struct BigArrays {
  std::string rest;
  bool classes = false, counts = false;
  std::vector<std::string> class_names;
  std::vector<int64_t> label_counts;
};

// Moves p past JSON whitespace.
void SkipSpace(const char*& p, const char* end) {
  while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) ++p;
}

// Takes the string at p ('"') if it has no escapes or control bytes, and is ASCII unless `any`.
bool PlainString(const char*& p, const char* end, std::string_view* s, bool any) {
  if (p >= end || *p != '"') return false;
  const char* b = ++p;
  while (p < end && *p != '"') {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c == '\\' || c < 0x20 || (!any && c >= 0x80)) return false;
    ++p;
  }
  if (p >= end) return false;
  *s = std::string_view(b, size_t(p - b));
  ++p;
  return true;
}

// Skips any value up to the ',' or '}' that ends it at this level (strings and nesting followed).
bool SkipValue(const char*& p, const char* end) {
  int depth = 0;
  while (p < end) {
    const char c = *p;
    if (c == '"') {
      for (++p; p < end && *p != '"'; ++p)
        if (*p == '\\') ++p;
      if (p >= end) return false;
      ++p;
    } else if (c == '[' || c == '{') {
      ++depth, ++p;
    } else if (c == ']' || c == '}') {
      if (depth == 0) return true;
      --depth, ++p;
    } else if (c == ',' && depth == 0) {
      return true;
    } else {
      ++p;
    }
  }
  return false;
}

// Takes the count at p: at most 18 digits, no sign, fraction, exponent or leading zero.
bool PlainCount(const char*& p, const char* end, int64_t* out) {
  int64_t v = 0;
  const char* b = p;
  while (p < end && *p >= '0' && *p <= '9' && p - b < 18) v = v * 10 + (*p++ - '0');
  if (p == b || (*b == '0' && p - b > 1) || (p < end && ((*p >= '0' && *p <= '9') || *p == '.' ||
                                                       *p == 'e' || *p == 'E')))
    return false;
  *out = v;
  return true;
}

// Takes the array at p ('[') up to its ']': class names with `names`, else label counts.
bool TakeArray(const char*& p, const char* end, bool names, BigArrays* out) {
  ++p;
  SkipSpace(p, end);
  bool first = true;
  while (p < end && *p != ']') {
    if (!first) {
      if (*p != ',') return false;
      ++p;
      SkipSpace(p, end);
    }
    first = false;
    if (names) {
      std::string_view s;
      if (!PlainString(p, end, &s, false)) return false;
      out->class_names.emplace_back(s);
    } else {
      int64_t v = 0;
      if (!PlainCount(p, end, &v)) return false;
      out->label_counts.push_back(v);
    }
    SkipSpace(p, end);
  }
  if (p >= end) return false;
  ++p;
  return true;
}

// The text with each [begin, end) of `cut` replaced by "[]".
std::string WithoutCuts(const char* text, size_t size, const std::vector<std::pair<size_t, size_t>>& cut) {
  std::string rest;
  size_t at = 0;
  for (const auto& [b, e] : cut) {
    rest.append(text + at, b - at);
    rest += "[]";
    at = e;
  }
  rest.append(text + at, size - at);
  return rest;
}

bool TakeBigArrays(const uint8_t* data, size_t size, BigArrays* out) {
  const char* const text = reinterpret_cast<const char*>(data);
  const char* p = text;
  const char* const end = p + size;
  std::vector<std::pair<size_t, size_t>> cut;  // [begin, end) of the arrays taken
  SkipSpace(p, end);
  if (p >= end || *p != '{') return false;
  ++p;
  for (;;) {
    SkipSpace(p, end);
    if (p < end && *p == '}') break;
    std::string_view key;
    if (!PlainString(p, end, &key, true)) return false;
    SkipSpace(p, end);
    if (p >= end || *p != ':') return false;
    ++p;
    SkipSpace(p, end);
    const bool names = key == "classes", counts = key == "label_counts";
    if ((names && out->classes) || (counts && out->counts)) return false;  // twice: nlohmann's rule (the last)
    if ((names || counts) && p < end && *p == '[') {
      const size_t begin = size_t(p - text);
      if (!TakeArray(p, end, names, out)) return false;
      cut.emplace_back(begin, size_t(p - text));
      (names ? out->classes : out->counts) = true;
    } else if (!SkipValue(p, end)) {
      return false;
    }
    SkipSpace(p, end);
    if (p < end && *p == ',') {
      ++p;
      continue;
    }
    if (p < end && *p == '}') break;
    return false;
  }
  if (cut.empty()) return false;
  out->rest = WithoutCuts(text, size, cut);
  return true;
}

Result<DatasetMeta> ParseMetaUnchecked(const uint8_t* data, size_t size) {
  // Nesting is counted before anything parses it: a value nested 90,000
  // deep (in "options", say) would parse, then overflow the stack of every
  // recursive step after it (dump, compare, copy).
  if (const int depth = internal::JsonDepth(std::string_view(reinterpret_cast<const char*>(data), size));
      depth > internal::limits::kJsonDepth)
    return Status::Corruption("metadata nested " + std::to_string(depth) + " deep (budget " +
                              std::to_string(internal::limits::kJsonDepth) + ")");
  BigArrays big;
  if (!TakeBigArrays(data, size, &big)) big = BigArrays();
  json j = big.rest.empty() ? json::parse(data, data + size, nullptr, /*allow_exceptions=*/false)
                            : json::parse(big.rest, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Corruption("metadata is not a JSON object");
  IMAGEPACK_RETURN_IF_ERROR(CheckMetaChecksum(data, size, j));
  auto need = [&](const char* key, json::value_t t1, json::value_t t2 = json::value_t::discarded) -> Status {
    if (!j.contains(key)) return Status::Corruption(std::string("metadata lacks '") + key + "'");
    auto t = j[key].type();
    if (t != t1 && t != t2) return Status::Corruption(std::string("metadata '") + key + "' has the wrong type");
    return Status::Ok();
  };
  using V = json::value_t;
  if (!j.contains("format") || j["format"] != "imagepack")
    return Status::Corruption("metadata is not imagepack's (format != \"imagepack\")");
  IMAGEPACK_RETURN_IF_ERROR(need("format_version", V::number_unsigned, V::number_integer));
  IMAGEPACK_RETURN_IF_ERROR(need("count", V::number_unsigned, V::number_integer));
  IMAGEPACK_RETURN_IF_ERROR(need("classes", V::array));
  IMAGEPACK_RETURN_IF_ERROR(need("encoding", V::string));
  IMAGEPACK_RETURN_IF_ERROR(need("channels", V::number_unsigned, V::number_integer));
  DatasetMeta m;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto version = IntIn(j["format_version"], "format_version", 0, 1 << 30);
  if (!version.ok()) return version.status();
  m.format_version = static_cast<int>(*version);
  if (m.format_version < 1 || m.format_version > NewestFormatVersion())
    return Status::NotSupported("format version " + std::to_string(m.format_version) +
                                " (this build reads 1 to " + std::to_string(NewestFormatVersion()) + ")");
  if (m.format_version >= kFormatVersionChecked && !j.contains("meta_checksum"))
    return Status::Corruption("metadata of format " + std::to_string(m.format_version) +
                              " lacks its meta_checksum (damaged)");
  if (m.format_version == kFormatVersionFields) IMAGEPACK_RETURN_IF_ERROR(need("fields", V::array));
  if (m.format_version >= kFormatVersionFields && j.contains("fields")) {
    IMAGEPACK_RETURN_IF_ERROR(need("fields", V::array));
    IMAGEPACK_RETURN_IF_ERROR(ParseFieldSpecs(j["fields"], m.format_version, &m.fields));
  }
  // Format 3's container layout is format 2's.
  if (m.format_version == kFormatVersionFields) m.format_version = kFormatVersion;
  if (m.format_version >= 2 && j.contains("records_per_value")) {
    auto per_value = IntIn(j["records_per_value"], "records_per_value", 1, kMaxRecordsPerValue);
    if (!per_value.ok()) return per_value.status();
    m.records_per_value = static_cast<int>(*per_value);
  }
  auto count = IntIn(j["count"], "count", 0, kMax);
  if (!count.ok()) return count.status();
  m.count = *count;
  m.classes = std::move(big.class_names);
  for (const auto& c : j["classes"]) {
    if (!c.is_string()) return Status::Corruption("metadata class names must be strings");
    m.classes.push_back(c.get<std::string>());
  }
  m.label_counts = std::move(big.label_counts);  // ParseStatistics checks them (j's are [] when taken)
  auto enc = ParseEncoding(j["encoding"].get<std::string>());
  if (!enc.ok()) return Status::Corruption("metadata: " + enc.status().message());
  m.encoding = enc.value();
  auto channels = IntIn(j["channels"], "channels", 1, 3);
  if (!channels.ok() || *channels == 2) return Status::Corruption("metadata channels must be 1 or 3");
  m.channels = static_cast<int>(*channels);
  if (j.contains("key_width") && j["key_width"] != kKeyWidth)
    return Status::NotSupported("key width " + j["key_width"].dump());
  if (j.contains("shard") && j["shard"].is_object()) {
    const auto& s = j["shard"];
    if (!s.contains("index") || !s.contains("count"))
      return Status::Corruption("metadata shard is not I/N with 0 <= I < N");
    auto index = IntIn(s["index"], "shard index", 0, 1 << 30);
    auto shards = IntIn(s["count"], "shard count", 1, 1 << 30);
    if (!index.ok() || !shards.ok() || *index >= *shards)
      return Status::Corruption("metadata shard is not I/N with 0 <= I < N");
    m.shard = {static_cast<int>(*index), static_cast<int>(*shards)};
  }
  IMAGEPACK_RETURN_IF_ERROR(ParseStatistics(j, &m));
  m.tool = j.value("tool", std::string());
  m.source = j.value("source", std::string());
  m.created = j.value("created", std::string());
  if (j.contains("options")) m.options_json = j["options"].dump();
  return m;
}

}  // namespace

Result<DatasetMeta> ParseMeta(const uint8_t* data, size_t size) {
  try {
    return ParseMetaUnchecked(data, size);
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(std::string("metadata: ") + e.what());
  }
}

uint64_t DatasetIdentity(const DatasetMeta& meta) {
  const std::string text = meta.ToJson();
  return XXH3_64bits(text.data(), text.size());
}

namespace {

std::string UtcText(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string UtcNow() { return UtcText(std::time(nullptr)); }

Result<std::string> CreationTime() {
  const char* env = std::getenv("SOURCE_DATE_EPOCH");
  if (env == nullptr) return UtcNow();
  const std::string_view text(env);
  int64_t seconds = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  // Years past 9999 do not fit the format; the convention allows none.
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || seconds < 0 ||
      seconds > int64_t{253402300799})
    return Status::InvalidArgument("SOURCE_DATE_EPOCH='" + std::string(text.substr(0, 64)) +
                                   "' is not a count of seconds since 1970-01-01 (0 to 253402300799)");
  return UtcText(static_cast<std::time_t>(seconds));
}

bool StoredShuffled(const DatasetMeta& meta) {
  const auto options = nlohmann::json::parse(meta.options_json, nullptr, /*allow_exceptions=*/false);
  if (!options.is_object()) return false;
  const auto it = options.find("shuffle");
  return it != options.end() && it->is_number_integer() && it->get<int64_t>() >= 0;
}

}  // namespace imagepack
