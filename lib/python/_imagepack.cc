// The Python extension: the library's loader and databases behind a small
// API that the package `imagepack` (imagepack/__init__.py) wraps. Batches
// cross as numpy arrays over the loader's own buffers (no copy); torch is
// never included: the package turns arrays into tensors with
// torch.from_numpy when torch is there.
//
// Errors become Python exceptions carrying the library's message:
// NotFound -> FileNotFoundError, InvalidArgument and NotSupported ->
// ValueError, Corruption -> imagepack.CorruptionError (a RuntimeError),
// IOError -> OSError. The GIL is released while the loader works or waits
// and while a record is decoded.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "binding.h"
#include "imagepack/classes.h"
#include "imagepack/fields.h"
#include "imagepack/formats.h"
#include "imagepack/loader.h"
#include "imagepack/storage.h"

namespace imagepack::binding {

PyObject* g_corruption_error = nullptr;

[[noreturn]] void Raise(const Status& st) {
  PyObject* type = PyExc_RuntimeError;
  switch (st.code()) {
    case Status::Code::kNotFound: type = PyExc_FileNotFoundError; break;
    case Status::Code::kInvalidArgument:
    case Status::Code::kNotSupported: type = PyExc_ValueError; break;
    case Status::Code::kCorruption: type = g_corruption_error; break;
    case Status::Code::kIOError: type = PyExc_OSError; break;
    case Status::Code::kCancelled: type = PyExc_KeyboardInterrupt; break;
    default: break;
  }
  PyErr_SetString(type, st.message().c_str());
  throw py::error_already_set();
}

// A batch field as a numpy array of its dtype over the batch's memory.
py::array FieldArray(const BatchField& f, const std::shared_ptr<void>& hold) {
  std::vector<py::ssize_t> shape(f.shape.begin(), f.shape.end());
  switch (f.dtype) {
    case DType::kInt64: return View(reinterpret_cast<int64_t*>(f.data), shape, hold);
    case DType::kFloat32: return View(reinterpret_cast<float*>(f.data), shape, hold);
    case DType::kUint16: return View(reinterpret_cast<uint16_t*>(f.data), shape, hold);
    case DType::kInt32: return View(reinterpret_cast<int32_t*>(f.data), shape, hold);
    case DType::kFloat16:  // fields are never 16-bit floats; the images' own types below
    case DType::kBFloat16:
    case DType::kUint8: break;
  }
  return View(f.data, shape, hold);
}

// A batch's images as a numpy array of the loader's output type over the
// batch's memory; bfloat16, which numpy lacks, as its uint16 bits (the
// package views them as torch.bfloat16).
py::array ImagesArray(DType dtype, uint8_t* data, std::vector<py::ssize_t> shape, const std::shared_ptr<void>& hold) {
  if (dtype == DType::kFloat32) return View(reinterpret_cast<float*>(data), shape, hold);
  if (dtype == DType::kBFloat16) return View(reinterpret_cast<uint16_t*>(data), shape, hold);
  if (dtype == DType::kFloat16) {
    auto* keep = new std::shared_ptr<void>(hold);
    py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<void>*>(p); });
    return py::array(py::dtype("float16"), shape, data, base);
  }
  return View(data, shape, hold);
}

namespace {

class PyLoader {
 public:
  explicit PyLoader(const LoaderOptions& o) : nchw_(o.layout == Layout::kNCHW), dtype_(o.output_dtype) {
    Result<std::unique_ptr<Loader>> l = [&] {
      py::gil_scoped_release release;
      return Loader::Open(o);
    }();
    loader_ = Take(std::move(l));
  }

  void StartEpoch(int64_t epoch) {
    py::gil_scoped_release release;
    loader_->StartEpoch(epoch);
  }

  // Refuses (ValueError) a state of another mix, naming the source, or a
  // position beyond the epoch (Loader::CheckState).
  void CheckState(int64_t position, const std::string& mix) const {
    LoaderState state;
    state.position = position;
    state.mix = mix;
    Status st = loader_->CheckState(state);
    if (!st.ok()) Raise(st);
  }

