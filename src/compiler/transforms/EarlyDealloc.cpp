//===- EarlyDealloc.cpp - the nova-early-dealloc pass ------------*- C++ -*-===//
//
// For every `memref.dealloc %m` whose %m is a `memref.alloc` of the same
// block: collect %m's aliases (results of view-like ops on it, transitively),
// find the last op of the block that uses any of them (an op whose nested
// regions use one counts), and move the dealloc right after it. Runs after
// bufferization and the lowering of deallocations, on straight-line blocks
// of memref code; deallocs of anything else are left in place.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAEARLYDEALLOC
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

/// %alloc and every value viewing its memory (subview, cast, reshape...).
llvm::DenseSet<Value> aliasesOf(Value alloc) {
  llvm::DenseSet<Value> aliases{alloc};
  SmallVector<Value> work{alloc};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      auto view = dyn_cast<ViewLikeOpInterface>(user);
      if (!view || view.getViewSource() != v)
        continue;
      for (Value r : user->getResults())
        if (aliases.insert(r).second)
          work.push_back(r);
    }
  }
  return aliases;
}

/// The op of `block` that contains `op` (op itself, or an ancestor).
Operation *inBlock(Operation *op, Block *block) {
  while (op && op->getBlock() != block)
    op = op->getParentOp();
  return op;
}

void moveDeallocs(Block &block) {
  SmallVector<memref::DeallocOp> deallocs;
  for (Operation &op : block)
    if (auto d = dyn_cast<memref::DeallocOp>(op))
      if (auto alloc = d.getMemref().getDefiningOp<memref::AllocOp>())
        if (alloc->getBlock() == &block)
          deallocs.push_back(d);
  for (memref::DeallocOp d : deallocs) {
    llvm::DenseSet<Value> aliases = aliasesOf(d.getMemref());
    Operation *last = d.getMemref().getDefiningOp();
    for (Value a : aliases)
      for (Operation *user : a.getUsers()) {
        if (user == d.getOperation())
          continue;
        Operation *top = inBlock(user, &block);
        if (top && last->isBeforeInBlock(top))
          last = top;
      }
    d->moveAfter(last);
  }
}

struct NovaEarlyDealloc : mlir::nova::impl::NovaEarlyDeallocBase<NovaEarlyDealloc> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp f) {
      if (!f.isExternal())
        moveDeallocs(f.front());
    });
  }
};

} // namespace
