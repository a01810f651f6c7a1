//===- VectorizeRows.cpp - the nova-vectorize-rows pass ----------*- C++ -*-===//
//
// Expands each bufferized nova.layer_norm_kernel of a kernel configured
// `rows` into vector code. Workgroup wg takes rows [wg t, min(wg t + t, N))
// (t = tile[0]) of the input viewed as [N, d]; R rows at a time
// (register_tile[0]) go through each pass over their d / W vectors together,
// so every reduction has R independent chains. A row is 1 KiB at d = 256:
// its passes after the first read it from L1.
//
// Forward:   mean; var = mean((x - mean)^2); rstd = 1 / sqrt(var + eps);
//            y = (x - mean) rstd gamma + beta.                 (3 passes)
// Backward:  the statistics again, then sum(g) and sum(g xhat) with
//            g = grad gamma, then dx = rstd (g - sum(g)/d - xhat
//            sum(g xhat)/d).                                   (4 passes)
// The two-pass variance (not E[x^2] - E[x]^2) matches the reference's
// numerics; the backward keeps nothing from the forward but its input.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAVECTORIZEROWS
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

struct RowEmitter {
  OpBuilder &b;
  Location l;
  VectorType vec;
  int64_t W, d;
  double eps;
  bool backward;
  Value x, gamma, third, out; // [N, d], [d], [d] beta or [N, d] grad, [N, d]

  Value c(int64_t v) { return b.create<arith::ConstantIndexOp>(l, v); }
  Value splat(double v) {
    return b.create<arith::ConstantOp>(
        l, DenseElementsAttr::get(vec, b.getFloatAttr(vec.getElementType(), v)));
  }
  Value scalar(double v) {
    return b.create<arith::ConstantOp>(l, b.getFloatAttr(vec.getElementType(), v));
  }
  Value bcast(Value s) { return b.create<vector::BroadcastOp>(l, vec, s); }
  Value vload(Value m, ValueRange idx) { return b.create<vector::LoadOp>(l, vec, m, idx); }
  Value sum(Value v) { return b.create<vector::ReductionOp>(l, vector::CombiningKind::ADD, v); }

  /// One pass over the d / W vectors of `n` rows: `count` values per row
  /// carried (from zero), step(r, at, carried row values) -> new values.
  SmallVector<Value> pass(int64_t n, int64_t count,
                          function_ref<SmallVector<Value>(int64_t r, Value at, ValueRange acc)> step) {
    SmallVector<Value> init(n * count, splat(0.0));
    auto loop = nova::buildFor(b, l, c(0), c(d / W), c(1), init, [&](Value v, ValueRange acc) {
      Value at = b.create<arith::MulIOp>(l, v, c(W));
      SmallVector<Value> next;
      for (int64_t r = 0; r < n; ++r) {
        SmallVector<Value> row = step(r, at, acc.slice(r * count, count));
        next.append(row.begin(), row.end());
      }
      return next;
    });
    return SmallVector<Value>(loop.getResults());
  }

