//===- GpuAttentionBackward.h - an attention backward in two kernels -*- C++ -*-===//
//
// The attention backward a row at a time (GpuScalarKernels.h) needs each
// query row's softmax statistics (max, sum of exponentials, D) before any
// key row's dk and dv: in one kernel, a block per (batch, head) kept them in
// shared memory between its query rows and its key rows. That is 64 blocks
// for a GPT's 8 x 8 (batch, head) pairs: half of an H200's 132 SMs, each
// running the whole head (0.467 ms a layer of the medium GPT, 39% of its
// bf16 step's kernel time). So, on the GPU target, nova-gpu-threads splits
// it before configuring:
//
//   `<k>` (kAttentionPartAttr "queries"): blocks of query rows (dq), which
//     also write their rows' statistics into a workspace [batch x heads,
//     T, 2] (log-sum-exp and D; a new buffer at each launch, its last
//     argument);
//   `<k>_keys` ("keys"), launched after it on the same buffers: blocks of
//     key rows (dk, dv), reading them.
//
// Both grids are (batch, head) pairs x row blocks; no shared memory holds
// the statistics, so any sequence length runs a row at a time. On the
// tensor cores the query rows may take the statistics from the forward
// instead of a pass of their own (GpuAttentionForwardStats.h).
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUATTENTIONBACKWARD_H
#define NOVA_COMPILER_TARGET_CUDA_GPUATTENTIONBACKWARD_H

#include "mlir/IR/BuiltinOps.h"

namespace mlir::nova {

/// Splits each kernel of `kernels` whose one op is an attention backward
/// with heads a row at a time takes (kAttentionRowsMaxHeadDim) into its two
/// kernels, rewriting its launches in `top`.
LogicalResult splitAttentionBackward(ModuleOp top, ModuleOp kernels);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUATTENTIONBACKWARD_H
