//===- Bf16SavedActivations.cpp - the nova-bf16-saved-activations pass ---===//
//
// With activations in bf16 asked for (nova::set_activation_precision, the
// module's nova.activation_precision = "bf16"), a forward product's output
// that the step keeps for the backward is kept rounded to bf16, as
// PyTorch's autocast keeps a linear layer's output. In a GPT that is the
// MLP's pre-activation h = x W1 + b1, the largest value a layer keeps (4d
// floats a token): the GELU forward and, after nova-rematerialize, the
// GELU recomputed for W2's gradient and the GELU's gradient all read it.
//
// Runs after elementwise fusion, so the value is the one the step keeps
// (a product's output with its bias add fused after it). Only values all
// of whose readers are elementwise linalg.generics (also through reshapes)
// are taken: each reader's body widens the bf16 value (arith.extf) where
// it read the f32 one, so every reader sees the same rounded value. The
// rounding copy is fused into the elementwise op that makes the value (the
// bias add: the product's epilogue once outlined; linalg's elementwise
// fusion, as in nova-fuse-elementwise), which then writes bf16 itself; a
// product's bare output keeps the copy after it, which the outliner keeps
// in the product's kernel as its epilogue. Either way the f32 value
// no longer exists. A value read by anything else (a LayerNorm or
// attention kernel, a product directly, the step's results) stays f32:
// those are the residual stream's, which autocast keeps in f32 too, and
// qkv (nova-bf16-attention-qkv's, exact). Products nova-autodiff did not
// mark as the forward's (kForwardProductAttr) are left alone: a weight's
// gradient is a product's output read late too.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Bf16Copies.h"
#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVABF16SAVEDACTIVATIONS
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

/// An all-parallel linalg.generic on tensors that is not a product.
bool elementwise(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic && !nova::isTaggedMatmul(op) && generic.hasPureTensorSemantics() &&
         generic.getNumLoops() == generic.getNumParallelLoops();
}

/// A forward product (kForwardProductAttr).
bool forwardProduct(Operation *op) { return op && nova::isTaggedMatmul(op) && op->hasAttr(nova::kForwardProductAttr); }

/// Whether `v` is a forward product's f32 output: its result, or the
/// result of an elementwise op (a bias add, a scaling) of which one input
/// is the product's result, also reshaped, that only it reads.
bool madeByProduct(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  Operation *def = v.getDefiningOp();
  if (!type || !type.getElementType().isF32() || !def || def->getNumResults() != 1)
    return false;
  if (forwardProduct(def))
    return true;
  if (!elementwise(def))
    return false;
  for (Value in : cast<linalg::GenericOp>(def).getDpsInputs()) {
    SmallVector<Operation *> chain;
    Value root = nova::rearrangedRoot(in, chain);
    if (forwardProduct(root.getDefiningOp()) && root.hasOneUse() &&
        llvm::all_of(chain, [](Operation *op) { return op->getResult(0).hasOneUse(); }))
      return true;
  }
  return false;
}

/// `copy` (a rounding copy of `v`, its one reader) fused with the
/// elementwise op that makes `v` (linalg's elementwise fusion, as
/// nova-fuse-elementwise fuses): one op rounding what it yields into a bf16
/// tensor, and `v` gone; nothing where `v` is not made so.
void fuseIntoMaker(Value v, Value copy) {
  auto maker = dyn_cast_or_null<linalg::GenericOp>(v.getDefiningOp());
  auto copyOp = copy.getDefiningOp<linalg::GenericOp>();
  OpOperand &read = copyOp->getOpOperand(0);
  if (!maker || !elementwise(maker) || !v.hasOneUse() || !linalg::areElementwiseOpsFusable(&read))
    return;
  IRRewriter rewriter(copyOp);
  FailureOr<linalg::ElementwiseOpFusionResult> fused = linalg::fuseElementwiseOps(rewriter, &read);
  if (failed(fused))
    return;
  rewriter.replaceAllUsesWith(copy, fused->replacements.lookup(copy));
  Value init = maker.getDpsInits()[0];
  rewriter.eraseOp(copyOp);
  rewriter.eraseOp(maker);
  if (auto empty = init.getDefiningOp<tensor::EmptyOp>(); empty && empty->use_empty())
    rewriter.eraseOp(empty);
}

/// A reader of a value: an elementwise op's input operand, and the
/// reshapes from the value to it, first to last.
struct Reader {
  OpOperand *operand;
  SmallVector<Operation *> chain;
};

/// The readers of `v` through collapse_shape / expand_shape, or nothing if
/// anything else (not an elementwise op's input) uses it.
bool collectReaders(Value v, SmallVector<Operation *> &chain, SmallVectorImpl<Reader> &readers) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(user)) {
      chain.push_back(user);
      bool ok = collectReaders(user->getResult(0), chain, readers);
      chain.pop_back();
      if (!ok)
        return false;
      continue;
    }
    if (!elementwise(user) || cast<linalg::GenericOp>(user).isDpsInit(&use))
      return false;
    readers.push_back({&use, chain});
  }
  return true;
}

struct NovaBf16SavedActivations : mlir::nova::impl::NovaBf16SavedActivationsBase<NovaBf16SavedActivations> {
  using NovaBf16SavedActivationsBase::NovaBf16SavedActivationsBase;

  void runOnOperation() override {
    ModuleOp top = getOperation();
    auto precision = top->getAttrOfType<StringAttr>(nova::kActivationPrecisionAttr);
    if (!precision || precision.getValue() != "bf16")
      return;
    for (auto step : top.getOps<func::FuncOp>()) {
      if (step.isExternal())
        continue;
      // Each op's place among the step's computing ops (destination-style:
      // linalg's and nova's kernels; not constants, empties, reshapes):
      // how far a value is kept.
      llvm::DenseMap<Operation *, int64_t> position;
      int64_t computing = 0;
      for (Operation &op : step.getBody().front()) {
        position[&op] = computing;
        if (isa<DestinationStyleOpInterface>(op))
          ++computing;
      }
      SmallVector<Value> values;
      for (Operation &op : step.getBody().front())
        if (op.getNumResults() == 1 && madeByProduct(op.getResult(0)))
          values.push_back(op.getResult(0));
      for (Value v : values)
        keepRounded(v, position);
    }
    top.walk([](linalg::GenericOp op) { op->removeAttr(nova::kForwardProductAttr); });
  }

  void keepRounded(Value v, const llvm::DenseMap<Operation *, int64_t> &position) {
    SmallVector<Operation *> chain;
    SmallVector<Reader> readers;
    if (!collectReaders(v, chain, readers) || readers.empty())
      return;
    int64_t made = position.lookup(v.getDefiningOp()), last = made;
    for (const Reader &r : readers)
      last = std::max(last, position.lookup(r.operand->getOwner()));
    if (last - made < keptOps)
      return;
    Value copy = nova::roundedCopy(v, nullptr);
    llvm::SetVector<Operation *> rearranged;
    for (Reader &r : readers) {
      nova::readWidened(*r.operand, r.chain.empty() ? copy : nova::rearrangedLike(copy, r.chain));
      rearranged.insert(r.chain.begin(), r.chain.end());
    }
    for (Operation *op : llvm::reverse(rearranged))
      if (op->use_empty())
        nova::eraseRearrangement(op);
    // The op making `v` (its bias add) makes the copy itself.
    fuseIntoMaker(v, copy);
  }
};

} // namespace
