//===- IndexingToLinalg.cpp - slice, pad, gather, scatter_add, mask -*- C++ -*-===//
//
// slice        → tensor.extract_slice (static box).
// pad          → linalg.fill of zeros + tensor.insert_slice.
// gather       → a parallel linalg.generic over the result whose body reads
//                the table with tensor.extract; out-of-range rows read zeros
//                (the index is clamped before the read, so memory is safe).
// scatter_add  → scf.for over indices and width carrying the result tensor,
//                tensor.extract/insert; out-of-range indices are skipped.
//                One-shot bufferization turns the carried tensor into one
//                buffer updated in place. The width loop is marked
//                kSplitLoopAttr: the target splits it over workgroups
//                (parallel, and each element still sums in index order).
// causal_mask  → generic comparing linalg.index of rows and columns.
// dropout      → generic computing Philox4x32-10 of the element's linear
//                index in arith (i32 multiply-high, xor, add).
//
//===----------------------------------------------------------------------===//

#include "compiler/conversion/LinalgBuilders.h"
#include "compiler/conversion/NovaToLinalg.h"
#include "nova/detail/philox.hpp"
#include "compiler/dialect/NovaDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::nova;

namespace {

Value zeroOf(OpBuilder &b, Location loc, Type elem) { return scalarConstant(b, loc, elem, 0.0); }

/// An index-typed value and whether it lies in [0, rows).
std::pair<Value, Value> checkedIndex(OpBuilder &b, Location loc, Value raw, int64_t rows) {
  Value idx = b.create<arith::IndexCastOp>(loc, b.getIndexType(), raw);
  Value zero = b.create<arith::ConstantIndexOp>(loc, 0);
  Value limit = b.create<arith::ConstantIndexOp>(loc, rows);
  Value geZero = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, idx, zero);
  Value ltRows = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, idx, limit);
  return {idx, b.create<arith::AndIOp>(loc, geZero, ltRows)};
}

/// Collapses all dims of `v` into one (rank 0 becomes [1]); `extra` trailing
/// dims are kept.
Value flatten(OpBuilder &b, Location loc, Value v, int64_t keepTrailing) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t lead = type.getRank() - keepTrailing;
  if (lead == 1)
    return v;
  SmallVector<int64_t> shape = {1};
  for (int64_t i = 0; i < lead; ++i)
    shape[0] *= type.getDimSize(i);
  for (int64_t i = lead; i < type.getRank(); ++i)
    shape.push_back(type.getDimSize(i));
  auto flatType = RankedTensorType::get(shape, type.getElementType());
  if (lead == 0) {
    SmallVector<ReassociationIndices> re;
    for (int64_t i = 0; i < keepTrailing; ++i)
      re.push_back(i == 0 ? ReassociationIndices{0, 1} : ReassociationIndices{i + 1});
    if (keepTrailing == 0)
      re.clear();
    return b.create<tensor::ExpandShapeOp>(loc, flatType, v, re);
  }
  SmallVector<ReassociationIndices> re(1);
  for (int64_t i = 0; i < lead; ++i)
    re[0].push_back(i);
  for (int64_t i = lead; i < type.getRank(); ++i)
    re.push_back({i});
  return b.create<tensor::CollapseShapeOp>(loc, flatType, v, re);
}

struct SlicePattern : OpConversionPattern<SliceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SliceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    SmallVector<int64_t> strides(op.getOffsets().size(), 1);
    rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(
        op, cast<RankedTensorType>(op.getType()), adaptor.getInput(), ValueRange{}, ValueRange{},
        ValueRange{}, op.getOffsets(), op.getSizes(), strides);
    return success();
  }
};

struct PadPattern : OpConversionPattern<PadOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(PadOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    Value zeros = filled(rewriter, op.getLoc(), type, 0.0);
    auto inType = cast<RankedTensorType>(op.getInput().getType());
    SmallVector<int64_t> strides(type.getRank(), 1);
    rewriter.replaceOpWithNewOp<tensor::InsertSliceOp>(
        op, adaptor.getInput(), zeros, ValueRange{}, ValueRange{}, ValueRange{}, op.getLow(),
        inType.getShape(), strides);
    return success();
  }
};

struct GatherPattern : OpConversionPattern<GatherOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(GatherOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto out = cast<RankedTensorType>(op.getType());
    int64_t rank = out.getRank();
    int64_t rows = cast<RankedTensorType>(op.getTable().getType()).getDimSize(0);
    Value table = adaptor.getTable();
    Value r = parallelGeneric(
        rewriter, op.getLoc(), out, adaptor.getIndices(), dropLastDimMap(rank, op.getContext()),
        [&](OpBuilder &b, Location l, ValueRange a) {
          auto [idx, inRange] = checkedIndex(b, l, a[0], rows);
          Value safe = b.create<arith::SelectOp>(l, inRange, idx,
                                                 b.create<arith::ConstantIndexOp>(l, 0));
          Value col = b.create<linalg::IndexOp>(l, rank - 1);
          Value v = b.create<tensor::ExtractOp>(l, table, ValueRange{safe, col});
          return b.create<arith::SelectOp>(l, inRange, v, zeroOf(b, l, out.getElementType()))
              .getResult();
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct ScatterAddPattern : OpConversionPattern<ScatterAddOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ScatterAddOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto out = cast<RankedTensorType>(op.getType());
    int64_t rows = out.getDimSize(0), width = out.getDimSize(1);
    Value indices = flatten(rewriter, loc, adaptor.getIndices(), 0);
    Value updates = flatten(rewriter, loc, adaptor.getUpdates(), 1);
    int64_t count = cast<RankedTensorType>(indices.getType()).getDimSize(0);
    Value zeros = filled(rewriter, loc, out, 0.0);
    Value c0 = rewriter.create<arith::ConstantIndexOp>(loc, 0);
    Value c1 = rewriter.create<arith::ConstantIndexOp>(loc, 1);
    auto outer = rewriter.create<scf::ForOp>(
        loc, c0, rewriter.create<arith::ConstantIndexOp>(loc, count), c1, ValueRange{zeros},
        [&](OpBuilder &b, Location l, Value n, ValueRange acc) {
          Value raw = b.create<tensor::ExtractOp>(l, indices, ValueRange{n});
          auto [idx, inRange] = checkedIndex(b, l, raw, rows);
          auto ifOp = b.create<scf::IfOp>(
              l, inRange,
              [&](OpBuilder &tb, Location tl) {
                // The row's columns: the loop a target may split over
                // workgroups (each then adds every update to its own columns,
                // in the same order: parallel and deterministic).
                auto inner = tb.create<scf::ForOp>(
                    tl, c0, tb.create<arith::ConstantIndexOp>(tl, width), c1, acc,
                    [&](OpBuilder &ib, Location il, Value d, ValueRange acc2) {
                      Value u = ib.create<tensor::ExtractOp>(il, updates, ValueRange{n, d});
                      Value old = ib.create<tensor::ExtractOp>(il, acc2[0], ValueRange{idx, d});
                      Value sum = ib.create<arith::AddFOp>(il, old, u);
                      Value next = ib.create<tensor::InsertOp>(il, sum, acc2[0], ValueRange{idx, d});
                      ib.create<scf::YieldOp>(il, next);
                    });
                inner->setAttr(kSplitLoopAttr, tb.getUnitAttr());
                tb.create<scf::YieldOp>(tl, inner.getResults());
              },
              [&](OpBuilder &eb, Location el) { eb.create<scf::YieldOp>(el, acc); });
          b.create<scf::YieldOp>(l, ifOp.getResults());
        });
    rewriter.replaceOp(op, outer.getResults());
    return success();
  }
};

struct CausalMaskPattern : OpConversionPattern<CausalMaskOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(CausalMaskOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto out = cast<RankedTensorType>(op.getType());
    Type elem = out.getElementType();
    Value r = elementwiseGeneric(rewriter, op.getLoc(), out, ValueRange{},
                                 [&](OpBuilder &b, Location l, ValueRange) {
      Value row = b.create<linalg::IndexOp>(l, 0), col = b.create<linalg::IndexOp>(l, 1);
      Value above = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ugt, col, row);
      Value negInf = scalarConstant(b, l, elem, -std::numeric_limits<double>::infinity());
      return b.create<arith::SelectOp>(l, above, negInf, zeroOf(b, l, elem)).getResult();
    });
    rewriter.replaceOp(op, r);
    return success();
  }
};

