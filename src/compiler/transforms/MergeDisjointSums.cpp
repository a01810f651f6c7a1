//===- MergeDisjointSums.cpp - the nova-merge-disjoint-sums pass -*- C++ -*-===//
//
// The gradient of a value sliced into parts (attention's q, k and v columns
// of one qkv projection) is the sum of each part's gradient zero-padded to
// the whole: per part a full-size zero fill and an insert, then an
// elementwise sum reading all of them. Where every operand of such a sum is
// inserts into a zero fill and no two inserted boxes overlap, each element
// has one non-zero term: the sum is the parts inserted into one buffer, and
// when the boxes cover it, that buffer needs no fill at all.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAMERGEDISJOINTSUMS
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

/// `v` as inserts of static boxes into a zero linalg.fill, each used only by
/// the next: the inserts, innermost first, and the fill.
bool zeroPadded(Value v, SmallVectorImpl<tensor::InsertSliceOp> &inserts, linalg::FillOp &fill) {
  SmallVector<tensor::InsertSliceOp> chain;
  while (auto insert = v.getDefiningOp<tensor::InsertSliceOp>()) {
    if (!insert->hasOneUse() || !insert.hasUnitStride() || !insert.getOffsets().empty() ||
        !insert.getSizes().empty())
      return false; // dynamic offsets or sizes
    chain.push_back(insert);
    v = insert.getDest();
  }
  fill = v.getDefiningOp<linalg::FillOp>();
  if (chain.empty() || !fill || !fill->hasOneUse() ||
      !matchPattern(fill.getDpsInputs()[0], m_AnyZeroFloat()))
    return false;
  inserts.append(chain.rbegin(), chain.rend());
  return true;
}

/// An elementwise generic whose body is a sum of all its inputs, each once.
bool isPlainSum(linalg::GenericOp g) {
  if (g.getNumDpsInits() != 1 || g.getNumDpsInputs() < 2 || g.getNumReductionLoops() != 0 ||
      !llvm::all_of(g.getIndexingMapsArray(), [](AffineMap m) { return m.isIdentity(); }))
    return false;
  Block &body = *g.getBody();
  if (static_cast<int64_t>(body.getOperations().size()) != g.getNumDpsInputs())
    return false; // n - 1 adds and the yield
  if (!llvm::all_of(body.without_terminator(), [](Operation &op) { return isa<arith::AddFOp>(op); }))
    return false;
  for (BlockArgument arg : body.getArguments().drop_back())
    if (!arg.hasOneUse())
      return false;
  return body.getArguments().back().use_empty();
}

bool overlap(tensor::InsertSliceOp a, tensor::InsertSliceOp b) {
  for (auto [ao, as, bo, bs] :
       llvm::zip(a.getStaticOffsets(), a.getStaticSizes(), b.getStaticOffsets(), b.getStaticSizes()))
    if (ao + as <= bo || bo + bs <= ao)
      return false;
  return true;
}

void merge(linalg::GenericOp sum) {
  SmallVector<tensor::InsertSliceOp> inserts;
  SmallVector<linalg::FillOp> fills;
  for (Value in : sum.getDpsInputs()) {
    linalg::FillOp fill;
    if (!zeroPadded(in, inserts, fill))
      return;
    fills.push_back(fill);
  }
  int64_t covered = 0;
  for (size_t i = 0; i < inserts.size(); ++i) {
    for (size_t j = i + 1; j < inserts.size(); ++j)
      if (overlap(inserts[i], inserts[j]))
        return;
    covered += cast<RankedTensorType>(inserts[i].getSourceType()).getNumElements();
  }
  auto type = cast<RankedTensorType>(sum.getResult(0).getType());
  OpBuilder b(sum);
  Location loc = sum.getLoc();
  Value into = b.create<tensor::EmptyOp>(loc, type.getShape(), type.getElementType());
  if (covered != type.getNumElements())
    into = b.create<linalg::FillOp>(loc, fills.front().getDpsInputs()[0], into).getResult(0);
  for (tensor::InsertSliceOp insert : inserts)
    into = b.create<tensor::InsertSliceOp>(insert.getLoc(), insert.getSource(), into,
                                           insert.getMixedOffsets(), insert.getMixedSizes(),
                                           insert.getMixedStrides());
  sum.getResult(0).replaceAllUsesWith(into);
  // What fed only the sum goes with it (the empty tensors too: the greedy
  // canonicalizer does not run between here and bufferization).
  SmallVector<Value> inits{sum.getDpsInits()[0]};
  sum.erase();
  for (tensor::InsertSliceOp insert : llvm::reverse(inserts))
    insert.erase();
  for (linalg::FillOp fill : fills) {
    inits.push_back(fill.getDpsInits()[0]);
    fill.erase();
  }
  for (Value init : inits)
    if (auto empty = init.getDefiningOp<tensor::EmptyOp>(); empty && empty->use_empty())
      empty.erase();
}

struct NovaMergeDisjointSums : mlir::nova::impl::NovaMergeDisjointSumsBase<NovaMergeDisjointSums> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> sums;
    getOperation().walk([&](linalg::GenericOp g) {
      if (g.hasPureTensorSemantics() && isPlainSum(g))
        sums.push_back(g);
    });
    for (linalg::GenericOp g : sums)
      merge(g);
  }
};

} // namespace
