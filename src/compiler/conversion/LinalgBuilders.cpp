//===- LinalgBuilders.cpp - shared lowering scaffolding ----------*- C++ -*-===//

#include "compiler/conversion/LinalgBuilders.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

Value mlir::nova::scalarConstant(OpBuilder &b, Location loc, Type elem, double v) {
  if (isa<FloatType>(elem))
    return b.create<arith::ConstantOp>(loc, b.getFloatAttr(elem, v));
  return b.create<arith::ConstantOp>(loc, b.getIntegerAttr(elem, static_cast<int64_t>(v)));
}

Value mlir::nova::emptyOf(OpBuilder &b, Location loc, RankedTensorType type) {
  return b.create<tensor::EmptyOp>(loc, type.getShape(), type.getElementType());
}

Value mlir::nova::filled(OpBuilder &b, Location loc, RankedTensorType type, double value) {
  Value scalar = scalarConstant(b, loc, type.getElementType(), value);
  return b.create<linalg::FillOp>(loc, scalar, emptyOf(b, loc, type)).getResult(0);
}

Value mlir::nova::parallelGeneric(OpBuilder &b, Location loc, RankedTensorType out,
                                  ValueRange inputs, ArrayRef<AffineMap> inputMaps,
                                  ElementFn element) {
  SmallVector<AffineMap> maps(inputMaps);
  maps.push_back(b.getMultiDimIdentityMap(out.getRank()));
  SmallVector<utils::IteratorType> iterators(out.getRank(), utils::IteratorType::parallel);
  auto generic = b.create<linalg::GenericOp>(
      loc, TypeRange{out}, inputs, ValueRange{emptyOf(b, loc, out)}, maps, iterators,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        nb.create<linalg::YieldOp>(l, element(nb, l, args.drop_back()));
      });
  return generic.getResult(0);
}

Value mlir::nova::elementwiseGeneric(OpBuilder &b, Location loc, RankedTensorType out,
                                     ValueRange inputs, ElementFn element) {
  SmallVector<AffineMap> maps(inputs.size(), b.getMultiDimIdentityMap(out.getRank()));
  return parallelGeneric(b, loc, out, inputs, maps, element);
}

AffineMap mlir::nova::dropLastDimMap(int64_t rank, MLIRContext *ctx) {
  SmallVector<AffineExpr> exprs;
  for (int64_t i = 0; i + 1 < rank; ++i)
    exprs.push_back(getAffineDimExpr(i, ctx));
  return AffineMap::get(rank, 0, exprs, ctx);
}

Value mlir::nova::transposed(OpBuilder &b, Location loc, Value value, ArrayRef<int64_t> perm) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(type.getDimSize(p));
  Value init = b.create<tensor::EmptyOp>(loc, shape, type.getElementType());
  return b.create<linalg::TransposeOp>(loc, value, init, perm)->getResult(0);
}
