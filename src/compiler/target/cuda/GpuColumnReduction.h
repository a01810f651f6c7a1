//===- GpuColumnReduction.h - reductions across rows on a GPU -*- C++ -*-===//
//
// A reduction whose parallel loops run along its input's rows (a column
// sum: a bias gradient, a LayerNorm's d(gamma) and d(beta), summed over
// every token) maps one thread to each output element. Two things made it
// the slowest kernel of a GPT step on the H200 (0.36 ms for 256 columns
// over 2048 rows, more than half of the small step's kernel time):
//
//   - each row's term was added into the output in memory (a load and a
//     store of the output a row: the loop could not keep it in a register,
//     since the output may alias an input), a chain of dependent global
//     accesses 2048 long;
//   - 256 columns are 256 threads: one block on one of 132 SMs.
//
// So, on the GPU target:
//
//   buildFoldingPoints: a structured op's points whose reduction loops fold
//     into outputs indexed by the parallel loops alone keep each unit's
//     partial in a register from the combiner's identity, over the
//     reduction points in loop order, and fold it into the output element
//     (or the dropped fill's constant) once: one store a unit.
//   splitColumnReductions (nova-gpu-threads, before configuring): such a
//     reduction over many rows and few columns becomes two kernels: `<k>`
//     folds each of P parts of the rows (P about sqrt(rows), a power of
//     two dividing them) into a workspace [P, columns] (a new buffer at
//     each launch), its parallel points P times as many; `<k>_total` folds
//     the P partials of each column, in part order, into the output. The
//     sums are deterministic: the same order on every run.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUCOLUMNREDUCTION_H
#define NOVA_COMPILER_TARGET_CUDA_GPUCOLUMNREDUCTION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <optional>

namespace mlir::nova {

/// Whether `op`'s points can fold its reduction loops in registers: it has
/// reduction loops, every output is indexed by the parallel loops (each
/// once) and constants and folded by one combiner (combinerOf), and no
/// output's buffer is read as an input.
bool foldsInRegisters(linalg::GenericOp op);

/// Replaces `op` (foldsInRegisters) by its points, `count` of them, point
/// u = it * perIteration + first: each folds the reduction points into
/// registers, then combines its output elements' values (or `init`, where
/// given) with them and stores them.
LogicalResult buildFoldingPoints(linalg::GenericOp op, int64_t count, int64_t perIteration, Value first,
                                 FloatAttr init = {});

/// The parts a reduction across rows is split into (splitColumnReductions),
/// or nullopt where it stays whole. Split: not a matmul, a single output
/// (foldsInRegisters), at least 512 reduction points over at most 16384
/// columns, not a warp reduction (its first input's innermost index a
/// parallel loop), and every input an identity-layout buffer whose indices
/// hold every reduction loop, in loop order, side by side, or none of them.
std::optional<int64_t> columnSplitParts(linalg::GenericOp op);

/// Shared by the splits into parts (this one and GpuScatterAddParts.h):
/// `<kernel>_total`(parts [P, ...result], result), inserted after `kernel`:
/// each result element folds its P parts into its value in part order,
/// `combine(value, part)`.
func::FuncOp buildPartsTotal(func::FuncOp kernel, MemRefType parts, MemRefType result,
                             function_ref<Value(OpBuilder &, Location, Value, Value)> combine);

/// Each launch of `kernel`, whose argument `resultArgument` (numbered after
/// the workgroup number) became the parts' workspace, its last: a new
/// workspace of type `parts` allocated before it and passed in place of
/// the result, `first` (if any) launched on it before, `total` launched
/// after it on the workspace and the result.
void launchInParts(ModuleOp top, func::FuncOp kernel, unsigned resultArgument, MemRefType parts, func::FuncOp total,
                   func::FuncOp first = {});

/// A kernel to split into parts: its one generic `op`, whose one output is
/// all of argument `outArgument` (numbered after the workgroup number).
struct PartsSplit {
  func::FuncOp kernel;
  linalg::GenericOp op;
  int64_t parts;
  unsigned outArgument;
};
/// The kernels of `kernels` that are one such generic `partsOf` splits.
SmallVector<PartsSplit> kernelsToSplit(ModuleOp kernels,
                                       function_ref<std::optional<int64_t>(linalg::GenericOp)> partsOf);

/// Shared by the splits of a reduction into parts (this one and
/// GpuFullReductionParts.h): replaces `op`, the one output of which is all
/// of `kernel`'s argument `outArgument` (numbered after the workgroup
/// number), by a generic of `op`'s body over `ins` with `maps` (the
/// inputs', then the partials') and `iterators`, folding into a new last
/// argument of type `partials` from the combiner's identity; then builds
/// its total (buildPartsTotal) and rewrites its launches (launchInParts).
LogicalResult splitIntoParts(ModuleOp top, func::FuncOp kernel, linalg::GenericOp op, unsigned outArgument,
                             ValueRange ins, ArrayRef<AffineMap> maps, ArrayRef<utils::IteratorType> iterators,
                             MemRefType partials);

/// Splits each kernel of `kernels` that is one reduction across rows
/// (columnSplitParts) into its parts and their total, rewriting its
/// launches in `top`.
LogicalResult splitColumnReductions(ModuleOp top, ModuleOp kernels);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUCOLUMNREDUCTION_H
