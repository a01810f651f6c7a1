//===- GpuFullReductionParts.h - reductions to a scalar, in parts -*- C++ -*-===//
//
// A reduction with no parallel loop (a gradient's sum of squares for
// clipping, a loss's sum) runs on one block (GpuBlockReduction.h): fine
// for a few thousand points, but a block sits on one SM, which reads
// memory at a small fraction of the GPU's rate. The medium GPT step's 101
// sums of squares took 0.354 ms in the third H200 run: its largest
// gradients (1M floats) each on one SM.
//
//   splitFullReductions (nova-gpu-threads, before configuring, after the
//     column split): such a reduction over at least 65536 points, whose
//     inputs are whole buffers read at the loops in order, becomes two
//     kernels: `<k>` folds each of P contiguous parts of the points (P
//     about sqrt(points), a power of two dividing them) into a workspace
//     [P] (a new buffer at each launch), a warp a part (its lanes reading
//     side by side); `<k>_total` folds the P partials, in part order, into
//     the output (one block). The sums are deterministic: the same order
//     on every run.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUFULLREDUCTIONPARTS_H
#define NOVA_COMPILER_TARGET_CUDA_GPUFULLREDUCTIONPARTS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <optional>

namespace mlir::nova {

/// The parts a reduction with no parallel loop is split into
/// (splitFullReductions), or nullopt where it stays whole: one f32 output
/// with a combiner (combinerOf), not read as an input, at least 65536
/// points, no linalg.index, every input an identity-layout buffer of
/// static shape indexed by every loop in loop order.
std::optional<int64_t> fullReductionParts(linalg::GenericOp op);

/// Splits each kernel of `kernels` that is one such reduction into its
/// parts and their total, rewriting its launches in `top`.
LogicalResult splitFullReductions(ModuleOp top, ModuleOp kernels);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUFULLREDUCTIONPARTS_H
