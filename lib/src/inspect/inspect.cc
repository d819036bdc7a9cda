#include "imagepack/inspect.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "imagepack/augment.h"
#include "imagepack/decode.h"
#include "imagepack/fields.h"
#include "imagepack/files.h"
#include "imagepack/loader.h"
#include "imagepack/mask.h"
#include "imagepack/record.h"
#include "imagepack/resample.h"
#include "imagepack/store.h"
#include "image/vips_util.h"

namespace imagepack {
namespace {

using nlohmann::json;

struct Rgb {
  uint8_t r, g, b;
};
constexpr Rgb kWhite{255, 255, 255}, kInk{30, 30, 30}, kGrey{200, 200, 200}, kBar{70, 110, 180};

// A distinct colour per value (golden-angle hues).
Rgb ColourOf(int v) {
  const double h = std::fmod(v * 137.508, 360.0) / 60.0;
  const double x = 1 - std::fabs(std::fmod(h, 2.0) - 1);
  double r = 0, g = 0, b = 0;
  switch (static_cast<int>(h)) {
    case 0: r = 1, g = x; break;
    case 1: r = x, g = 1; break;
    case 2: g = 1, b = x; break;
    case 3: g = x, b = 1; break;
    case 4: r = x, b = 1; break;
    default: r = 1, b = x; break;
  }
  return {uint8_t(40 + 215 * r), uint8_t(40 + 215 * g), uint8_t(40 + 215 * b)};
}

// An RGB picture to draw on.
class Canvas {
 public:
  Canvas(int w, int h, Rgb bg = kWhite) {
    img_.width = w;
    img_.height = h;
    img_.channels = 3;
    img_.pixels.resize(size_t(w) * h * 3);
    Fill(0, 0, w, h, bg);
  }
  void Fill(int x, int y, int w, int h, Rgb c) {
    for (int yy = std::max(0, y); yy < std::min(img_.height, y + h); ++yy)
      for (int xx = std::max(0, x); xx < std::min(img_.width, x + w); ++xx) Put(xx, yy, c);
  }
  void Outline(int x, int y, int w, int h, Rgb c, int t = 1) {
    Fill(x, y, w, t, c);
    Fill(x, y + h - t, w, t, c);
    Fill(x, y, t, h, c);
    Fill(x + w - t, y, t, h, c);
  }
  // Pixels of `im` (1 or 3 channels) with their top-left corner at (x, y),
  // each drawn as a zoom x zoom block.
  void Blit(const Image& im, int x, int y, int zoom = 1) {
    for (int yy = 0; yy < im.height * zoom; ++yy)
      for (int xx = 0; xx < im.width * zoom; ++xx) {
        const uint8_t* p = im.pixels.data() + (size_t(yy / zoom) * im.width + xx / zoom) * im.channels;
        Put(x + xx, y + yy, im.channels == 1 ? Rgb{p[0], p[0], p[0]} : Rgb{p[0], p[1], p[2]});
      }
  }
  // `alpha` of colour c over the pixel.
  void Tint(int x, int y, Rgb c, float alpha) {
    if (x < 0 || y < 0 || x >= img_.width || y >= img_.height) return;
    uint8_t* p = img_.pixels.data() + (size_t(y) * img_.width + x) * 3;
    p[0] = uint8_t(std::lround(p[0] * (1 - alpha) + c.r * alpha));
    p[1] = uint8_t(std::lround(p[1] * (1 - alpha) + c.g * alpha));
    p[2] = uint8_t(std::lround(p[2] * (1 - alpha) + c.b * alpha));
  }
  // Text with its top-left corner at (x, y), cut at max_w pixels wide.
  void Text(const std::string& text, int x, int y, int px, Rgb c = kInk, int max_w = 1 << 30) {
    auto t = internal::RenderText(text, px);
    if (!t.ok()) return;  // pictures without words are still pictures
    for (int yy = 0; yy < t->height; ++yy)
      for (int xx = 0; xx < std::min(t->width, max_w); ++xx) {
        const uint8_t a = t->pixels[size_t(yy) * t->width + xx];
        if (a) Tint(x + xx, y + yy, c, a / 255.f);
      }
  }
  Status Save(const std::string& path) const {
    auto png = EncodePng(img_);
    if (!png.ok()) return png.status();
    return WriteFileAtomic(path, png->data(), png->size());
  }
  int width() const { return img_.width; }
  int height() const { return img_.height; }

 private:
  void Put(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= img_.width || y >= img_.height) return;
    uint8_t* p = img_.pixels.data() + (size_t(y) * img_.width + x) * 3;
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
  }
  Image img_;
};

// A record's image fitted into tile x tile, keeping its aspect: shrunk
// while decoding, or enlarged when smaller.
Result<Image> Thumbnail(const RecordView& r, int tile) {
  Image img;
  if (r.fields.encoding == Encoding::kRaw) {
    img.width = int(r.fields.width);
    img.height = int(r.fields.height);
    img.channels = r.fields.channels;
    img.pixels.assign(r.payload, r.payload + r.payload_size);
  } else {
    DecodeOptions d;
    d.channels = 3;
    d.limit = {SizeLimit::Mode::kLongerEdge, tile};
    auto dec = DecodeImage(r.payload, r.payload_size, d);
    if (!dec.ok()) return dec.status();
    img = std::move(dec.value());
  }
  const double s = double(tile) / std::max(img.width, img.height);
  const int w = std::max(1, int(std::lround(img.width * s))), h = std::max(1, int(std::lround(img.height * s)));
  if (w == img.width && h == img.height) return img;
  return ResampleImage(img, w, h, ResampleFilter::kTriangle);
}

// Draws record `index`'s thumbnail centred in the tile at (x, y).
void DrawRecordTile(Canvas& c, RecordCursor& cur, int64_t index, int x, int y, int tile) {
  c.Fill(x, y, tile, tile, kGrey);
  auto r = cur.Read(index);
  if (!r.ok()) {
    c.Text("unreadable", x + 2, y + tile / 2 - 6, 12, {200, 0, 0});
    return;
  }
  auto t = Thumbnail(r.value(), tile);
  if (!t.ok()) {
    c.Text("no decode", x + 2, y + tile / 2 - 6, 12, {200, 0, 0});
    return;
  }
  c.Blit(t.value(), x + (tile - t->width) / 2, y + (tile - t->height) / 2);
}

std::string ClassName(const DatasetMeta& m, int64_t label) {
  if (label < 0) return "-";
  return label < int64_t(m.classes.size()) ? m.classes[size_t(label)] : std::to_string(label);
}

Status WriteJson(const std::string& png, const json& j) {
  std::string path = png;
  const auto dot = path.rfind('.');
  path = (dot == std::string::npos ? path : path.substr(0, dot)) + ".json";
  const std::string text = j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
  return WriteFileAtomic(path, text.data(), text.size());
}

}  // namespace

Result<std::string> WriteContactSheet(const InspectOptions& o, const std::string& png) {
  if (o.per_class < 1 || o.max_classes < 1 || o.tile < 8) return Status::InvalidArgument("per_class, max_classes >= 1, tile >= 8");
  auto db = OpenDatabase(o.db);
  if (!db.ok()) return db.status();
  const DatasetMeta& meta = db.value()->meta();
  auto labels = ReadLabels({o.db});
  if (!labels.ok()) return labels.status();
  std::map<int64_t, std::vector<int64_t>> by_class;
  for (int64_t i = 0; i < int64_t(labels->size()); ++i) by_class[(*labels)[size_t(i)]].push_back(i);
  std::vector<std::pair<int64_t, std::vector<int64_t>>> rows;
  std::mt19937_64 rng(o.seed);
  for (auto& [label, idx] : by_class) {
    if (int(rows.size()) >= o.max_classes) break;
    std::vector<int64_t> pick = idx;
    for (size_t k = 0; k < std::min<size_t>(pick.size(), size_t(o.per_class)); ++k)
      std::swap(pick[k], pick[k + rng() % (pick.size() - k)]);
    pick.resize(std::min<size_t>(pick.size(), size_t(o.per_class)));
    std::sort(pick.begin(), pick.end());
    rows.emplace_back(label, std::move(pick));
  }
  const int pitch = o.tile + 4, left = 170, top = 34;
  Canvas c(left + pitch * o.per_class + 4, top + pitch * int(rows.size()) + 4);
  c.Text(o.db + ": " + std::to_string(db.value()->size()) + " records, " + std::to_string(by_class.size()) +
             " classes; " + std::to_string(o.per_class) + " random records per class (seed " +
             std::to_string(o.seed) + ")",
         6, 8, 16);
  auto cur = db.value()->NewCursor();
  json jrows = json::array();
  for (size_t r = 0; r < rows.size(); ++r) {
    const int y = top + pitch * int(r);
    const std::string name = ClassName(meta, rows[r].first);
    c.Text(name, 6, y + o.tile / 2 - 8, 14, kInk, left - 12);
    c.Text(std::to_string(by_class[rows[r].first].size()) + " records", 6, y + o.tile / 2 + 8, 11, {110, 110, 110},
           left - 12);
    for (size_t k = 0; k < rows[r].second.size(); ++k)
      DrawRecordTile(c, *cur, rows[r].second[k], left + pitch * int(k), y, o.tile);
    jrows.push_back({{"label", rows[r].first}, {"class", name}, {"records", rows[r].second}});
  }
  IMAGEPACK_RETURN_IF_ERROR(c.Save(png));
  IMAGEPACK_RETURN_IF_ERROR(WriteJson(png, {{"tile", o.tile}, {"pitch", pitch}, {"origin", {left, top}}, {"rows", jrows}}));
  // Classes of the list with no record have no row: said, by name.
  std::string empty;
  int64_t n_empty = 0;
  for (size_t k = 0; k < meta.classes.size(); ++k)
    if (!by_class.count(int64_t(k)) && ++n_empty <= 5) empty += (empty.empty() ? "" : ", ") + meta.classes[k];
  if (n_empty > 5) empty += ", ...";
  return "contact sheet of " + std::to_string(rows.size()) + " classes x " + std::to_string(o.per_class) + " -> " +
         png + (n_empty ? "; " + std::to_string(n_empty) + " class(es) with no records, no row: " + empty : "");
}

// The grid's transform and augmentations into *lo: --augment a transform
// (train, eval, pad_crop, ...) or a policy's name (the train transform with
// it, as the recipe trains), then the policy's and the crop's settings.
Status GridAugmentations(const InspectOptions& o, LoaderOptions* lo) {
  std::string policy = o.auto_augment;
  auto transform = ParseTransform(o.augment);
  if (AutoAugmentKind k; !transform.ok() && ParseAutoAugment(o.augment, &k) && k != AutoAugmentKind::kNone) {
    transform = TransformKind::kTrain;
    policy = o.augment;
  }
  if (!transform.ok())
    return Status::InvalidArgument(transform.status().message() + ", or a policy (ta_wide, ra, imagenet, cifar10, "
                                                                  "svhn, augmix)");
  lo->transform = transform.value();
  if (!ParseAutoAugment(policy, &lo->augment.kind)) return Status::InvalidArgument("unknown policy " + policy);
  lo->augment.ra_magnitude = o.ra_magnitude;
  lo->augment.augmix_severity = o.augmix_severity;
  lo->erase.p = o.random_erase;
  lo->hflip = o.hflip;
  lo->filter = o.interpolation == "bicubic" ? ResampleFilter::kCatmullRom : ResampleFilter::kTriangle;
  return Status::Ok();
}

