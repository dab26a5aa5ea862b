// What the entry points of gemm.cu, gated.cu and adamw.cu share: the Hopper schedules they are
// built with, so a fused kernel and its plain twin name the same ones, and the steps each takes with
// its CUTLASS device adapter.
#pragma once

#include <cstddef>

#include "cutlass/cutlass.h"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"

// Cooperative: two consumer warpgroups on one tile. Ping-pong: two consumer warpgroups taking turns
// on tiles, so one's epilogue runs under the other's products.
using Cooperative = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using CooperativeEpilogue = cutlass::epilogue::TmaWarpSpecializedCooperative;
using Pingpong = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using PingpongEpilogue = cutlass::epilogue::TmaWarpSpecialized;

// Launches the kernel of Adapter with args. Returns 0, or the step that failed: 1 can_implement,
// 2 workspace too small, 3 initialize, 4 run.
template <class Adapter>
int launch(typename Adapter::Arguments const& args, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  Adapter gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return 1;
  if (Adapter::get_workspace_size(args) > workspace_bytes) return 2;
  if (gemm.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return 3;
  if (gemm.run(stream) != cutlass::Status::kSuccess) return 4;
  return 0;
}
