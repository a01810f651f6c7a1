//===- WgmmaMatmulKernel.h - the Hopper matmul kernel: TMA + wgmma -*- C++ -*-===//
//
// Builds the sm_90a matmul kernel a wgmma GpuMatmulConfig describes, as a
// gpu.func at the level of the PTX it becomes (notes/ptx-semantics.md §7).
// It is warp-specialized, as CUTLASS's and cuBLAS's Hopper kernels are: the
// block is `warpsM` consumer warpgroups (64 rows of the block each) and one
// producer warpgroup (wgmmaBlockThreads), which meet only at mbarriers, so
// neither waits for the block:
//   - one producer thread runs the K loop's loads: it waits until the
//     consumers released a stage (its `empty` mbarrier), counts the slab's
//     bytes on the stage's `full` mbarrier (arrive.expect_tx) and issues its
//     TMA loads (nvgpu.tma.async.load) into that stage of a `stages`-deep
//     ring of shared-memory tiles;
//   - each consumer warpgroup waits for the stage's `full` phase
//     (mbarrier.try_wait.parity), then multiplies the slab with
//     wgmma.mma_async reading both operands from shared memory through
//     64-bit matrix descriptors that the kernel computes itself (start
//     address, LBO, SBO, swizzle);
//   - one wgmma group stays in flight: after committing slab kt's group a
//     warpgroup waits for slab kt - 1's (wgmma.wait_group 1), and its
//     first thread arrives on that stage's `empty` mbarrier;
//   - the accumulators (64 x blockN f32 a warpgroup, blockN / 2 registers a
//     thread) go through the fused epilogue to global memory.
// With config.persistentBlocks (more tiles than the SMs hold at once), that
// many blocks each run tiles persistentBlocks apart, both roles looping over
// the same tiles and counting the ring's uses across them: the producer
// loads the next tile's first slabs while the consumers store the present
// tile, where a block a tile would end and a new block fill its pipeline
// from nothing (CUTLASS's persistent warp-specialized kernels). The
// consumers release a tile's last stage after its final wgmma.wait_group.
// With config.pingPong, the two consumer warpgroups take the block's 64-row
// tiles in turn (tile ordinal mod 2), each slab read and released by one
// of them, so one's epilogue runs beside the other's wgmmas (CUTLASS's
// ping-pong kernels); the other warpgroup only counts the tile's slabs.
// With config.consumerRegisters, the producer warpgroup gives its registers
// back to the block's pool down to kWgmmaProducerRegisters
// (setmaxnreg.dec) and the consumer warpgroups take them (setmaxnreg.inc,
// which waits until the pool holds them): 232 a consumer thread instead of
// 168 with two consumer warpgroups (ptxas launches such a kernel with all a
// thread may take, 168 at 384 threads; CUTLASS's 40 / 232).
// With config.clusterM = 2 (persistent), the blocks pair up in clusters
// (kClusterDimsAttr; rank = %cluster_ctarank) that take the two row tiles
// of a 2 blockM x blockN cluster tile: each CTA loads its own A tile and
// half of the B tile they share, multicast into both (TMA multicast), so
// B crosses from L2 once a cluster. A stage's `full` expects the whole
// stage in each CTA; its `empty` (an mbarrier of the NVVM pointer ops in
// dynamic shared memory, which a peer reaches through mapa) counts the
// readers of both CTAs: each consumer warpgroup's release arrives on the
// stage's `empty` in every CTA of the cluster (kRemoteArriveAsm), as both
// producers write into the stage. Cluster barriers follow the inits (a
// peer's first arrive or multicast finds them done) and precede the exit
// (a CTA's shared memory stays while a peer may still arrive on it).
// Tiles are written by TMA with the 128/64/32-byte swizzle of their rows and
// read by wgmma with the same swizzle, both on absolute shared addresses, so
// every tile starts on a 1024-byte boundary (the kernel rounds the dynamic
// shared memory's base up; the launch asks for 1024 bytes more).
//
// Operands: f16 and bf16 in any layout (an M/N-contiguous operand is read
// "MN-major", imm-trans); tf32 K-major as stored (A stored M x K, B stored
// N x K), an M/N-contiguous tf32 operand (config.convertA / convertB)
// transposed by the consumers in shared memory into K-major tiles first,
// wgmma having no transposed tf32 (as tf32x3's both). Each operand reaches the kernel as a
// TMA tensor map (an !llvm.ptr to the 128-byte CUtensorMap in global
// memory), which the launcher encodes as `maps` says. The argument is an
// !llvm.ptr cast to !nvgpu.tensormap.descriptor inside: MLIR 19's
// convert-gpu-to-nvvm cannot convert a gpu.func whose signature holds the
// nvgpu type ("failed to legalize operation 'gpu.func'"); the cast pair
// folds away after convert-nvgpu-to-nvvm.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_WGMMAMATMULKERNEL_H
#define NOVA_COMPILER_TARGET_CUDA_WGMMAMATMULKERNEL_H

