//===- GpuBlockReduction.h - a reduction with no parallel loop on one block -*- C++ -*-===//
//
// A structured op with no parallel loop (a sum to a scalar: a mean loss, a
// gradient norm; often with an elementwise epilogue fused in that writes a
// second output point by point) would run on one GPU thread. Instead one
// block runs it: each thread folds its share of the points (point = step *
// threads + thread) into its own slot of shared memory, written as the op's
// body says (an elementwise output stored at its point; a reduced scalar
// output's value replaced by the thread's partial), then the slots are
// combined in a tree (threads / 2, / 4, ... 1, a barrier between levels),
// and thread 0 combines the total with the output's initial value.
// The combiner is the body's own: the op that folds the scalar output's
// value into the yielded one (addf, maximumf, minimumf, maxnumf, minnumf).
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUBLOCKREDUCTION_H
#define NOVA_COMPILER_TARGET_CUDA_GPUBLOCKREDUCTION_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <cstdint>

namespace mlir::nova {

/// For each unit u < count this thread takes: body(u), u = it * perIteration
/// + first over it = 0, 1, ... (first: the thread's index in the grid or
/// the block), guarded by u < count. Loop bounds are the same in every
/// thread (the emulator requires uniform loops; scf.if masks the rest).
void forEachThreadUnit(OpBuilder &b, Location l, int64_t count, int64_t perIteration, Value first,
                       function_ref<void(Value)> body);

/// `linear` as row-major indices over `shape` (the first not bounded:
/// arith remui/divui, which the emulator runs; no affine ops).
SmallVector<Value> delinearizeIndex(OpBuilder &b, Location l, Value linear, ArrayRef<int64_t> shape);

/// Whether `op` can run as a block reduction (no parallel loop; each
/// output either written once a point, its map a permutation of the loops,
/// or a scalar folded by one combiner; inputs read through loop dims and
/// constants), and if so the shared memory it needs for `threads` threads.
bool isBlockReduction(linalg::GenericOp op, int64_t threads, int64_t *sharedBytes = nullptr);

/// Replaces `op` (isBlockReduction) by its block reduction over `threads`
/// threads (a power of two), `thread` the thread's index.
LogicalResult buildBlockReduction(linalg::GenericOp op, Value thread, int64_t threads);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUBLOCKREDUCTION_H