Result<std::string> WriteAugmentedGrid(const InspectOptions& o, const std::string& png) {
  LoaderOptions lo;
  lo.paths = {o.db};
  lo.batch_size = std::max(1, o.batch);
  lo.size = o.crop > 0 ? o.crop : o.tile;
  lo.seed = o.seed;
  lo.layout = Layout::kNHWC;
  lo.threads = o.threads;
  lo.channels = 3;
  IMAGEPACK_RETURN_IF_ERROR(GridAugmentations(o, &lo));
  // The one spelling, whatever the caller's: "train", "train + ta_wide".
  const std::string augment = std::string(TransformName(lo.transform)) +
                              (lo.augment.kind != AutoAugmentKind::kNone
                                   ? std::string(" + ") + AutoAugmentName(lo.augment.kind) : std::string());
  auto loader = Loader::Open(lo);
  if (!loader.ok()) return loader.status();
  Loader& l = *loader.value();
  l.StartEpoch(o.epoch);
  auto batch = l.NextView();
  if (!batch.ok()) return batch.status();
  const BatchView& b = batch.value();
  const DatasetMeta& meta = l.meta();
  // Small samples are shown enlarged (each pixel a zoom x zoom block).
  const int s = lo.size, zoom = std::max(1, 64 / s), cols = std::min(8, std::max(1, b.count)),
            rows = (b.count + cols - 1) / cols, z = s * zoom;
  const int pitch_x = z + 6, pitch_y = z + 22, top = 30;
  Canvas c(std::max(pitch_x * cols + 6, 480), top + pitch_y * rows + 4);
  c.Text(o.db + ": epoch " + std::to_string(o.epoch) + ", seed " + std::to_string(o.seed) + ", " + augment + " " +
             std::to_string(s) + "x" + std::to_string(s),
         6, 6, 15);
  const BatchField* mask = nullptr;  // the first map of classes, tinted by value
  int mask_ignore = -1;
  std::vector<std::pair<const BatchField*, std::pair<const BatchField*, const BatchField*>>> boxes;
  for (const auto& f : b.fields) {
    for (const auto& spec : meta.fields) {
      if (spec.name != f.name) continue;
      const KindInfo& info = InfoOf(spec.kind);
      if (info.layout == FieldLayout::kMap && info.classes && !mask) mask = &f, mask_ignore = spec.ignore;
      if (info.layout == FieldLayout::kBoxes) {
        const std::string lab = FieldLabelsName(f.name);
        const std::string num = FieldCountName(f.name);
        const BatchField *fl = nullptr, *fn = nullptr;
        for (const auto& g : b.fields) {
          if (g.name == lab) fl = &g;
          if (g.name == num) fn = &g;
        }
        if (fl && fn) boxes.push_back({&f, {fl, fn}});
      }
    }
  }
  json tiles = json::array();
  for (int i = 0; i < b.count; ++i) {
    const int x = 6 + pitch_x * (i % cols), y = top + pitch_y * (i / cols);
    Image im;
    im.width = im.height = s;
    im.channels = 3;
    const uint8_t* src = b.images + size_t(i) * s * s * 3;
    im.pixels.assign(src, src + size_t(s) * s * 3);
    c.Blit(im, x, y, zoom);
    if (mask) {
      const size_t bytes = DTypeBytes(mask->dtype);
      const uint8_t* m = mask->data + size_t(i) * s * s * bytes;
      for (int yy = 0; yy < z; ++yy)
        for (int xx = 0; xx < z; ++xx) {
          const uint8_t* at = m + (size_t(yy / zoom) * s + xx / zoom) * bytes;
          const int v = bytes == 2 ? at[0] | at[1] << 8 : at[0];
          if (v != mask_ignore && v != 0) c.Tint(x + xx, y + yy, ColourOf(v), 0.45f);
        }
    }
    for (const auto& [bf, rest] : boxes) {
      const int64_t m = bf->shape[1];
      const int64_t count = reinterpret_cast<const int64_t*>(rest.second->data)[i];
      for (int64_t k = 0; k < count; ++k) {
        const float* q = reinterpret_cast<const float*>(bf->data) + (size_t(i) * m + k) * 4;
        const int64_t cls = reinterpret_cast<const int64_t*>(rest.first->data)[size_t(i) * m + k];
        const int x0 = int(std::floor(q[0] * zoom)), y0 = int(std::floor(q[1] * zoom));
        const int x1 = int(std::ceil(q[2] * zoom)), y1 = int(std::ceil(q[3] * zoom));
        c.Outline(x + x0, y + y0, std::max(2, x1 - x0), std::max(2, y1 - y0), ColourOf(int(cls) + 1), 2);
      }
    }
    c.Text(ClassName(meta, b.labels[i]), x, y + z + 2, 12, kInk, z);
    tiles.push_back({{"index", b.indices[i]}, {"label", b.labels[i]}, {"x", x}, {"y", y}});
  }
  IMAGEPACK_RETURN_IF_ERROR(c.Save(png));
  IMAGEPACK_RETURN_IF_ERROR(WriteJson(png, {{"size", s}, {"zoom", zoom}, {"seed", o.seed}, {"epoch", o.epoch}, {"augment", augment},
                                            {"tiles", tiles}}));
  return "loader's first batch of epoch " + std::to_string(o.epoch) + " (" + std::to_string(b.count) + " samples" +
         (mask ? ", masks" : "") + (boxes.empty() ? "" : ", boxes") + ") -> " + png;
}

