// ExportDatabase's TFRecord layout (export.h): files of tf.train.Example
// records in the TF-slim / Inception layout, written as
// tf.io.TFRecordWriter writes them, plain or as one gzip stream.

#include <cstdio>
#include <string_view>

#include "formats/tfrecord.h"
#include "imagepack/fields.h"
#include "imagepack/record.h"
#include "pack/export_internal.h"

namespace imagepack::internal {

std::string TfRecordFileName(const std::string& prefix, int64_t shard, int64_t shards) {
  char name[64];
  std::snprintf(name, sizeof name, "-%05lld-of-%05lld", static_cast<long long>(shard), static_cast<long long>(shards));
  return prefix + name;
}

std::string SlimLabelsText(const std::vector<std::string>& classes) {
  std::string text = "0:background\n";
  for (size_t i = 0; i < classes.size(); ++i) text += std::to_string(i + 1) + ":" + classes[i] + "\n";
  return text;
}

namespace {

// The boxes field written as image/object/bbox/*: the one named "boxes",
// else the first of kind boxes; -1 for none.
int BoxSlot(const DatasetMeta& meta) {
  int first = -1;
  for (size_t i = 0; i < meta.fields.size(); ++i) {
    if (InfoOf(meta.fields[i].kind).layout != FieldLayout::kBoxes) continue;
    if (meta.fields[i].name == "boxes") return int(i);
    if (first < 0) first = int(i);
  }
  return first;
}

// Record `r` as a tf.train.Example in the TF-slim layout.
Status ExampleOf(const RecordView& r, const DatasetMeta& meta, int box_slot, std::vector<uint8_t>* out) {
  std::vector<uint8_t> image;
  const char* ext = "jpg";
  IMAGEPACK_RETURN_IF_ERROR(ImageBytes(r.fields.encoding, r.fields.channels, r.fields.height, r.fields.width,
                                       r.payload, r.payload_size, &image, &ext));
  TfExampleBuilder ex;
  ex.AddBytes("image/encoded", {std::string_view(reinterpret_cast<const char*>(image.data()), image.size())});
  ex.AddBytes("image/format", {ext[0] == 'j' ? "JPEG" : "PNG"});
  ex.AddBytes("image/filename", {r.path});
  ex.AddInts("image/height", {int64_t(r.fields.height)});
  ex.AddInts("image/width", {int64_t(r.fields.width)});
  ex.AddInts("image/channels", {int64_t(r.fields.channels)});
  ex.AddBytes("image/colorspace", {r.fields.channels == 1 ? "Grayscale" : "RGB"});
  if (r.fields.label >= 0) {
    ex.AddInts("image/class/label", {int64_t(r.fields.label) + 1});  // TF-slim: 0 is the background
    const std::string name = ClassName(meta, r.fields.label);
    if (!name.empty()) ex.AddBytes("image/class/text", {name});
  }
  for (const FieldView& f : RecordFieldViews(r)) {
    if (int(f.slot) != box_slot) continue;
    std::vector<float> c[4];
    std::vector<int64_t> labels;
    const double w = r.fields.width ? double(r.fields.width) : 1, h = r.fields.height ? double(r.fields.height) : 1;
    for (const Box& b : ReadBoxes(f)) {
      c[0].push_back(float(b.x0 / w));
      c[1].push_back(float(b.y0 / h));
      c[2].push_back(float(b.x1 / w));
      c[3].push_back(float(b.y1 / h));
      labels.push_back(int64_t(b.label) + 1);
    }
    ex.AddFloats("image/object/bbox/xmin", c[0]);
    ex.AddFloats("image/object/bbox/ymin", c[1]);
    ex.AddFloats("image/object/bbox/xmax", c[2]);
    ex.AddFloats("image/object/bbox/ymax", c[3]);
    ex.AddInts("image/object/bbox/label", labels);
  }
  *out = ex.Serialize();
  return Status::Ok();
}

}  // namespace

Status WriteTfRecordFile(RecordCursor& cur, const DatasetMeta& meta, const TfRecordFileJob& job, bool* written,
                         uint64_t* bytes) {
  *written = false;
  *bytes = 0;
  const int box_slot = BoxSlot(meta);
  AsideFile file(job.path, job.gzip);
  std::vector<uint8_t> example, framed;
  for (int64_t i = job.first; i < job.last; ++i) {
    if (job.cancel && job.cancel->load()) return Status::Ok();  // the temporary goes with `file`
    auto r = cur.Read(i);
    if (!r.ok()) return r.status().WithContext(job.shown + " record " + RecordKey(i));
    Status st = ExampleOf(r.value(), meta, box_slot, &example);
    if (!st.ok()) return st.WithContext(job.shown + " record " + RecordKey(i));
    framed.clear();
    AppendTfRecord(example.data(), example.size(), &framed);
    file.Write(framed);
    if (job.progress) ++job.progress->done;
  }
  IMAGEPACK_RETURN_IF_ERROR(file.Finish(bytes));
  *written = true;
  return Status::Ok();
}

}  // namespace imagepack::internal