  /// Rows [r0, r0 + n).
  void emitBlock(int64_t n, Value r0) {
    SmallVector<Value> rows;
    for (int64_t r = 0; r < n; ++r)
      rows.push_back(b.create<arith::AddIOp>(l, r0, c(r)));
    Value invD = scalar(1.0 / double(d));
    SmallVector<Value> sums = pass(n, 1, [&](int64_t r, Value at, ValueRange acc) {
      return SmallVector<Value>{b.create<arith::AddFOp>(l, acc[0], vload(x, {rows[r], at}))};
    });
    SmallVector<Value> mean, rstd;
    for (int64_t r = 0; r < n; ++r)
      mean.push_back(bcast(b.create<arith::MulFOp>(l, sum(sums[r]), invD)));
    SmallVector<Value> squares = pass(n, 1, [&](int64_t r, Value at, ValueRange acc) {
      Value centered = b.create<arith::SubFOp>(l, vload(x, {rows[r], at}), mean[r]);
      return SmallVector<Value>{b.create<vector::FMAOp>(l, centered, centered, acc[0])};
    });
    for (int64_t r = 0; r < n; ++r) {
      Value var = b.create<arith::MulFOp>(l, sum(squares[r]), invD);
      Value root = b.create<math::SqrtOp>(l, b.create<arith::AddFOp>(l, var, scalar(eps)));
      rstd.push_back(bcast(b.create<arith::DivFOp>(l, scalar(1.0), root)));
    }
    auto xhat = [&](int64_t r, Value at) {
      return b.create<arith::MulFOp>(
          l, b.create<arith::SubFOp>(l, vload(x, {rows[r], at}), mean[r]), rstd[r]);
    };
    if (!backward) {
      pass(n, 0, [&](int64_t r, Value at, ValueRange) {
        Value y = b.create<vector::FMAOp>(l, xhat(r, at), vload(gamma, {at}), vload(third, {at}));
        b.create<vector::StoreOp>(l, y, out, ValueRange{rows[r], at});
        return SmallVector<Value>{};
      });
      return;
    }
    auto g = [&](int64_t r, Value at) {
      return b.create<arith::MulFOp>(l, vload(third, {rows[r], at}), vload(gamma, {at}));
    };
    SmallVector<Value> gSums = pass(n, 2, [&](int64_t r, Value at, ValueRange acc) {
      Value gv = g(r, at);
      return SmallVector<Value>{b.create<arith::AddFOp>(l, acc[0], gv),
                                b.create<vector::FMAOp>(l, gv, xhat(r, at), acc[1])};
    });
    SmallVector<Value> meanG, meanGx;
    for (int64_t r = 0; r < n; ++r) {
      meanG.push_back(bcast(b.create<arith::MulFOp>(l, sum(gSums[2 * r]), invD)));
      meanGx.push_back(bcast(b.create<arith::MulFOp>(l, sum(gSums[2 * r + 1]), invD)));
    }
    pass(n, 0, [&](int64_t r, Value at, ValueRange) {
      Value centered = b.create<arith::SubFOp>(l, g(r, at), meanG[r]);
      Value dx = b.create<arith::MulFOp>(
          l, b.create<arith::SubFOp>(l, centered, b.create<arith::MulFOp>(l, xhat(r, at), meanGx[r])),
          rstd[r]);
      b.create<vector::StoreOp>(l, dx, out, ValueRange{rows[r], at});
      return SmallVector<Value>{};
    });
  }
};

/// `m` ([..., d]) viewed as [N, d].
Value asRows(OpBuilder &b, Location l, Value m) {
  auto type = cast<MemRefType>(m.getType());
  int64_t rank = type.getRank();
  if (rank == 2)
    return m;
  if (rank == 1)
    return b.create<memref::ExpandShapeOp>(
        l, SmallVector<int64_t>{1, type.getDimSize(0)}, m,
        SmallVector<ReassociationIndices>{{0, 1}});
  ReassociationIndices lead;
  for (int64_t i = 0; i + 1 < rank; ++i)
    lead.push_back(i);
  return b.create<memref::CollapseShapeOp>(
      l, m, SmallVector<ReassociationIndices>{lead, {rank - 1}});
}

/// `m` itself if its layout is the identity, else a contiguous copy (a
/// strided view, a slice feeding the op, cannot be collapsed to rows).
Value contiguous(OpBuilder &b, Location l, Value m, bool copyIn, SmallVectorImpl<Value> &temps) {
  return cast<MemRefType>(m.getType()).getLayout().isIdentity()
             ? m
             : nova::contiguousCopy(b, l, m, copyIn, temps);
}

