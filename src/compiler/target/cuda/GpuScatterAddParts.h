//===- GpuScatterAddParts.h - a scatter-add over many indices on a GPU -*- C++ -*-===//
//
// A scatter-add (an embedding's gradient: every token's row of updates
// added into the table row its index names) runs on one block: a thread a
// column, each adding every index's update in index order, so no two
// threads add into one element and the sums are deterministic. On the H200
// the small GPT's (2048 tokens into a 256 x 256 table) took 0.481 ms: each
// thread's 2048 additions are a chain of dependent global loads and stores.
//
// splitScatterAdds (nova-gpu-threads, before configuring) splits one over
// many indices into a small table into P parts of the indices, each adding
// into a table of its own, P zeroed tables in a new workspace [P, rows,
// width]: `<k>_zero` zeroes it, `<k>` adds each part (its loop over parts,
// kGpuPartLoopAttr, one part a group of blocks; its columns a thread each,
// as before), and `<k>_total` adds the P tables into the result in part
// order, element by element. P: a power of two dividing the indices, at
// most indices / 64 (each part at least 64 of them), with P tables no more
// than 4 times the updates (P x rows <= 4 x indices): large vocabularies
// stay whole.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUSCATTERADDPARTS_H
#define NOVA_COMPILER_TARGET_CUDA_GPUSCATTERADDPARTS_H

#include "mlir/IR/BuiltinOps.h"

namespace mlir::nova {

/// Splits each kernel of `kernels` that is one scatter-add over many
/// indices into a small table (see above), rewriting its launches in `top`.
LogicalResult splitScatterAdds(ModuleOp top, ModuleOp kernels);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUSCATTERADDPARTS_H