// The image sizes panel at `py`: width against height of the sampled
// records, plotted between x = left..x1, and their edges' quantiles.
void DrawSizes(Canvas& c, const std::vector<int>& ws, const std::vector<int>& hs, int py, int left, int x1,
               int panel_h, json* panels) {
  const int x0 = left, y0 = py + 30, y1 = py + panel_h - 40, W = 2 * (x1 + 20);  // the chart's width
  const int maxw = ws.empty() ? 1 : *std::max_element(ws.begin(), ws.end());
  const int maxh = hs.empty() ? 1 : *std::max_element(hs.begin(), hs.end());
  const int m = std::max(maxw, maxh);
  c.Text("image sizes (" + std::to_string(ws.size()) + " sampled): width x height", x0, py + 6, 14);
  c.Fill(x0 - 1, y0, 1, y1 - y0 + 1, kInk);
  c.Fill(x0 - 1, y1, x1 - x0 + 1, 1, kInk);
  for (size_t k = 0; k < ws.size(); ++k) {
    const int px = x0 + int(double(ws[k]) / m * (x1 - x0 - 3)), pyy = y1 - int(double(hs[k]) / m * (y1 - y0 - 3));
    c.Fill(px, pyy - 2, 3, 3, kBar);
  }
  c.Text(std::to_string(m), x1 - 20, y1 + 4, 11);
  c.Text(std::to_string(m), 4, y0 - 6, 11);
  c.Text("width", (x0 + x1) / 2 - 20, y1 + 20, 12);
  panels->push_back({{"title", "sizes"}, {"plot", {x0, y0, x1, y1}}, {"max", m}});
  // shorter edges, as text
  std::vector<int> shorter(ws.size());
  for (size_t k = 0; k < ws.size(); ++k) shorter[k] = std::min(ws[k], hs[k]);
  std::sort(shorter.begin(), shorter.end());
  if (!shorter.empty()) {
    auto q = [&](double f) { return shorter[size_t(f * (shorter.size() - 1))]; };
    c.Text("shorter edge: min " + std::to_string(shorter.front()) + ", median " + std::to_string(q(0.5)) +
               ", max " + std::to_string(shorter.back()),
           W / 2 + 10, y0 + 10, 13);
    std::vector<int> longer(ws.size());
    for (size_t k = 0; k < ws.size(); ++k) longer[k] = std::max(ws[k], hs[k]);
    std::sort(longer.begin(), longer.end());
    c.Text("longer edge: min " + std::to_string(longer.front()) + ", median " +
               std::to_string(longer[longer.size() / 2]) + ", max " + std::to_string(longer.back()),
           W / 2 + 10, y0 + 30, 13);
  }
}

