//===- ReuseDyingInputs.cpp - the nova-reuse-dying-inputs pass ---*- C++ -*-===//
//
// An elementwise op that reads x[i] and writes y[i] can write y over x when
// nothing reads x after it: the op's destination becomes x. One-shot
// bufferization then keeps the op in place (the input is only read at the
// element it overwrites), and the arena holds one buffer where it held two.
// The rewrite is only made where bufferization needs no copy for it: x is
// computed into a fresh tensor (nothing else shares its buffer), and every
// other use of x, or of a view of it, comes earlier in the block.
//
// The backward row kernels likewise: a cross-entropy gradient over its
// logits (at a real vocabulary the step's largest buffer, live beside its
// gradient at the loss otherwise), a LayerNorm input gradient over the
// output gradient. Every implementation of them (CPU VectorizeRows.cpp,
// GPU GpuScalarKernels.cpp) reads a row's sums first, then each element
// of the result from the inputs at its own position before writing it:
// the op keeps reading x as an input, and its bufferization says the
// access is elementwise (NovaBufferization.cpp).
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAREUSEDYINGINPUTS
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

bool isView(Operation *op) {
  return isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::ExtractSliceOp, tensor::CastOp,
             tensor::ReshapeOp>(op);
}

/// Every use of `v` other than by `op`, and every use of what aliases `v`
/// (views of it, results written over it), is before `op` in its block.
bool usedOnlyBefore(Value v, Operation *op) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (user == op)
      continue;
    if (user->getBlock() != op->getBlock() || !user->isBeforeInBlock(op))
      return false;
    if (isView(user)) {
      for (Value r : user->getResults())
        if (!usedOnlyBefore(r, op))
          return false;
    } else if (auto dps = dyn_cast<DestinationStyleOpInterface>(user)) {
      if (dps.isDpsInit(&use) && !usedOnlyBefore(dps.getTiedOpResult(&use), op))
        return false;
    } else if (user->getNumRegions() != 0) {
      return false; // a loop or branch could pass it on: not followed
    }
  }
  return true;
}

/// `v` is computed into a buffer of its own, which nothing reads after `at`
/// but `at`: a destination-style result whose destination is an empty
/// tensor or such a value that dies there, or a reshape of such a value.
bool isFresh(Value v, Operation *at) {
  auto result = dyn_cast<OpResult>(v);
  if (!result)
    return false; // a function argument: the caller's, read-only
  Operation *def = result.getOwner();
  if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def)) {
    Value source = def->getOperand(0);
    return usedOnlyBefore(source, at) && isFresh(source, at);
  }
  auto dps = dyn_cast<DestinationStyleOpInterface>(def);
  if (!dps || isa<tensor::InsertSliceOp>(def))
    return false;
  Value dest = dps.getTiedOpOperand(result)->get();
  if (dest.getDefiningOp<tensor::EmptyOp>())
    return true;
  return usedOnlyBefore(dest, def) && isFresh(dest, def);
}

/// Whether `v` (or a view of it) is returned: it is then computed into the
/// caller's buffer, which an input cannot be.
bool reachesReturn(Value v) {
  for (Operation *user : v.getUsers()) {
    if (isa<func::ReturnOp>(user))
      return true;
    if (isView(user) && llvm::any_of(user->getResults(), reachesReturn))
      return true;
  }
  return false;
}

/// The rewrite for one op: the input it can write over, or null.
Value dyingInput(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1 || op.getNumParallelLoops() != op.getNumLoops() || op->getNumResults() != 1)
    return {};
  OpOperand *init = op.getDpsInitOperand(0);
  if (!init->get().getDefiningOp<tensor::EmptyOp>() || op.payloadUsesValueFromOperand(init) ||
      reachesReturn(op->getResult(0)))
    return {};
  AffineMap outMap = op.getMatchingIndexingMap(init);
  Type type = op->getResult(0).getType();
  for (OpOperand *in : op.getDpsInputOperands()) {
    Value x = in->get();
    // A contraction's result read at once by an elementwise op (maybe
    // through a reshape) is its register epilogue (OutlineKernels.cpp):
    // written over, it would have to be stored; left alone, it need not
    // (nova-drop-unstored-results).
    Value source = x;
    while (Operation *def = source.getDefiningOp()) {
      if (!isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def))
        break;
      source = def->getOperand(0);
    }
    if (auto producer = source.getDefiningOp<linalg::LinalgOp>(); producer && producer.getNumReductionLoops() > 0)
      continue;
    if (x.getType() != type || !usedOnlyBefore(x, op) || !isFresh(x, op))
      continue;
    // Every read of x must be of the element being written.
    bool elementwise = llvm::all_of(op.getDpsInputOperands(), [&](OpOperand *o) {
      return o->get() != x || op.getMatchingIndexingMap(o) == outMap;
    });
    if (elementwise && outMap.isPermutation())
      return x;
  }
  return {};
}

/// For a backward row kernel: the input its result can be written over
/// (the logits of a cross-entropy gradient, the output gradient of a
/// LayerNorm's), or null.
Value dyingRowInput(Operation *op) {
  Value x;
  if (auto ce = dyn_cast<nova::CrossEntropyKernelOp>(op); ce && ce.getBackward())
    x = ce.getInputs()[0];
  else if (auto norm = dyn_cast<nova::LayerNormKernelOp>(op); norm && norm.getBackward())
    x = norm.getInputs()[2];
  if (!x || op->getNumResults() != 1 || !isa<RankedTensorType>(x.getType()))
    return {};
  auto dps = cast<DestinationStyleOpInterface>(op);
  Value init = dps.getDpsInitOperand(0)->get();
  if (!init.getDefiningOp<tensor::EmptyOp>() || x.getType() != init.getType() || reachesReturn(op->getResult(0)) ||
      !usedOnlyBefore(x, op) || !isFresh(x, op))
    return {};
  return x;
}

/// `op` with `x` as its destination instead of an input.
void writeOver(linalg::GenericOp op, Value x) {
  OpBuilder b(op);
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  SmallVector<unsigned> dropped;
  for (OpOperand *in : op.getDpsInputOperands()) {
    if (in->get() == x) {
      dropped.push_back(in->getOperandNumber());
      continue;
    }
    inputs.push_back(in->get());
    maps.push_back(op.getMatchingIndexingMap(in));
  }
  maps.push_back(op.getMatchingIndexingMap(op.getDpsInitOperand(0)));
  auto fresh = b.create<linalg::GenericOp>(op.getLoc(), op->getResultTypes(), inputs, ValueRange{x}, maps,
                                           op.getIteratorTypesArray());
  fresh->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  fresh.getRegion().takeBody(op.getRegion());
  Block &body = fresh.getRegion().front();
  BlockArgument out = body.getArgument(body.getNumArguments() - 1);
  for (unsigned i : llvm::reverse(dropped)) {
    body.getArgument(i).replaceAllUsesWith(out);
    body.eraseArgument(i);
  }
  Operation *empty = op.getDpsInitOperand(0)->get().getDefiningOp();
  op->replaceAllUsesWith(fresh);
  op->erase();
  if (empty->use_empty())
    empty->erase();
}

struct ReuseDyingInputs : mlir::nova::impl::NovaReuseDyingInputsBase<ReuseDyingInputs> {
  void runOnOperation() override {
    auto inPlace = getOperation()->getAttrOfType<BoolAttr>(nova::kInPlaceAttr);
    if (inPlace && !inPlace.getValue())
      return; // NOVA_IN_PLACE=0
    // One at a time, each on the IR the earlier ones left (a rewrite
    // replaces its op, whose result may be another's input).
    SmallVector<linalg::GenericOp> ops;
    getOperation().walk([&](linalg::GenericOp op) { ops.push_back(op); });
    for (linalg::GenericOp op : ops)
      if (Value x = dyingInput(op))
        writeOver(op, x);
    SmallVector<Operation *> rowKernels;
    getOperation().walk([&](Operation *op) {
      if (isa<nova::CrossEntropyKernelOp, nova::LayerNormKernelOp>(op))
        rowKernels.push_back(op);
    });
    for (Operation *op : rowKernels)
      if (Value x = dyingRowInput(op)) {
        OpOperand *init = cast<DestinationStyleOpInterface>(op).getDpsInitOperand(0);
        Operation *empty = init->get().getDefiningOp();
        init->set(x);
        if (empty->use_empty())
          empty->erase();
      }
  }
};

} // namespace
