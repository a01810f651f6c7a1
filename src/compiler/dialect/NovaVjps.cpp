//===- NovaVjps.cpp - each op's vector-Jacobian product ----------*- C++ -*-===//
//
// One buildVjp per differentiable op: given the cotangent g of its result,
// build the cotangent of each operand from nova ops. These are the op's
// derivative rules, kept beside its shape rules (NovaOps.cpp); the autodiff
// pass only walks the graph. Each rule is checked against central finite
// differences in tests/unit/test_gradients.cpp.
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"

#include <cmath>

using namespace mlir;
using namespace mlir::nova;

namespace {

/// Builds nova ops at one location; result types are inferred.
struct Emitter {
  OpBuilder &b;
  Location loc;

  Value add(Value x, Value y) { return b.create<AddOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<MulOp>(loc, x, y); }
  Value div(Value x, Value y) { return b.create<DivOp>(loc, x, y); }
  Value neg(Value x) { return b.create<NegOp>(loc, x); }
  Value exp(Value x) { return b.create<ExpOp>(loc, x); }
  Value tanh(Value x) { return b.create<TanhOp>(loc, x); }
  Value erf(Value x) { return b.create<ErfOp>(loc, x); }
  Value greater(Value x, Value y) { return b.create<GreaterOp>(loc, x, y); }
  /// A tensor like `like` filled with v.
  Value splat(Value like, double v) {
    return b.create<ConstantOp>(loc, like.getType(), b.getF64FloatAttr(v));
  }
  Value scale(Value x, double v) { return mul(x, splat(x, v)); }
  Value broadcastTo(Value x, Type type) {
    return x.getType() == type ? x : b.create<BroadcastOp>(loc, type, x).getResult();
  }
  Value reshapeTo(Value x, Type type) {
    return x.getType() == type ? x : b.create<ReshapeOp>(loc, type, x).getResult();
  }
  Value sum(Value x, ArrayRef<int64_t> axes, bool keepDims) {
    return b.create<ReduceSumOp>(loc, x, b.getDenseI64ArrayAttr(axes),
                                 b.getBoolAttr(keepDims));
  }
  Value matmul(Value x, Value y, bool ta, bool tb) {
    return b.create<MatmulOp>(loc, x, y, b.getBoolAttr(ta), b.getBoolAttr(tb));
  }
  Value softmax(Value x, int64_t axis) {
    return b.create<SoftmaxOp>(loc, x, b.getI64IntegerAttr(axis));
  }
};

/// Shape of `type` with the dims in `axes` set to 1.
RankedTensorType keepDimsType(RankedTensorType type, ArrayRef<int64_t> axes) {
  SmallVector<int64_t> shape(type.getShape());
  for (int64_t a : axes)
    shape[a] = 1;
  return RankedTensorType::get(shape, type.getElementType());
}

LogicalResult one(SmallVectorImpl<Value> &out, Value v) {
  out.push_back(v);
  return success();
}

LogicalResult two(SmallVectorImpl<Value> &out, Value a, Value c) {
  out.push_back(a);
  out.push_back(c);
  return success();
}

/// Shared by reduce_sum and reduce_mean: g broadcast back over the reduced
/// axes, times `factor`.
Value spreadOverAxes(Emitter &e, Value g, Value input, ArrayRef<int64_t> axes,
                     double factor) {
  auto inType = cast<RankedTensorType>(input.getType());
  Value kept = e.reshapeTo(g, keepDimsType(inType, axes));
  Value spread = e.broadcastTo(kept, inType);
  return factor == 1.0 ? spread : e.scale(spread, factor);
}

} // namespace

// ---- elementwise ------------------------------------------------------------

LogicalResult AddOp::buildVjp(OpBuilder &, ValueRange ct, SmallVectorImpl<Value> &out) {
  return two(out, ct[0], ct[0]);
}

LogicalResult SubOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  Emitter e{b, getLoc()};
  return two(out, ct[0], e.neg(ct[0]));
}

LogicalResult MulOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  Emitter e{b, getLoc()};
  return two(out, e.mul(ct[0], getRhs()), e.mul(ct[0], getLhs()));
}

LogicalResult DivOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // d(a/b) = g/b, -g (a/b) / b
  Emitter e{b, getLoc()};
  Value gOverB = e.div(ct[0], getRhs());
  return two(out, gOverB, e.neg(e.mul(gOverB, getResult())));
}

LogicalResult MaxOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // The larger operand takes the gradient; on a tie, rhs does.
  Emitter e{b, getLoc()};
  Value lhsWins = e.greater(getLhs(), getRhs());
  Value toLhs = e.mul(ct[0], lhsWins);
  return two(out, toLhs, e.sub(ct[0], toLhs));
}

LogicalResult GreaterOp::buildVjp(OpBuilder &, ValueRange, SmallVectorImpl<Value> &out) {
  // A step function: zero derivative almost everywhere.
  return two(out, Value(), Value());
}

LogicalResult NegOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  Emitter e{b, getLoc()};
  return one(out, e.neg(ct[0]));
}

LogicalResult ExpOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  Emitter e{b, getLoc()};
  return one(out, e.mul(ct[0], getResult()));
}

LogicalResult LogOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  Emitter e{b, getLoc()};
  return one(out, e.div(ct[0], getInput()));
}

LogicalResult TanhOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // g (1 - tanh^2)
  Emitter e{b, getLoc()};
  Value y = getResult();
  return one(out, e.mul(ct[0], e.sub(e.splat(y, 1.0), e.mul(y, y))));
}

LogicalResult SqrtOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // g / (2 sqrt(x))
  Emitter e{b, getLoc()};
  return one(out, e.div(e.scale(ct[0], 0.5), getResult()));
}

LogicalResult RsqrtOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // d x^-1/2 = -1/2 x^-3/2 = -1/2 y / x
  Emitter e{b, getLoc()};
  return one(out, e.scale(e.div(e.mul(ct[0], getResult()), getInput()), -0.5));
}

LogicalResult ReluOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // relu'(0) = 0, as in PyTorch.
  Emitter e{b, getLoc()};
  Value x = getInput();
  return one(out, e.mul(ct[0], e.greater(x, e.splat(x, 0.0))));
}

LogicalResult ErfOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // 2/sqrt(pi) exp(-x^2)
  Emitter e{b, getLoc()};
  Value x = getInput();
  Value d = e.scale(e.exp(e.neg(e.mul(x, x))), 2.0 / std::sqrt(M_PI));
  return one(out, e.mul(ct[0], d));
}

LogicalResult GeluOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  Emitter e{b, getLoc()};
  Value x = getInput();
  Value x2 = e.mul(x, x);
  Value d;
  if (getApproximate()) {
    // u = c (x + 0.044715 x^3), t = tanh(u):
    // d = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 * 0.044715 x^2),
    // computed as u = x (c + 0.044715 c x^2) and
    // d = (0.5 t + 0.5) + (1 - t^2) x (0.5 c + 1.5 * 0.044715 c x^2):
    // 13 ops besides the tanh where the formula as written takes 16 (the
    // GELU gradient's epilogue of dy W2^T was 15.5-19% of that kernel's
    // perf samples on the CPU; bench/gelu_bench: the gradient 3.328-3.883x
    // a same-traffic kernel's time before, 2.998-3.255x after).
    const double c = std::sqrt(2.0 / M_PI), k = 0.044715;
    Value u = e.mul(x, e.add(e.splat(x, c), e.scale(x2, k * c)));
    Value t = e.tanh(u);
    Value slope = e.mul(x, e.add(e.splat(x, 0.5 * c), e.scale(x2, 1.5 * k * c)));
    Value sech2 = e.sub(e.splat(x, 1.0), e.mul(t, t));
    d = e.add(e.add(e.scale(t, 0.5), e.splat(x, 0.5)), e.mul(slope, sech2));
  } else {
    // Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi)
    Value cdf = e.scale(e.add(e.splat(x, 1.0), e.erf(e.scale(x, M_SQRT1_2))), 0.5);
    Value pdf = e.scale(e.exp(e.scale(x2, -0.5)), 1.0 / std::sqrt(2.0 * M_PI));
    d = e.add(cdf, e.mul(x, pdf));
  }
  return one(out, e.mul(ct[0], d));
}

// ---- contraction --------------------------------------------------------------

LogicalResult MatmulOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // C = opA(A) opB(B): d opA(A) = g opB(B)^T, d opB(B) = opA(A)^T g; an
  // operand stored transposed receives the transpose, folded into the flags.
  Emitter e{b, getLoc()};
  Value g = ct[0], a = getLhs(), c = getRhs();
  bool ta = getTransposeA(), tb = getTransposeB();
  // The gradient of the smaller operand first: it is the last use of the
  // larger one (a saved activation, typically, beside a weight), which can
  // then be freed before the other gradient, as large as it, is made. The
  // other order holds both at once: for the GPT's MLP, 8 MiB more at the
  // backward's peak.
  auto numel = [](Value v) { return cast<ShapedType>(v.getType()).getNumElements(); };
  auto gradA = [&] { return ta ? e.matmul(c, g, tb, true) : e.matmul(g, c, false, !tb); };
  auto gradB = [&] { return tb ? e.matmul(g, a, true, ta) : e.matmul(a, g, !ta, false); };
  Value da, db;
  if (numel(a) >= numel(c)) {
    db = gradB();
    da = gradA();
  } else {
    da = gradA();
    db = gradB();
  }
  return two(out, da, db);
}

// ---- layout -------------------------------------------------------------------

LogicalResult BroadcastOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // Sum over the added leading dims and the stretched dims, then restore the
  // input's size-1 dims.
  Emitter e{b, getLoc()};
  auto in = getInput().getType();
  auto res = getResult().getType();
  int64_t offset = res.getRank() - in.getRank();
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i < res.getRank(); ++i)
    if (i < offset || (in.getDimSize(i - offset) == 1 && res.getDimSize(i) != 1))
      axes.push_back(i);
  Value g = axes.empty() ? ct[0] : e.sum(ct[0], axes, /*keepDims=*/false);
  return one(out, e.reshapeTo(g, in));
}

LogicalResult ReshapeOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  Emitter e{b, getLoc()};
  return one(out, e.reshapeTo(ct[0], getInput().getType()));
}

LogicalResult TransposeOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = static_cast<int64_t>(i);
  return one(out, b.create<TransposeOp>(getLoc(), ct[0], b.getDenseI64ArrayAttr(inverse)));
}

// ---- reductions ---------------------------------------------------------------

LogicalResult ReduceSumOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  Emitter e{b, getLoc()};
  return one(out, spreadOverAxes(e, ct[0], getInput(), getAxes(), 1.0));
}

LogicalResult ReduceMeanOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  Emitter e{b, getLoc()};
  auto in = getInput().getType();
  int64_t count = 1;
  for (int64_t a : getAxes())
    count *= in.getDimSize(a);
  return one(out, spreadOverAxes(e, ct[0], getInput(), getAxes(),
                                 1.0 / static_cast<double>(count)));
}

LogicalResult ReduceMaxOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // The gradient flows to the elements equal to the max (x == max iff not
  // max > x); ties share it in full, as torch.amax's subgradient does not.
  Emitter e{b, getLoc()};
  Value x = getInput();
  auto in = getInput().getType();
  Value m = e.broadcastTo(e.reshapeTo(getResult(), keepDimsType(in, getAxes())), in);
  Value isMax = e.sub(e.splat(x, 1.0), e.greater(m, x));
  return one(out, e.mul(spreadOverAxes(e, ct[0], x, getAxes(), 1.0), isMax));
}

LogicalResult SoftmaxOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // y (g - sum(g y))
  Emitter e{b, getLoc()};
  Value y = getResult();
  int64_t axis = static_cast<int64_t>(getAxis());
  Value dot = e.broadcastTo(e.sum(e.mul(ct[0], y), {axis}, true), y.getType());
  return one(out, e.mul(y, e.sub(ct[0], dot)));
}

LogicalResult LogSoftmaxOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // g - softmax(x) sum(g)
  Emitter e{b, getLoc()};
  int64_t axis = static_cast<int64_t>(getAxis());
  Value total = e.broadcastTo(e.sum(ct[0], {axis}, true), getType());
  return one(out, e.sub(ct[0], e.mul(e.softmax(getInput(), axis), total)));
}

// ---- slicing and indexing ---------------------------------------------------

LogicalResult SliceOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // Zeros around the box: pad by the offsets below and the rest above.
  auto in = getInput().getType();
  SmallVector<int64_t> low(getOffsets()), high;
  for (int64_t i = 0; i < in.getRank(); ++i)
    high.push_back(in.getDimSize(i) - getOffsets()[i] - getSizes()[i]);
  return one(out, b.create<PadOp>(getLoc(), ct[0], b.getDenseI64ArrayAttr(low),
                                  b.getDenseI64ArrayAttr(high)));
}

LogicalResult PadOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  return one(out, b.create<SliceOp>(getLoc(), ct[0], b.getDenseI64ArrayAttr(getLow()),
                                    b.getDenseI64ArrayAttr(getInput().getType().getShape())));
}

LogicalResult GatherOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // Each row read is a row to add back into; indices get no gradient.
  Value table = b.create<ScatterAddOp>(getLoc(), getTable().getType(), getIndices(), ct[0]);
  return two(out, table, Value());
}

LogicalResult ScatterAddOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  return two(out, Value(), b.create<GatherOp>(getLoc(), ct[0], getIndices()));
}

LogicalResult DropoutOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // The mask depends only on (seed, stream, index): dropping the cotangent
  // with the same parameters applies the forward's mask and scale.
  Value g = b.create<DropoutOp>(getLoc(), ct[0], getSeed(), getRateAttr(), getStreamAttr());
  return two(out, g, Value());
}

// ---- attention ----------------------------------------------------------------

LogicalResult CausalAttentionOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // One op for the whole gradient: it recomputes the probabilities from q
  // and k instead of keeping them from the forward.
  return one(out, b.create<CausalAttentionGradOp>(getLoc(), getQkv(), ct[0], getHeadsAttr(),
                                                  getScaleAttr()));
}

// ---- normalization ------------------------------------------------------------

LogicalResult LayerNormOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // d(input): one op that recomputes the row statistics. d(gamma) and
  // d(beta): column sums of g * xhat and g, xhat the normalized input
  // (this op with gamma 1 and beta 0).
  Emitter e{b, getLoc()};
  Value x = getInput();
  out.push_back(b.create<LayerNormGradOp>(getLoc(), x, getGamma(), ct[0], getEpsAttr()));
  Value xhat = b.create<LayerNormOp>(getLoc(), x, e.splat(getGamma(), 1.0),
                                     e.splat(getBeta(), 0.0), getEpsAttr());
  auto rank = cast<RankedTensorType>(x.getType()).getRank();
  SmallVector<int64_t> rows;
  for (int64_t a = 0; a + 1 < rank; ++a)
    rows.push_back(a);
  auto overRows = [&](Value v) { return rows.empty() ? v : e.sum(v, rows, false); };
  out.push_back(overRows(e.mul(ct[0], xhat)));
  out.push_back(overRows(ct[0]));
  return success();
}

// ---- losses -------------------------------------------------------------------

LogicalResult CrossEntropyOp::buildVjp(OpBuilder &b, ValueRange ct, SmallVectorImpl<Value> &out) {
  // One op that recomputes the rows' max and sum; labels get no gradient.
  return two(out, b.create<CrossEntropyGradOp>(getLoc(), getLogits(), getLabels(), ct[0]), Value());
}