LogicalResult expand(nova::LayerNormKernelOp op, Value wg, int64_t tile, int64_t interleaved,
                     int64_t lanes) {
  int64_t d = op.width(), N = op.rows();
  if (lanes < 1 || d % lanes != 0 || interleaved < 1 || tile < 1)
    return op.emitError("nova-vectorize-rows: register tile [")
           << interleaved << ", " << lanes << "] does not fit rows of " << d;
  OpBuilder b(op);
  Location l = op.getLoc();
  Type elem = cast<MemRefType>(op.getInit().getType()).getElementType();
  SmallVector<Value> temps, in;
  for (Value v : op.getInputs())
    in.push_back(contiguous(b, l, v, /*copyIn=*/true, temps));
  Value result = contiguous(b, l, op.getInit(), /*copyIn=*/false, temps);
  RowEmitter e{b,     l,
               VectorType::get({lanes}, elem),
               lanes, d,
               op.getEps().convertToDouble(),
               op.getBackward(),
               asRows(b, l, in[0]),
               in[1],
               op.getBackward() ? asRows(b, l, in[2]) : in[2],
               asRows(b, l, result)};
  // A strided output (the op writing into a view of a larger buffer) is
  // computed whole into a contiguous copy by workgroup 0, then copied out:
  // rare, and no workgroup writes another's elements.
  bool whole = result != op.getInit();
  OpBuilder::InsertionGuard guard(b);
  if (whole) {
    Value first = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, wg, e.c(0));
    auto only = b.create<scf::IfOp>(l, first, /*withElseRegion=*/false);
    b.setInsertionPointToStart(&only.getThenRegion().front());
  }
  Value lo = whole ? e.c(0) : b.create<arith::MulIOp>(l, wg, e.c(tile)).getResult();
  Value hi = whole ? e.c(N)
                   : b.create<arith::MinUIOp>(l, b.create<arith::AddIOp>(l, lo, e.c(tile)), e.c(N))
                         .getResult();
  // Whole blocks of `interleaved` rows, then the rest one row at a time.
  Value count = b.create<arith::SubIOp>(l, hi, lo);
  Value blocksEnd = b.create<arith::AddIOp>(
      l, lo, b.create<arith::MulIOp>(l, b.create<arith::DivUIOp>(l, count, e.c(interleaved)),
                                     e.c(interleaved)));
  nova::buildFor(b, l, lo, blocksEnd, e.c(interleaved), {}, [&](Value r0, ValueRange) {
    e.emitBlock(interleaved, r0);
    return SmallVector<Value>{};
  });
  nova::buildFor(b, l, blocksEnd, hi, e.c(1), {}, [&](Value r0, ValueRange) {
    e.emitBlock(1, r0);
    return SmallVector<Value>{};
  });
  if (whole)
    b.create<linalg::CopyOp>(l, ValueRange{result}, ValueRange{op.getInit()});
  b.setInsertionPoint(op);
  for (Value t : temps)
    b.create<memref::DeallocOp>(l, t);
  op.erase();
  return success();
}

struct NovaVectorizeRows : mlir::nova::impl::NovaVectorizeRowsBase<NovaVectorizeRows> {
  using NovaVectorizeRowsBase::NovaVectorizeRowsBase;

  void runOnOperation() override {
    SmallVector<nova::LayerNormKernelOp> ops;
    getOperation().walk([&](nova::LayerNormKernelOp op) { ops.push_back(op); });
    for (nova::LayerNormKernelOp op : ops) {
      FailureOr<nova::LoweringConfigAttr> configured =
          nova::configForKernelOp(op, op.getInit(), getArgument(), "rows");
      if (failed(configured))
        return signalPassFailure();
      nova::LoweringConfigAttr config = *configured;
      auto func = op->getParentOfType<func::FuncOp>();
      int64_t elemBits = cast<MemRefType>(op.getInit().getType()).getElementTypeBitWidth();
      if (config && config.getTile().size() != 1) {
        op.emitError("nova-vectorize-rows: a rows kernel takes one tile size, not ") << config;
        return signalPassFailure();
      }
      LogicalResult done =
          config ? expand(op, func.getArgument(0), config.getTile()[0], config.getRegisterTile()[0],
                          config.getRegisterTile()[1])
                 : [&] {
                     // Outside a configured kernel: all rows, 4 at a time.
                     OpBuilder b(op);
                     Value zero = b.create<arith::ConstantIndexOp>(op.getLoc(), 0);
                     return expand(op, zero, std::max<int64_t>(1, op.rows()), 4,
                                   nova::vectorLanesDividing(op.width(), elemBits, vectorBits));
                   }();
      if (failed(done))
        return signalPassFailure();
    }
  }
};

} // namespace
