//===- StructuredToLinalg.cpp - contraction, reductions, layout --*- C++ -*-===//
//
// matmul       → contraction linalg.generic over (batch..., m, k, n), init 0.
// reduce_*     → linalg.generic with reduction iterators over a filled init;
//                mean divides the sum by the element count afterwards.
// softmax      → nova.reduce_max/broadcast/sub/exp/reduce_sum/div, which the
//                same conversion then lowers (one definition of the math);
//                log_softmax likewise, ending in a subtraction of the log-sum.
// one_hot      → generic comparing linalg.index of the class dim with the label.
// broadcast    → generic reading stretched dims at index 0.
// reshape      → tensor.collapse_shape to 1-D, then tensor.expand_shape.
// transpose    → linalg.transpose.
// constant     → linalg.fill of a scalar arith.constant.
// causal_attention(_grad) → nova.attention_kernel (destination style) into
//                a tensor.empty: the target expands it (the CPU's
//                nova-vectorize-attention), not linalg.
// layer_norm(_grad) → nova.layer_norm_kernel likewise (nova-vectorize-rows);
// cross_entropy(_grad) → nova.cross_entropy_kernel likewise.
//
//===----------------------------------------------------------------------===//

#include "compiler/conversion/LinalgBuilders.h"
#include "compiler/conversion/NovaToLinalg.h"
#include "compiler/dialect/NovaDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

using namespace mlir;
using namespace mlir::nova;

namespace {

struct MatmulPattern : OpConversionPattern<MatmulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MatmulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    MLIRContext *ctx = op.getContext();
    int64_t batch = type.getRank() - 2;
    // Loop order (batch..., m, k, n): the innermost loop runs along contiguous
    // rows of rhs and of the result with no loop-carried reduction, so the
    // scalar loops that linalg-to-loops emits vectorize in LLVM.
    int64_t loops = batch + 3;
    auto d = [&](int64_t i) { return getAffineDimExpr(i, ctx); };
    SmallVector<AffineExpr> lhs, rhs, out;
    for (int64_t i = 0; i < batch; ++i) {
      lhs.push_back(d(i));
      rhs.push_back(d(i));
      out.push_back(d(i));
    }
    AffineExpr m = d(batch), k = d(batch + 1), n = d(batch + 2);
    if (op.getTransposeA()) lhs.append({k, m}); else lhs.append({m, k});
    rhs.append({k, n});
    out.append({m, n});
    // A transposed rhs is materialised as [.., k, n] first: O(k n) copies
    // buy contiguous rhs rows for the O(m k n) loop (see VectorizeMatmul).
    Value rhsValue = adaptor.getRhs();
    if (op.getTransposeB()) {
      SmallVector<int64_t> perm;
      for (int64_t i = 0; i < batch; ++i)
        perm.push_back(i);
      perm.append({batch + 1, batch});
      rhsValue = transposed(rewriter, loc, rhsValue, perm);
    }
    SmallVector<AffineMap> maps = {AffineMap::get(loops, 0, lhs, ctx),
                                   AffineMap::get(loops, 0, rhs, ctx),
                                   AffineMap::get(loops, 0, out, ctx)};
    SmallVector<utils::IteratorType> iterators(loops, utils::IteratorType::parallel);
    iterators[batch + 1] = utils::IteratorType::reduction;
    Value init = filled(rewriter, loc, type, 0.0);
    auto generic = rewriter.create<linalg::GenericOp>(
        loc, TypeRange{type}, ValueRange{adaptor.getLhs(), rhsValue},
        ValueRange{init}, maps, iterators,
        [](OpBuilder &b, Location l, ValueRange a) {
          Value prod = b.create<arith::MulFOp>(l, a[0], a[1]);
          b.create<linalg::YieldOp>(l, ValueRange{b.create<arith::AddFOp>(l, a[2], prod)});
        });
    // Tells nova-vectorize-matmul this generic is a plain matmul.
    generic->setAttr("nova.kernel", rewriter.getStringAttr("matmul"));
    if (op->hasAttr(kForwardProductAttr))
      generic->setAttr(kForwardProductAttr, rewriter.getUnitAttr());
    rewriter.replaceOp(op, generic.getResults());
    return success();
  }
};

/// Sum or max over `axes`; returns the reduced tensor of `resultType`.
Value reduce(OpBuilder &b, Location loc, Value input, ArrayRef<int64_t> axes,
             RankedTensorType resultType, bool isMax) {
  auto inType = cast<RankedTensorType>(input.getType());
  MLIRContext *ctx = b.getContext();
  int64_t rank = inType.getRank();
  bool keepDims = resultType.getRank() == rank;
  SmallVector<AffineExpr> outExprs;
  SmallVector<utils::IteratorType> iterators;
  for (int64_t i = 0; i < rank; ++i) {
    bool reduced = llvm::is_contained(axes, i);
    iterators.push_back(reduced ? utils::IteratorType::reduction
                                : utils::IteratorType::parallel);
    if (!reduced)
      outExprs.push_back(getAffineDimExpr(i, ctx));
    else if (keepDims)
      outExprs.push_back(getAffineConstantExpr(0, ctx));
  }
  double initValue = isMax ? -std::numeric_limits<double>::infinity() : 0.0;
  Value init = filled(b, loc, resultType, initValue);
  SmallVector<AffineMap> maps = {b.getMultiDimIdentityMap(rank),
                                 AffineMap::get(rank, 0, outExprs, ctx)};
  auto generic = b.create<linalg::GenericOp>(
      loc, TypeRange{resultType}, ValueRange{input}, ValueRange{init}, maps,
      iterators, [isMax](OpBuilder &nb, Location l, ValueRange a) {
        Value r = isMax ? nb.create<arith::MaximumFOp>(l, a[0], a[1]).getResult()
                        : nb.create<arith::AddFOp>(l, a[0], a[1]).getResult();
        nb.create<linalg::YieldOp>(l, r);
      });
  return generic.getResult(0);
}

template <typename OpTy>
struct ReducePattern : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    constexpr bool isMax = std::is_same_v<OpTy, ReduceMaxOp>;
    Value r = reduce(rewriter, loc, adaptor.getInput(), op.getAxes(), type, isMax);
    if constexpr (std::is_same_v<OpTy, ReduceMeanOp>) {
      auto inType = cast<RankedTensorType>(op.getInput().getType());
      int64_t count = 1;
      for (int64_t a : op.getAxes())
        count *= inType.getDimSize(a);
      Value scale = scalarConstant(rewriter, loc, type.getElementType(),
                                   1.0 / static_cast<double>(count));
      r = elementwiseGeneric(rewriter, loc, type, r, [scale](OpBuilder &b, Location l, ValueRange a) {
        return b.create<arith::MulFOp>(l, a[0], scale).getResult();
      });
    }
    rewriter.replaceOp(op, r);
    return success();
  }
};

/// The shared, stable start of softmax and log_softmax, as nova ops along
/// `axis`: x - max(x), its exp, and the sum of that (dims kept).
struct ShiftedExp {
  Value shifted, exp, sum;
};
ShiftedExp shiftedExp(OpBuilder &b, Location loc, Value x, int64_t axis) {
  auto type = cast<RankedTensorType>(x.getType());
  auto axes = b.getDenseI64ArrayAttr({axis});
  auto keep = b.getBoolAttr(true);
  Value m = b.create<ReduceMaxOp>(loc, x, axes, keep);
  Value shifted = b.create<SubOp>(loc, x, b.create<BroadcastOp>(loc, type, m));
  Value e = b.create<ExpOp>(loc, shifted);
  return {shifted, e, b.create<ReduceSumOp>(loc, e, axes, keep)};
}

struct SoftmaxPattern : OpConversionPattern<SoftmaxOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SoftmaxOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    // exp(x - max) / sum(exp(x - max))
    Location loc = op.getLoc();
    ShiftedExp s = shiftedExp(rewriter, loc, adaptor.getInput(), static_cast<int64_t>(op.getAxis()));
    rewriter.replaceOpWithNewOp<DivOp>(op, s.exp,
                                       rewriter.create<BroadcastOp>(loc, op.getType(), s.sum));
    return success();
  }
};

struct LogSoftmaxPattern : OpConversionPattern<LogSoftmaxOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LogSoftmaxOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    // (x - max) - log(sum(exp(x - max)))
    Location loc = op.getLoc();
    ShiftedExp s = shiftedExp(rewriter, loc, adaptor.getInput(), static_cast<int64_t>(op.getAxis()));
    Value logSum = rewriter.create<LogOp>(loc, s.sum);
    rewriter.replaceOpWithNewOp<SubOp>(op, s.shifted,
                                       rewriter.create<BroadcastOp>(loc, op.getType(), logSum));
    return success();
  }
};

struct OneHotPattern : OpConversionPattern<OneHotOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OneHotOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto out = cast<RankedTensorType>(op.getType());
    int64_t rank = out.getRank();
    Type elem = out.getElementType();
    Value r = parallelGeneric(
        rewriter, op.getLoc(), out, adaptor.getLabels(), dropLastDimMap(rank, op.getContext()),
        [&](OpBuilder &b, Location l, ValueRange a) {
          Value cls = b.create<linalg::IndexOp>(l, rank - 1);
          Value label = b.create<arith::IndexCastOp>(l, b.getIndexType(), a[0]);
          Value hit = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, cls, label);
          return b.create<arith::SelectOp>(l, hit, scalarConstant(b, l, elem, 1.0),
                                           scalarConstant(b, l, elem, 0.0))
              .getResult();
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct BroadcastPattern : OpConversionPattern<BroadcastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(BroadcastOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto in = cast<RankedTensorType>(op.getInput().getType());
    auto out = cast<RankedTensorType>(op.getType());
    MLIRContext *ctx = op.getContext();
    int64_t offset = out.getRank() - in.getRank();
    SmallVector<AffineExpr> inExprs;
    for (int64_t i = 0; i < in.getRank(); ++i) {
      bool stretched = in.getDimSize(i) == 1 && out.getDimSize(i + offset) != 1;
      inExprs.push_back(stretched ? getAffineConstantExpr(0, ctx)
                                  : getAffineDimExpr(i + offset, ctx));
    }
    rewriter.replaceOp(op, parallelGeneric(rewriter, loc, out, adaptor.getInput(),
                                           AffineMap::get(out.getRank(), 0, inExprs, ctx),
                                           [](OpBuilder &, Location, ValueRange a) { return a[0]; }));
    return success();
  }
};

