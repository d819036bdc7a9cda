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

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "imagepack/classes.h"
#include "imagepack/fields.h"
#include "imagepack/image.h"
#include "imagepack/loader.h"
#include "imagepack/mix.h"
#include "imagepack/resolution.h"
#include "imagepack/storage.h"
#include "imagepack/store.h"

namespace py = pybind11;

namespace imagepack {
namespace {

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

template <typename T>
T Take(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(r.value());
}

// A numpy array over memory that `hold` keeps alive.
template <typename T>
py::array_t<T> View(T* data, std::vector<py::ssize_t> shape, const std::shared_ptr<void>& hold) {
  auto* keep = new std::shared_ptr<void>(hold);
  py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<void>*>(p); });
  return py::array_t<T>(shape, data, base);
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

// The output types by name (LoaderOptions::output_dtype), as Python's
// Loader(dtype=) takes them.
constexpr std::pair<DType, const char*> kOutputTypes[] = {
    {DType::kUint8, "uint8"}, {DType::kFloat32, "float32"}, {DType::kFloat16, "float16"}, {DType::kBFloat16, "bfloat16"}};

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

// Pinned memory from CUDA's runtime, as torch loaded it (the library and
// this extension never link CUDA): the libcudart this process has mapped
// (its name carries a hash in torch's wheels, so it is looked for by
// path), else one the dynamic linker finds. Null where there is none.
void* CudaRuntime() {
  static void* handle = [] {
    void* h = nullptr;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          if (!info->dlpi_name || !std::strstr(info->dlpi_name, "libcudart")) return 0;
          *static_cast<void**>(data) = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
          return *static_cast<void**>(data) ? 1 : 0;
        },
        &h);
    for (const char* name : {"libcudart.so", "libcudart.so.12", "libcudart.so.11.0"})
      if (!h) h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    return h;
  }();
  return handle;
}
using CudaHostAllocFn = int (*)(void**, size_t, unsigned int);
using CudaFreeHostFn = int (*)(void*);
CudaHostAllocFn g_cuda_host_alloc = nullptr;
CudaFreeHostFn g_cuda_free_host = nullptr;
void* PinnedAlloc(size_t bytes) {
  void* p = nullptr;
  return g_cuda_host_alloc(&p, bytes, 0) == 0 ? p : nullptr;  // 0: cudaSuccess, cudaHostAllocDefault
}
void PinnedFree(void* p) { g_cuda_free_host(p); }

// LoaderOptions::pinned_alloc / pinned_free set to CUDA's, or ValueError.
void SetPinned(LoaderOptions& o, bool pinned) {
  if (!pinned) {
    o.pinned_alloc = nullptr, o.pinned_free = nullptr;
    return;
  }
  if (void* rt = CudaRuntime(); rt && !g_cuda_host_alloc) {
    g_cuda_host_alloc = reinterpret_cast<CudaHostAllocFn>(dlsym(rt, "cudaHostAlloc"));
    g_cuda_free_host = reinterpret_cast<CudaFreeHostFn>(dlsym(rt, "cudaFreeHost"));
  }
  if (!g_cuda_host_alloc || !g_cuda_free_host)
    Raise(Status::InvalidArgument("pinned memory needs CUDA's runtime (libcudart) in this process, and none was found"));
  o.pinned_alloc = PinnedAlloc, o.pinned_free = PinnedFree;
}

