//===- GpuScalarKernels.cpp - one GPU thread's LayerNorm row or attention head ===//

#include "compiler/target/cuda/GpuScalarKernels.h"
#include "compiler/target/cuda/GpuBlockReduction.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <limits>

using namespace mlir;

namespace {

/// Scalar loop code in one element type.
struct Scalar {
  OpBuilder &b;
  Location l;
  Type e;

  Value c(int64_t v) { return b.create<arith::ConstantIndexOp>(l, v); }
  Value f(double v) { return b.create<arith::ConstantOp>(l, b.getFloatAttr(e, v)); }
  Value add(Value x, Value y) { return b.create<arith::AddFOp>(l, x, y); }
  Value sub(Value x, Value y) { return b.create<arith::SubFOp>(l, x, y); }
  Value mul(Value x, Value y) { return b.create<arith::MulFOp>(l, x, y); }
  Value div(Value x, Value y) { return b.create<arith::DivFOp>(l, x, y); }
  Value iadd(Value x, Value y) { return b.create<arith::AddIOp>(l, x, y); }
  Value iadd(Value x, int64_t y) { return y == 0 ? x : iadd(x, c(y)); }
  Value load(Value m, ValueRange at) { return b.create<memref::LoadOp>(l, m, at); }
  /// m[at] = v, rounded to m's element where that is narrower (a forward
  /// kernel's bf16 result, writesEachResultOnce).
  void store(Value v, Value m, ValueRange at) {
    Type element = cast<MemRefType>(m.getType()).getElementType();
    if (element != v.getType())
      v = b.create<arith::TruncFOp>(l, element, v);
    b.create<memref::StoreOp>(l, v, m, at);
  }
  /// m[at] += v.
  void accumulate(Value v, Value m, ValueRange at) { store(add(load(m, at), v), m, at); }

  /// sum over i in [lb, ub) of term(i).
  Value sum(Value lb, Value ub, function_ref<Value(Value)> term) {
    return nova::buildFor(b, l, lb, ub, c(1), {f(0.0)}, [&](Value i, ValueRange acc) {
             return SmallVector<Value>{add(acc[0], term(i))};
           }).getResult(0);
  }
  void loop(Value lb, Value ub, function_ref<void(Value)> body) {
    nova::buildFor(b, l, lb, ub, c(1), {}, [&](Value i, ValueRange) {
      body(i);
      return SmallVector<Value>{};
    });
  }
};

/// The element a kernel computes in: its (first) input's. Its result may
/// be narrower (writesEachResultOnce).
Type computeType(Operation *op) { return cast<ShapedType>(op->getOperand(0).getType()).getElementType(); }

} // namespace

namespace {

/// One LayerNorm row with the reference's formulas (mean, two-pass
/// variance, rstd; forward y, or the input gradient dx), the row's
/// columns visited as `rowSum` (a sum over them of term(column)) and
/// `eachColumn` (body(column) for each) say: by one thread, or by a warp.
void layerNormRowFormulas(Scalar &s, nova::LayerNormKernelOp op, function_ref<SmallVector<Value>(Value)> at,
                          function_ref<Value(function_ref<Value(Value)>)> rowSum,
                          function_ref<void(function_ref<void(Value)>)> eachColumn) {
  Value x = op.getInputs()[0], gamma = op.getInputs()[1], third = op.getInputs()[2], out = op.getInit();
  Value invD = s.f(1.0 / double(op.width()));
  Value mean = s.mul(rowSum([&](Value c) { return s.load(x, at(c)); }), invD);
  Value var = s.mul(rowSum([&](Value c) {
                      Value centered = s.sub(s.load(x, at(c)), mean);
                      return s.mul(centered, centered);
                    }),
                    invD);
  Value rstd = s.div(s.f(1.0), s.b.create<math::SqrtOp>(s.l, s.add(var, s.f(op.getEps().convertToDouble()))));
  auto xhat = [&](Value c) { return s.mul(s.sub(s.load(x, at(c)), mean), rstd); };
  if (!op.getBackward()) {
    eachColumn([&](Value c) { s.store(s.add(s.mul(xhat(c), s.load(gamma, c)), s.load(third, c)), out, at(c)); });
    return;
  }
  auto g = [&](Value c) { return s.mul(s.load(third, at(c)), s.load(gamma, c)); };
  Value meanG = s.mul(rowSum(g), invD);
  Value meanGx = s.mul(rowSum([&](Value c) { return s.mul(g(c), xhat(c)); }), invD);
  eachColumn([&](Value c) {
    Value centered = s.sub(g(c), meanG);
    s.store(s.mul(s.sub(centered, s.mul(xhat(c), meanGx)), rstd), out, at(c));
  });
}

/// The indices of `column` in the row whose leading indices are `prefix`.
SmallVector<Value> rowIndices(ArrayRef<Value> prefix, Value column) {
  SmallVector<Value> idx(prefix);
  idx.push_back(column);
  return idx;
}

} // namespace

