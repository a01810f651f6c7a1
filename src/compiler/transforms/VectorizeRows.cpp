//===- VectorizeRows.cpp - the nova-vectorize-rows pass ----------*- C++ -*-===//
//
// Expands each bufferized nova.layer_norm_kernel and
// nova.cross_entropy_kernel of a kernel configured `rows` into vector code. Workgroup wg takes rows [wg t, min(wg t + t, N))
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
// numerics. Where nova-share-row-statistics gave them stats, the first
// forward stores each row's (mean, rstd) and later kernels of the same
// rows load them instead of their first two passes.
//
// Cross-entropy, per row of logits x with label y (rows of an out-of-range
// label: loss and gradient 0):
// Forward:   m = max(x); s = sum(exp(x - m)); loss = log(s) - (x[y] - m);
//            with stats, m and s stored too.                   (2 passes)
// Backward:  m and s again (or read from the forward's stats), then
//            dx = exp(x - m) g / s, and dx[y] -= g (one scalar store
//            after the pass).                       (3 passes, 1 with stats)
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

#include <functional>
#include <limits>

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAVECTORIZEROWS
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

/// Vector code over rows of d elements, W lanes a vector.
struct Rows {
  OpBuilder &b;
  Location l;
  VectorType vec;
  int64_t W, d;

  Value c(int64_t v) { return b.create<arith::ConstantIndexOp>(l, v); }
  Value splat(double v) {
    return b.create<arith::ConstantOp>(
        l, DenseElementsAttr::get(vec, b.getFloatAttr(vec.getElementType(), v)));
  }
  Value scalar(double v) {
    return b.create<arith::ConstantOp>(l, b.getFloatAttr(vec.getElementType(), v));
  }
  /// While a pass's last, partial vector (d % W columns) is emitted, its
  /// lanes' mask: loads past the row read `tailFill`, stores skip them.
  Value tailMask;
  double tailFill = 0.0;

  Value bcast(Value s) { return b.create<vector::BroadcastOp>(l, vec, s); }
  Value vload(Value m, ValueRange idx) {
    if (tailMask)
      return b.create<vector::MaskedLoadOp>(l, vec, m, idx, tailMask, splat(tailFill));
    return b.create<vector::LoadOp>(l, vec, m, idx);
  }
  void vstore(Value v, Value m, ValueRange idx) {
    if (tailMask)
      b.create<vector::MaskedStoreOp>(l, m, idx, tailMask, v);
    else
      b.create<vector::StoreOp>(l, v, m, idx);
  }
  Value sum(Value v) { return nova::sumLanes(b, l, v); }

  /// One pass over the d / W vectors of `n` rows: `count` values per row
  /// carried (from `initial` in every lane), step(r, at, carried row
  /// values) -> new values; then, where W does not divide d, the partial
  /// vector under tailMask.
  SmallVector<Value> pass(int64_t n, int64_t count,
                          function_ref<SmallVector<Value>(int64_t r, Value at, ValueRange acc)> step,
                          double initial = 0.0) {
    SmallVector<Value> init(n * count, splat(initial));
    auto each = [&](Value at, ValueRange acc) {
      SmallVector<Value> next;
      for (int64_t r = 0; r < n; ++r) {
        SmallVector<Value> row = step(r, at, acc.slice(r * count, count));
        next.append(row.begin(), row.end());
      }
      return next;
    };
    auto loop = nova::buildFor(b, l, c(0), c(d / W), c(1), init, [&](Value v, ValueRange acc) {
      return each(b.create<arith::MulIOp>(l, v, c(W)), acc);
    });
    SmallVector<Value> results(loop.getResults());
    if (d % W == 0)
      return results;
    tailMask = b.create<vector::CreateMaskOp>(l, VectorType::get({W}, b.getI1Type()), ValueRange{c(d % W)});
    SmallVector<Value> tail = each(c(d / W * W), results);
    tailMask = Value();
    return tail.empty() ? results : tail;
  }

