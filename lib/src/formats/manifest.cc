#include "formats/manifest.h"

#include "base/limits.h"
#include "formats/text.h"

namespace imagepack::internal {
namespace {

using nlohmann::json;

// A CSV cell as the JSON value it spells (numbers, lists, objects), else a
// string.
json CellValue(const std::string& cell) {
  const std::string t = TrimSpace(cell);
  if (t.empty()) return json();
  json v = json::parse(t, nullptr, /*allow_exceptions=*/false);
  if (!v.is_discarded() && (v.is_number() || v.is_array() || v.is_object())) return v;
  return t;
}

}  // namespace

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') out.back() += '"', ++i;
      else if (c == '"') quoted = false;
      else out.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else if (c != '\r') {
      out.back() += c;
    }
  }
  return out;
}

Result<std::vector<ManifestRow>> ParseManifest(std::string_view text, bool csv, const std::string& name) {
  std::vector<ManifestRow> rows;
  std::vector<std::string> header;
  int n = 0;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    ++n;
    const std::string where = name + ":" + std::to_string(n);
    if (end - at > limits::kLineBytes)
      return Status::InvalidArgument(where + ": a line of " + std::to_string(end - at) + " bytes (budget " +
                                     std::to_string(limits::kLineBytes) + ")");
    const std::string line(text.substr(at, end - at));
    at = end + 1;
    if (TrimSpace(line).empty()) continue;
    if (rows.size() >= limits::kManifestRows)
      return Status::InvalidArgument(where + ": more than " + std::to_string(limits::kManifestRows) +
                                     " rows (the budget of one manifest)");
    if (csv) {
      if (!IsUtf8(line)) return Status::InvalidArgument(where + ": not UTF-8");
      auto cells = SplitCsv(line);
      if (header.empty()) {
        for (auto& c : cells) header.push_back(TrimSpace(c));
        continue;
      }
      if (cells.size() != header.size())
        return Status::InvalidArgument(where + ": " + std::to_string(cells.size()) + " cells, the header has " +
                                       std::to_string(header.size()));
      json row = json::object();
      for (size_t i = 0; i < cells.size(); ++i) {
        const std::string t = TrimSpace(cells[i]);
        if (t.empty()) continue;
        if (JsonDepth(t) > limits::kJsonDepth)
          return Status::InvalidArgument(where + ": a cell nested deeper than " + std::to_string(limits::kJsonDepth));
        if (auto v = CellValue(t); !v.is_null()) row[header[i]] = v;
      }
      rows.push_back({n, std::move(row)});
      continue;
    }
    auto row = ParseJsonBounded(line, where);
    if (!row.ok()) return row.status();
    if (!row->is_object()) return Status::InvalidArgument(where + ": not a JSON object");
    rows.push_back({n, std::move(row.value())});
  }
  return rows;
}

}  // namespace imagepack::internal
