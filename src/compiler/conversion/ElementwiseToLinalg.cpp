//===- ElementwiseToLinalg.cpp - elementwise nova ops → linalg ---*- C++ -*-===//
//
// Every elementwise op becomes one all-parallel linalg.generic with identity
// maps over a tensor.empty init; its body is the scalar formula below. The
// formulas are the same as the reference interpreter's (Interpreter.cpp).
// Chains of such generics are fused later by linalg-fuse-elementwise-ops.
//
//===----------------------------------------------------------------------===//

#include "compiler/conversion/LinalgBuilders.h"
#include "compiler/conversion/NovaToLinalg.h"
#include "compiler/dialect/NovaDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace mlir::nova;

namespace {

using ScalarFn = std::function<Value(OpBuilder &, Location, ValueRange)>;

Value constantLike(OpBuilder &b, Location loc, Value like, double v) {
  return scalarConstant(b, loc, like.getType(), v);
}

/// Rewrites `op` (all operands and the result of the same type) into a
/// parallel linalg.generic whose body applies `fn` to the scalar operands.
LogicalResult lowerElementwise(Operation *op, ConversionPatternRewriter &rewriter,
                               ValueRange operands, const ScalarFn &fn) {
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  rewriter.replaceOp(op, elementwiseGeneric(rewriter, op->getLoc(), type, operands, fn));
  return success();
}

template <typename OpTy>
struct ElementwisePattern : OpConversionPattern<OpTy> {
  ElementwisePattern(MLIRContext *ctx, ScalarFn fn)
      : OpConversionPattern<OpTy>(ctx), fn(std::move(fn)) {}
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    return lowerElementwise(op, rewriter, adaptor.getOperands(), fn);
  }
  ScalarFn fn;
};

template <typename OpTy, typename ArithOp>
void addSimple(RewritePatternSet &patterns) {
  patterns.add<ElementwisePattern<OpTy>>(
      patterns.getContext(), [](OpBuilder &b, Location l, ValueRange a) -> Value {
        return b.create<ArithOp>(l, a).getResult();
      });
}

/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as h + h tanh(x (c +
/// 0.044715 c x^2)) with h = 0.5 x, c = sqrt(2/pi): 7 ops besides the
/// tanh, where the formula as written takes 8.
Value geluTanh(OpBuilder &b, Location l, Value x) {
  const double c = std::sqrt(2.0 / M_PI);
  Value x2 = b.create<arith::MulFOp>(l, x, x);
  Value inner = b.create<arith::AddFOp>(
      l, constantLike(b, l, x, c), b.create<arith::MulFOp>(l, constantLike(b, l, x, 0.044715 * c), x2));
  Value t = b.create<math::TanhOp>(l, b.create<arith::MulFOp>(l, x, inner));
  Value half = b.create<arith::MulFOp>(l, constantLike(b, l, x, 0.5), x);
  return b.create<arith::AddFOp>(l, half, b.create<arith::MulFOp>(l, half, t));
}

/// 0.5 x (1 + erf(x / sqrt(2)))
Value geluErf(OpBuilder &b, Location l, Value x) {
  Value scaled = b.create<arith::MulFOp>(l, x, constantLike(b, l, x, M_SQRT1_2));
  Value onePlus = b.create<arith::AddFOp>(l, constantLike(b, l, x, 1.0),
                                          b.create<math::ErfOp>(l, scaled));
  return b.create<arith::MulFOp>(
      l, b.create<arith::MulFOp>(l, constantLike(b, l, x, 0.5), x), onePlus);
}

struct GeluPattern : OpConversionPattern<GeluOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GeluOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    bool approximate = op.getApproximate();
    return lowerElementwise(
        op, rewriter, adaptor.getOperands(),
        [approximate](OpBuilder &b, Location l, ValueRange a) {
          return approximate ? geluTanh(b, l, a[0]) : geluErf(b, l, a[0]);
        });
  }
};

} // namespace

void mlir::nova::populateElementwiseToLinalgPatterns(RewritePatternSet &patterns) {
  addSimple<AddOp, arith::AddFOp>(patterns);
  addSimple<SubOp, arith::SubFOp>(patterns);
  addSimple<MulOp, arith::MulFOp>(patterns);
  addSimple<DivOp, arith::DivFOp>(patterns);
  addSimple<MaxOp, arith::MaximumFOp>(patterns);
  addSimple<NegOp, arith::NegFOp>(patterns);
  addSimple<ExpOp, math::ExpOp>(patterns);
  addSimple<LogOp, math::LogOp>(patterns);
  addSimple<TanhOp, math::TanhOp>(patterns);
  addSimple<SqrtOp, math::SqrtOp>(patterns);
  addSimple<RsqrtOp, math::RsqrtOp>(patterns);
  addSimple<ErfOp, math::ErfOp>(patterns);
  patterns.add<ElementwisePattern<GreaterOp>>(
      patterns.getContext(), [](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value gt = b.create<arith::CmpFOp>(l, arith::CmpFPredicate::OGT, a[0], a[1]);
        return b.create<arith::SelectOp>(l, gt, constantLike(b, l, a[0], 1.0),
                                         constantLike(b, l, a[0], 0.0));
      });
  patterns.add<ElementwisePattern<ReluOp>>(
      patterns.getContext(), [](OpBuilder &b, Location l, ValueRange a) -> Value {
        return b.create<arith::MaximumFOp>(l, a[0], constantLike(b, l, a[0], 0.0));
      });
  patterns.add<GeluPattern>(patterns.getContext());
}
