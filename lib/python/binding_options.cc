// imagepack._imagepack.LoaderOptions: the C++ LoaderOptions field by field,
// and pinned batch memory from the CUDA runtime torch loaded.
#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <mutex>
#include <string>

#include "binding.h"
#include "imagepack/augment.h"
#include "imagepack/loader.h"
#include "imagepack/mix.h"
#include "imagepack/option_table.h"

namespace imagepack::binding {
namespace {

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
// them again); enums as the strings the package documents. Bound by
// subject, in the order of the fields.
using OptionsClass = py::class_<LoaderOptions>;
using O = LoaderOptions;

// "random", or 1 or 3 grey levels as text ("0", "124,116,104", or a
// list's str(), which is how Loader's keywords arrive here).
void SetEraseValue(O& o, const std::string& v) {
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
}

// What is read: the datasets, their classes, where they are kept.
void BindDataOptions(OptionsClass& c) {
  c.def_readwrite("paths", &O::paths)
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
      .def_readwrite("split", &O::split)
      .def_readwrite("image_column", &O::image_column)
      .def_readwrite("label_column", &O::label_column)
      .def_readwrite("no_class", &O::no_class);
}

// The output's geometry: batch, size, transform, crop ranges, channels, layout.
void BindGeometryOptions(OptionsClass& c) {
  c.def_readwrite("batch_size", &O::batch_size)
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
          });
}

// The order, the ranks and the threads.
void BindOrderOptions(OptionsClass& c) {
  c.def_readwrite("shuffle", &O::shuffle)
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
          });
}

// Decoding and the output's type, normalisation and memory.
void BindOutputOptions(OptionsClass& c) {
  c.def_readwrite("dct_scaling", &O::dct_scaling)
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
      .def_readwrite("norm_std", &O::norm_std);
}

// The training augmentations.
void BindAugmentOptions(OptionsClass& c) {
  c.def_readwrite("hflip", &O::hflip)
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
          SetEraseValue)
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
}  // namespace

void BindLoaderOptions(py::module_& m) {
  py::class_<MixSource>(m, "MixSource")
      .def(py::init<>())
      .def_readwrite("paths", &MixSource::paths)
      .def_readwrite("weight", &MixSource::weight)
      .def_readwrite("repeat", &MixSource::repeat)
      .def_readwrite("choose", &MixSource::choose);
  OptionsClass c(m, "LoaderOptions");
  c.def(py::init<>());
  BindDataOptions(c);
  BindGeometryOptions(c);
  BindOrderOptions(c);
  BindOutputOptions(c);
  BindAugmentOptions(c);
}

// The option table (imagepack/option_table.h) as Python reads it: one dict
// a row, and the table's own check of a value, so that the script's
// refusals are the C++ trainer's word for word.
void BindOptionTable(py::module_& m) {
  m.def("option_table", [] {
    static const char* const kKinds[] = {"int", "real", "text", "choice", "switch", "list"};
    py::list rows;
    for (const OptionSpec& s : OptionTable()) {
      py::dict d;
      d["name"] = s.name;
      d["short"] = s.short_name ? std::string(1, s.short_name) : std::string();
      d["kind"] = kKinds[static_cast<int>(s.kind)];
      d["default"] = s.fallback;
      d["choices"] = OptionChoices(s);
      d["range"] = s.range.says ? py::object(py::str(s.range.says)) : py::object(py::none());
      d["help"] = s.help;
      d["train"] = bool(s.surfaces & kTrainFlag);
      d["script"] = bool(s.surfaces & kScriptFlag);
      d["loader"] = bool(s.surfaces & kLoaderKeyword);
      d["inspect"] = bool(s.surfaces & kInspectFlag);
      d["implicit"] = s.implicit;
      d["keyword"] = OptionKeyword(s);
      rows.append(d);
    }
    return rows;
  });
  m.def(
      "option_problem",
      [](const std::string& name, py::object value) -> std::string {
        const OptionSpec* spec = FindOption(name);
        if (!spec) Raise(Status::InvalidArgument("no option " + name + " in the option table"));
        if (py::isinstance<py::str>(value)) return OptionChoiceProblem(*spec, value.cast<std::string>());
        return OptionProblem(*spec, value.cast<double>());
      },
      "\"\" when VALUE is within the option's range or choices, else the trainers' refusal.");
}

}  // namespace imagepack::binding