#include "compiler/target/cuda/GpuConfigurator.h"
#include "compiler/target/cuda/MatmulKernelParts.h"
#include "compiler/target/cuda/TmaMap.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <string>
#include <vector>

namespace mlir::nova {

/// Deliberate faults, for tests that the emulator catches what they break.
struct WgmmaMatmulFaults {
  /// The slab multiplied without waiting on its mbarrier (TMA data in flight).
  bool noMbarrierWait = false;
  /// The producer refills a stage without waiting for its consumers' release.
  bool noStageRelease = false;
  /// The consumers release a stage while its wgmmas may still read it
  /// (wgmma.wait_group 2 before the release instead of 1).
  bool releaseBeforeWgmmaWait = false;
  /// No final wgmma.wait_group 0: the epilogue reads unfinished accumulators.
  bool noFinalWgmmaWait = false;
  /// The descriptors claim a swizzle narrower than the one TMA wrote with.
  bool wrongDescriptorSwizzle = false;
  /// No wgmma.fence before the first wgmma of the kernel.
  bool noWgmmaFence = false;
  /// tf32x3: no fence.proxy.async between the conversion's stores and the
  /// wgmmas that read them.
  bool noConversionFence = false;
  /// Persistent: a tile's last slab never released (its stage, or the
  /// tf32x3 converted set), so the block's next tile waits for it.
  bool noTileEndRelease = false;
  /// Ping-pong: a warpgroup's tile not waiting for the other's previous
  /// one, so it may wait on a stage two phases ahead.
  bool noPingPongOrder = false;
  /// setmaxnreg: the producer keeps its registers (no .dec), so the
  /// consumers' .inc waits forever for the pool.
  bool producerKeepsRegisters = false;
  /// Clusters: a consumer releases a stage only in its own CTA, whose
  /// `empty` counts its own readers alone, so a peer's producer may
  /// multicast into the stage while it is still read.
  bool releaseOnlyLocally = false;
  /// Clusters: no cluster barrier between the mbarriers' inits and the
  /// peers' first use of them.
  bool noClusterSyncAfterInit = false;
  /// Clusters: no cluster barrier before the CTAs exit (a peer's last
  /// releases may arrive on a CTA that has exited).
  bool noClusterSyncBeforeExit = false;
  /// Not a fault: a probe (nova-gpu-kernels' `:probeshared` on a wgmma
  /// kernel), timed by the device check beside the kernel. The producer
  /// loads the block's first `stages` slabs; every later use of a stage
  /// arrives on its `full` mbarrier without loading (plain
  /// mbarrier.arrive), so the consumers multiply what the stage holds: the
  /// waits, releases and wgmmas as in the kernel, no global loads. Its
  /// product is not A x B: a block a tile (not persistent), slab kt reads
  /// slab kt mod stages. K-major operands (none converted), no cluster.
  bool probeShared = false;
};

struct WgmmaMatmulKernel {
  gpu::GPUFuncOp func;
  /// The tensor maps of the kernel's first two arguments (A's, B's; `arg`
  /// 0 and 1).
  std::vector<::nova::TensorMapDesc> maps;
};

/// Adds the kernel `name` to `module` (arguments: A's map, B's map, C, then
/// the epilogue's bias and residual when present), or fails with `error`
/// naming the shapes and the config. `linearGrid` as for the mma.sync
/// kernel: blocks numbered along x only.
FailureOr<WgmmaMatmulKernel> buildWgmmaMatmulKernel(gpu::GPUModuleOp module, StringRef name,
                                                    const GpuMatmulProblem &problem, const GpuMatmulConfig &config,
                                                    std::string &error, const WgmmaMatmulFaults &faults = {},
                                                    const MmaEpilogue &epilogue = {}, bool linearGrid = false);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_WGMMAMATMULKERNEL_H
