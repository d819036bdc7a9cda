// The only place that knows about NCCL. Built with NCCL support only when
// LibTorch was built with CUDA (IMAGEPACK_WITH_NCCL); otherwise asking for a
// CUDA process group fails with a clear message. Not exercised by CI (no
// GPU there); see docs/TRAINING.md.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace imagepack::trainer {

c10::intrusive_ptr<c10d::ProcessGroup> MakeNcclGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                      int world_size);

// CUDA habits: cudnn benchmark on. No-op without CUDA.
void ConfigureCuda();

}  // namespace imagepack::trainer
