//===- GpuScalarKernels.h - one GPU thread's share of a row or attention kernel -*- C++ -*-===//
//
// The first GPU form of the whole-op kernels (nova.layer_norm_kernel,
// nova.cross_entropy_kernel, nova.attention_kernel): scalar loops that one
// thread runs for its unit of work, with the reference's formulas (the
// CPU's nova-vectorize-rows and nova-vectorize-attention compute the same
// ones, vectorized):
//   - a LayerNorm row: mean, two-pass variance, rstd; forward y or the
//     input gradient dx; by one thread, or (f32, 32 columns or more) by a
//     warp, its sums in shuffles;
//   - a cross-entropy row: max, sum of exponentials; forward the loss,
//     backward dx, by one thread or a warp likewise;
//   - attention, one (batch, head): each query row's max and sum of
//     exp(scale q.k - max) over its causal keys, then the output; backward
//     dq, dk, dv of the head's columns (zeroed first, then accumulated row
//     by row: no other thread writes them);
//   - attention a row at a time (heads of up to 128 columns; a row 1, 2,
//     4, 8 or 16 lanes of a warp, its dot products summed by shuffles; a thread
//     1, 2 or 4 adjacent rows, sharing each visited row's shared reads): a
//     query row's online softmax (running max, sum and output, rescaled
//     as the max grows) in one pass over its keys; backward, in two
//     kernels (splitAttentionBackward): per query row its statistics and
//     D = sum_j P_ij dP_ij in one pass, dq in a second, the statistics
//     into a workspace; then per key row dk and dv from them; the keys
//     (backward, key rows: the queries) in shared tiles the block loads
//     together.
// They compute in their inputs' element; a forward kernel's result may be
// bf16 (writesEachResultOnce), rounded at its stores.
// With bf16 matmuls, attention of heads whose width the tensor cores take
// runs on them instead (GpuAttentionMma.h).
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUSCALARKERNELS_H
#define NOVA_COMPILER_TARGET_CUDA_GPUSCALARKERNELS_H

#include "compiler/dialect/NovaDialect.h"

#include "mlir/IR/Builders.h"

#include <optional>