  void Restore(int64_t epoch, int64_t position, const std::string& order, int world, int64_t block_records,
               int64_t window_blocks, int size, const std::string& mix) {
    CheckState(position, mix);
    const LoaderState state{epoch, position, Take(ParseOrder(order)), world, block_records, window_blocks, size, mix};
    py::gil_scoped_release release;
    loader_->Restore(state);
  }

  void SetOutputSize(int size) {
    Status st = loader_->SetOutputSize(size);
    if (!st.ok()) Raise(st);
  }

  // (images, labels, indices, {name: array} of the dataset's fields), or
  // None at the end of the epoch.
  py::object Next() {
    Result<OwnedBatch> r = [&] {
      py::gil_scoped_release release;
      return loader_->NextOwned();
    }();
    OwnedBatch b = Take(std::move(r));
    if (b.count == 0) return py::none();
    const py::ssize_t n = b.count, s = loader_->output_size(), c = loader_->channels();
    std::vector<py::ssize_t> shape = nchw_ ? std::vector<py::ssize_t>{n, c, s, s} : std::vector<py::ssize_t>{n, s, s, c};
    py::dict fields;
    for (const BatchField& f : b.fields) fields[py::str(f.name)] = FieldArray(f, b.hold);
    return py::make_tuple(ImagesArray(dtype_, b.images, shape, b.hold), View(b.labels, {n}, b.hold), View(b.indices, {n}, b.hold),
                          fields);
  }

  py::dict Stats() const {
    const LoaderStats s = loader_->stats();
    py::dict d;
    d["images"] = s.images;
    d["bytes_read"] = s.bytes_read;
    d["read_seconds"] = s.read_seconds;
    d["decode_seconds"] = s.decode_seconds;
    d["wait_seconds"] = s.wait_seconds;
    d["skipped"] = s.skipped;
    d["read_ahead_bytes"] = s.read_ahead_bytes;
    d["remote_requests"] = s.remote_requests;
    d["remote_bytes"] = s.remote_bytes;
    d["read_ahead_wait_seconds"] = s.read_ahead_wait_seconds;
    return d;
  }

  Loader& loader() { return *loader_; }

 private:
  std::unique_ptr<Loader> loader_;
  bool nchw_ = true;
  DType dtype_ = DType::kUint8;
};

}  // namespace

// imagepack._imagepack.Loader.
void BindLoader(py::module_& m) {
  py::class_<PyLoader>(m, "Loader")
      .def(py::init<const LoaderOptions&>(), py::arg("options"))
      .def("start_epoch", &PyLoader::StartEpoch, py::arg("epoch"))
      .def("restore", &PyLoader::Restore, py::arg("epoch"), py::arg("position"), py::arg("order") = "auto",
           py::arg("world") = 0, py::arg("block_records") = 0, py::arg("window_blocks") = 0, py::arg("size") = 0,
           py::arg("mix") = "")
      .def("check_state", &PyLoader::CheckState, py::arg("position"), py::arg("mix") = "")
      .def("set_output_size", &PyLoader::SetOutputSize, py::arg("size"))
      .def_property_readonly("output_size", [](PyLoader& l) { return l.loader().output_size(); })
      .def_property_readonly("epoch_length", [](PyLoader& l) { return l.loader().epoch_length(); })
      .def_property_readonly("sources", [](PyLoader& l) {
        py::list out;
        for (const auto& s : l.loader().sources()) out.append(py::make_tuple(s.name, s.records, s.samples));
        return out;
      })
      .def("next", &PyLoader::Next)
      .def("stats", &PyLoader::Stats)
      .def_property_readonly("state", [](PyLoader& l) {
        const LoaderState s = l.loader().state();
        return py::make_tuple(s.epoch, s.position, OrderName(s.order), s.world, s.block_records, s.window_blocks, s.size,
                              s.mix);
      })
      .def_property_readonly("order", [](PyLoader& l) { return OrderName(l.loader().order()); })
      .def_property_readonly("block_records", [](PyLoader& l) { return l.loader().block_records(); })
      .def_property_readonly("batches_per_epoch", [](PyLoader& l) { return l.loader().batches_per_epoch(); })
      .def_property_readonly("samples_per_epoch", [](PyLoader& l) { return l.loader().samples_per_epoch(); })
      .def_property_readonly("dataset_size", [](PyLoader& l) { return l.loader().dataset_size(); })
      .def_property_readonly("channels", [](PyLoader& l) { return l.loader().channels(); })
      .def_property_readonly("meta_json", [](PyLoader& l) { return l.loader().meta().ToJson(); })
      .def_property_readonly("identity", [](PyLoader& l) {
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(DatasetIdentity(l.loader().meta())));
        return std::string(hex);
      });
}

}  // namespace imagepack::binding

