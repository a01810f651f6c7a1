//===- GpuBlockReduction.h - reductions on a block or a warp -*- C++ -*-===//
//
// A structured op with no parallel loop (a sum to a scalar: a mean loss, a
// gradient norm; often with an elementwise epilogue fused in that writes a
// second output point by point) would run on one GPU thread. Instead one
// block runs it: each thread folds its share of the points (point = step *
// threads + thread) into its partials in registers, as the op's body says
// (an elementwise output stored at its point; a reduced scalar output's
// value replaced by the thread's partial), stores them into its own slots
// of shared memory, then the slots are
// combined in a tree (threads / 2, / 4, ... 1, a barrier between levels),
// and thread 0 combines the total with the output's initial value.
// The combiner is the body's own: the op that folds the scalar output's
// value into the yielded one (addf, maximumf, minimumf, maxnumf, minnumf).
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUBLOCKREDUCTION_H
#define NOVA_COMPILER_TARGET_CUDA_GPUBLOCKREDUCTION_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cstdint>

namespace mlir::nova {

/// For each unit u < count this thread takes: body(u), u = it * perIteration
/// + first over it = 0, 1, ... (first: the thread's index in the grid or
/// the block), guarded by u < count. Loop bounds are the same in every
/// thread (the emulator requires uniform loops; scf.if masks the rest).
void forEachThreadUnit(OpBuilder &b, Location l, int64_t count, int64_t perIteration, Value first,
                       function_ref<void(Value)> body);

/// `value` combined over the 32 lanes of each warp (or each aligned group
/// of `lanes`, a power of two), every lane ending with the total: a
/// butterfly of shuffles (xor lanes / 2, ... 1), `combine` at each level.
/// Every lane of the block must reach it.
Value warpAllReduce(OpBuilder &b, Location l, Value value, function_ref<Value(Value, Value)> combine,
                    int64_t lanes = 32);

/// 2^x (f32) by the SFU: ex2.approx.ftz.f32 (relative error about 2^-22,
/// subnormal results 0), one instruction where math.exp is written out in
/// a dozen FMA-pipe ones (GpuInlineMath).
Value sfuExp2(OpBuilder &b, Location l, Value x);

/// scf.for over [lb, ub) by 1 carrying `init`, whose bounds stay the same
/// in every thread (the emulator requires uniform loops): `step` builds the
/// iteration's new values only where `take(iv)` holds (an scf.if with
/// results, built after `take(iv)`, so it may use what `take` built);
/// elsewhere the carried values pass unchanged.
scf::ForOp buildMaskedFor(OpBuilder &b, Location l, Value lb, Value ub, ValueRange init,
                          function_ref<Value(Value)> take, function_ref<SmallVector<Value>(Value, ValueRange)> step);

/// The indices an operand read through `map` (loop dims and constants)
/// has at the loop values `loops` (no affine ops: the emulator runs arith).
SmallVector<Value> indicesAt(OpBuilder &b, Location l, AffineMap map, ArrayRef<Value> loops);

/// Clones `body`'s ops (a linalg body whose arguments `map` maps) at b's
/// insertion point, linalg.index as `loops`; returns the values it yields.
SmallVector<Value> cloneBodyAt(OpBuilder &b, Block &body, IRMapping &map, ArrayRef<Value> loops);

/// A vector of `elements` (scalars of one type), built element by element
/// (vector.insert into a zero vector: the ops the emulator runs).
Value vectorOf(OpBuilder &b, Location l, ArrayRef<Value> elements);

/// `linear` as row-major indices over `shape` (the first not bounded:
/// arith remui/divui, which the emulator runs; no affine ops).
SmallVector<Value> delinearizeIndex(OpBuilder &b, Location l, Value linear, ArrayRef<int64_t> shape);

/// The op folding output `output` (its body argument) into the value the
/// body yields for it, one of addf, maximumf, minimumf, maxnumf, minnumf
/// (the reduction's combiner), or null.
Operation *combinerOf(linalg::GenericOp op, unsigned output);

/// `combine` (a combiner of a body) applied to x and y at b's insertion point.
Value combineLike(OpBuilder &b, Location l, Operation *combine, Value x, Value y);

/// The combiner's identity: 0 for a sum, -inf for a maximum, +inf for a minimum.
double identityOf(Operation *combine);

/// Whether every index `map` gives is a loop dim or a constant.
bool readsThroughDimsAndConstants(AffineMap map);

/// Whether `map` indexes an output of `op` by its parallel loops, each
/// once, and constants (one element a point of the parallel loops).
bool indexedByParallelLoops(linalg::GenericOp op, AffineMap map);

/// A structured op's loops by kind, each in loop order, with their extents
/// and how many points each kind spans.
struct ReductionLoops {
  SmallVector<unsigned> parallelDims, reductionDims;
  SmallVector<int64_t> parallelExtents, reductionExtents;
  int64_t points = 1, reductionPoints = 1;
};
ReductionLoops reductionLoopsOf(linalg::GenericOp op);

/// Each output's combiner (combinerOf) and its identity, a constant built
/// at b's insertion point.
struct Folds {
  SmallVector<Operation *> combiners;
  SmallVector<Value> identities;
};
Folds foldsOf(OpBuilder &b, Location l, linalg::GenericOp op);

/// Stores `total` folded into output `output` of `op` at `indices`: the
/// element's value (or `init`, where given) combined with it.
void storeFolded(OpBuilder &b, Location l, linalg::GenericOp op, unsigned output, Operation *combine,
                 ValueRange indices, Value total, FloatAttr init);

/// Whether `op` can run as a block reduction (no parallel loop; each
/// output either written once a point, its map a permutation of the loops,
/// or a scalar folded by one combiner; inputs read through loop dims and
/// constants), and if so the shared memory it needs for `threads` threads.
bool isBlockReduction(linalg::GenericOp op, int64_t threads, int64_t *sharedBytes = nullptr);

/// Replaces `op` (isBlockReduction) by its block reduction over `threads`
/// threads (a power of two), `thread` the thread's index. With `init`, the
/// folded outputs start from it instead of their buffers' values (the fill
/// that wrote it is gone).
LogicalResult buildBlockReduction(linalg::GenericOp op, Value thread, int64_t threads, FloatAttr init = {});

/// Row reductions (a softmax's max and sum, a cross-entropy's, a mean over
/// the last dim): a warp per point of the parallel loops. Each lane folds
/// the reduction points lane, lane + 32, ... with the op's body into its
/// partial of each output, the warp combines the partials in a butterfly
/// of shuffles (xor 16 ... 1) with the body's combiner, and lane 0 folds
/// the total into the output's value. Loop bounds are the same in every
/// lane; lanes past the points run clamped and store nothing, so every
/// shuffle has the whole warp.
inline constexpr int64_t kWarpReductionMinPoints = 32;

/// Whether `op` runs as warp reductions: parallel and reduction loops (at
/// least kWarpReductionMinPoints reduction points), its first input's
/// innermost index a reduction loop (the lanes' reads coalesce), every
/// output f32, written once a parallel point (its indices the parallel
/// loops, each once, and constants) and folded by one combiner
/// (shuffles move 32-bit values), inputs read through loop dims and
/// constants.
bool isWarpReduction(linalg::GenericOp op);

/// Replaces `op` (isWarpReduction) by its warp reductions: `warps` warps
/// in the grid, this thread's global warp `warp` and its `lane`. With
/// `init`, the outputs start from it instead of their buffers' values.
LogicalResult buildWarpReduction(linalg::GenericOp op, Value warp, Value lane, int64_t warps, FloatAttr init = {});

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUBLOCKREDUCTION_H