// LoaderOptions as Python sees it: every field under its C++ name, with
// the C++ defaults (the package reads them from here rather than writing
// them again); enums as the strings the package documents.
void BindLoaderOptions(py::module_& m) {
  py::class_<MixSource>(m, "MixSource")
      .def(py::init<>())
      .def_readwrite("paths", &MixSource::paths)
      .def_readwrite("weight", &MixSource::weight)
      .def_readwrite("repeat", &MixSource::repeat)
      .def_readwrite("choose", &MixSource::choose);
  using O = LoaderOptions;
  py::class_<O>(m, "LoaderOptions")
      .def(py::init<>())
      .def_readwrite("paths", &O::paths)
      .def_readwrite("sources", &O::sources)
      .def_readwrite("epoch_size", &O::epoch_size)
      .def_readwrite("crop_size", &O::crop_size)
      .def_readwrite("classes", &O::classes)
      .def_readwrite("classes_from", &O::classes_from)
      .def_readwrite("wide_maps_int32", &O::wide_maps_int32)
      .def_readwrite("in_ram", &O::in_ram)
      .def_readwrite("lock_in_ram", &O::lock_in_ram)
      .def_readwrite("cache_dir", &O::cache_dir)
      .def_readwrite("cache_limit_mb", &O::cache_limit_mb)
      .def_readwrite("ca_file", &O::ca_file)
      .def_readwrite("batch_size", &O::batch_size)
      .def_readwrite("size", &O::size)
      .def_readwrite("eval_resize", &O::eval_resize)
      .def_readwrite("pad", &O::pad)
      .def_property(
          "transform", [](const O& o) { return TransformName(o.transform); },
          [](O& o, const std::string& v) { o.transform = Take(ParseTransform(v)); })
      .def_readwrite("scale_min", &O::scale_min)
      .def_readwrite("scale_max", &O::scale_max)
      .def_readwrite("ratio_min", &O::ratio_min)
      .def_readwrite("ratio_max", &O::ratio_max)
      .def_readwrite("channels", &O::channels)
      .def_property(
          "layout", [](const O& o) { return o.layout == Layout::kNCHW ? "NCHW" : "NHWC"; },
          [](O& o, const std::string& v) {
            if (v != "NCHW" && v != "NHWC") Raise(Status::InvalidArgument("layout must be NCHW or NHWC"));
            o.layout = v == "NCHW" ? Layout::kNCHW : Layout::kNHWC;
          })
      .def_readwrite("shuffle", &O::shuffle)
      .def_readwrite("seed", &O::seed)
      .def_property(
          "order", [](const O& o) { return OrderName(o.order); },
          [](O& o, const std::string& v) { o.order = Take(ParseOrder(v)); })
      .def_readwrite("block_mb", &O::block_mb)
      .def_readwrite("window_blocks", &O::window_blocks)
      .def_readwrite("io_threads", &O::io_threads)
      .def_readwrite("read_chunk_mb", &O::read_chunk_mb)
      .def_readwrite("rank", &O::rank)
      .def_readwrite("world_size", &O::world_size)
      .def_readwrite("even_partition", &O::even_partition)
      .def_readwrite("drop_last", &O::drop_last)
      .def_readwrite("threads", &O::threads)
      .def_readwrite("prefetch", &O::prefetch)
      .def_property(
          "on_corrupt", [](const O& o) { return o.on_corrupt == CorruptPolicy::kFail ? "fail" : "skip"; },
          [](O& o, const std::string& v) {
            if (v != "fail" && v != "skip") Raise(Status::InvalidArgument("on_corrupt must be fail or skip"));
            o.on_corrupt = v == "fail" ? CorruptPolicy::kFail : CorruptPolicy::kSkip;
          })
      .def_readwrite("dct_scaling", &O::dct_scaling)
      .def_property(
          "dct", [](const O& o) { return o.fast_dct ? "fast" : "accurate"; },
          [](O& o, const std::string& v) {
            if (v != "fast" && v != "accurate") Raise(Status::InvalidArgument("dct must be fast or accurate"));
            o.fast_dct = v == "fast";
          })
      .def_property(
          "output_dtype",
          [](const O& o) {
            for (const auto& [t, name] : kOutputTypes)
              if (t == o.output_dtype) return std::string(name);
            return std::string("?");
          },
          [](O& o, const std::string& v) {
            for (const auto& [t, name] : kOutputTypes)
              if (v == name) return void(o.output_dtype = t);
            Raise(Status::InvalidArgument("dtype must be uint8, float32, float16 or bfloat16, not " + v));
          })
      .def_property(
          "pinned", [](const O& o) { return o.pinned_alloc != nullptr; }, [](O& o, bool v) { SetPinned(o, v); })
      .def_readwrite("norm_mean", &O::norm_mean)
      .def_readwrite("norm_std", &O::norm_std)
      .def_readwrite("vflip", &O::vflip)
      .def_property(
          "auto_augment", [](const O& o) { return std::string(AutoAugmentName(o.augment.kind)); },
          // None (the reference parser's default, str() by Loader) is "none".
          [](O& o, const std::string& v) {
            if (!ParseAutoAugment(v == "None" ? "none" : v, &o.augment.kind))
              Raise(Status::InvalidArgument("auto_augment must be ta_wide, ra, imagenet, cifar10, svhn, augmix or "
                                            "none, not " + v));
          })
      .def_property(
          "ra_magnitude", [](const O& o) { return o.augment.ra_magnitude; },
          [](O& o, int v) { o.augment.ra_magnitude = v; })
      .def_property(
          "ra_num_ops", [](const O& o) { return o.augment.ra_num_ops; }, [](O& o, int v) { o.augment.ra_num_ops = v; })
      .def_property(
          "ra_num_magnitude_bins", [](const O& o) { return o.augment.ra_bins; },
          [](O& o, int v) { o.augment.ra_bins = v; })
      .def_property(
          "augmix_severity", [](const O& o) { return o.augment.augmix_severity; },
          [](O& o, int v) { o.augment.augmix_severity = v; })
      .def_property(
          "augmix_width", [](const O& o) { return o.augment.augmix_width; },
          [](O& o, int v) { o.augment.augmix_width = v; })
      .def_property(
          "augmix_depth", [](const O& o) { return o.augment.augmix_depth; },
          [](O& o, int v) { o.augment.augmix_depth = v; })
      .def_property(
          "augmix_alpha", [](const O& o) { return o.augment.augmix_alpha; },
          [](O& o, double v) { o.augment.augmix_alpha = v; })
      .def_property(
          "random_erase", [](const O& o) { return o.erase.p; }, [](O& o, double v) { o.erase.p = v; })
      .def_property(
          "random_erase_value",
          [](const O& o) {
            if (o.erase.random) return std::string("random");
            return std::to_string(o.erase.value[0]) + "," + std::to_string(o.erase.value[1]) + "," +
                   std::to_string(o.erase.value[2]);
          },
          // "random", or 1 or 3 grey levels as text ("0", "124,116,104", or a
          // list's str(), which is how Loader's keywords arrive here).
          [](O& o, const std::string& v) {
            if (v == "random") return void(o.erase.random = true);
            std::vector<int> levels;
            int cur = -1;
            for (char ch : v + ",") {
              if (ch >= '0' && ch <= '9') {
                cur = (cur < 0 ? 0 : cur * 10) + (ch - '0');
                if (cur > 255) Raise(Status::InvalidArgument("random_erase_value: grey levels in 0..255"));
              } else if (ch == '-' || ch == '.') {
                Raise(Status::InvalidArgument("random_erase_value: grey levels in 0..255, or \"random\""));
              } else if (cur >= 0) {
                levels.push_back(cur), cur = -1;
              }
            }
            if (levels.size() != 1 && levels.size() != 3)
              Raise(Status::InvalidArgument("random_erase_value: 1 or 3 grey levels, or \"random\", not " + v));
            o.erase.random = false;
            for (size_t c = 0; c < 3; ++c) o.erase.value[c] = static_cast<uint8_t>(levels[levels.size() == 1 ? 0 : c]);
          })
      .def_property(
          "interpolation",
          [](const O& o) { return o.filter == ResampleFilter::kCatmullRom ? "bicubic" : "bilinear"; },
          [](O& o, const std::string& v) {
            if (v != "bilinear" && v != "bicubic")
              Raise(Status::InvalidArgument("interpolation must be bilinear or bicubic"));
            o.filter = v == "bicubic" ? ResampleFilter::kCatmullRom : ResampleFilter::kTriangle;
          })
      .def_readwrite("min_box_visible", &O::min_box_visible);
}

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

