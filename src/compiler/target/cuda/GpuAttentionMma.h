//===- GpuAttentionMma.h - causal attention on the tensor cores -*- C++ -*-===//
//
// Attention's products are matmuls: on a GPU with mma.sync they run on the
// tensor cores instead of the f32 FMAs of a row at a time
// (GpuScalarKernels.h), with the operands the step's matmul precision
// gives the matmuls (nova.matmul_precision): bf16 ones (m16n8k16) as
// PyTorch's scaled_dot_product_attention under bf16 autocast, tf32 ones
// (m16n8k8) under tf32, and f32 ones as 3xtf32 otherwise (each operand
// split into big and small tf32 halves, three m16n8k8 MMAs a product:
// about f32's accuracy). Three kernels, as the rows' split has them
// (GpuAttentionBackward.h): the forward, the backward's query rows (dq and
// each row's statistics into the workspace) and its key rows (dk, dv).
//
// A block of 4 warps takes 64 rows of one (batch, head), a warp 16 of them
// (query rows: the blocks of the last rows, with the most keys, first).
// Its own rows' operands (q; backward also dO, or k and v) are the A
// fragments of its products: bf16 ones loaded from shared memory
// (ldmatrix) into registers once (heads of 128: kept in shared tiles as
// f32 ones are, where they fit), f32 ones kept in shared tiles of their
// own and loaded at each use (their tf32 halves would take 64 registers a head of 64
// columns). Then, over the tiles of 64 rows it visits (keys up
// to its last row; the key rows': queries from its first), the block
// stages two tiles in shared memory (each f32 element read once from
// global memory, 16 bytes a thread; bf16 tiles rounded there, their rows'
// 16-byte chunks XOR-swizzled for ldmatrix; f32 tiles' rows padded), and
// each warp
//   - takes its scores (16 x 64: Q K^T, or K Q^T for key rows) in f32
//     accumulators, the tile's rows as the B fragments' columns (ldmatrix
//     without .trans), and likewise dP = dO V^T (or V dO^T);
//   - scales them into log2 units and masks them (only in the tiles the
//     causal mask or the sequence's end cuts: a loop of their own), keeps
//     each row's running max (over its 4 lanes by shuffles) and sum
//     (per lane, summed once at the end), rescaling by 2^(m_old - m_new);
//     every exponential 2^x by the SFU (ex2.approx);
//   - takes P = 2^(S - m) (or dS = scale P (dP - D)) into A fragments
//     straight from the accumulators (bf16: an m16n8 accumulator pair is
//     an m16n8k16 A fragment's layout; f32: an m16n8 accumulator is an
//     m16n8k8 A fragment with its k order permuted, which B's rows follow:
//     no shared memory either way), and adds P V, dS K, dS^T Q or P^T dO
//     into its f32 accumulators (the tile's rows as the B fragments' k:
//     ldmatrix.trans for bf16, scalar loads for f32).
// At the end each lane stores its rows (the forward's O / l rounded to the
// result's element, f32 or bf16). Heads of 16, 32, 64 or 128 columns; a
// backward with heads of 128 takes each visited tile in two halves of 32
// rows (AttentionMmaPlan::subRows); f32 inputs, and with bf16 operands a
// bf16 qkv (GpuBf16Operands.cpp), whose tiles are copied as they are
// (cp.async of 16 bytes into the swizzled chunks, no staging buffer);
// whole buffers (16-byte vector loads).
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

/// What attention's products consume on the tensor cores, f32 sums in
/// each case: bf16 operands (mma.sync m16n8k16; the step's matmuls are
/// bf16), tf32 (m16n8k8; they are tf32), or f32 operands as 3xtf32
/// (m16n8k8, each operand split into big and small tf32 halves, three
/// MMAs a product: about f32's accuracy, as the step's f32 matmuls).
enum class AttentionMmaOperands { bf16, tf32, tf32x3 };
const char *attentionMmaOperandsName(AttentionMmaOperands operands);
/// How the products run with `operands`, in words (for NOVA_EXPLAIN).
const char *attentionMmaHow(AttentionMmaOperands operands);

/// On an attention kernel built by buildAttentionMma: its operands'
/// name (attentionMmaOperandsName), and its tiles' buffers (tileStages).
inline constexpr const char kGpuAttentionMmaAttr[] = "nova.gpu_attention_mma";
inline constexpr const char kGpuAttentionTileStagesAttr[] = "nova.gpu_attention_tile_stages";
/// On one whose bf16 own rows are fragments in registers where its plan
/// would keep them in shared tiles (AttentionMmaPlan::ownRowsShared).
inline constexpr const char kGpuAttentionOwnRowsInRegistersAttr[] = "nova.gpu_attention_own_rows_in_registers";

