//===- GpuAttentionMma.h - causal attention on bf16 tensor cores -*- C++ -*-===//
//
// With bf16 matmuls asked for (nova.matmul_precision = "bf16": both operands
// of a product rounded to bfloat16, f32 sums) on a GPU with bf16 mma.sync,
// attention's products are such products too: they run on the tensor cores
// (mma.sync m16n8k16) instead of the f32 FMAs of a row at a time
// (GpuScalarKernels.h), as PyTorch's scaled_dot_product_attention does
// under bf16 autocast. Three kernels, as the rows' split has them
// (GpuAttentionBackward.h): the forward, the backward's query rows (dq and
// each row's statistics into the workspace) and its key rows (dk, dv).
//
// A block of 4 warps takes 64 rows of one (batch, head), a warp 16 of them
// (query rows: the blocks of the last rows, with the most keys, first).
// Its own rows' operands (q; backward also dO, or k and v) go through
// shared memory into registers as A fragments (ldmatrix) once; then, over
// the tiles of 64 rows it visits (keys up to its last row; the key rows':
// queries from its first), the block stages two tiles in shared memory as
// bf16 (each f32 element read once from global memory, 16 bytes a thread,
// and rounded there; each row's 16-byte chunks XOR-swizzled for ldmatrix),
// and each warp
//   - takes its scores (16 x 64: Q K^T, or K Q^T for key rows) in f32
//     accumulators, the tile's rows as the B fragments' columns (ldmatrix
//     without .trans), and likewise dP = dO V^T (or V dO^T);
//   - scales them into log2 units and masks them (only in the tiles the
//     causal mask or the sequence's end cuts: a loop of their own), keeps
//     each row's running max (over its 4 lanes by shuffles) and sum
//     (per lane, summed once at the end), rescaling by 2^(m_old - m_new);
//     every exponential 2^x by the SFU (ex2.approx);
//   - rounds P = 2^(S - m) (or dS = scale P (dP - D)) to bf16 into A
//     fragments straight from the accumulators (an m16n8 accumulator pair
//     is an m16n8k16 A fragment's layout: no shared memory), and adds P V,
//     dS K, dS^T Q or P^T dO into its f32 accumulators (the tile's rows as
//     the B fragments' k: ldmatrix.trans).
// At the end each lane stores its rows (the forward's O / l rounded to the
// result's element, f32 or bf16). Heads of 16, 32, 64 or 128 columns
// forward, up to 64 backward (its warps hold twice the accumulators); f32
// inputs; whole buffers (16-byte vector loads).
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUATTENTIONMMA_H
#define NOVA_COMPILER_TARGET_CUDA_GPUATTENTIONMMA_H

#include "compiler/dialect/NovaDialect.h"
#include "nova/target.hpp"

#include "mlir/IR/Builders.h"

#include <optional>
#include <string>

namespace mlir::nova {

/// On an attention kernel built by buildAttentionMma (a UnitAttr).
inline constexpr const char kGpuAttentionMmaAttr[] = "nova.gpu_attention_mma";

struct AttentionMmaPlan {
  /// 4 warps a block, 64 rows a block (16 a warp), key tiles of 64 rows.
  static constexpr int64_t kThreads = 128, kRows = 64, kTileRows = 64;
  int64_t rowBlocks = 0, blocks = 0, sharedBytes = 0;
};

/// The plan's shape for `op` (which planAttentionMma accepted).
AttentionMmaPlan attentionMmaShape(AttentionKernelOp op);

/// The plan for `op` with bf16 products allowed (`bf16Products`) on
/// `target`, or none, with `whyNot` saying why (empty where bf16 products
/// are not asked for).
std::optional<AttentionMmaPlan> planAttentionMma(AttentionKernelOp op, const ::nova::TargetDesc &target,
                                                 bool bf16Products, std::string &whyNot);

/// Deliberate faults, for tests that the emulator catches what they break.
struct AttentionMmaFaults {
  /// No barrier between staging the tiles and reading them.
  bool noBarrierAfterStaging = false;
  /// No barrier between reading the tiles and staging the next over them.
  bool noBarrierBeforeRestaging = false;
  /// ldmatrix without the swizzle the tiles were written with.
  bool unswizzledReads = false;
};

/// `op`'s kernel at b's insertion point, as `plan` says, for thread
/// `thread` of block `block`; a backward's statistics in `stats`
/// (attentionStatsType).
void buildAttentionMma(OpBuilder &b, AttentionKernelOp op, const AttentionMmaPlan &plan, Value thread, Value block,
                       Value stats = {}, const AttentionMmaFaults &faults = {});

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUATTENTIONMMA_H
