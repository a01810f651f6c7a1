//===- GpuScalarKernels.h - one GPU thread's share of a row or attention kernel -*- C++ -*-===//
//
// The first GPU form of the two whole-op kernels (nova.layer_norm_kernel,
// nova.attention_kernel): scalar loops that one thread runs for its unit of
// work, with the reference's formulas (the CPU's nova-vectorize-rows and
// nova-vectorize-attention compute the same ones, vectorized):
//   - a LayerNorm row: mean, two-pass variance, rstd; forward y or the
//     input gradient dx;
//   - attention, one (batch, head): each query row's max and sum of
//     exp(scale q.k - max) over its causal keys, then the output; backward
//     dq, dk, dv of the head's columns (zeroed first, then accumulated row
//     by row: no other thread writes them).
// Correct first: no shared memory, no warp reductions yet.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUSCALARKERNELS_H
#define NOVA_COMPILER_TARGET_CUDA_GPUSCALARKERNELS_H

#include "compiler/dialect/NovaDialect.h"

#include "mlir/IR/Builders.h"

namespace mlir::nova {

/// Row `row` (of op.rows()) of a bufferized LayerNorm kernel, at b's
/// insertion point.
void buildLayerNormRow(OpBuilder &b, LayerNormKernelOp op, Value row);

/// Work unit `unit` = batch * heads + head of a bufferized attention kernel.
void buildAttentionHead(OpBuilder &b, AttentionKernelOp op, Value unit);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUSCALARKERNELS_H
