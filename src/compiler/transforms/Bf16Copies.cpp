//===- Bf16Copies.cpp - bf16 copies of f32 tensors a kernel reads -------===//
//
// See Bf16Copies.h.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Bf16Copies.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>
#include <functional>

using namespace mlir;

bool mlir::nova::rearranges(Operation *op) {
  if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(op))
    return true;
  auto transpose = dyn_cast<linalg::TransposeOp>(op);
  return transpose && transpose.hasPureTensorSemantics();
}

Value mlir::nova::rearrangedRoot(Value v, SmallVectorImpl<Operation *> &chain) {
  while (Operation *def = v.getDefiningOp()) {
    if (!rearranges(def))
      break;
    chain.push_back(def);
    v = def->getOperand(0);
  }
  std::reverse(chain.begin(), chain.end());
  return v;
}

Value mlir::nova::roundedCopy(Value source, Operation *before) {
  auto type = cast<RankedTensorType>(source.getType());
  OpBuilder b(source.getContext());
  if (before)
    b.setInsertionPoint(before);
  else if (Operation *def = source.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(cast<BlockArgument>(source).getOwner());
  Location loc = source.getLoc();
  Value empty = b.create<tensor::EmptyOp>(loc, type.getShape(), b.getBF16Type());
  const unsigned rank = unsigned(type.getRank());
  AffineMap identity = b.getMultiDimIdentityMap(rank);
  auto copy = b.create<linalg::GenericOp>(
      loc, TypeRange{empty.getType()}, ValueRange{source}, ValueRange{empty}, ArrayRef<AffineMap>{identity, identity},
      SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        nb.create<linalg::YieldOp>(l, ValueRange{nb.create<arith::TruncFOp>(l, nb.getBF16Type(), args[0])});
      });
  return copy.getResult(0);
}

Value mlir::nova::rearrangedLike(Value copy, ArrayRef<Operation *> chain) {
  OpBuilder b = OpBuilder::atBlockBegin(copy.getParentBlock());
  b.setInsertionPointAfterValue(copy);
  for (Operation *op : chain) {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    if (auto transpose = dyn_cast<linalg::TransposeOp>(op)) {
      Value empty = b.create<tensor::EmptyOp>(op->getLoc(), type.getShape(), b.getBF16Type());
      copy = b.create<linalg::TransposeOp>(op->getLoc(), copy, empty, transpose.getPermutation())->getResult(0);
      continue;
    }
    IRMapping map;
    map.map(op->getOperand(0), copy);
    Operation *clone = b.clone(*op, map);
    clone->getResult(0).setType(RankedTensorType::get(type.getShape(), b.getBF16Type()));
    copy = clone->getResult(0);
  }
  return copy;
}

void mlir::nova::readWidened(OpOperand &operand, Value bf16) {
  auto generic = cast<linalg::GenericOp>(operand.getOwner());
  operand.set(bf16);
  BlockArgument arg = generic.getMatchingBlockArgument(&operand);
  Type wide = arg.getType();
  arg.setType(cast<RankedTensorType>(bf16.getType()).getElementType());
  Block *body = arg.getOwner();
  auto at = body->begin();
  while (auto ext = dyn_cast<arith::ExtFOp>(*at)) {
    if (!isa<BlockArgument>(ext.getIn()))
      break;
    ++at;
  }
  OpBuilder b(body, at);
  auto widened = b.create<arith::ExtFOp>(generic.getLoc(), wide, arg);
  arg.replaceAllUsesExcept(widened, widened);
}

void mlir::nova::eraseRearrangement(Operation *op) {
  SmallVector<Value> operands(op->getOperands());
  op->erase();
  for (Value operand : operands)
    if (auto empty = operand.getDefiningOp<tensor::EmptyOp>(); empty && empty->use_empty())
      empty->erase();
}

void mlir::nova::copyAttentionQkv(func::FuncOp step, function_ref<bool(AttentionKernelOp)> roundsQkv,
                                  Bf16CopyMap &copies) {
  SmallVector<AttentionKernelOp> readers;
  step.walk([&](AttentionKernelOp op) {
    if (op.hasPureTensorSemantics() && roundsQkv(op) &&
        cast<RankedTensorType>(op.getInputs()[0].getType()).getElementType().isF32())
      readers.push_back(op);
  });
  llvm::DenseMap<Value, bool> onlyAttention; // by root
  std::function<bool(Value)> attentionReadsOnly = [&](Value v) {
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (auto op = dyn_cast<AttentionKernelOp>(user)) {
        if (use.getOperandNumber() != 0 || !llvm::is_contained(readers, op))
          return false;
      } else if (!isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(user) ||
                 !attentionReadsOnly(user->getResult(0))) {
        return false;
      }
    }
    return true;
  };
  llvm::SetVector<Operation *> rearranged;
  for (AttentionKernelOp op : readers) {
    SmallVector<Operation *> chain;
    Value root = rearrangedRoot(op.getInputs()[0], chain);
    if (isa<BlockArgument>(root) || !cast<RankedTensorType>(root.getType()).getElementType().isF32())
      continue;
    auto [only, inserted] = onlyAttention.try_emplace(root, false);
    if (inserted)
      only->second = attentionReadsOnly(root);
    if (!only->second)
      continue;
    Value &copy = copies[{root, nullptr}];
    if (!copy)
      copy = roundedCopy(root, nullptr);
    op->setOperand(0, rearrangedLike(copy, chain));
    rearranged.insert(chain.begin(), chain.end());
  }
  for (Operation *op : llvm::reverse(rearranged))
    if (op->use_empty())
      eraseRearrangement(op);
}