Result<std::string> WriteSummaryChart(const InspectOptions& o, const std::string& png) {
  auto db = OpenDatabase(o.db);
  if (!db.ok()) return db.status();
  const RecordSource& src = *db.value();
  const DatasetMeta& meta = src.meta();
  const int64_t n = src.size();
  const int64_t sample = std::min<int64_t>(n, 20000);
  std::vector<int> ws, hs;
  std::vector<int64_t> sizes;
  auto cur = src.NewCursor();
  for (int64_t k = 0; k < sample; ++k) {
    const int64_t i = sample == n ? k : k * n / sample;
    auto r = cur->Read(i, /*verify_checksum=*/false);
    if (!r.ok()) continue;
    ws.push_back(int(r->fields.width));
    hs.push_back(int(r->fields.height));
    sizes.push_back(int64_t(r->payload_size));
  }
  const int W = 1000, panel_h = 280, left = 70, right = 20;
  Canvas c(W, 3 * panel_h + 50);
  c.Text(o.db + ": " + std::to_string(n) + " records, " + std::to_string(meta.classes.size()) + " classes, " +
             (meta.encoding == Encoding::kJpeg ? "JPEG" : "raw") + ", " + std::to_string(meta.payload_bytes / 1000000) +
             " MB of payload",
         8, 8, 16);
  json panels = json::array();
  // Histogram panel: bars of `values` between plot x0..x1, y0..y1 (bottom).
  auto bars = [&](int py, const std::string& title, const std::vector<int64_t>& values, const std::string& xlabel,
                  const std::vector<std::string>& ticks) {
    const int x0 = left, x1 = W - right, y0 = py + 30, y1 = py + panel_h - 40;
    c.Text(title, x0, py + 6, 14);
    c.Fill(x0 - 1, y0, 1, y1 - y0 + 1, kInk);
    c.Fill(x0 - 1, y1, x1 - x0 + 1, 1, kInk);
    const int64_t peak = values.empty() ? 0 : *std::max_element(values.begin(), values.end());
    c.Text(std::to_string(peak), 4, y0 - 6, 11);
    c.Text("0", left - 16, y1 - 8, 11);
    const double bw = values.empty() ? 0 : double(x1 - x0) / double(values.size());
    for (size_t k = 0; k < values.size(); ++k) {
      const int h = peak > 0 ? int(std::lround(double(values[k]) * (y1 - y0) / double(peak))) : 0;
      const int bx = x0 + int(std::floor(k * bw)), bx1 = x0 + int(std::floor((k + 1) * bw));
      c.Fill(bx + (bx1 - bx > 3 ? 1 : 0), y1 - h, std::max(1, bx1 - bx - (bx1 - bx > 3 ? 1 : 0)), h, kBar);
    }
    for (size_t k = 0; k < ticks.size() && !ticks[k].empty(); ++k)
      c.Text(ticks[k], x0 + int(k * (x1 - x0) / std::max<size_t>(1, ticks.size() - 1)) - 10, y1 + 4, 11);
    c.Text(xlabel, (x0 + x1) / 2 - 60, y1 + 20, 12);
    panels.push_back({{"title", title}, {"plot", {x0, y0, x1, y1}}, {"peak", peak}, {"values", values}});
  };
  // 1. classes (metadata counts)
  std::vector<int64_t> counts = meta.label_counts;
  std::vector<std::string> cticks;
  if (!counts.empty() && counts.size() <= 12)
    for (const auto& name : meta.classes) cticks.push_back(name.substr(0, 10));
  bars(30, "records per class (" + std::to_string(counts.size()) + " classes)", counts, "class index", {});
  if (!cticks.empty()) {
    const double bw = double(W - right - left) / double(counts.size());
    for (size_t k = 0; k < cticks.size(); ++k) c.Text(cticks[k], left + int((k + 0.2) * bw), 30 + panel_h - 36, 11);
  }
  // 2. sizes: width against height
  DrawSizes(c, ws, hs, 30 + panel_h, left, W / 2 - 20, panel_h, &panels);
  // 3. bytes per record
  {
    std::vector<int64_t> hist(40, 0);
    int64_t hi = 1;
    if (!sizes.empty()) {
      std::vector<int64_t> s = sizes;
      std::sort(s.begin(), s.end());
      hi = std::max<int64_t>(1, s[size_t(0.99 * (s.size() - 1))] + 1);
      for (int64_t v : sizes) ++hist[size_t(std::min<int64_t>(39, v * 40 / hi))];
    }
    std::vector<std::string> ticks;
    for (int k = 0; k <= 4; ++k)
      ticks.push_back(hi >= 10000 ? std::to_string(hi * k / 4 / 1000) + " KB" : std::to_string(hi * k / 4) + " B");
    bars(30 + 2 * panel_h, "bytes per record (" + std::to_string(sizes.size()) + " sampled; last bin: >= 99th percentile)",
         hist, "payload bytes", ticks);
  }
  IMAGEPACK_RETURN_IF_ERROR(c.Save(png));
  IMAGEPACK_RETURN_IF_ERROR(WriteJson(png, {{"panels", panels}}));
  return "summary chart -> " + png;
}

