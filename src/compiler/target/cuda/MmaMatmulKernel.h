//===- MmaMatmulKernel.h - the tensor-core matmul kernel, lane by lane -*- C++ -*-===//
//
// Builds the mma.sync matmul kernel a GpuMatmulConfig describes as a
// gpu.func written at the level of lanes: every thread's cp.async copies,
// the XOR swizzle of shared memory, each lane's ldmatrix address and each
// mma.sync are explicit ops (nvgpu dialect), so the PTX follows the IR one to
// one and an emulator of the IR sees exactly what the GPU runs
// (notes/ptx-semantics.md gives the lane maps used; the template it follows,
// checked lane by lane, is tests/lit/cuda/templates/).
//
// The kernel: C[M, N] (f32, row-major) = A[M, K] x B[K, N], both row-major
// ("NN"; either may be stored transposed), f16 / bf16 / tf32 operands,
// batched (grid z), any M, N, K whose contiguous extents are whole 16-byte
// chunks, and a fused epilogue (MmaEpilogue). One block per blockM x blockN tile,
// grid (N / blockN, M / blockM); its warps (warpsM x warpsN) each own a
// warpM x warpN tile of 16 x 8 accumulators. The K loop is a `stages`-deep
// cp.async pipeline in dynamic shared memory: slab kt + stages - 1 is
// copied while slab kt is multiplied.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_MMAMATMULKERNEL_H
#define NOVA_COMPILER_TARGET_CUDA_MMAMATMULKERNEL_H

#include "compiler/target/cuda/GpuConfigurator.h"
#include "compiler/target/cuda/MatmulKernelParts.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <string>

namespace mlir::nova {

// The fused epilogue (MmaEpilogue) is MatmulKernelParts.h's.

/// What a probe leaves of the kernel (MmaMatmulFaults::probe).
enum class MmaSyncProbe {
  none,
  /// No global loads in the K loop: slab kt reads the stage the prologue
  /// filled with slab kt mod (stages - 1), over and over (the waits, the
  /// barrier a slab, every ldmatrix and MMA as in the kernel; no cp.async).
  sharedOnly,
  /// The MMAs alone: the first k step's fragments, loaded once before the
  /// loop, feed every MMA of every slab (no copy, wait, barrier or
  /// fragment load in the loop).
  mmaOnly,
};

/// Deliberate faults, for tests that the emulator catches what they break;
/// and probes, which leave out parts of the kernel's work so that the
/// device check can time what is left (nova-gpu-kernels' `:probeshared`,
/// `:probemma`): the rates the whole kernel cannot pass. A probe's product
/// is not A x B (the tests hold it to what it computes instead).
struct MmaMatmulFaults {
  /// No barrier between the cp.async wait and the reads of the slab.
  bool noBarrierAfterWait = false;
  /// The refill of the stage read in the previous iteration issued before
  /// the barrier that ends those reads.
  bool refillBeforeBarrier = false;
  /// One more group left pending at the wait: the slab read is in flight.
  bool waitOneGroupShort = false;
  /// The rhs read without the swizzle it was written with.
  bool unswizzledRhsReads = false;
  /// No swizzle at all, written and read: the product is right, but
  /// ldmatrix's rows share banks (the emulator's bank conflicts).
  bool noSwizzle = false;
  /// A probe: f16, bf16 or tf32 operands, no split-K, no epilogue, whole
  /// tiles, at least stages - 1 slabs.
  MmaSyncProbe probe = MmaSyncProbe::none;
};

/// Adds the kernel `name` to `module`. With `linearGrid`, its blocks are
/// numbered along x only (tile column fastest, then row, then batch), as a
/// step's launch plan gives them. Fails (with `error` naming the shapes
/// and the config) for what it does not support yet: transposed operands,
/// batches, shapes that are not multiples of the block tile, tiles the
/// block's threads cannot copy in whole 16-byte chunks.
FailureOr<gpu::GPUFuncOp> buildMmaSyncMatmulKernel(gpu::GPUModuleOp module, StringRef name,
                                                    const GpuMatmulProblem &problem,
                                                    const GpuMatmulConfig &config, std::string &error,
                                                    const MmaMatmulFaults &faults = {},
                                                    const MmaEpilogue &epilogue = {},
                                                    bool linearGrid = false);

/// Marks `top` as holding GPU modules and adds `gpu.module @nova_kernels`
/// to it, for the kernels.
gpu::GPUModuleOp addKernelsModule(ModuleOp top);

// The dynamic shared memory a kernel needs at launch: gpuMatmulSmemBytes.

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_MMAMATMULKERNEL_H
