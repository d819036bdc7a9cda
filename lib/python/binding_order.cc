// imagepack._imagepack's epoch indices (order.h) and FFCV's resolution
// schedule (resolution.h).
#include <string>

#include "binding.h"
#include "imagepack/order.h"
#include "imagepack/permutation.h"
#include "imagepack/resolution.h"

namespace imagepack::binding {
namespace {

// Iteration over an EpochIndices sequence.
struct RankOrderIterator {
  RankOrder order;
  int64_t k = 0;
};

}  // namespace

void BindOrder(py::module_& m) {
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

}  // namespace imagepack::binding
