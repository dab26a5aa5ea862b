// The 2.7B model's products in bf16 (fp32 accumulation) by CUTLASS 3's Hopper kernels, for
// notes/cutlass_gemm_bench.py.
//
// Why: the levers left for the 50% MFU target (notes/ladder-power.md, last section) put work in a GEMM's
// epilogue, and they pay only if the GEMM itself spends no more energy than cuBLAS's. A Gluon kernel
// trailed cuBLAS by 2-5% before any epilogue. This asks the same of CUTLASS's warp-specialized
// kernels, with clusters of two CTAs (one TMA load feeding both SMs), as cuBLAS's own kernels use.
//
// D = A B, D (M, N) row-major, in the layouts of the model's products (torch's row-major tensors):
// - tn: A (M, K) row-major, B (K, N) column-major: the forward, y = x W^T (B is W as stored);
// - nn: A row-major, B (K, N) row-major: an input gradient, dX = dY W;
// - nt: A (M, K) column-major, B row-major: a weight gradient, dW = dY^T X (A is dY as stored).
// Each entry point returns launch()'s code (launch.hpp): 0, or the step that failed.
//
// Build (CUTLASS's include and tools/util/include on the include path; measured with CUTLASS 4.7.0,
// commit 7107b0553, and nvcc 13.0):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DNDEBUG -diag-suppress 20012 \
//        -shared -Xcompiler -fPIC -I$CUTLASS/include -I$CUTLASS/tools/util/include \
//        -o notes/cutlass_gemm/libcutlass_gemm.so notes/cutlass_gemm/gemm.cu

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "launch.hpp"

using namespace cute;

using Element = cutlass::bfloat16_t;
constexpr int kAlignment = 8;  // 16 bytes

template <class LayoutA, class LayoutB, class TileShape, class ClusterShape, class KernelSchedule,
          class EpilogueSchedule, class TileScheduler = void>
struct Gemm {
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,
      void, cutlass::layout::RowMajor, kAlignment,  // no C
      Element, cutlass::layout::RowMajor, kAlignment, EpilogueSchedule>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      Element, LayoutA, kAlignment, Element, LayoutB, kAlignment, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<
          static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue, TileScheduler>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static int run(void const* a, void const* b, void* d, int m, int n, int k, void* workspace,
                 size_t workspace_bytes, cudaStream_t stream) {
    auto stride_a = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, {m, k, 1});
    auto stride_b = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, {n, k, 1});
    auto stride_d = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, {m, n, 1});
    typename Adapter::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {m, n, k, 1},
        {static_cast<Element const*>(a), stride_a, static_cast<Element const*>(b), stride_b},
        {{1.0f, 0.0f}, nullptr, stride_d, static_cast<Element*>(d), stride_d}};
    return launch<Adapter>(args, workspace, workspace_bytes, stream);
  }
};

using Row = cutlass::layout::RowMajor;
using Col = cutlass::layout::ColumnMajor;

#define ENTRY(name, ...)                                                                          \
  extern "C" int name(void const* a, void const* b, void* d, int m, int n, int k, void* workspace, \
                      size_t workspace_bytes, cudaStream_t stream) {                              \
    return Gemm<__VA_ARGS__>::run(a, b, d, m, n, k, workspace, workspace_bytes, stream);          \
  }

// Cooperative: two consumer warpgroups on one 128 x 256 tile. Ping-pong: two consumer warpgroups
// taking turns on 128 x 128 tiles, so one's epilogue runs under the other's products. Clusters of
// two CTAs along M (2x1) or N (1x2).
#define ENTRIES(layouts, A, B)                                                                              \
  ENTRY(layouts##_cooperative_128x256_2x1, A, B, Shape<_128, _256, _64>, Shape<_2, _1, _1>, Cooperative, \
        CooperativeEpilogue)                                                                                \
  ENTRY(layouts##_cooperative_128x256_1x2, A, B, Shape<_128, _256, _64>, Shape<_1, _2, _1>, Cooperative, \
        CooperativeEpilogue)                                                                                \
  ENTRY(layouts##_pingpong_128x128_1x2, A, B, Shape<_128, _128, _64>, Shape<_1, _2, _1>, Pingpong,       \
        PingpongEpilogue)                                                                                   \
  ENTRY(layouts##_pingpong_128x128_2x1, A, B, Shape<_128, _128, _64>, Shape<_2, _1, _1>, Pingpong,       \
        PingpongEpilogue)

ENTRIES(tn, Row, Col)
ENTRIES(nn, Row, Row)
ENTRIES(nt, Col, Row)

// More for the weight gradients, where the four above trail cuBLAS: 256 x 128 tiles (each consumer
// warpgroup 128 x 128), and stream-K, which shares tiles' K loops among CTAs to even out the last wave.
ENTRY(nt_cooperative_256x128_2x1, Col, Row, Shape<_256, _128, _64>, Shape<_2, _1, _1>, Cooperative, CooperativeEpilogue)
ENTRY(nt_cooperative_256x128_1x2, Col, Row, Shape<_256, _128, _64>, Shape<_1, _2, _1>, Cooperative, CooperativeEpilogue)
ENTRY(nt_cooperative_128x256_2x1_streamk, Col, Row, Shape<_128, _256, _64>, Shape<_2, _1, _1>, Cooperative,
      CooperativeEpilogue, cutlass::gemm::StreamKScheduler)
ENTRY(nt_cooperative_256x128_1x2_streamk, Col, Row, Shape<_256, _128, _64>, Shape<_1, _2, _1>, Cooperative,
      CooperativeEpilogue, cutlass::gemm::StreamKScheduler)