/// Philox4x32-10's first output word, built from arith ops on i32; the same
/// algorithm and constants as include/nova/detail/philox.hpp (tests compare
/// the two bit for bit).
Value philoxWord(OpBuilder &b, Location l, Value index64, Value seed64, int64_t stream) {
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  auto c32 = [&](uint32_t v) {
    return b.create<arith::ConstantOp>(l, b.getIntegerAttr(i32, static_cast<int64_t>(v)));
  };
  auto low = [&](Value v) { return b.create<arith::TruncIOp>(l, i32, v).getResult(); };
  auto high = [&](Value v) {
    Value shifted = b.create<arith::ShRUIOp>(l, v, b.create<arith::ConstantOp>(l, b.getIntegerAttr(i64, 32)));
    return b.create<arith::TruncIOp>(l, i32, shifted).getResult();
  };
  Value c0 = low(index64), c1 = high(index64), c2 = c32(0), c3 = c32(0);
  Value k0 = low(seed64);
  Value k1 = b.create<arith::XOrIOp>(l, high(seed64), c32(static_cast<uint32_t>(stream)));
  for (int round = 0; round < 10; ++round) {
    auto p0 = b.create<arith::MulUIExtendedOp>(l, c32(::nova::detail::kPhiloxM0), c0);
    auto p1 = b.create<arith::MulUIExtendedOp>(l, c32(::nova::detail::kPhiloxM1), c2);
    Value n0 = b.create<arith::XOrIOp>(l, b.create<arith::XOrIOp>(l, p1.getHigh(), c1), k0);
    Value n2 = b.create<arith::XOrIOp>(l, b.create<arith::XOrIOp>(l, p0.getHigh(), c3), k1);
    c0 = n0;
    c1 = p1.getLow();
    c2 = n2;
    c3 = p0.getLow();
    k0 = b.create<arith::AddIOp>(l, k0, c32(::nova::detail::kPhiloxW0));
    k1 = b.create<arith::AddIOp>(l, k1, c32(::nova::detail::kPhiloxW1));
  }
  return c0;
}

struct DropoutPattern : OpConversionPattern<DropoutOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(DropoutOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getType());
    Type elem = type.getElementType();
    int64_t rank = type.getRank();
    double rate = op.getRate().convertToDouble();
    int64_t stream = static_cast<int64_t>(op.getStream());
    Value seed = rewriter.create<tensor::ExtractOp>(loc, adaptor.getSeed(), ValueRange{});
    Value r = elementwiseGeneric(
        rewriter, loc, type, adaptor.getInput(), [&](OpBuilder &b, Location l, ValueRange a) {
          // Row-major linear index of this element.
          Value linear = b.create<arith::ConstantIndexOp>(l, 0);
          for (int64_t d = 0; d < rank; ++d) {
            Value extent = b.create<arith::ConstantIndexOp>(l, type.getDimSize(d));
            linear = b.create<arith::AddIOp>(l, b.create<arith::MulIOp>(l, linear, extent),
                                             b.create<linalg::IndexOp>(l, d));
          }
          Value index64 = b.create<arith::IndexCastUIOp>(l, b.getI64Type(), linear);
          Value word = philoxWord(b, l, index64, seed, stream);
          // keep iff (word >> 8) >= rate * 2^24, all in integers: exact.
          Value bits = b.create<arith::ShRUIOp>(
              l, word, b.create<arith::ConstantOp>(l, b.getI32IntegerAttr(8)));
          auto threshold = static_cast<int64_t>(std::ceil(rate * 16777216.0));
          Value keep = b.create<arith::CmpIOp>(
              l, arith::CmpIPredicate::uge, bits,
              b.create<arith::ConstantOp>(l, b.getI32IntegerAttr(static_cast<int32_t>(threshold))));
          Value scaled =
              b.create<arith::MulFOp>(l, a[0], scalarConstant(b, l, elem, 1.0 / (1.0 - rate)));
          return b.create<arith::SelectOp>(l, keep, scaled, zeroOf(b, l, elem)).getResult();
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

} // namespace

void mlir::nova::populateIndexingToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<SlicePattern, PadPattern, GatherPattern, ScatterAddPattern, CausalMaskPattern,
               DropoutPattern>(
      patterns.getContext());
}
