// H = SiLU(x W1^T) * (x W3^T) in one CUTLASS kernel, for notes/cutlass_swiglu_bench.py.
//
// Why: the SwiGLU lever (notes/ladder-power.md) needs a GEMM that carries the gate in its epilogue at
// cuBLAS's energy. Plain CUTLASS ping-pong kernels are level with cuBLAS on x W1^T
// (notes/cutlass_gemm_bench.py). This is CUTLASS's own gated-activation kernel
// (examples/113_hopper_gemm_activation_fusion, whose headers it includes), in bf16: one ping-pong
// kernel multiplies x by one (2 d_ff, d_model) weight, and its epilogue rounds both halves of the
// product to bf16, as the model does, and stores H = SiLU(second half) * (first half) alone (found by
// the bench's float64 check; the model's weights would be stacked [W3; W1]). Training would also
// need G and U stored for the backward; this kernel does not store them, so it prices the epilogue
// from below.
//
// Arguments: w13 (m, k) row-major with m = 2 d_ff, x (n, k) row-major with n = tokens, h (n, m / 2)
// row-major. Returns launch()'s code (launch.hpp): 0, or the step that failed.
//
// Build (as gemm.cu, plus the example's directory on the include path):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DNDEBUG -diag-suppress 20012 \
//        -shared -Xcompiler -fPIC -I$CUTLASS/include -I$CUTLASS/tools/util/include \
//        -I$CUTLASS/examples/113_hopper_gemm_activation_fusion \
//        -o notes/cutlass_gemm/libcutlass_gated.so notes/cutlass_gemm/gated.cu

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "launch.hpp"
#include "gated_builder.hpp"
#include "gated_stride.hpp"

using namespace cute;
using Bf16 = cutlass::bfloat16_t;
template <class T>
using Act = cutlass::epilogue::thread::SiLu<T>;
using GatedProblemShape = decltype(cutlass::sm90_make_gated_shape<0>(Shape<int, int, int, int>{}));

template <class TileShape, class ClusterShape, class KernelSchedule, class EpilogueSchedule>
struct Gated {
  using Epi = typename cutlass::epilogue::collective::Sm90CollectiveBuilderGated<
      cutlass::arch::OpClassTensorOp, TileShape, ClusterShape, cutlass::epilogue::collective::EpilogueTileAuto,
      float, float, float, Bf16, Bf16, cutlass::layout::ColumnMajor, 8, Bf16, cutlass::layout::ColumnMajor, 8,
      EpilogueSchedule, Act, false>::CollectiveOp;
  using Main = typename cutlass::gemm::collective::Sm90CollectiveBuilderGated<
      cutlass::arch::OpClassTensorOp, Bf16, cutlass::layout::RowMajor, 8, Bf16, cutlass::layout::ColumnMajor, 8, float,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epi::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<GatedProblemShape, Main, Epi>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideD = typename Kernel::CollectiveEpilogue::FusionCallbacks::Operation::GmemLayoutTagAux;

  static int run(void const* w13, void const* x, void* h, int m, int n, int k, void* workspace,
                 size_t workspace_bytes, cudaStream_t stream) {
    auto stride_a = cutlass::sm90_make_gated_packed_stride(typename Kernel::StrideA{}, {m, k, 1});
    auto stride_b = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, {n, k, 1});
    auto stride_c = cutlass::sm90_make_gated_packed_stride(typename Kernel::StrideC{}, {m, 1, 1});
    get<1>(stride_c) = 0;
    auto stride_d = cutlass::sm90_make_gated_packed_stride(StrideD{}, {m / 2, n, 1});
    typename Adapter::Arguments args;
    decltype(args.epilogue.thread) fusion{};
    fusion.alpha = 1.0f;
    fusion.beta = 0.0f;
    fusion.scale_ptr = nullptr;
    fusion.ptr_D = static_cast<Bf16*>(h);
    fusion.dD = stride_d;
    cutlass::KernelHardwareInfo hw_info;
    hw_info.device_id = 0;
    hw_info.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
    args = typename Adapter::Arguments{
        cutlass::gemm::GemmUniversalMode::kGemm,
        cutlass::sm90_make_gated_shape<0>(make_shape(m, n, k, 1)),
        {static_cast<Bf16 const*>(w13), stride_a, static_cast<Bf16 const*>(x), stride_b},
        {fusion, nullptr, stride_c, nullptr, {}},
        hw_info};
    return launch<Adapter>(args, workspace, workspace_bytes, stream);
  }
};

extern "C" int gated_pingpong_128x128_1x2(void const* w13, void const* x, void* h, int m, int n, int k,
                                          void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  return Gated<Shape<_128, _128, _64>, Shape<_1, _2, _1>, Pingpong, PingpongEpilogue>::run(w13, x, h, m, n, k, workspace,
                                                                                        workspace_bytes, stream);
}