struct ReshapePattern : OpConversionPattern<ReshapeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReshapeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto in = cast<RankedTensorType>(op.getInput().getType());
    auto out = cast<RankedTensorType>(op.getType());
    auto flatType = RankedTensorType::get({in.getNumElements()}, in.getElementType());
    auto allDims = [](int64_t rank) {
      ReassociationIndices group;
      for (int64_t i = 0; i < rank; ++i)
        group.push_back(i);
      return SmallVector<ReassociationIndices>{group};
    };
    // Rank 0 <-> [1] uses an empty reassociation.
    auto reassociation = [&](int64_t rank) {
      return rank == 0 ? SmallVector<ReassociationIndices>{} : allDims(rank);
    };
    Value flat = adaptor.getInput();
    if (in.getRank() == 0)
      flat = rewriter.create<tensor::ExpandShapeOp>(loc, flatType, flat,
                                                    reassociation(0));
    else if (in.getRank() > 1)
      flat = rewriter.create<tensor::CollapseShapeOp>(loc, flatType, flat,
                                                      reassociation(in.getRank()));
    Value result = flat;
    if (out.getRank() == 0)
      result = rewriter.create<tensor::CollapseShapeOp>(loc, out, flat, reassociation(0));
    else if (out.getRank() > 1)
      result = rewriter.create<tensor::ExpandShapeOp>(loc, out, flat,
                                                      reassociation(out.getRank()));
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct TransposePattern : OpConversionPattern<TransposeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TransposeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, transposed(rewriter, op.getLoc(), adaptor.getInput(),
                                      op.getPermutation()));
    return success();
  }
};

struct ConstantPattern : OpConversionPattern<ConstantOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ConstantOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    rewriter.replaceOp(op, filled(rewriter, op.getLoc(), type,
                                  op.getValue().convertToDouble()));
    return success();
  }
};

/// An op the target runs as one kernel (attention, LayerNorm,
/// cross-entropy, forward or gradient) → its destination-style kernel op into a tensor.empty, with
/// the op's attributes and, for a gradient, `backward`.
template <typename Op, typename KernelOp, bool Backward>
struct ToKernelOpPattern : OpConversionPattern<Op> {
  using OpConversionPattern<Op>::OpConversionPattern;
  using Adaptor = typename OpConversionPattern<Op>::OpAdaptor;
  LogicalResult matchAndRewrite(Op op, Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    OperationState state(op.getLoc(), KernelOp::getOperationName());
    state.addOperands(adaptor.getOperands());
    state.addOperands(emptyOf(rewriter, op.getLoc(), type));
    state.addTypes(type);
    state.addAttributes(op->getAttrs());
    if constexpr (KernelOp::template hasTrait<OpTrait::AttrSizedOperandSegments>())
      state.addAttribute(KernelOp::getOperandSegmentSizeAttr(),
                         rewriter.getDenseI32ArrayAttr({static_cast<int32_t>(adaptor.getOperands().size()), 1}));
    if (Backward)
      state.addAttribute("backward", rewriter.getUnitAttr());
    rewriter.replaceOp(op, rewriter.create(state)->getResults());
    return success();
  }
};

} // namespace

void mlir::nova::populateStructuredToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<MatmulPattern, ReducePattern<ReduceSumOp>, ReducePattern<ReduceMeanOp>,
               ReducePattern<ReduceMaxOp>, SoftmaxPattern, LogSoftmaxPattern,
               OneHotPattern, BroadcastPattern,
               ReshapePattern, TransposePattern, ConstantPattern,
               ToKernelOpPattern<CausalAttentionOp, AttentionKernelOp, false>,
               ToKernelOpPattern<CausalAttentionGradOp, AttentionKernelOp, true>,
               ToKernelOpPattern<LayerNormOp, LayerNormKernelOp, false>,
               ToKernelOpPattern<LayerNormGradOp, LayerNormKernelOp, true>,
               ToKernelOpPattern<CrossEntropyOp, CrossEntropyKernelOp, false>,
               ToKernelOpPattern<CrossEntropyGradOp, CrossEntropyKernelOp, true>>(
      patterns.getContext());
}
