// A weight gradient dW = dY^T X whose epilogue runs AdamW on it, for notes/cutlass_adamw_bench.py.
//
// Why: the backward writes each weight gradient in bf16 and AdamW reads it back, 4 bytes a
// parameter (notes/ladder-power.md, "AdamW in the weight-gradient GEMMs' epilogue"). Here the
// gradient never leaves the registers: the epilogue of CUTLASS's Hopper GEMM (an epilogue visitor
// tree) loads the fp32 master weight and moments of its tile, updates them with the fp32
// accumulator as the gradient, and stores the master, the moments and the bf16 weight. Same update
// as lmperf.model.fused_adamw (CS336 AdamW), with the bias-corrected step size passed in.
//
// The master and moments move one of two ways (Direct and Tma below): between global memory and
// registers directly, or by TMA through shared memory, which costs the main loop stages. Each
// subtile's state is loaded before it is stored, and subtiles do not overlap, so the update is in
// place. The bf16 weight is the GEMM's D, stored by TMA. Measured, with its twin from gemm.cu, in
// notes/ladder-power.md ("AdamW in a CUTLASS weight-gradient epilogue").
//
// Arguments: dy (tokens, m) and x (tokens, n) row-major bf16, as the model holds them; w (m, n)
// bf16; master, exp_avg, exp_avg_sq (m, n) fp32; k = tokens. Returns launch()'s code (launch.hpp).
//
// Build (as gemm.cu):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DNDEBUG -diag-suppress 20012 \
//        -shared -Xcompiler -fPIC -I$CUTLASS/include -I$CUTLASS/tools/util/include \
//        -o notes/cutlass_gemm/libcutlass_adamw.so notes/cutlass_gemm/adamw.cu

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/sm90_callbacks_tma_warpspecialized.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "launch.hpp"

using namespace cute;
using namespace cutlass::epilogue::fusion;
using Bf16 = cutlass::bfloat16_t;
constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;

struct Hyper {
  float beta1, beta2, step_size, eps, decay;  // step_size = lr sqrt(1 - b2^t) / (1 - b1^t), decay = 1 - lr wd
};

// Each update is a compute node's function of its children's fragments, T = Array<float, N>.
template <class T>
struct FirstMoment {  // m <- b1 m + (1 - b1) g
  using Arguments = Hyper;
  CUTLASS_HOST_DEVICE T operator()(T const& g, T const& m, Hyper const& h) const {
    T out;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < T::kElements; ++i) out[i] = h.beta1 * m[i] + (1.f - h.beta1) * g[i];
    return out;
  }
};

template <class T>
struct SecondMoment {  // v <- b2 v + (1 - b2) g^2
  using Arguments = Hyper;
  CUTLASS_HOST_DEVICE T operator()(T const& g, T const& v, Hyper const& h) const {
    T out;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < T::kElements; ++i) out[i] = h.beta2 * v[i] + (1.f - h.beta2) * g[i] * g[i];
    return out;
  }
};

template <class T>
struct MasterStep {  // p <- (p - step_size m / (sqrt(v) + eps)) (1 - lr wd)
  using Arguments = Hyper;
  CUTLASS_HOST_DEVICE T operator()(T const& p, T const& m, T const& v, Hyper const& h) const {
    T out;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < T::kElements; ++i) out[i] = (p[i] - h.step_size * m[i] / (sqrtf(v[i]) + h.eps)) * h.decay;
    return out;
  }
};

template <template <class> class Fn, class... Inputs>
using Compute = Sm90EVT<Sm90Compute<Fn, float, float, kRound>, Inputs...>;

// The update as an epilogue visitor tree, given the nodes that load and store the fp32 state (a
// store node passes its input on). The root rounds the new master to the bf16 weight, the D.
template <class Load, class Store>
struct AdamWTree {
  using NewExpAvg = Sm90EVT<Store, Compute<FirstMoment, Sm90AccFetch, Load>>;
  using NewExpAvgSq = Sm90EVT<Store, Compute<SecondMoment, Sm90AccFetch, Load>>;
  using NewMaster = Sm90EVT<Store, Compute<MasterStep, Load, NewExpAvg, NewExpAvgSq>>;
  using Root = Sm90EVT<Sm90Compute<cutlass::epilogue::thread::Identity, Bf16, float, kRound>, NewMaster>;
};

using RowMajorMNL = Stride<int64_t, _1, int64_t>;

// Between global memory and registers, each thread its own elements: no shared memory, no prefetch.
struct Direct {
  template <class TileShape, class EpilogueTile, class EpilogueSchedule>
  using Tree = AdamWTree<Sm90AuxLoad<0, void, float, RowMajorMNL, void, void>,
                         Sm90AuxStore<0, void, float, kRound, RowMajorMNL, void, void>>;
};

