//===- GpuAttentionMma.h - causal attention on bf16 tensor cores -*- C++ -*-===//
//
// With bf16 matmuls asked for (nova.matmul_precision = "bf16": both operands
// of a product rounded to bfloat16, f32 sums) on a GPU with bf16 mma.sync,
// the attention forward's two products, S = Q K^T and O = P V, are such
// products too: they run on the tensor cores (mma.sync m16n8k16) instead
// of the f32 FMAs of a row at a time (GpuScalarKernels.h), as PyTorch's
// scaled_dot_product_attention does under bf16 autocast.
//
// A block of 4 warps takes 64 query rows of one (batch, head), a warp 16
// of them; blocks with the most keys (the last rows, causal) first. Q's
// rows go through shared memory into registers as A fragments (ldmatrix)
// once; then, over the key tiles of 64 rows up to the block's last row,
// the block stages K's and V's rows in shared memory as bf16 (each f32
// element read once from global memory and rounded there, each row's
// 16-byte chunks XOR-swizzled for ldmatrix), and each warp
//   - takes S (16 x 64) = Q K^T in f32 accumulators (K's rows are the B
//     fragments' columns: ldmatrix without .trans),
//   - scales and masks it (key > query: -inf) and updates each row's
//     running max m and sum l (the max over a row's 4 lanes by shuffles;
//     the sum kept per lane and summed once at the end), rescaling O by
//     exp(m_old - m_new) as the max grows,
//   - rounds P = exp(S - m) to bf16 into A fragments straight from the
//     accumulators (an m16n8 accumulator pair is an m16n8k16 A fragment's
//     layout: no shared memory), and adds P V into O (V's rows are the B
//     fragments' k: ldmatrix.trans).
// At the end O / l is stored (rounded to the result's element, f32 or
// bf16). Heads of 16, 32, 64 or 128 columns (whole ldmatrix chunks, a
// power of two for the swizzle); f32 inputs; whole buffers (vector loads).
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
