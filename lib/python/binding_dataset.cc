// imagepack._imagepack.Dataset: random access to records, decoded in C++.
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "binding.h"
#include "imagepack/fields.h"
#include "imagepack/image.h"
#include "imagepack/store.h"

namespace imagepack::binding {
namespace {

// Random access to records, decoding in C++. One cursor, behind a mutex;
// the decode runs outside it and without the GIL.
class PyDataset {
 public:
  PyDataset(std::vector<std::string> paths, bool in_ram, std::string split, std::string image_column,
            std::string label_column, bool no_class) {
    OpenOptions oo;
    oo.in_ram = in_ram;
    oo.split = std::move(split);
    oo.image_column = std::move(image_column);
    oo.label_column = std::move(label_column);
    oo.no_class = no_class;
    Result<std::unique_ptr<RecordSource>> src = [&] {
      py::gil_scoped_release release;
      return OpenDatabases(paths, oo);
    }();
    src_ = Take(std::move(src));
    cursor_ = src_->NewCursor();
  }

  int64_t size() const { return src_->size(); }

  // i, or i + size() for a negative i; IndexError outside the dataset.
  int64_t CheckIndex(int64_t i) const {
    if (i < 0) i += size();
    if (i < 0 || i >= size()) {
      PyErr_SetString(PyExc_IndexError, ("record " + std::to_string(i) + " outside [0, " + std::to_string(size()) +
                                         ") of " + src_->Describe()).c_str());
      throw py::error_already_set();
    }
    return i;
  }
  std::string meta_json() const { return src_->meta().ToJson(); }
  std::string describe() const { return src_->Describe(); }

  // (HxWxC uint8 array, label, path) of record i.
  py::tuple Get(int64_t i) {
    i = CheckIndex(i);
    RecordFields fields;
    std::string path;
    std::vector<uint8_t> payload;
    Status st;
    Image img;
    {
      py::gil_scoped_release release;
      {
        std::lock_guard<std::mutex> g(mu_);
        auto rec = cursor_->Read(i);
        if (rec.ok()) {
          fields = rec->fields;
          path.assign(rec->path);
          payload.assign(rec->payload, rec->payload + rec->payload_size);
        } else {
          st = rec.status();
        }
      }
      if (st.ok() && fields.encoding == Encoding::kJpeg) {
        // The dataset's channels, not the JPEG's: a gray JPEG kept as it
        // was in an RGB dataset (ImageNet holds such files) comes out RGB,
        // so every sample of a dataset has one shape.
        DecodeOptions d;
        d.channels = src_->meta().channels == 1 ? 1 : 3;
        d.apply_orientation = false;  // packed JPEGs are upright
        auto dec = DecodeImage(payload.data(), payload.size(), d);
        if (dec.ok()) img = std::move(dec.value());
        else st = dec.status().WithContext("record " + RecordKey(i) + " (" + path + ")");
      }
    }
    if (!st.ok()) Raise(st);
    if (fields.encoding == Encoding::kRaw) {
      img.width = int(fields.width);
      img.height = int(fields.height);
      img.channels = fields.channels;
      img.pixels = std::move(payload);
    }
    auto owner = std::make_shared<Image>(std::move(img));
    py::array_t<uint8_t> arr = View(owner->pixels.data(), {owner->height, owner->width, owner->channels}, owner);
    return py::make_tuple(arr, fields.label, path);
  }