void mlir::nova::buildLayerNormRow(OpBuilder &b, LayerNormKernelOp op, Value row) {
  auto type = cast<MemRefType>(op.getInit().getType());
  Scalar s{b, op.getLoc(), computeType(op)};
  SmallVector<Value> prefix = delinearizeIndex(b, s.l, row, type.getShape().drop_back());
  Value zero = s.c(0), width = s.c(op.width());
  layerNormRowFormulas(
      s, op, [&](Value c) { return rowIndices(prefix, c); },
      [&](function_ref<Value(Value)> term) { return s.sum(zero, width, term); },
      [&](function_ref<void(Value)> body) { s.loop(zero, width, body); });
}

void mlir::nova::buildAttentionHead(OpBuilder &b, AttentionKernelOp op, Value unit) {
  Scalar s{b, op.getLoc(), computeType(op)};
  const int64_t T = op.seq(), d = op.model(), hd = op.headDim(), heads = op.getHeads();
  Value batch = b.create<arith::DivUIOp>(s.l, unit, s.c(heads));
  Value head = b.create<arith::RemUIOp>(s.l, unit, s.c(heads));
  Value column0 = b.create<arith::MulIOp>(s.l, head, s.c(hd)); // the head's first column
  Value qkv = op.getInputs()[0], out = op.getInit();
  Value zero = s.c(0), seq = s.c(T), width = s.c(hd);
  // Element c of the head's q (part 0), k (1) or v (2) in row t of `m`.
  auto at = [&](Value t, int64_t part, Value c) {
    return SmallVector<Value>{batch, t, s.iadd(s.iadd(column0, c), part * d)};
  };
  Value scale = s.f(op.getScale().convertToDouble());
  auto score = [&](Value i, Value j) {
    return s.mul(scale, s.sum(zero, width, [&](Value c) {
      return s.mul(s.load(qkv, at(i, 0, c)), s.load(qkv, at(j, 1, c)));
    }));
  };
  // Row i's softmax over keys [0, i]: max and sum of exponentials.
  auto statistics = [&](Value i, Value &max, Value &total) {
    Value keys = s.iadd(i, 1);
    Value lowest = s.f(-std::numeric_limits<double>::infinity());
    max = nova::buildFor(b, s.l, zero, keys, s.c(1), {lowest}, [&](Value j, ValueRange m) {
            return SmallVector<Value>{b.create<arith::MaximumFOp>(s.l, m[0], score(i, j))};
          }).getResult(0);
    total = s.sum(zero, keys, [&](Value j) { return b.create<math::ExpOp>(s.l, s.sub(score(i, j), max)); });
  };
  auto probability = [&](Value i, Value j, Value max, Value total) {
    return s.div(b.create<math::ExpOp>(s.l, s.sub(score(i, j), max)), total);
  };
  if (!op.getBackward()) {
    s.loop(zero, seq, [&](Value i) {
      Value max, total;
      statistics(i, max, total);
      s.loop(zero, width, [&](Value c) { s.store(s.f(0.0), out, at(i, 0, c)); });
      s.loop(zero, s.iadd(i, 1), [&](Value j) {
        Value p = probability(i, j, max, total);
        s.loop(zero, width, [&](Value c) { s.accumulate(s.mul(p, s.load(qkv, at(j, 2, c))), out, at(i, 0, c)); });
      });
    });
    return;
  }
  Value grad = op.getInputs()[1];
  s.loop(zero, seq, [&](Value t) {
    s.loop(zero, width, [&](Value c) {
      for (int64_t part = 0; part < 3; ++part)
        s.store(s.f(0.0), out, at(t, part, c));
    });
  });
  s.loop(zero, seq, [&](Value i) {
    Value max, total;
    statistics(i, max, total);
    // dP_ij = g_i . v_j; D_i = sum_j P_ij dP_ij.
    auto dP = [&](Value j) {
      return s.sum(zero, width, [&](Value c) { return s.mul(s.load(grad, at(i, 0, c)), s.load(qkv, at(j, 2, c))); });
    };
    Value keys = s.iadd(i, 1);
    Value D = s.sum(zero, keys, [&](Value j) { return s.mul(probability(i, j, max, total), dP(j)); });
    s.loop(zero, keys, [&](Value j) {
      Value p = probability(i, j, max, total);
      Value dS = s.mul(scale, s.mul(p, s.sub(dP(j), D)));
      s.loop(zero, width, [&](Value c) {
        s.accumulate(s.mul(dS, s.load(qkv, at(j, 1, c))), out, at(i, 0, c));
        s.accumulate(s.mul(dS, s.load(qkv, at(i, 0, c))), out, at(j, 1, c));
        s.accumulate(s.mul(p, s.load(grad, at(i, 0, c))), out, at(j, 2, c));
      });
    });
  });
}

std::optional<mlir::nova::AttentionRowsPlan> mlir::nova::planAttentionRows(AttentionKernelOp op) {
  if (op.headDim() > kAttentionRowsMaxHeadDim)
    return std::nullopt;
  const int64_t T = op.seq();
  AttentionRowsPlan plan;
  plan.threads = std::min<int64_t>(256, std::max<int64_t>(32, (T + 31) / 32 * 32));
  const int64_t pairs = op.batch() * op.getHeads();
  if (!op.getBackward()) {
    plan.rowBlocks = (T + plan.threads - 1) / plan.threads;
    plan.blocks = pairs * plan.rowBlocks;
    return plan;
  }
  plan.blocks = pairs;
  plan.sharedBytes = 3 * T * std::max<int64_t>(1, computeType(op).getIntOrFloatBitWidth() / 8);
  return plan;
}

void mlir::nova::buildAttentionRows(OpBuilder &b, AttentionKernelOp op, const AttentionRowsPlan &plan, Value thread,
                                    Value block) {
  Scalar s{b, op.getLoc(), computeType(op)};
  Location l = s.l;
  const int64_t T = op.seq(), d = op.model(), hd = op.headDim(), heads = op.getHeads(), threads = plan.threads;
  Value pair = b.create<arith::DivUIOp>(l, block, s.c(plan.rowBlocks));
  Value rowBlock = b.create<arith::RemUIOp>(l, block, s.c(plan.rowBlocks));
  Value batch = b.create<arith::DivUIOp>(l, pair, s.c(heads));
  Value column0 = b.create<arith::MulIOp>(l, b.create<arith::RemUIOp>(l, pair, s.c(heads)), s.c(hd));
  Value qkv = op.getInputs()[0], out = op.getInit();
  Value scale = s.f(op.getScale().convertToDouble());
  auto at = [&](Value t, int64_t part, int64_t c) {
    return SmallVector<Value>{batch, t, s.iadd(column0, c + part * d)};
  };
  auto exp = [&](Value x) -> Value { return b.create<math::ExpOp>(l, x); };
  auto minIndex = [&](Value x, int64_t bound) -> Value { return b.create<arith::MinUIOp>(l, x, s.c(bound)); };
  // Row t's head columns of part `part` of `m` (t clamped into the sequence:
  // threads past its end load a real row and store nothing).
  auto loadRow = [&](Value m, Value t, int64_t part) {
    SmallVector<Value> row;
    Value inside = minIndex(t, T - 1);
    for (int64_t c = 0; c < hd; ++c)
      row.push_back(s.load(m, at(inside, part, c)));
    return row;
  };
  // sum_c x[c] * m[t, part, c], in column order (as the reference).
  auto dot = [&](ArrayRef<Value> x, Value m, Value t, int64_t part) {
    Value total = s.f(0.0);
    for (int64_t c = 0; c < hd; ++c)
      total = s.add(total, s.mul(x[size_t(c)], s.load(m, at(t, part, c))));
    return total;
  };
  auto storeRow = [&](Value inside, ArrayRef<Value> row, Value t, int64_t part, Value divisor) {
    auto guard = b.create<scf::IfOp>(l, inside, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&guard.getThenRegion().front());
    for (int64_t c = 0; c < hd; ++c)
      s.store(divisor ? s.div(row[size_t(c)], divisor) : row[size_t(c)], out, at(t, part, c));
  };
  // Loops whose bounds are the same in every thread of the block, the
  // causal mask a branch inside.
  auto maskedLoop = [&](Value lb, Value ub, ValueRange init, function_ref<Value(Value)> take,
                        function_ref<SmallVector<Value>(Value, ValueRange)> step) {
    return buildMaskedFor(b, l, lb, ub, init, take, step);
  };
  Value lowest = s.f(-std::numeric_limits<double>::infinity());
  SmallVector<Value> zeros(size_t(hd), s.f(0.0));

  if (!op.getBackward()) {
    // Query row i: one pass, the running max m, sum l and output, rescaled
    // by exp(m_old - m_new) as the max grows; out = acc / l.
    Value first = b.create<arith::MulIOp>(l, rowBlock, s.c(threads));
    Value i = s.iadd(first, thread);
    Value inside = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, i, s.c(T));
    SmallVector<Value> q = loadRow(qkv, i, 0);
    SmallVector<Value> init{lowest, s.f(0.0)};
    init.append(zeros);
    scf::ForOp keys = maskedLoop(
        s.c(0), minIndex(s.iadd(first, threads), T), init,
        [&](Value j) { return b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ule, j, i); },
        [&](Value j, ValueRange carried) {
          Value score = s.mul(scale, dot(q, qkv, j, 1));
          Value max = b.create<arith::MaximumFOp>(l, carried[0], score);
          Value rescale = exp(s.sub(carried[0], max)), p = exp(s.sub(score, max));
          SmallVector<Value> next{max, s.add(s.mul(carried[1], rescale), p)};
          for (int64_t c = 0; c < hd; ++c)
            next.push_back(s.add(s.mul(carried[size_t(2 + c)], rescale), s.mul(p, s.load(qkv, at(j, 2, c)))));
          return next;
        });
    storeRow(inside, SmallVector<Value>(keys.getResults().drop_front(2)), i, 0, keys.getResult(1));
    return;
  }

  // Backward. Shared statistics of each query row: max, sum, D.
  auto wg = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Value dyn = b.create<gpu::DynamicSharedMemoryOp>(
      l, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(), wg));
  Value stats = b.create<memref::ViewOp>(l, MemRefType::get({T, 3}, s.e, MemRefLayoutAttrInterface(), wg), dyn,
                                         s.c(0), ValueRange{});
  Value grad = op.getInputs()[1];
  const int64_t iterations = (T + threads - 1) / threads;
  // Query rows: max m, sum l and D = sum_j P_ij dP_ij (dP_ij = g_i . v_j)
  // online in one pass; then dq_i = sum_j dS_ij k_j, dS_ij = scale P_ij
  // (dP_ij - D).
  s.loop(s.c(0), s.c(iterations), [&](Value it) {
    Value first = b.create<arith::MulIOp>(l, it, s.c(threads));
    Value i = s.iadd(first, thread);
    Value inside = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, i, s.c(T));
    SmallVector<Value> q = loadRow(qkv, i, 0), g = loadRow(grad, i, 0);
    Value end = minIndex(s.iadd(first, threads), T);
    auto causal = [&](Value j) { return b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ule, j, i); };
    scf::ForOp pass = maskedLoop(s.c(0), end, {lowest, s.f(0.0), s.f(0.0)}, causal, [&](Value j, ValueRange c) {
      Value score = s.mul(scale, dot(q, qkv, j, 1));
      Value max = b.create<arith::MaximumFOp>(l, c[0], score);
      Value rescale = exp(s.sub(c[0], max)), p = exp(s.sub(score, max));
      return SmallVector<Value>{max, s.add(s.mul(c[1], rescale), p),
                                s.add(s.mul(c[2], rescale), s.mul(p, dot(g, qkv, j, 2)))};
    });
    Value max = pass.getResult(0), total = pass.getResult(1), D = s.div(pass.getResult(2), total);
    scf::ForOp dq = maskedLoop(s.c(0), end, zeros, causal, [&](Value j, ValueRange acc) {
      Value p = s.div(exp(s.sub(s.mul(scale, dot(q, qkv, j, 1)), max)), total);
      Value dS = s.mul(scale, s.mul(p, s.sub(dot(g, qkv, j, 2), D)));
      SmallVector<Value> next;
      for (int64_t c = 0; c < hd; ++c)
        next.push_back(s.add(acc[size_t(c)], s.mul(dS, s.load(qkv, at(j, 1, c)))));
      return next;
    });
    storeRow(inside, SmallVector<Value>(dq.getResults()), i, 0, Value());
    auto guard = b.create<scf::IfOp>(l, inside, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard ig(b);
    b.setInsertionPointToStart(&guard.getThenRegion().front());
    for (auto [slot, value] : llvm::enumerate(SmallVector<Value>{max, total, D}))
      s.store(value, stats, {i, s.c(int64_t(slot))});
  });
  b.create<gpu::BarrierOp>(l);
  // Key rows: dk_j = sum_{i >= j} dS_ij q_i, dv_j = sum_{i >= j} P_ij g_i.
  s.loop(s.c(0), s.c(iterations), [&](Value it) {
    Value first = b.create<arith::MulIOp>(l, it, s.c(threads));
    Value j = s.iadd(first, thread);
    Value inside = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, j, s.c(T));
    SmallVector<Value> k = loadRow(qkv, j, 1), v = loadRow(qkv, j, 2);
    SmallVector<Value> init(zeros);
    init.append(zeros);
    scf::ForOp rows = maskedLoop(
        first, s.c(T), init, [&](Value i) { return b.create<arith::CmpIOp>(l, arith::CmpIPredicate::uge, i, j); },
        [&](Value i, ValueRange acc) {
          Value score = s.f(0.0), dP = s.f(0.0);
          SmallVector<Value> q, g;
          for (int64_t c = 0; c < hd; ++c) {
            q.push_back(s.load(qkv, at(i, 0, c)));
            g.push_back(s.load(grad, at(i, 0, c)));
            score = s.add(score, s.mul(q.back(), k[size_t(c)]));
            dP = s.add(dP, s.mul(g.back(), v[size_t(c)]));
          }
          Value max = s.load(stats, {i, s.c(0)}), total = s.load(stats, {i, s.c(1)}), D = s.load(stats, {i, s.c(2)});
          Value p = s.div(exp(s.sub(s.mul(scale, score), max)), total);
          Value dS = s.mul(scale, s.mul(p, s.sub(dP, D)));
          SmallVector<Value> next;
          for (int64_t c = 0; c < hd; ++c)
            next.push_back(s.add(acc[size_t(c)], s.mul(dS, q[size_t(c)])));
          for (int64_t c = 0; c < hd; ++c)
            next.push_back(s.add(acc[size_t(hd + c)], s.mul(p, g[size_t(c)])));
          return next;
        });
    storeRow(inside, SmallVector<Value>(rows.getResults().take_front(hd)), j, 1, Value());
    storeRow(inside, SmallVector<Value>(rows.getResults().drop_front(hd)), j, 2, Value());
  });
}

bool mlir::nova::layerNormByWarps(LayerNormKernelOp op) {
  return computeType(op).isF32() && op.width() >= 32;
}

void mlir::nova::buildLayerNormWarpRows(OpBuilder &b, LayerNormKernelOp op, Value warp, Value lane, int64_t warps) {
  auto type = cast<MemRefType>(op.getInit().getType());
  Scalar s{b, op.getLoc(), computeType(op)};
  Location l = s.l;
  const int64_t d = op.width(), rows = op.rows(), steps = (d + 31) / 32;
  s.loop(s.c(0), s.c((rows + warps - 1) / warps), [&](Value it) {
    Value unit = s.iadd(b.create<arith::MulIOp>(l, it, s.c(warps)), warp);
    Value inside = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, unit, s.c(rows));
    Value row = b.create<arith::MinUIOp>(l, unit, s.c(rows - 1));
    SmallVector<Value> prefix = delinearizeIndex(b, l, row, type.getShape().drop_back());
    // Lane `lane`'s column at step `step`, clamped into the row, and
    // whether it is one.
    auto column = [&](Value step, Value &c, Value &take) {
      Value raw = s.iadd(b.create<arith::MulIOp>(l, step, s.c(32)), lane);
      take = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, raw, s.c(d));
      c = b.create<arith::MinUIOp>(l, raw, s.c(d - 1));
    };
    layerNormRowFormulas(
        s, op, [&](Value c) { return rowIndices(prefix, c); },
        // The lanes' partials, then a butterfly: every lane has the sum.
        [&](function_ref<Value(Value)> term) {
          Value partial =
              nova::buildFor(b, l, s.c(0), s.c(steps), s.c(1), {s.f(0.0)}, [&](Value step, ValueRange acc) {
                Value c, take;
                column(step, c, take);
                Value v = b.create<arith::SelectOp>(l, take, term(c), s.f(0.0));
                return SmallVector<Value>{s.add(acc[0], v)};
              }).getResult(0);
          return warpAllReduce(b, l, partial, [&](Value x, Value y) { return s.add(x, y); });
        },
        [&](function_ref<void(Value)> body) {
          s.loop(s.c(0), s.c(steps), [&](Value step) {
            Value c, take;
            column(step, c, take);
            auto guard = b.create<scf::IfOp>(l, b.create<arith::AndIOp>(l, take, inside), /*withElseRegion=*/false);
            OpBuilder::InsertionGuard g(b);
            b.setInsertionPointToStart(&guard.getThenRegion().front());
            body(c);
          });
        });
  });
}

bool mlir::nova::writesEachResultOnce(Operation *op) {
  if (auto norm = dyn_cast<LayerNormKernelOp>(op))
    return !norm.getBackward();
  if (auto attention = dyn_cast<AttentionKernelOp>(op))
    return !attention.getBackward() && attention.headDim() <= kAttentionRowsMaxHeadDim;
  return false;
}
