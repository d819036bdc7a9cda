#include "nccl_backend.h"

#include <stdexcept>

#ifdef IMAGEPACK_WITH_NCCL
#include <ATen/Context.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace imagepack::trainer {

c10::intrusive_ptr<c10d::ProcessGroup> MakeNcclGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                      int world_size) {
#ifdef IMAGEPACK_WITH_NCCL
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, opts);
#else
  (void)store;
  (void)rank;
  (void)world_size;
  throw std::runtime_error("this build of the trainer has no NCCL (LibTorch without CUDA): use --device cpu");
#endif
}

void ConfigureCuda() {
#ifdef IMAGEPACK_WITH_NCCL
  at::globalContext().setBenchmarkCuDNN(true);
#endif
}

}  // namespace imagepack::trainer