PYBIND11_MODULE(_imagepack, m) {
  using namespace imagepack;
  using namespace imagepack::binding;
  m.doc() = "imagepack's C++ loader and databases (use the package `imagepack`, not this module)";
  // The library never prints: its warnings (a planted folder skipped, a
  // dataset read from its node cache) go to stderr here.
  SetWarningHandler([](const std::string& message) {
    std::fprintf(stderr, "imagepack: warning: %s\n", message.c_str());
    std::fflush(stderr);
  });
  m.def(
      "transforms",
      [] {
        std::vector<std::pair<std::string, bool>> out;
        for (TransformKind t : TransformKinds()) out.emplace_back(TransformName(t), TransformTrains(t));
        return out;
      },
      "The loader's transforms as (name, trains) pairs, from the library's one table.");
  m.def(
      "kinds",
      [] {
        py::list out;
        for (const KindInfo& k : AllKinds()) {
          py::dict d;
          d["byte"] = static_cast<int>(k.kind);
          d["name"] = k.name;
          d["layout"] = FieldLayoutName(k.layout);
          d["floats"] = k.floats;
          d["first_format"] = k.first_format;
          out.append(d);
        }
        return out;
      },
      "The library's kind table (fields.h): byte, name, layout, floats, first format, per kind.");
  m.def(
      "is_local",
      [](const std::string& path) {
        auto storage = OpenStorage(path);
        return storage.ok() && storage.value()->local();
      },
      "True when `path` names a file of this machine (not s3://, https://, ...).");
  m.def("shared_files", &SharedFiles, py::arg("data"), py::arg("data_split"), py::arg("val"), py::arg("val_split"),
        "Why validation files `val` are not apart from training files `data` (\"\" when they are).");
  m.def(
      "pinned_url", [](const std::string& url) { return Take(PinnedUrl(url)); },
      "`url` at the version this process reads: an hf:// URL at the commit its revision resolved to; \"\" where "
      "files have no revisions to pin.");
  m.def("is_file_pattern", &IsFilePattern,
        "True when `path` names files by a pattern (braces, a '::' list, a shell glob), not one path.");
  g_corruption_error = PyErr_NewExceptionWithDoc("imagepack.CorruptionError",
                                                 "A record or file is damaged; the message names it.",
                                                 PyExc_RuntimeError, nullptr);
  m.attr("CorruptionError") = py::handle(g_corruption_error);

  BindLoaderOptions(m);
  BindLoader(m);
  BindDataset(m);
  m.def(
      "match_classes",
      [](const std::vector<std::string>& reference, const std::string& reference_name,
         const std::vector<std::string>& other, const std::string& other_name, const std::string& what) {
        const ClassMap map = Take(MatchClasses(reference, reference_name, other, other_name, what));
        std::vector<int64_t> to_reference = map.to_reference;
        if (map.identity())
          for (int64_t i = 0; i < map.other_classes; ++i) to_reference.push_back(i);
        return py::make_tuple(to_reference, map.absent, map.Describe());
      },
      py::arg("reference"), py::arg("reference_name"), py::arg("other"), py::arg("other_name"),
      py::arg("what") = "classes",
      "(labels of `other` as indices of `reference`, reference classes `other` lacks, a one-line description); "
      "ValueError naming the first class of `other` that `reference` lacks (classes.h).");
  BindOrder(m);
  BindOptionTable(m);
}