namespace mlir::nova {

/// Row `row` of a bufferized row kernel, at b's insertion point.
void buildRow(OpBuilder &b, Operation *rowKernel, Value row);

/// A row kernel with a warp per row (f32 rows of at least 32 columns):
/// each lane takes every 32nd column, the row's reductions (LayerNorm's
/// mean and centered squares, backward the gradient's two means;
/// cross-entropy's max and sum of exponentials) in a butterfly of shuffles,
/// so the lanes' loads and stores are consecutive.
bool rowsByWarps(Operation *rowKernel);

/// Rows of `rowKernel` (rowsByWarps) for the grid's `warps` warps, this
/// thread's global warp `warp` and `lane` (loop bounds the same in every
/// lane: warps past the rows run the last one and store nothing).
void buildWarpRows(OpBuilder &b, Operation *rowKernel, Value warp, Value lane, int64_t warps);

/// Work unit `unit` = batch * heads + head of a bufferized attention kernel.
void buildAttentionHead(OpBuilder &b, AttentionKernelOp op, Value unit);

/// Attention a row at a time: the blocks each take kAttentionForwardRows
/// (backward: kAttentionBackwardRows) rows of one (batch, head), fewer for
/// shorter sequences: the forward's query rows; the backward's, in two
/// kernels (splitAttentionBackward), first query rows (dq, and each row's
/// softmax statistics into the workspace), then key rows (dk, dv, reading
/// them). A row is `lanes` adjacent threads of a warp (heads of over
/// kAttentionLaneBytes a row: 2, 4, 8 or 16), each holding every lanes-th
/// column of the row's q (or k and v) and accumulators in registers, its
/// dot products summed over the lanes by shuffles; so only heads of up to
/// kAttentionRowsMaxHeadDim columns. A thread takes 1, 2 or 4 adjacent
/// rows (rowsPerThread), which share each visited row's columns read from
/// shared memory; a warp visits only the rows its own rows need (causal),
/// the others masked by score. The rows a row's loop visits (keys;
/// the backward's key rows: queries) come through shared memory, tileRows
/// at a time, each tile loaded once by the whole block (coalesced) and
/// read by all its threads at once, instead of every thread reading every
/// row from global memory.
inline constexpr int64_t kAttentionRowsMaxHeadDim = 128;
inline constexpr int64_t kAttentionForwardRows = 128;
/// Half the forward's: a GPT's (batch, head) pairs times 64-row blocks
/// fill an H200's 132 SMs at a sequence of 128 (16 x 4 x 2 blocks) where
/// 128-row blocks would leave half of them idle.
inline constexpr int64_t kAttentionBackwardRows = 64;
/// The bytes of a lane's columns of a row, at most (where the head's width
/// allows): 16 f32 columns, 8 f64.
inline constexpr int64_t kAttentionLaneBytes = 64;
/// The bytes of one of the two tiles, at most.
inline constexpr int64_t kAttentionTileBytes = 16384;
/// Registers a thread's rows may hold (their own columns of the row
/// vectors a kernel keeps: 128 registers), which sets how many rows a
/// thread takes (AttentionRowsPlan::rowsPerThread).
inline constexpr int64_t kAttentionRowRegisterBytes = 512;

/// The backward's two kernels (the kernel's kAttentionPartAttr).
enum class AttentionBackwardPart { queries, keys };

struct AttentionRowsPlan {
  int64_t threads = 0, blocks = 0, sharedBytes = 0;
  /// Blocks per (batch, head).
  int64_t rowBlocks = 1;
  /// Rows a block takes, threads a row, rows a thread (threads = rows x
  /// lanes / rowsPerThread): a thread's rows share each row it reads from
  /// shared memory.
  int64_t rows = 0, lanes = 1, rowsPerThread = 1;
  /// Rows of a shared tile.
  int64_t tileRows = 0;
};

/// The plan for `op`, or none when its heads are too wide, or it is a
/// backward whose kernel was not split into its two parts
/// (attentionBackwardPart), or its shared memory would pass
/// `maxSharedBytes` (the target's limit when configuring, the kernel's
/// recorded bytes when building it): those are the kernel of a thread per
/// (batch, head).
std::optional<AttentionRowsPlan> planAttentionRows(AttentionKernelOp op, int64_t maxSharedBytes);

/// Which of the backward's two kernels `op`'s kernel is, or none (a
/// forward, or a backward not split).
std::optional<AttentionBackwardPart> attentionBackwardPart(AttentionKernelOp op);

/// The rows `op`'s kernel takes, in words: "query rows", or a backward
/// part's with what it computes (for NOVA_EXPLAIN).
StringRef attentionRowsOf(AttentionKernelOp op);

/// The backward's workspace between its two kernels: each query row's
/// log-sum-exp of its scores (max + log sum of exponentials) and D,
/// [batch x heads, T, 2] in the element the kernel computes in; the
/// log-sum-exp in the kernels' units: log2 for f32 (their scores times
/// log2 e, exponentials 2^x by the SFU), natural for f64.
MemRefType attentionStatsType(AttentionKernelOp op);

/// `op`'s rows at b's insertion point, as `plan` says, for the thread
/// `thread` of block `block`; a backward's statistics in `stats`
/// (attentionStatsType).
void buildAttentionRows(OpBuilder &b, AttentionKernelOp op, const AttentionRowsPlan &plan, Value thread, Value block,
                        Value stats = {});

/// Whether `op`'s GPU kernel (a forward LayerNorm, a cross-entropy, or a
/// forward attention a row at a time) computes in its inputs' element and writes each
/// element of its result once, so that its init may be narrower than its
/// inputs (a bf16 result the products read, GpuBf16Operands.cpp): each
/// element rounded once at its store. (The other forms accumulate into
/// their result.)
bool writesEachResultOnce(Operation *op);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUSCALARKERNELS_H