Status WriteDuplicateSheet(const std::vector<std::string>& dbs, const std::vector<DuplicatePair>& pairs,
                           int max_pairs, const std::string& png) {
  const int tile = 96, pitch = tile + 8, top = 30;
  const int n = std::min<int>(max_pairs, int(pairs.size()));
  Canvas c(1100, top + pitch * std::max(n, 1) + 4);
  c.Text(std::to_string(pairs.size()) + " duplicate pairs" + (n < int(pairs.size()) ? "; the first " + std::to_string(n) : ""), 6, 6, 15);
  std::vector<std::unique_ptr<RecordSource>> open;
  std::vector<std::unique_ptr<RecordCursor>> cursors;
  std::vector<const DatasetMeta*> metas;
  for (const auto& p : dbs) {
    auto db = OpenDatabase(p);
    if (!db.ok()) return db.status();
    cursors.push_back(db.value()->NewCursor());
    metas.push_back(&db.value()->meta());
    open.push_back(std::move(db.value()));
  }
  json rows = json::array();
  for (int k = 0; k < n; ++k) {
    const DuplicatePair& p = pairs[size_t(k)];
    const int y = top + pitch * k;
    DrawRecordTile(c, *cursors[size_t(p.db_a)], p.a, 6, y, tile);
    DrawRecordTile(c, *cursors[size_t(p.db_b)], p.b, 6 + tile + 6, y, tile);
    char head[128];
    std::snprintf(head, sizeof head, "%s  (hash distance %d, similarity %.3f)%s", p.exact ? "exact" : "near",
                  p.distance, p.similarity, p.db_a != p.db_b ? "  LEAK between databases" : "");
    const int tx = 2 * tile + 24;
    c.Text(head, tx, y + 6, 14, p.db_a != p.db_b ? Rgb{190, 30, 30} : kInk);
    c.Text(dbs[size_t(p.db_a)] + " #" + std::to_string(p.a) + "  " + p.path_a + "  [" +
               ClassName(*metas[size_t(p.db_a)], p.label_a) + "]",
           tx, y + 32, 12, kInk, 1100 - tx - 6);
    c.Text(dbs[size_t(p.db_b)] + " #" + std::to_string(p.b) + "  " + p.path_b + "  [" +
               ClassName(*metas[size_t(p.db_b)], p.label_b) + "]",
           tx, y + 52, 12, kInk, 1100 - tx - 6);
    rows.push_back({{"y", y}, {"a", {p.db_a, p.a}}, {"b", {p.db_b, p.b}}});
  }
  IMAGEPACK_RETURN_IF_ERROR(c.Save(png));
  return WriteJson(png, {{"tile", tile}, {"rows", rows}});
}

}  // namespace imagepack