// Random access to records, decoding in C++. One cursor, behind a mutex;
// the decode runs outside it and without the GIL.
class PyDataset {
 public:
  PyDataset(std::vector<std::string> paths, bool in_ram) {
    OpenOptions oo;
    oo.in_ram = in_ram;
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

// Iteration over an EpochIndices sequence.
struct RankOrderIterator {
  RankOrder order;
  int64_t k = 0;
};

}  // namespace
}  // namespace imagepack

PYBIND11_MODULE(_imagepack, m) {
  using namespace imagepack;
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
  g_corruption_error = PyErr_NewExceptionWithDoc("imagepack.CorruptionError",
                                                 "A record or file is damaged; the message names it.",
                                                 PyExc_RuntimeError, nullptr);
  m.attr("CorruptionError") = py::handle(g_corruption_error);

  BindLoaderOptions(m);
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

  py::class_<PyDataset>(m, "Dataset")
      .def(py::init<std::vector<std::string>, bool>(), py::arg("paths"), py::arg("in_ram") = false)
      .def("__len__", &PyDataset::size)
      .def("get", &PyDataset::Get, py::arg("index"))
      .def("fields", &PyDataset::Fields, py::arg("index"))
      .def_property_readonly("meta_json", &PyDataset::meta_json)
      .def("describe", &PyDataset::describe);

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
  // A rank's indices of an epoch, computed when asked (order.h): the
  // sequence takes no memory per record, whatever the dataset's size.
  py::class_<RankOrder>(m, "EpochIndices")
      .def("__len__", [](const RankOrder& r) { return r.size(); })
      .def("__getitem__",
           [](const RankOrder& r, int64_t k) {
             if (k < 0) k += r.size();
             if (k < 0 || k >= r.size()) throw py::index_error("epoch index out of range");
             return r[k];
           })
      .def("__getitem__",
           [](const RankOrder& r, const py::slice& slice) {
             py::ssize_t start = 0, stop = 0, step = 0, len = 0;
             if (!slice.compute(static_cast<py::ssize_t>(r.size()), &start, &stop, &step, &len))
               throw py::error_already_set();
             py::array_t<int64_t> out(len);
             int64_t* o = out.mutable_data();
             {
               py::gil_scoped_release release;
               for (py::ssize_t i = 0; i < len; ++i) o[i] = r[start + i * step];
             }
             return out;
           })
      .def(
          "__array__",
          [](const RankOrder& r, const py::object&) {
            py::array_t<int64_t> out(static_cast<py::ssize_t>(r.size()));
            int64_t* o = out.mutable_data();
            {
              py::gil_scoped_release release;
              for (int64_t k = 0; k < r.size(); ++k) o[k] = r[k];
            }
            return out;
          },
          py::arg("dtype") = py::none())
      .def("__iter__", [](const RankOrder& r) { return RankOrderIterator{r, 0}; })
      .def("position", &RankOrder::Position, py::arg("k"), "The position in the epoch's order that entry k takes.");
  py::class_<RankOrderIterator>(m, "_EpochIndicesIterator")
      .def("__iter__", [](RankOrderIterator& it) -> RankOrderIterator& { return it; })
      .def("__next__", [](RankOrderIterator& it) {
        if (it.k >= it.order.size()) throw py::stop_iteration();
        return it.order[it.k++];
      });
  m.def(
      "resolution",
      [](int64_t epoch, int min_res, int max_res, int64_t start_ramp, int64_t end_ramp, int step) {
        return ResolutionSchedule{min_res, max_res, start_ramp, end_ramp, step}.At(epoch);
      },
      py::arg("epoch"), py::arg("min_res"), py::arg("max_res"), py::arg("start_ramp"), py::arg("end_ramp"),
      py::arg("step") = 32,
      "FFCV's progressive resolution at `epoch` (resolution.h): min_res up to start_ramp, max_res from end_ramp, "
      "in between linear, rounded to a multiple of `step` (halves to even).");
  m.def(
      "parse_resolution_schedule",
      [](const std::string& text) {
        const ResolutionSchedule s = Take(ParseResolutionSchedule(text));
        return py::make_tuple(s.min_res, s.max_res, s.start_ramp, s.end_ramp, s.step);
      },
      py::arg("text"), "\"MIN,MAX,START_RAMP,END_RAMP[,STEP]\" as a tuple; ValueError naming what is wrong.");
  m.def(
      "epoch_indices",
      [](int64_t n, bool shuffle, uint64_t seed, int64_t epoch, int rank, int world, bool even, int64_t start) {
        if (n < 0 || world < 1 || rank < 0 || rank >= world)
          throw py::value_error("epoch_indices: need n >= 0 and 0 <= rank < world_size");
        OrderSpec spec;
        spec.kind = shuffle ? Order::kRandom : Order::kSequential;
        spec.seed = seed;
        return RankOrder(EpochPermutation(n, spec, epoch), rank, world, even, start);
      },
      py::arg("n"), py::arg("shuffle"), py::arg("seed"), py::arg("epoch"), py::arg("rank"), py::arg("world_size"),
      py::arg("even_partition"), py::arg("start") = 0,
      "The dataset indices rank `rank` reads in epoch `epoch` from position `start` on, in order (the loader's "
      "sampling rule, docs/LOADER.md): a sequence computed when indexed (len, [k], iteration; slices and "
      "numpy.asarray give int64 arrays), so it holds nothing per record.");
}
