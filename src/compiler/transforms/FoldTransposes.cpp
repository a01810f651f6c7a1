//===- FoldTransposes.cpp - the nova-fold-transposes pass --------*- C++ -*-===//
//
// A transpose copy whose every reader is a matmul kernel's operand is
// replaced by a transposed view of its source (see Passes.td). Safe when:
//   - the copy's destination is a whole allocation nothing else uses;
//   - the source's buffer is not written by any op after the copy (the view
//     is read later than the copy would have been);
//   - each reading matmul still matches the register kernel with the view:
//     matchMatmul (MatmulKernel.h) is asked again on the rewritten op, and
//     the rewrite is undone for this transpose if any reader stops matching.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/MatmulKernel.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAFOLDTRANSPOSES
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

/// Whether an op after `from`, up to and including `until` (same block),
/// writes (through any view) the buffer `root`: the view would then read the
/// new values. Writes after the last reader (a parameter's in-place update)
/// do not matter.
bool writtenBetween(Operation *from, Operation *until, Value root) {
  for (Operation *op = from->getNextNode(); op; op = op->getNextNode()) {
    bool writes = false;
    mlir::nova::forEachWrittenRoot(op, [&](Value written) { writes |= written == root; });
    if (writes)
      return true;
    if (op == until)
      break;
  }
  return false;
}

/// Folds `t` if it can; returns whether it did.
bool fold(linalg::TransposeOp t) {
  if (!t.hasPureBufferSemantics())
    return false;
  Value src = t.getInput(), dst = t.getInit();
  auto alloc = dst.getDefiningOp<memref::AllocOp>();
  if (!alloc)
    return false;
  SmallVector<OpOperand *> readers;
  for (OpOperand &use : dst.getUses()) {
    Operation *user = use.getOwner();
    if (user == t.getOperation())
      continue;
    auto generic = dyn_cast<linalg::GenericOp>(user);
    if (!generic || !mlir::nova::isTaggedMatmul(generic) || !generic.isDpsInput(&use) || generic->getBlock() != t->getBlock())
      return false;
    readers.push_back(&use);
  }
  if (readers.empty())
    return false;
  Operation *lastReader = readers.front()->getOwner();
  for (OpOperand *use : readers)
    if (lastReader->isBeforeInBlock(use->getOwner()))
      lastReader = use->getOwner();
  if (writtenBetween(t, lastReader, mlir::nova::bufferRoot(src)))
    return false;

  OpBuilder b(t);
  auto perm = AffineMapAttr::get(AffineMap::getPermutationMap(t.getPermutation(), t.getContext()));
  auto view = b.create<memref::TransposeOp>(t.getLoc(), src, perm);
  if (view.getType().getShape() != cast<MemRefType>(dst.getType()).getShape()) {
    view.erase();
    return false;
  }
  for (OpOperand *use : readers)
    use->set(view);
  bool stillMatmuls = llvm::all_of(readers, [](OpOperand *use) {
    return mlir::nova::matchMatmul(cast<linalg::GenericOp>(use->getOwner())).has_value();
  });
  if (!stillMatmuls) {
    for (OpOperand *use : readers)
      use->set(dst);
    view.erase();
    return false;
  }
  t.erase();
  if (alloc->use_empty())
    alloc.erase();
  return true;
}

struct NovaFoldTransposes : mlir::nova::impl::NovaFoldTransposesBase<NovaFoldTransposes> {
  void runOnOperation() override {
    SmallVector<linalg::TransposeOp> transposes;
    getOperation().walk([&](linalg::TransposeOp t) { transposes.push_back(t); });
    for (linalg::TransposeOp t : transposes)
      fold(t);
  }
};

} // namespace
