//===- Autodiff.cpp - the nova-autodiff pass ---------------------*- C++ -*-===//
//
// Reverse mode over one block. A value is *active* if it depends on a `wrt`
// value and the loss depends on it; only ops with an active result get a VJP,
// so no dead backward code is built for inputs we do not differentiate.
// Cotangents are accumulated with nova.add in a map keyed by value.
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAAUTODIFF
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;
using namespace mlir::nova;

namespace {

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

LogicalResult expandGradient(GradientOp grad) {
  Block *block = grad->getBlock();
  Value loss = grad.getLoss();

  // Ops before the gradient op, in order; values that depend on a wrt value.
  SmallVector<Operation *> ops;
  llvm::DenseSet<Value> dependsOnWrt(grad.getWrt().begin(), grad.getWrt().end());
  for (Operation &op : *block) {
    if (&op == grad.getOperation())
      break;
    ops.push_back(&op);
    bool fromWrt = llvm::any_of(op.getOperands(),
                                [&](Value v) { return dependsOnWrt.contains(v); });
    if (fromWrt)
      for (Value r : op.getResults())
        if (isFloatTensor(r))
          dependsOnWrt.insert(r);
  }

  // Values the loss depends on.
  llvm::DenseSet<Value> lossDependsOn{loss};
  for (Operation *op : llvm::reverse(ops))
    if (llvm::any_of(op->getResults(), [&](Value r) { return lossDependsOn.contains(r); }))
      lossDependsOn.insert(op->operand_begin(), op->operand_end());

  // With activations kept in bf16 asked for, the forward's products are
  // marked for nova-bf16-saved-activations (which rounds only forward
  // values: a weight's gradient, also a product's output read late, stays
  // f32), and the mark goes with them to linalg.
  auto activations = grad->getParentOfType<ModuleOp>()->getAttrOfType<StringAttr>(kActivationPrecisionAttr);
  if (activations && activations.getValue() == "bf16")
    for (Operation *op : ops)
      if (isa<MatmulOp>(op) && lossDependsOn.contains(op->getResult(0)))
        op->setAttr(kForwardProductAttr, UnitAttr::get(op->getContext()));

  OpBuilder b(grad);
  Location loc = grad.getLoc();
  llvm::DenseMap<Value, Value> cotangent;
  auto accumulate = [&](Value v, Value ct) {
    auto [it, inserted] = cotangent.try_emplace(v, ct);
    if (!inserted)
      it->second = b.create<AddOp>(loc, it->second, ct);
  };
  accumulate(loss, b.create<ConstantOp>(loc, loss.getType(), b.getF64FloatAttr(1.0)));

  for (Operation *op : llvm::reverse(ops)) {
    if (op->getNumResults() != 1)
      continue;
    Value result = op->getResult(0);
    auto ct = cotangent.find(result);
    if (ct == cotangent.end() || !dependsOnWrt.contains(result))
      continue;
    auto diff = dyn_cast<NovaDifferentiable>(op);
    if (!diff)
      return op->emitOpError("has no derivative, but the loss depends on it "
                             "through a value being differentiated");
    SmallVector<Value> operandCts;
    b.setInsertionPoint(grad);
    if (failed(diff.buildVjp(b, ValueRange{ct->second}, operandCts)))
      return failure();
    for (auto [operand, oct] : llvm::zip(op->getOperands(), operandCts))
      if (oct && dependsOnWrt.contains(operand) && lossDependsOn.contains(operand))
        accumulate(operand, oct);
  }

  SmallVector<Value> results;
  for (Value w : grad.getWrt()) {
    Value ct = cotangent.lookup(w);
    if (!ct)
      ct = b.create<ConstantOp>(loc, w.getType(), b.getF64FloatAttr(0.0));
    results.push_back(ct);
  }
  grad.replaceAllUsesWith(results);
  grad.erase();
  return success();
}

struct NovaAutodiff : mlir::nova::impl::NovaAutodiffBase<NovaAutodiff> {
  void runOnOperation() override {
    SmallVector<GradientOp> grads;
    getOperation().walk([&](GradientOp g) { grads.push_back(g); });
    for (GradientOp g : grads)
      if (failed(expandGradient(g)))
        return signalPassFailure();
  }
};

} // namespace
