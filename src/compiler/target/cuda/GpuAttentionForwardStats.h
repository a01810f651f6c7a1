//===- GpuAttentionForwardStats.h - the backward reads the forward's statistics -*- C++ -*-===//
//
// The backward's query rows (GpuAttentionBackward.h) need each row's
// log-sum-exp and D = sum_j P_ij dP_ij before dq: on their own they take
// two passes over the keys, the first recomputing the scores and dP = dO
// V^T (two products a tile) for the statistics alone. The forward already
// had the log-sum-exp, and D = rowsum(dO o O) (sum_j P_ij (dO_i . v_j) =
// dO_i . O_i) needs only the forward's result O, which a GPU step keeps
// for the backward's other uses (Target::recomputesAttention). So, where
// the forward and the query rows both run on the tensor cores
// (GpuAttentionMma.h), nova-gpu-threads pairs each query-rows launch with
// the forward launch before it on the same qkv buffer, neither qkv nor O
// written in between:
//   - the forward's kernel (kAttentionWritesLseAttr) takes a last argument
//     [batch x heads, T] (f32, attentionLseType) into which it writes each
//     row's log-sum-exp in its units (log2: scores times log2 e), a new
//     buffer at each of its launches;
//   - the query rows' kernel (kAttentionForwardStatsAttr) takes O and that
//     buffer after its workspace, computes D from O and dO, and runs one
//     pass over the keys (three products a tile, FlashAttention-2's)
//     instead of two (five); it still writes both statistics into the
//     workspace the key rows read.
// All of a query-rows kernel's launches pair, or none changes.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUATTENTIONFORWARDSTATS_H
#define NOVA_COMPILER_TARGET_CUDA_GPUATTENTIONFORWARDSTATS_H

#include "compiler/dialect/NovaDialect.h"
#include "compiler/target/cuda/GpuAttentionMma.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::nova {

/// On a forward attention kernel whose last argument receives its rows'
/// log-sum-exp (a UnitAttr).
inline constexpr const char kAttentionWritesLseAttr[] = "nova.attention_writes_lse";
// kAttentionForwardStatsAttr (Kernels.h) on a query-rows kernel: its last
// two arguments are the forward's O and log-sum-exp.

/// The forward's log-sum-exp: [batch x heads, T] f32, in log2 units.
MemRefType attentionLseType(AttentionKernelOp op);

/// Pairs the tensor-core query-rows launches in `top` with their forwards'
/// launches, as above.
void reuseAttentionForwardStats(ModuleOp top, ModuleOp kernels);

/// The buffers `kernel` (of attention op `op`) takes besides the op's
/// operands, from its last arguments.
AttentionMmaBuffers attentionKernelBuffers(func::FuncOp kernel, AttentionKernelOp op);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUATTENTIONFORWARDSTATS_H
