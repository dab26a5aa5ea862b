// The steps each entry point of gemm.cu and gated.cu takes with its CUTLASS device adapter. Returns
// 0, or the step that failed: 1 can_implement, 2 workspace too small, 3 initialize, 4 run.
#pragma once

#include <cstddef>

#include "cutlass/cutlass.h"

template <class Adapter>
int launch(typename Adapter::Arguments const& args, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  Adapter gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return 1;
  if (Adapter::get_workspace_size(args) > workspace_bytes) return 2;
  if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return 3;
  if (gemm.run(stream) != cutlass::Status::kSuccess) return 4;
  return 0;
}