// By TMA through shared memory, as the epilogue's C and D: the producer warp loads a subtile's state
// while the consumers work on earlier ones, and stores leave in bulk. Costs shared memory: 3 x
// (StagesC + StagesD) subtiles of fp32.
struct Tma {
  template <class TileShape, class EpilogueTile, class EpilogueSchedule>
  struct Nodes {
    using Descriptor = cutlass::epilogue::collective::detail::EpilogueDescriptor<TileShape, EpilogueTile, void, Bf16,
                                                                                 EpilogueSchedule>;
    using L = cutlass::epilogue::collective::detail::AuxLoadDescriptor<Descriptor, cutlass::layout::RowMajor, float>;
    using S = cutlass::epilogue::collective::detail::AuxStoreDescriptor<Descriptor, cutlass::layout::RowMajor, float>;
    using Load = Sm90AuxLoad<L::Stages, typename Descriptor::EpilogueTile, float, typename L::Stride,
                             typename L::SmemLayoutAtom, typename L::CopyOpS2R>;
    using Store = Sm90AuxStore<S::Stages, typename Descriptor::EpilogueTile, float, kRound, typename S::Stride,
                               typename S::SmemLayoutAtom, typename S::CopyOpR2S>;
  };
  template <class TileShape, class EpilogueTile, class EpilogueSchedule>
  using Tree = AdamWTree<typename Nodes<TileShape, EpilogueTile, EpilogueSchedule>::Load,
                         typename Nodes<TileShape, EpilogueTile, EpilogueSchedule>::Store>;
};

template <class StateNodes, class TileShape, class ClusterShape, class KernelSchedule, class EpilogueSchedule,
          class EpilogueTile, class TileScheduler = void>
struct AdamWGrad {
  using AdamWEpilogue = typename StateNodes::template Tree<TileShape, EpilogueTile, EpilogueSchedule>::Root;
  using Epi = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape, EpilogueTile, float, float,
      void, cutlass::layout::RowMajor, 8, Bf16,
      cutlass::layout::RowMajor, 8, EpilogueSchedule, AdamWEpilogue>::CollectiveOp;
  using Main = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bf16, cutlass::layout::ColumnMajor, 8, Bf16,
      cutlass::layout::RowMajor, 8, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epi::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Main, Epi, TileScheduler>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static int run(void const* dy, void const* x, void* w, float* master, float* exp_avg, float* exp_avg_sq, int m,
                 int n, int k, Hyper hyper, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    auto stride_a = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, {m, k, 1});
    auto stride_b = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, {n, k, 1});
    auto stride_d = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, {m, n, 1});
    RowMajorMNL state{int64_t(n), _1{}, int64_t(m) * n};
    typename AdamWEpilogue::Arguments epilogue{
        {                                                                                 // NewMaster
         {                                                                                // its MasterStep
          {master, 0.f, state},                                                           // p
          {{{}, {exp_avg, 0.f, state}, hyper}, {exp_avg, state}},                         // NewExpAvg
          {{{}, {exp_avg_sq, 0.f, state}, hyper}, {exp_avg_sq, state}},                   // NewExpAvgSq
          hyper},
         {master, state}},
        {}};                                                                              // to bf16
    typename Adapter::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {m, n, k, 1},
        {static_cast<Bf16 const*>(dy), stride_a, static_cast<Bf16 const*>(x), stride_b},
        {epilogue, nullptr, stride_d, static_cast<Bf16*>(w), stride_d}};
    return launch<Adapter>(args, workspace, workspace_bytes, stream);
  }
};

#define ENTRY(name, ...)                                                                                      \
  extern "C" int name(void const* dy, void const* x, void* w, float* master, float* exp_avg, float* exp_avg_sq, \
                      int m, int n, int k, Hyper const* hyper, void* workspace, size_t workspace_bytes,         \
                      cudaStream_t stream) {                                                                    \
    return AdamWGrad<__VA_ARGS__>::run(dy, x, w, master, exp_avg, exp_avg_sq, m, n, k, *hyper, workspace,      \
                                       workspace_bytes, stream);                                               \
  }

// The same tiles and schedules as gemm.cu's nt entries of those names, so each fused kernel has a
// plain twin. Ping-pong runs one consumer warpgroup's epilogue under the other's products. The
// epilogue works through its tile in subtiles: with direct loads, CUTLASS's choice (64 x 32
// ping-pong, 128 x 32 cooperative) spills registers (ptxas: 276-332 bytes a thread), so each is
// built with subtiles half as wide too (_epi16). With TMA, 64 x 16 subtiles leave the ping-pong main
// loop 4 stages (its twin has 6); the cooperative 128 x 256 tile would keep one, and CUTLASS takes no
// subtile narrower than 16, so it has no TMA entry.
using Auto = cutlass::epilogue::collective::EpilogueTileAuto;
using Pingpong128 = Shape<_128, _128, _64>;
using Cooperative256 = Shape<_128, _256, _64>;
using StreamK = cutlass::gemm::StreamKScheduler;
ENTRY(adamw_pingpong_128x128_1x2, Direct, Pingpong128, Shape<_1, _2, _1>, Pingpong, PingpongEpilogue, Auto)
ENTRY(adamw_pingpong_128x128_1x2_epi16, Direct, Pingpong128, Shape<_1, _2, _1>, Pingpong, PingpongEpilogue,
      Shape<_64, _16>)
ENTRY(adamw_cooperative_128x256_2x1_streamk, Direct, Cooperative256, Shape<_2, _1, _1>, Cooperative,
      CooperativeEpilogue, Auto, StreamK)
ENTRY(adamw_cooperative_128x256_2x1_streamk_epi16, Direct, Cooperative256, Shape<_2, _1, _1>, Cooperative,
      CooperativeEpilogue, Shape<_128, _16>, StreamK)
ENTRY(adamw_pingpong_128x128_1x2_tma, Tma, Pingpong128, Shape<_1, _2, _1>, Pingpong, PingpongEpilogue,
      Shape<_64, _16>)
