//===- MatmulKernel.cpp - recognising a vectorizable matmul ------*- C++ -*-===//

#include "compiler/transforms/MatmulKernel.h"

using namespace mlir;

int64_t mlir::nova::MatmulOperands::batch() const {
  int64_t b = 1;
  for (int64_t d = 0; d < batchRank; ++d)
    b *= outType.getDimSize(d);
  return b;
}

std::optional<mlir::nova::MatmulOperands> mlir::nova::matchMatmul(linalg::GenericOp op) {
  auto tag = op->getAttrOfType<StringAttr>("nova.kernel");
  if (!tag || tag.getValue() != "matmul" || !op.hasPureBufferSemantics() ||
      op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
    return std::nullopt;
  MatmulOperands m;
  m.lhs = op.getDpsInputs()[0];
  m.rhs = op.getDpsInputs()[1];
  m.out = op.getDpsInits()[0];
  auto lhsType = dyn_cast<MemRefType>(m.lhs.getType());
  auto rhsType = dyn_cast<MemRefType>(m.rhs.getType());
  m.outType = dyn_cast<MemRefType>(m.out.getType());
  if (!lhsType || !rhsType || !m.outType || !lhsType.hasStaticShape() ||
      !rhsType.hasStaticShape() || !m.outType.hasStaticShape() ||
      !m.outType.getLayout().isIdentity() || !rhsType.getLayout().isIdentity())
    return std::nullopt;
  Type elem = m.outType.getElementType();
  if (!elem.isF32() && !elem.isF64())
    return std::nullopt;
  int64_t rank = m.outType.getRank();
  m.batchRank = rank - 2;
  m.M = m.outType.getDimSize(rank - 2);
  m.N = m.outType.getDimSize(rank - 1);
  m.K = rhsType.getDimSize(rank - 2);
  // lhs is [.., m, k] or [.., k, m]: the map's last result tells which.
  AffineMap lhsMap = op.getIndexingMapsArray()[0];
  auto last = dyn_cast<AffineDimExpr>(lhsMap.getResult(rank - 1));
  if (!last)
    return std::nullopt;
  m.transposeA = last.getPosition() == static_cast<unsigned>(m.batchRank);
  return m;
}
