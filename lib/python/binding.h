// What the extension's files share (_imagepack.cc, binding_*.cc): errors
// as Python exceptions, numpy views over the library's memory, and each
// file's part of the module. Internal to the extension.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "imagepack/loader.h"
#include "imagepack/status.h"

namespace py = pybind11;

namespace imagepack::binding {

// imagepack.CorruptionError, made when the module is.
extern PyObject* g_corruption_error;

// Raises the Python exception of `st` (the module's opening comment).
[[noreturn]] void Raise(const Status& st);

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

// The output types by name (LoaderOptions::output_dtype), as Python's
// Loader(dtype=) takes them.
inline constexpr std::pair<DType, const char*> kOutputTypes[] = {
    {DType::kUint8, "uint8"}, {DType::kFloat32, "float32"}, {DType::kFloat16, "float16"}, {DType::kBFloat16, "bfloat16"}};


// A batch field as a numpy array of its dtype over the batch's memory.
py::array FieldArray(const BatchField& f, const std::shared_ptr<void>& hold);

// A batch's images as a numpy array of the loader's output type over the
// batch's memory; bfloat16, which numpy lacks, as its uint16 bits (the
// package views them as torch.bfloat16).
py::array ImagesArray(DType dtype, uint8_t* data, std::vector<py::ssize_t> shape, const std::shared_ptr<void>& hold);

// The module's parts: Loader (_imagepack.cc), LoaderOptions
// (binding_options.cc), Dataset (binding_dataset.cc), the epoch's indices
// and resolution schedule (binding_order.cc).
void BindLoader(py::module_& m);
void BindLoaderOptions(py::module_& m);
void BindDataset(py::module_& m);
void BindOrder(py::module_& m);
void BindOptionTable(py::module_& m);

}  // namespace imagepack::binding