  /// Row `row`'s statistics (two scalars) in `stats` ([N, 2]): loaded, or
  /// stored.
  std::pair<Value, Value> loadStats(Value stats, Value row) {
    return {b.create<memref::LoadOp>(l, stats, ValueRange{row, c(0)}),
            b.create<memref::LoadOp>(l, stats, ValueRange{row, c(1)})};
  }
  void storeStats(Value stats, Value row, Value first, Value second) {
    b.create<memref::StoreOp>(l, first, stats, ValueRange{row, c(0)});
    b.create<memref::StoreOp>(l, second, stats, ValueRange{row, c(1)});
  }

  /// The row indices [r0, r0 + n).
  SmallVector<Value> rowsFrom(int64_t n, Value r0) {
    SmallVector<Value> rows;
    for (int64_t r = 0; r < n; ++r)
      rows.push_back(b.create<arith::AddIOp>(l, r0, c(r)));
    return rows;
  }
};

struct LayerNormRows : Rows {
  double eps;
  bool backward;
  // [N, d], [d], [d] beta or [N, d] grad, [N, d], and [N, 2] or null: the
  // rows' (mean, rstd), read where `readsStats`, else written.
  Value x, gamma, third, out, stats;
  bool readsStats;

  /// Rows [r0, r0 + n).
  void emitBlock(int64_t n, Value r0) {
    SmallVector<Value> rows = rowsFrom(n, r0);
    Value invD = scalar(1.0 / double(d));
    SmallVector<Value> mean, rstd;
    if (readsStats) {
      for (int64_t r = 0; r < n; ++r) {
        auto [m, inverse] = loadStats(stats, rows[r]);
        mean.push_back(bcast(m));
        rstd.push_back(bcast(inverse));
      }
    } else {
      SmallVector<Value> sums = pass(n, 1, [&](int64_t r, Value at, ValueRange acc) {
        return SmallVector<Value>{b.create<arith::AddFOp>(l, acc[0], vload(x, {rows[r], at}))};
      });
      SmallVector<Value> means;
      for (int64_t r = 0; r < n; ++r) {
        means.push_back(b.create<arith::MulFOp>(l, sum(sums[r]), invD));
        mean.push_back(bcast(means[r]));
      }
      SmallVector<Value> squares = pass(n, 1, [&](int64_t r, Value at, ValueRange acc) {
        Value centered = b.create<arith::SubFOp>(l, vload(x, {rows[r], at}), mean[r]);
        return SmallVector<Value>{b.create<vector::FMAOp>(l, centered, centered, acc[0])};
      });
      for (int64_t r = 0; r < n; ++r) {
        Value var = b.create<arith::MulFOp>(l, sum(squares[r]), invD);
        Value root = b.create<math::SqrtOp>(l, b.create<arith::AddFOp>(l, var, scalar(eps)));
        Value inverse = b.create<arith::DivFOp>(l, scalar(1.0), root);
        rstd.push_back(bcast(inverse));
        if (stats)
          storeStats(stats, rows[r], means[r], inverse);
      }
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

struct CrossEntropyRows : Rows {
  bool backward;
  // [N, d], [N], [N] (backward), [N] or [N, d] (backward), and [N, 2] or
  // null: the rows' (m, s), read where `readsStats` (a backward), else
  // written.
  Value x, labels, grad, out, stats;
  bool readsStats;

  /// Rows [r0, r0 + n). A partial vector's lanes past the row read -inf:
  /// nothing to the max, exp(-inf) = 0 to the sum.
  void emitBlock(int64_t n, Value r0) {
    tailFill = -std::numeric_limits<double>::infinity();
    SmallVector<Value> rows = rowsFrom(n, r0);
    SmallVector<Value> max, total;
    if (readsStats) {
      for (int64_t r = 0; r < n; ++r) {
        auto [m, s] = loadStats(stats, rows[r]);
        max.push_back(m);
        total.push_back(s);
      }
    } else {
      SmallVector<Value> maxes = pass(
          n, 1,
          [&](int64_t r, Value at, ValueRange acc) {
            return SmallVector<Value>{nova::softmaxMax(b, l, acc[0], vload(x, {rows[r], at}))};
          },
          -std::numeric_limits<double>::infinity());
      for (int64_t r = 0; r < n; ++r)
        max.push_back(nova::maxLanes(b, l, maxes[r]));
    }
    auto shifted = [&](int64_t r, Value at) -> Value {
      return b.create<math::ExpOp>(l, b.create<arith::SubFOp>(l, vload(x, {rows[r], at}), bcast(max[r])));
    };
    if (total.empty()) {
      SmallVector<Value> sums = pass(n, 1, [&](int64_t r, Value at, ValueRange acc) {
        return SmallVector<Value>{b.create<arith::AddFOp>(l, acc[0], shifted(r, at))};
      });
      for (int64_t r = 0; r < n; ++r)
        total.push_back(sum(sums[r]));
    }
    // Per row: its label's column (0 for an out-of-range label, whose loss
    // and gradient are 0) and, backward, the gradient it takes (g or 0).
    SmallVector<Value> column, taken, scale;
    for (int64_t r = 0; r < n; ++r) {
      Value label = b.create<arith::IndexCastOp>(l, b.getIndexType(),
                                                 b.create<memref::LoadOp>(l, labels, ValueRange{rows[r]}));
      Value inside = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, label, c(d));
      column.push_back(b.create<arith::SelectOp>(l, inside, label, c(0)));
      if (!backward) {
        Value picked = b.create<memref::LoadOp>(l, x, ValueRange{rows[r], column[r]});
        // log(s) - (x[y] - m): the difference first, exact where x[y] is
        // near the max; log(s) + m would round to m's magnitude.
        Value loss = b.create<arith::SubFOp>(l, b.create<math::LogOp>(l, total[r]),
                                             b.create<arith::SubFOp>(l, picked, max[r]));
        b.create<memref::StoreOp>(l, b.create<arith::SelectOp>(l, inside, loss, scalar(0.0)), out,
                                  ValueRange{rows[r]});
        if (stats)
          storeStats(stats, rows[r], max[r], total[r]);
        continue;
      }
      Value g = b.create<arith::SelectOp>(l, inside, b.create<memref::LoadOp>(l, grad, ValueRange{rows[r]}),
                                          scalar(0.0));
      taken.push_back(g);
      scale.push_back(bcast(b.create<arith::DivFOp>(l, g, total[r])));
    }
    if (!backward)
      return;
    pass(n, 0, [&](int64_t r, Value at, ValueRange) {
      vstore(b.create<arith::MulFOp>(l, shifted(r, at), scale[r]), out, ValueRange{rows[r], at});
      return SmallVector<Value>{};
    });
    for (int64_t r = 0; r < n; ++r) {
      SmallVector<Value, 2> at{rows[r], column[r]};
      Value held = b.create<memref::LoadOp>(l, out, at);
      b.create<memref::StoreOp>(l, b.create<arith::SubFOp>(l, held, taken[r]), out, at);
    }
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

/// `m` ([...]) viewed as [N].
Value asColumn(OpBuilder &b, Location l, Value m) {
  auto type = cast<MemRefType>(m.getType());
  if (type.getRank() == 1)
    return m;
  if (type.getRank() == 0)
    return b.create<memref::ExpandShapeOp>(l, SmallVector<int64_t>{1}, m,
                                           SmallVector<ReassociationIndices>{});
  ReassociationIndices all;
  for (int64_t i = 0; i < type.getRank(); ++i)
    all.push_back(i);
  return b.create<memref::CollapseShapeOp>(l, m, SmallVector<ReassociationIndices>{all});
}

/// Expands a row kernel `op` of N rows of d: workgroup `wg`'s rows [wg
/// tile, min(wg tile + tile, N)), `interleaved` at a time, then the rest
/// one at a time. `emitter(inputs, result)`, given the op's inputs and
/// init made contiguous, returns what emits a block of n rows from r0.
LogicalResult expandRows(Operation *op, ValueRange inputs, Value init, int64_t N, int64_t d, Value wg,
                         int64_t tile, int64_t interleaved, int64_t lanes,
                         function_ref<std::function<void(int64_t, Value)>(OpBuilder &, ArrayRef<Value>, Value)>
                             emitter) {
  if (lanes < 1 || (!nova::rowsTakePartialVectors(op) && d % lanes != 0) || interleaved < 1 || tile < 1)
    return op->emitError("nova-vectorize-rows: register tile [")
           << interleaved << ", " << lanes << "] does not fit rows of " << d;
  OpBuilder b(op);
  Location l = op->getLoc();
  SmallVector<Value> temps, in;
  for (Value v : inputs)
    in.push_back(contiguous(b, l, v, /*copyIn=*/true, temps));
  Value result = contiguous(b, l, init, /*copyIn=*/false, temps);
  std::function<void(int64_t, Value)> emitBlock = emitter(b, in, result);
  auto c = [&](int64_t v) { return b.create<arith::ConstantIndexOp>(l, v); };
  // A strided output (the op writing into a view of a larger buffer) is
  // computed whole into a contiguous copy by workgroup 0, then copied out:
  // rare, and no workgroup writes another's elements.
  bool whole = result != init;
  OpBuilder::InsertionGuard guard(b);
  if (whole) {
    Value first = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, wg, c(0));
    auto only = b.create<scf::IfOp>(l, first, /*withElseRegion=*/false);
    b.setInsertionPointToStart(&only.getThenRegion().front());
  }
  Value lo = whole ? c(0) : b.create<arith::MulIOp>(l, wg, c(tile)).getResult();
  Value hi = whole ? c(N)
                   : b.create<arith::MinUIOp>(l, b.create<arith::AddIOp>(l, lo, c(tile)), c(N)).getResult();
  // Whole blocks of `interleaved` rows, then the rest one row at a time.
  Value count = b.create<arith::SubIOp>(l, hi, lo);
  Value blocksEnd = b.create<arith::AddIOp>(
      l, lo, b.create<arith::MulIOp>(l, b.create<arith::DivUIOp>(l, count, c(interleaved)), c(interleaved)));
  nova::buildFor(b, l, lo, blocksEnd, c(interleaved), {}, [&](Value r0, ValueRange) {
    emitBlock(interleaved, r0);
    return SmallVector<Value>{};
  });
  nova::buildFor(b, l, blocksEnd, hi, c(1), {}, [&](Value r0, ValueRange) {
    emitBlock(1, r0);
    return SmallVector<Value>{};
  });
  if (whole)
    b.create<linalg::CopyOp>(l, ValueRange{result}, ValueRange{init});
  b.setInsertionPoint(op);
  for (Value t : temps)
    b.create<memref::DeallocOp>(l, t);
  op->erase();
  return success();
}

/// A row kernel's stats it writes (a buffer of their own, made by
/// nova-share-row-statistics, written in place; those it reads are an
/// input), or null; failure where they are not contiguous.
FailureOr<Value> writtenStats(Operation *op, Value stats, bool reads) {
  if (!stats || reads)
    return Value();
  if (!cast<MemRefType>(stats.getType()).getLayout().isIdentity())
    return op->emitError("nova-vectorize-rows: the row statistics must be a contiguous buffer, not ")
           << stats.getType();
  return stats;
}

LogicalResult expand(nova::LayerNormKernelOp op, Value wg, int64_t tile, int64_t interleaved, int64_t lanes) {
  Type elem = cast<MemRefType>(op.getInit().getType()).getElementType();
  FailureOr<Value> written = writtenStats(op, op.getStats(), op.readsStats());
  if (failed(written))
    return failure();
  Value stats = *written;
  return expandRows(op, op.getInputs(), op.getInit(), op.rows(), op.width(), wg, tile, interleaved, lanes,
                    [&](OpBuilder &b, ArrayRef<Value> in, Value result) -> std::function<void(int64_t, Value)> {
                      Location l = op.getLoc();
                      Value rowStats = op.readsStats() ? in[3] : stats;
                      LayerNormRows e{{b, l, VectorType::get({lanes}, elem), lanes, op.width()},
                                      op.getEps().convertToDouble(),
                                      op.getBackward(),
                                      asRows(b, l, in[0]),
                                      in[1],
                                      op.getBackward() ? asRows(b, l, in[2]) : in[2],
                                      asRows(b, l, result),
                                      rowStats ? asRows(b, l, rowStats) : Value(),
                                      op.readsStats()};
                      return [e](int64_t n, Value r0) mutable { e.emitBlock(n, r0); };
                    });
}

LogicalResult expand(nova::CrossEntropyKernelOp op, Value wg, int64_t tile, int64_t interleaved, int64_t lanes) {
  Type elem = cast<MemRefType>(op.getInputs()[0].getType()).getElementType();
  bool backward = op.getBackward();
  FailureOr<Value> written = writtenStats(op, op.getStats(), op.readsStats());
  if (failed(written))
    return failure();
  Value stats = *written;
  return expandRows(op, op.getInputs(), op.getInit(), op.rows(), op.width(), wg, tile, interleaved, lanes,
                    [&](OpBuilder &b, ArrayRef<Value> in, Value result) -> std::function<void(int64_t, Value)> {
                      Location l = op.getLoc();
                      Value rowStats = op.readsStats() ? in[3] : stats;
                      CrossEntropyRows e{{b, l, VectorType::get({lanes}, elem), lanes, op.width()},
                                         backward,
                                         asRows(b, l, in[0]),
                                         asColumn(b, l, in[1]),
                                         backward ? asColumn(b, l, in[2]) : Value(),
                                         backward ? asRows(b, l, result) : asColumn(b, l, result),
                                         rowStats ? asRows(b, l, rowStats) : Value(),
                                         op.readsStats()};
                      return [e](int64_t n, Value r0) mutable { e.emitBlock(n, r0); };
                    });
}

/// The configured expansion of a row kernel `op` (LayerNorm or
/// cross-entropy).
template <typename KernelOp>
LogicalResult expandConfigured(KernelOp op, StringRef pass, int64_t vectorBits) {
  FailureOr<nova::LoweringConfigAttr> configured = nova::configForKernelOp(op, op.getInit(), pass, "rows");
  if (failed(configured))
    return failure();
  nova::LoweringConfigAttr config = *configured;
  if (config && config.getTile().size() != 1)
    return op.emitError("nova-vectorize-rows: a rows kernel takes one tile size, not ") << config;
  if (config) {
    auto func = op->template getParentOfType<func::FuncOp>();
    return expand(op, func.getArgument(0), config.getTile()[0], config.getRegisterTile()[0],
                  config.getRegisterTile()[1]);
  }
  // Outside a configured kernel: all rows, 4 at a time.
  OpBuilder b(op);
  Value zero = b.create<arith::ConstantIndexOp>(op.getLoc(), 0);
  return expand(op, zero, std::max<int64_t>(1, op.rows()), 4, nova::rowVectorLanes(op, vectorBits));
}

struct NovaVectorizeRows : mlir::nova::impl::NovaVectorizeRowsBase<NovaVectorizeRows> {
  using NovaVectorizeRowsBase::NovaVectorizeRowsBase;

  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<nova::LayerNormKernelOp, nova::CrossEntropyKernelOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      LogicalResult done = isa<nova::LayerNormKernelOp>(op)
                               ? expandConfigured(cast<nova::LayerNormKernelOp>(op), getArgument(), vectorBits)
                               : expandConfigured(cast<nova::CrossEntropyKernelOp>(op), getArgument(), vectorBits);
      if (failed(done))
        return signalPassFailure();
    }
  }
};

} // namespace