struct AttentionMmaPlan {
  /// 4 warps a block, 64 rows a block (16 a warp), key tiles of 64 rows.
  static constexpr int64_t kThreads = 128, kRows = 64, kTileRows = 64;
  AttentionMmaOperands operands = AttentionMmaOperands::bf16;
  int64_t rowBlocks = 0, blocks = 0, sharedBytes = 0;
  /// Buffers of the visited rows' tiles: 2 (where they fit) lets the next
  /// tiles land while the present ones are read, one barrier a tile; 1
  /// takes a second barrier a tile (and f32 tiles wait for their copies).
  int64_t tileStages = 2;
  /// Rows of a visited tile a warp's products take at once (its scores'
  /// columns): the whole tile, or half of it in a backward with heads of
  /// 128 columns, whose warps' accumulators (dq, or dk and dv) take 64 or
  /// 128 registers a lane beside the scores and dP.
  int64_t subRows = kTileRows;
  /// The block's own rows (q; backward also dO, or k and v) in shared
  /// tiles of their own, read at each use: f32 operands always; bf16 ones
  /// for heads of 128 where the tiles fit (else fragments in registers,
  /// loaded once).
  bool ownRowsShared = true;
  /// bf16 own rows in registers because shared tiles of them do not fit
  /// (kGpuAttentionOwnRowsInRegistersAttr).
  bool ownRowsInRegistersToFit = false;
};

/// Whether `op`'s heads have a width the tensor-core kernels take (16, 32,
/// 64 or 128 columns), on tensors or buffers.
bool attentionHeadsTakeMma(AttentionKernelOp op);

/// The plan's shape for `op` (which planAttentionMma accepted); bf16 own
/// rows of heads of 128 in shared tiles unless `bf16RowsInRegisters`.
AttentionMmaPlan attentionMmaShape(AttentionKernelOp op, AttentionMmaOperands operands, int64_t tileStages,
                                   bool bf16RowsInRegisters = false);

/// The plan for `op` with `operands` on `target`, or none, with `whyNot`
/// saying why.
std::optional<AttentionMmaPlan> planAttentionMma(AttentionKernelOp op, const ::nova::TargetDesc &target,
                                                 AttentionMmaOperands operands, std::string &whyNot);

/// What `plan` does besides the usual, in words (for
/// NOVA_EXPLAIN; empty where nothing): its tiles taken in parts, bf16 own
/// rows in registers where tiles of them do not fit.
std::string attentionMmaTileNotes(const AttentionMmaPlan &plan);

/// Marks `kernel` as attention on the tensor cores by `plan`
/// (kGpuAttentionMmaAttr, kGpuAttentionTileStagesAttr,
/// kGpuAttentionOwnRowsInRegistersAttr).
void markAttentionMma(Operation *kernel, const AttentionMmaPlan &plan);
/// The plan `kernel`'s marks give its attention `op`, if it has them.
std::optional<AttentionMmaPlan> markedAttentionMma(Operation *kernel, AttentionKernelOp op);

/// Deliberate faults, for tests that the emulator catches what they break.
struct AttentionMmaFaults {
  /// No barrier between staging the tiles and reading them.
  bool noBarrierAfterStaging = false;
  /// No barrier between reading the tiles and staging the next over them
  /// (with two buffers: every tile staged into the first).
  bool noBarrierBeforeRestaging = false;
  /// ldmatrix without the swizzle the tiles were written with.
  bool unswizzledReads = false;
  /// No wait for the cp.async copies that stage the tiles (f32 tiles) or
  /// the staging buffer (bf16 tiles).
  bool noWaitAfterStaging = false;
  /// bf16 tiles: the next tiles' copies into the staging buffer issued
  /// before this thread has read the present ones back.
  bool prefetchBeforeConvert = false;
  /// f32 operands: B's rows read in the k order of the MMA's own layout
  /// (t, t + 4), not the permuted one P's A fragments take (2t, 2t + 1).
  bool unpermutedRows = false;
};

/// The buffers an attention kernel takes besides its op's operands.
struct AttentionMmaBuffers {
  /// A backward's workspace between its query and key rows
  /// (attentionStatsType), which the query rows write.
  Value stats;
  /// A forward's rows' log-sum-exp, which it writes (kAttentionWritesLseAttr),
  /// or the forward's, which the query rows read with the forward's result
  /// `forwardOut` (kAttentionForwardStatsAttr; GpuAttentionForwardStats.h).
  Value lse, forwardOut;
};

/// `op`'s kernel at b's insertion point, as `plan` says, for thread
/// `thread` of block `block`, with `buffers`.
void buildAttentionMma(OpBuilder &b, AttentionKernelOp op, const AttentionMmaPlan &plan, Value thread, Value block,
                       const AttentionMmaBuffers &buffers = {}, const AttentionMmaFaults &faults = {});

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUATTENTIONMMA_H