  // {name: value} of record i's fields: second images HxWxC uint8 (JPEGs
  // decoded), masks HxW uint8, boxes (N x 4 float32, N int64 classes under
  // NAME_labels / "box_labels"), ints int64, floats float32, text str.
  py::dict Fields(int64_t i) {
    i = CheckIndex(i);
    std::vector<uint8_t> bytes;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> g(mu_);
      const uint8_t* data = nullptr;
      size_t size = 0;
      Status st = cursor_->ReadRaw(i, &data, &size);
      if (st.ok()) bytes.assign(data, data + size);
      else {
        py::gil_scoped_acquire acquire;
        Raise(st);
      }
    }
    auto rec = ParseRecord(bytes.data(), bytes.size(), false);  // checksum checked by Get()
    if (!rec.ok()) Raise(rec.status().WithContext("record " + RecordKey(i)));
    const auto& specs = src_->meta().fields;
    py::dict out;
    for (const FieldView& f : RecordFieldViews(rec.value())) {
      if (f.slot >= specs.size()) Raise(Status::Corruption("record " + RecordKey(i) + ": field slot out of range"));
      const std::string& name = specs[f.slot].name;
      const KindInfo& info = InfoOf(f.kind);
      switch (info.layout) {
        case FieldLayout::kPicture: {
          Image img;
          if (f.encoding == 0) {
            DecodeOptions d;
            d.channels = f.channels;
            d.apply_orientation = false;
            Result<Image> dec = [&] {
              py::gil_scoped_release release;
              return DecodeImage(f.data, f.size, d);
            }();
            img = Take(std::move(dec));
          } else {
            img.width = int(f.width);
            img.height = int(f.height);
            img.channels = f.channels;
            img.pixels.assign(f.data, f.data + f.size);
          }
          auto owner = std::make_shared<Image>(std::move(img));
          out[py::str(name)] = View(owner->pixels.data(), {owner->height, owner->width, owner->channels}, owner);
          break;
        }
        case FieldLayout::kMap: {  // uint8 or uint16, as stored
          py::array m = f.encoding == 2 ? py::array(py::array_t<uint16_t>({py::ssize_t(f.height), py::ssize_t(f.width)}))
                                        : py::array(py::array_t<uint8_t>({py::ssize_t(f.height), py::ssize_t(f.width)}));
          std::memcpy(m.mutable_data(), f.data, f.size);
          out[py::str(name)] = m;
          break;
        }
        case FieldLayout::kBoxes: {
          const auto boxes = ReadBoxes(f);
          py::array_t<float> xy({py::ssize_t(boxes.size()), py::ssize_t(4)});
          py::array_t<int64_t> cls(py::ssize_t(boxes.size()));
          for (size_t k = 0; k < boxes.size(); ++k) {
            float* q = xy.mutable_data(k);
            q[0] = boxes[k].x0, q[1] = boxes[k].y0, q[2] = boxes[k].x1, q[3] = boxes[k].y1;
            cls.mutable_data()[k] = boxes[k].label;
          }
          out[py::str(name)] = xy;
          out[py::str(FieldLabelsName(name))] = cls;
          break;
        }
        case FieldLayout::kList: {
          if (info.floats) {
            py::array_t<float> v(py::ssize_t(f.count));
            if (f.size) std::memcpy(v.mutable_data(), f.data, f.size);
            out[py::str(name)] = v;
            break;
          }
          py::array_t<int64_t> v(py::ssize_t(f.count));
          for (uint32_t k = 0; k < f.count; ++k) {
            int32_t x;
            std::memcpy(&x, f.data + 4 * size_t(k), 4);
            v.mutable_data()[k] = x;
          }
          out[py::str(name)] = v;
          break;
        }
        case FieldLayout::kText:
          out[py::str(name)] = py::str(reinterpret_cast<const char*>(f.data), f.size);
          break;
      }
    }
    return out;
  }

 private:
  std::unique_ptr<RecordSource> src_;
  std::unique_ptr<RecordCursor> cursor_;
  std::mutex mu_;
};

}  // namespace

void BindDataset(py::module_& m) {
  py::class_<PyDataset>(m, "Dataset")
      .def(py::init<std::vector<std::string>, bool, std::string, std::string, std::string, bool>(), py::arg("paths"),
           py::arg("in_ram") = false, py::arg("split") = "", py::arg("image_column") = "",
           py::arg("label_column") = "", py::arg("no_class") = false)
      .def("__len__", &PyDataset::size)
      .def("get", &PyDataset::Get, py::arg("index"))
      .def("fields", &PyDataset::Fields, py::arg("index"))
      .def_property_readonly("meta_json", &PyDataset::meta_json)
      .def("describe", &PyDataset::describe);
}

}  // namespace imagepack::binding
