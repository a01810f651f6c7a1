//===- GpuScalarKernels.cpp - one GPU thread's LayerNorm row or attention head ===//

#include "compiler/target/cuda/GpuScalarKernels.h"
#include "compiler/target/cuda/GpuBlockReduction.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <cmath>
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
  /// m[at], widened to the compute element where m's is a narrower float
  /// (attention's bf16 qkv, GpuBf16Operands.cpp).
  Value load(Value m, ValueRange at) {
    Value v = b.create<memref::LoadOp>(l, m, at);
    if (v.getType() != e && isa<FloatType>(v.getType()) && isa<FloatType>(e))
      v = b.create<arith::ExtFOp>(l, e, v);
    return v;
  }
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

/// The element a kernel computes in: its (first) input's, f32 for a
/// 16-bit float. Its result may be narrower (writesEachResultOnce).
Type computeType(Operation *op) {
  Type e = cast<ShapedType>(op->getOperand(0).getType()).getElementType();
  return e.isBF16() || e.isF16() ? Float32Type::get(e.getContext()) : e;
}

} // namespace

namespace {

/// The indices of `column` in the row whose leading indices are `prefix`.
SmallVector<Value> rowIndices(ArrayRef<Value> prefix, Value column) {
  SmallVector<Value> idx(prefix);
  idx.push_back(column);
  return idx;
}

/// Row `prefix`'s statistics (two values, [..., 2] `stats`): loaded, or
/// stored.
std::pair<Value, Value> loadRowStats(Scalar &s, Value stats, ArrayRef<Value> prefix) {
  return {s.load(stats, rowIndices(prefix, s.c(0))), s.load(stats, rowIndices(prefix, s.c(1)))};
}
void storeRowStats(Scalar &s, Value stats, ArrayRef<Value> prefix, Value first, Value second) {
  s.store(first, stats, rowIndices(prefix, s.c(0)));
  s.store(second, stats, rowIndices(prefix, s.c(1)));
}

/// How a row kernel's formulas visit a row's columns: by one thread, or by
/// a warp (each lane every 32nd column, reductions in shuffles).
struct RowVisit {
  /// The row's reduction of term(column) by `combine` from `identity`.
  function_ref<Value(function_ref<Value(Value)> term, function_ref<Value(Value, Value)> combine,
                     double identity)>
      reduce;
  /// body(column) for each column.
  function_ref<void(function_ref<void(Value)>)> eachColumn;
  /// body() once for the row (a warp's first lane).
  function_ref<void(function_ref<void()>)> once;
};

/// One LayerNorm row with the reference's formulas (mean, two-pass
/// variance, rstd; forward y, or the input gradient dx). With stats, the
/// mean and rstd are loaded (a reader) or also stored (the writer).
void layerNormRowFormulas(Scalar &s, nova::LayerNormKernelOp op, ArrayRef<Value> prefix,
                          function_ref<SmallVector<Value>(Value)> at, const RowVisit &visit) {
  auto rowSum = [&](function_ref<Value(Value)> term) {
    return visit.reduce(term, [&](Value x, Value y) { return s.add(x, y); }, 0.0);
  };
  Value x = op.getInputs()[0], gamma = op.getInputs()[1], third = op.getInputs()[2], out = op.getInit();
  Value stats = op.getStats();
  Value invD = s.f(1.0 / double(op.width()));
  Value mean, rstd;
  if (op.readsStats()) {
    std::tie(mean, rstd) = loadRowStats(s, stats, prefix);
  } else {
    mean = s.mul(rowSum([&](Value c) { return s.load(x, at(c)); }), invD);
    Value var = s.mul(rowSum([&](Value c) {
                        Value centered = s.sub(s.load(x, at(c)), mean);
                        return s.mul(centered, centered);
                      }),
                      invD);
    rstd = s.div(s.f(1.0), s.b.create<math::SqrtOp>(s.l, s.add(var, s.f(op.getEps().convertToDouble()))));
    if (stats)
      visit.once([&] { storeRowStats(s, stats, prefix, mean, rstd); });
  }
  auto xhat = [&](Value c) { return s.mul(s.sub(s.load(x, at(c)), mean), rstd); };
  if (!op.getBackward()) {
    visit.eachColumn(
        [&](Value c) { s.store(s.add(s.mul(xhat(c), s.load(gamma, c)), s.load(third, c)), out, at(c)); });
    return;
  }
  auto g = [&](Value c) { return s.mul(s.load(third, at(c)), s.load(gamma, c)); };
  Value meanG = s.mul(rowSum(g), invD);
  Value meanGx = s.mul(rowSum([&](Value c) { return s.mul(g(c), xhat(c)); }), invD);
  visit.eachColumn([&](Value c) {
    Value centered = s.sub(g(c), meanG);
    s.store(s.mul(s.sub(centered, s.mul(xhat(c), meanGx)), rstd), out, at(c));
  });
}

/// One cross-entropy row with the reference's formulas: the max m, the sum
/// s of exp(x - m) (a backward with stats reads both; a forward with stats
/// stores them); forward the loss log(s) - (x[y] - m), backward dx =
/// exp(x - m) g / s - [c == y] g, each element written once. A label
/// outside [0, C) gives a zero loss and gradient. `prefix` indexes the
/// row in the labels (and the losses or grad).
void crossEntropyRowFormulas(Scalar &s, nova::CrossEntropyKernelOp op, ArrayRef<Value> prefix,
                             function_ref<SmallVector<Value>(Value)> at, const RowVisit &visit) {
  OpBuilder &b = s.b;
  Location l = s.l;
  Value x = op.getInputs()[0], labels = op.getInputs()[1], out = op.getInit(), stats = op.getStats();
  Value max, total;
  if (op.readsStats())
    std::tie(max, total) = loadRowStats(s, stats, prefix);
  else
    max = visit.reduce([&](Value c) { return s.load(x, at(c)); },
                       [&](Value a, Value v) { return b.create<arith::MaximumFOp>(l, a, v); },
                       -std::numeric_limits<double>::infinity());
  auto shifted = [&](Value c) -> Value { return b.create<math::ExpOp>(l, s.sub(s.load(x, at(c)), max)); };
  if (!total)
    total = visit.reduce(shifted, [&](Value a, Value v) { return s.add(a, v); }, 0.0);
  Value label = b.create<arith::IndexCastOp>(l, b.getIndexType(), s.load(labels, prefix));
  Value inside = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, label, s.c(op.width()));
  Value column = b.create<arith::SelectOp>(l, inside, label, s.c(0));
  if (!op.getBackward()) {
    // The difference first: exact where x[y] is near the max.
    Value loss = s.sub(b.create<math::LogOp>(l, total), s.sub(s.load(x, at(column)), max));
    loss = b.create<arith::SelectOp>(l, inside, loss, s.f(0.0));
    visit.once([&] {
      s.store(loss, out, prefix);
      if (stats)
        storeRowStats(s, stats, prefix, max, total);
    });
    return;
  }
  Value g = b.create<arith::SelectOp>(l, inside, s.load(op.getInputs()[2], prefix), s.f(0.0));
  Value scale = s.div(g, total);
  visit.eachColumn([&](Value c) {
    Value isLabel = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, c, column);
    Value hot = b.create<arith::SelectOp>(l, isLabel, g, s.f(0.0));
    s.store(s.sub(s.mul(shifted(c), scale), hot), out, at(c));
  });
}

} // namespace

namespace {

/// The rows' shape without the row dim: the leading dims of the kernel's
/// first input ([..., d] or [..., C]).
ArrayRef<int64_t> leadingShape(Operation *op) {
  return cast<MemRefType>(op->getOperand(0).getType()).getShape().drop_back();
}

/// Row kernel `op`'s formulas for the row at `prefix`, visited as `visit`.
void rowFormulas(Scalar &s, Operation *op, ArrayRef<Value> prefix, const RowVisit &visit) {
  auto at = [&](Value c) { return rowIndices(prefix, c); };
  if (auto norm = dyn_cast<nova::LayerNormKernelOp>(op))
    return layerNormRowFormulas(s, norm, prefix, at, visit);
  crossEntropyRowFormulas(s, cast<nova::CrossEntropyKernelOp>(op), prefix, at, visit);
}

} // namespace

void mlir::nova::buildRow(OpBuilder &b, Operation *op, Value row) {
  Scalar s{b, op->getLoc(), computeType(op)};
  SmallVector<Value> prefix = delinearizeIndex(b, s.l, row, leadingShape(op));
  Value zero = s.c(0), width = s.c(rowKernelShape(op).second);
  rowFormulas(s, op, prefix,
              {[&](function_ref<Value(Value)> term, function_ref<Value(Value, Value)> combine, double identity) {
                 return nova::buildFor(b, s.l, zero, width, s.c(1), {s.f(identity)},
                                       [&](Value c, ValueRange acc) {
                                         return SmallVector<Value>{combine(acc[0], term(c))};
                                       })
                     .getResult(0);
               },
               [&](function_ref<void(Value)> body) { s.loop(zero, width, body); },
               [&](function_ref<void()> body) { body(); }});
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

std::optional<mlir::nova::AttentionBackwardPart> mlir::nova::attentionBackwardPart(AttentionKernelOp op) {
  auto kernel = op->getParentOfType<func::FuncOp>();
  auto part = kernel ? kernel->getAttrOfType<StringAttr>(kAttentionPartAttr) : StringAttr();
  if (!op.getBackward() || !part)
    return std::nullopt;
  return part.getValue() == "keys" ? AttentionBackwardPart::keys : AttentionBackwardPart::queries;
}

StringRef mlir::nova::attentionRowsOf(AttentionKernelOp op) {
  std::optional<AttentionBackwardPart> part = attentionBackwardPart(op);
  return !part ? "query rows"
         : *part == AttentionBackwardPart::queries
             ? "query rows (dq; each row's softmax statistics into the workspace)"
             : "key rows (dk, dv; the query rows' statistics from the workspace)";
}

MemRefType mlir::nova::attentionStatsType(AttentionKernelOp op) {
  return MemRefType::get({op.batch() * int64_t(op.getHeads()), op.seq(), 2}, computeType(op));
}

std::optional<mlir::nova::AttentionRowsPlan> mlir::nova::planAttentionRows(AttentionKernelOp op,
                                                                           int64_t maxSharedBytes) {
  if (op.headDim() > kAttentionRowsMaxHeadDim || (op.getBackward() && !attentionBackwardPart(op)))
    return std::nullopt;
  const int64_t T = op.seq(), hd = op.headDim();
  const int64_t bytes = std::max<int64_t>(1, computeType(op).getIntOrFloatBitWidth() / 8);
  AttentionRowsPlan plan;
  // Lanes a row: a power of two dividing hd, until a lane's columns of a
  // row take at most kAttentionLaneBytes (16 f32, 8 f64).
  while (hd / plan.lanes * bytes > kAttentionLaneBytes && hd % (2 * plan.lanes) == 0)
    plan.lanes *= 2;
  // Key (backward: also query) rows a tile: two tiles of kAttentionTileBytes
  // at most, no more rows than the sequence (rounded up to 8).
  plan.tileRows = std::clamp<int64_t>(kAttentionTileBytes / (hd * bytes), 8, 64);
  plan.tileRows = std::min(plan.tileRows, (T + 7) / 8 * 8);
  plan.sharedBytes = 2 * plan.tileRows * hd * bytes;
  if (plan.sharedBytes > maxSharedBytes)
    return std::nullopt;
  // 128 forward rows a block: a GPT's (batch, head) pairs times its row
  // blocks fill a GPU's SMs where 256 would leave half of them idle (8 x 8
  // pairs of 256 rows: 64 blocks against an H100's 132 SMs).
  const int64_t rows32 = std::max<int64_t>(32, (T + 31) / 32 * 32);
  plan.rows = std::min(op.getBackward() ? kAttentionBackwardRows : kAttentionForwardRows, rows32);
  plan.rowBlocks = (T + plan.rows - 1) / plan.rows;
  plan.blocks = op.batch() * op.getHeads() * plan.rowBlocks;
  // Rows a thread: as many as kAttentionRowRegisterBytes of registers hold
  // (a row's own columns of q and the output forward; of q, g and dq for
  // query rows backward; of k, v, dk and dv for key rows; a register at
  // least an element), in whole warps.
  const int64_t vectors = !op.getBackward() ? 2 : *attentionBackwardPart(op) == AttentionBackwardPart::queries ? 3 : 4;
  const int64_t rowBytes = hd / plan.lanes * std::max<int64_t>(bytes, 4) * vectors;
  for (int64_t r : {4, 2}) {
    if (r * rowBytes <= kAttentionRowRegisterBytes && (plan.rows * plan.lanes) % (32 * r) == 0) {
      plan.rowsPerThread = r;
      break;
    }
  }
  plan.threads = plan.rows * plan.lanes / plan.rowsPerThread;
  return plan;
}

void mlir::nova::buildAttentionRows(OpBuilder &b, AttentionKernelOp op, const AttentionRowsPlan &plan, Value thread,
                                    Value block, Value stats) {
  Scalar s{b, op.getLoc(), computeType(op)};
  Location l = s.l;
  const int64_t T = op.seq(), d = op.model(), hd = op.headDim(), heads = op.getHeads(), threads = plan.threads;
  const int64_t tileRows = plan.tileRows, lanes = plan.lanes, rowsPerPass = plan.rows, own = hd / lanes;
  const int64_t bytes = std::max<int64_t>(1, s.e.getIntOrFloatBitWidth() / 8);
  Value pair = b.create<arith::DivUIOp>(l, block, s.c(plan.rowBlocks));
  Value rowBlock = b.create<arith::RemUIOp>(l, block, s.c(plan.rowBlocks));
  Value batch = b.create<arith::DivUIOp>(l, pair, s.c(heads));
  Value column0 = b.create<arith::MulIOp>(l, b.create<arith::RemUIOp>(l, pair, s.c(heads)), s.c(hd));
  Value qkv = op.getInputs()[0], out = op.getInit();
  Value scale = s.f(op.getScale().convertToDouble());
  // This thread's row group of the block's (its rows: ownRows), and its
  // lane in the group: lane `lane` owns the head's columns lane + t *
  // lanes, t < own.
  Value rowInPass = b.create<arith::DivUIOp>(l, thread, s.c(lanes));
  Value lane = b.create<arith::RemUIOp>(l, thread, s.c(lanes));
  auto column = [&](int64_t t) { return s.iadd(lane, t * lanes); };
  auto at = [&](Value row, int64_t part, Value c) {
    return SmallVector<Value>{batch, row, s.iadd(s.iadd(column0, c), part * d)};
  };
  // Exponentials: f32 scores in log2 units (the scale times log2 e), each
  // exponential a 2^x by the SFU (sfuExp2): one instruction where math.exp
  // is a dozen FMA-pipe ones (a forward row takes two a visited row,
  // beside its lane's 16 FMAs of the dot product, 16 multiplies rescaling
  // its output and 16 FMAs adding to it, f32 heads of 64: counted, not
  // measured); f64 in natural units, math.exp
  // (GpuInlineMath). The workspace's
  // log-sum-exp is in the scores' units (attentionStatsType).
  const bool log2Units = s.e.isF32();
  Value scoreScale = log2Units ? s.f(op.getScale().convertToDouble() * M_LOG2E) : scale;
  auto exp = [&](Value x) -> Value {
    return log2Units ? sfuExp2(b, l, x) : b.create<math::ExpOp>(l, x).getResult();
  };
  auto inUnits = [&](Value natural) { return log2Units ? s.mul(natural, s.f(M_LOG2E)) : natural; };
  auto minIndex = [&](Value x, int64_t bound) -> Value { return b.create<arith::MinUIOp>(l, x, s.c(bound)); };
  // This lane's columns of part `part` of `m` in row t (t clamped into the
  // sequence: threads past its end load a real row and store nothing).
  auto loadOwn = [&](Value m, Value t, int64_t part) {
    SmallVector<Value> row;
    Value inside = minIndex(t, T - 1);
    for (int64_t k = 0; k < own; ++k)
      row.push_back(s.load(m, at(inside, part, column(k))));
    return row;
  };
  auto storeOwn = [&](Value inside, ArrayRef<Value> row, Value t, int64_t part, Value divisor) {
    auto guard = b.create<scf::IfOp>(l, inside, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&guard.getThenRegion().front());
    for (int64_t k = 0; k < own; ++k)
      s.store(divisor ? s.div(row[size_t(k)], divisor) : row[size_t(k)], out, at(t, part, column(k)));
  };
  Value lowest = s.f(-std::numeric_limits<double>::infinity());
  SmallVector<Value> zeros(size_t(own), s.f(0.0));

  // A block's first row: causal, a query block's work grows with its
  // rows' index, a key block's falls: the blocks with the most work first.
  Value queryFirst = b.create<arith::MulIOp>(l, b.create<arith::SubIOp>(l, s.c(plan.rowBlocks - 1), rowBlock),
                                             s.c(rowsPerPass));
  Value keyFirst = b.create<arith::MulIOp>(l, rowBlock, s.c(rowsPerPass));
  // Shared memory: two tiles of tileRows rows of a head's columns.
  auto wg = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Value dyn = b.create<gpu::DynamicSharedMemoryOp>(
      l, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(), wg));
  auto view = [&](int64_t offset, ArrayRef<int64_t> shape) -> Value {
    return b.create<memref::ViewOp>(l, MemRefType::get(shape, s.e, MemRefLayoutAttrInterface(), wg), dyn,
                                    s.c(offset), ValueRange{});
  };
  Value tileA = view(0, {tileRows, hd});
  Value tileB = view(tileRows * hd * bytes, {tileRows, hd});
  // The block's threads copy rows [r0, r0 + tileRows) of part `partA` of
  // `a` into tileA and of `partB` of `m` into tileB (rows clamped into the
  // sequence), consecutive threads consecutive columns; then a barrier.
  auto fillTiles = [&](Value r0, Value a, int64_t partA, Value m, int64_t partB) {
    const int64_t elements = tileRows * hd, rounds = (elements + threads - 1) / threads;
    s.loop(s.c(0), s.c(rounds), [&](Value round) {
      Value e = s.iadd(b.create<arith::MulIOp>(l, round, s.c(threads)), thread);
      auto copy = [&] {
        Value r = b.create<arith::DivUIOp>(l, e, s.c(hd)), c = b.create<arith::RemUIOp>(l, e, s.c(hd));
        Value row = minIndex(s.iadd(r0, r), T - 1);
        s.store(s.load(a, at(row, partA, c)), tileA, {r, c});
        s.store(s.load(m, at(row, partB, c)), tileB, {r, c});
      };
      if (elements % threads == 0) {
        copy();
        return;
      }
      auto guard = b.create<scf::IfOp>(l, b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, e, s.c(elements)),
                                       /*withElseRegion=*/false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&guard.getThenRegion().front());
      copy();
    });
    b.create<gpu::BarrierOp>(l);
  };
  // This thread's R rows of the block's: rows[rho] = first + group R + rho
  // (a row group's lanes hold the same rows, adjacent rows a thread so
  // that a warp's rows are one run). Every visited row's columns are read
  // from shared memory once and serve all R rows: with one row a thread a
  // warp issues as many shared reads as FMAs for a visited row, and an SM
  // issues a quarter as many reads as FMAs a clock, so the reads would
  // bound it (counted from the instructions, not measured).
  const int64_t R = plan.rowsPerThread, rowsPerWarp = 32 / lanes * R;
  auto ownRows = [&](Value first) {
    SmallVector<Value> rows;
    Value base = s.iadd(first, b.create<arith::MulIOp>(l, rowInPass, s.c(R)));
    for (int64_t rho = 0; rho < R; ++rho)
      rows.push_back(s.iadd(base, rho));
    return rows;
  };
  // The warp's first and last rows (of the block's, from `first`): the
  // rows it visits are the ones these need, the same in all its lanes.
  Value warp = b.create<arith::DivUIOp>(l, thread, s.c(32));
  auto warpFirst = [&](Value first) { return s.iadd(first, b.create<arith::MulIOp>(l, warp, s.c(rowsPerWarp))); };
  auto warpLast = [&](Value first) { return s.iadd(warpFirst(first), rowsPerWarp - 1); };
  auto cmp = [&](arith::CmpIPredicate p, Value x, Value y) { return b.create<arith::CmpIOp>(l, p, x, y); };
  // A score where the causal mask allows it, else -inf: its probability is
  // then exp(-inf - m) = 0 and it moves no running max; the running max
  // starts at the most negative finite value, not -inf, so that a row
  // whose first visited scores are all masked rescales by exp(0) = 1, not
  // exp(-inf + inf) = NaN.
  Value minusInf = lowest;
  Value lowestFinite = b.create<arith::ConstantOp>(
      l, b.getFloatAttr(s.e, APFloat::getLargest(cast<FloatType>(s.e).getFloatSemantics(), /*Negative=*/true)));
  auto masked = [&](Value allowed, Value score) { return b.create<arith::SelectOp>(l, allowed, score, minusInf); };
  // This lane's columns of row r of a tile.
  auto columnsOf = [&](Value tile, Value r) {
    SmallVector<Value> cols;
    for (int64_t k = 0; k < own; ++k)
      cols.push_back(s.load(tile, {r, column(k)}));
    return cols;
  };
  // sum_c x[c] * y[c] over the row's lanes: each lane its columns in
  // order, then a butterfly of shuffles over the row's lanes (every lane
  // gets the sum). Outside any branch that lanes of a warp take apart.
  // Two running sums (even and odd columns) halve the chain of dependent
  // FMAs a visited row waits on.
  auto dot = [&](ArrayRef<Value> x, ArrayRef<Value> y) {
    Value even = s.f(0.0), odd = s.f(0.0);
    for (int64_t k = 0; k < own; ++k) {
      Value &sum = k % 2 ? odd : even;
      sum = s.add(sum, s.mul(x[size_t(k)], y[size_t(k)]));
    }
    Value total = own > 1 ? s.add(even, odd) : even;
    return lanes == 1 ? total : warpAllReduce(b, l, total, [&](Value x, Value y) { return s.add(x, y); }, lanes);
  };
  // acc + factor * y, column by column, appended to `next`.
  auto accumulate = [&](ValueRange acc, Value factor, ArrayRef<Value> y, SmallVector<Value> &next) {
    for (int64_t k = 0; k < own; ++k)
      next.push_back(s.add(acc[size_t(k)], s.mul(factor, y[size_t(k)])));
  };
  // Over the tiles of rows [lb, ub) (bounds the same in every thread):
  // fills them (fillTiles' arguments); for each row r that the warp's rows
  // need (lo <= r <= hi, one of them null for none: the same in all its lanes, so
  // its shuffles see the whole warp), step(r, r's index in the tiles,
  // carried); a barrier
  // before the next tile overwrites them.
  using Step = function_ref<SmallVector<Value>(Value, Value, ValueRange)>;
  auto overTiles = [&](Value lb, Value ub, ValueRange init, Value a, int64_t partA, Value m, int64_t partB, Value lo,
                       Value hi, Step step) {
    Value count = b.create<arith::DivUIOp>(l, s.iadd(b.create<arith::SubIOp>(l, ub, lb), tileRows - 1),
                                           s.c(tileRows));
    return nova::buildFor(b, l, s.c(0), count, s.c(1), init, [&](Value t, ValueRange carried) {
      Value r0 = s.iadd(lb, b.create<arith::MulIOp>(l, t, s.c(tileRows)));
      fillTiles(r0, a, partA, m, partB);
      Value end = b.create<arith::MinUIOp>(l, s.iadd(r0, tileRows), ub);
      scf::ForOp rows = nova::buildFor(b, l, r0, end, s.c(1), carried, [&](Value r, ValueRange acc) {
        Value needed = hi ? cmp(arith::CmpIPredicate::ule, r, hi) : Value();
        if (lo) {
          Value from = cmp(arith::CmpIPredicate::uge, r, lo);
          needed = needed ? b.create<arith::AndIOp>(l, from, needed) : from;
        }
        auto branch = b.create<scf::IfOp>(l, acc.getTypes(), needed, /*withElseRegion=*/true);
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(&branch.getThenRegion().front());
        b.create<scf::YieldOp>(l, step(r, b.create<arith::SubIOp>(l, r, r0), acc));
        b.setInsertionPointToStart(&branch.getElseRegion().front());
        b.create<scf::YieldOp>(l, acc);
        return SmallVector<Value>(branch.getResults());
      });
      b.create<gpu::BarrierOp>(l);
      return SmallVector<Value>(rows.getResults());
    });
  };
  // Carried values: R groups of `width`, row rho's at rho x width.
  auto groupOf = [](ValueRange all, int64_t rho, int64_t width) { return all.slice(size_t(rho * width), size_t(width)); };

  if (!op.getBackward()) {
    // Query row i: one pass over the key tiles (k, v), the running max m,
    // sum l and output, rescaled by exp(m_old - m_new) as the max grows;
    // out = acc / l.
    Value first = queryFirst;
    SmallVector<Value> rows = ownRows(first);
    SmallVector<SmallVector<Value>> q;
    SmallVector<Value> init;
    for (Value i : rows) {
      q.push_back(loadOwn(qkv, i, 0));
      init.append({lowestFinite, s.f(0.0)});
      init.append(zeros);
    }
    const int64_t width = 2 + own;
    scf::ForOp keys = overTiles(
        s.c(0), minIndex(s.iadd(first, rowsPerPass), T), init, qkv, 1, qkv, 2, Value(), warpLast(first),
        [&](Value j, Value jt, ValueRange carried) {
          SmallVector<Value> k = columnsOf(tileA, jt), v = columnsOf(tileB, jt), next;
          for (int64_t rho = 0; rho < R; ++rho) {
            ValueRange c = groupOf(carried, rho, width);
            Value score = masked(cmp(arith::CmpIPredicate::ule, j, rows[size_t(rho)]), s.mul(scoreScale, dot(q[size_t(rho)], k)));
            Value max = b.create<arith::MaximumFOp>(l, c[0], score);
            Value rescale = exp(s.sub(c[0], max)), p = exp(s.sub(score, max));
            next.append({max, s.add(s.mul(c[1], rescale), p)});
            SmallVector<Value> scaled;
            for (int64_t col = 0; col < own; ++col)
              scaled.push_back(s.mul(c[size_t(2 + col)], rescale));
            accumulate(scaled, p, v, next);
          }
          return next;
        });
    for (int64_t rho = 0; rho < R; ++rho) {
      ValueRange result = groupOf(keys.getResults(), rho, width);
      Value i = rows[size_t(rho)];
      storeOwn(cmp(arith::CmpIPredicate::ult, i, s.c(T)), SmallVector<Value>(result.drop_front(2)), i, 0, result[1]);
    }
    return;
  }

  // Backward: this kernel's part (splitAttentionBackward). Each query
  // row's log-sum-exp (max + log sum) and D in `stats`, [pair, row, 2]:
  // P_ij = exp(score_ij - lse_i), no division a pair.
  Value grad = op.getInputs()[1];
  auto statistic = [&](Value i, int64_t slot) { return SmallVector<Value>{pair, i, s.c(slot)}; };
  if (*attentionBackwardPart(op) == AttentionBackwardPart::queries) {
    // Query rows: max m, sum l and D = sum_j P_ij dP_ij online in one pass
    // over the key tiles (k, v); then dq_i = sum_j dS_ij k_j, dS_ij = scale
    // P_ij (dP_ij - D), in a second. score_ij = q_i . k_j, dP_ij = g_i . v_j.
    Value first = queryFirst;
    SmallVector<Value> rows = ownRows(first);
    SmallVector<SmallVector<Value>> q, g;
    SmallVector<Value> init;
    for (Value i : rows) {
      q.push_back(loadOwn(qkv, i, 0));
      g.push_back(loadOwn(grad, i, 0));
      init.append({lowestFinite, s.f(0.0), s.f(0.0)});
    }
    Value end = minIndex(s.iadd(first, rowsPerPass), T), last = warpLast(first);
    auto causal = [&](Value j, int64_t rho) { return cmp(arith::CmpIPredicate::ule, j, rows[size_t(rho)]); };
    scf::ForOp pass = overTiles(s.c(0), end, init, qkv, 1, qkv, 2, Value(), last,
                                [&](Value j, Value jt, ValueRange c) {
                                  SmallVector<Value> k = columnsOf(tileA, jt), v = columnsOf(tileB, jt), next;
                                  for (int64_t rho = 0; rho < R; ++rho) {
                                    ValueRange r = groupOf(c, rho, 3);
                                    Value score = masked(causal(j, rho), s.mul(scoreScale, dot(q[size_t(rho)], k)));
                                    Value dP = dot(g[size_t(rho)], v);
                                    Value max = b.create<arith::MaximumFOp>(l, r[0], score);
                                    Value rescale = exp(s.sub(r[0], max)), p = exp(s.sub(score, max));
                                    next.append({max, s.add(s.mul(r[1], rescale), p),
                                                 s.add(s.mul(r[2], rescale), s.mul(p, dP))});
                                  }
                                  return next;
                                });
    // The log-sum-exp in the scores' units.
    SmallVector<Value> lse, D, dqInit;
    for (int64_t rho = 0; rho < R; ++rho) {
      Value total = pass.getResult(unsigned(3 * rho + 1)), max = pass.getResult(unsigned(3 * rho));
      D.push_back(s.div(pass.getResult(unsigned(3 * rho + 2)), total));
      Value logTotal = b.create<math::LogOp>(l, total);
      lse.push_back(s.add(max, inUnits(logTotal)));
      dqInit.append(zeros);
    }
    scf::ForOp dq = overTiles(s.c(0), end, dqInit, qkv, 1, qkv, 2, Value(), last,
                              [&](Value j, Value jt, ValueRange acc) {
                                SmallVector<Value> k = columnsOf(tileA, jt), v = columnsOf(tileB, jt), next;
                                for (int64_t rho = 0; rho < R; ++rho) {
                                  Value score = masked(causal(j, rho), s.mul(scoreScale, dot(q[size_t(rho)], k)));
                                  Value dP = dot(g[size_t(rho)], v);
                                  Value p = exp(s.sub(score, lse[size_t(rho)]));
                                  Value dS = s.mul(scale, s.mul(p, s.sub(dP, D[size_t(rho)])));
                                  accumulate(groupOf(acc, rho, own), dS, k, next);
                                }
                                return next;
                              });
    Value firstLane = cmp(arith::CmpIPredicate::eq, lane, s.c(0));
    for (int64_t rho = 0; rho < R; ++rho) {
      Value i = rows[size_t(rho)];
      Value inside = cmp(arith::CmpIPredicate::ult, i, s.c(T));
      storeOwn(inside, SmallVector<Value>(groupOf(dq.getResults(), rho, own)), i, 0, Value());
      // The row's statistics, by its first lane.
      auto guard = b.create<scf::IfOp>(l, b.create<arith::AndIOp>(l, inside, firstLane), /*withElseRegion=*/false);
      OpBuilder::InsertionGuard ig(b);
      b.setInsertionPointToStart(&guard.getThenRegion().front());
      s.store(lse[size_t(rho)], stats, statistic(i, 0));
      s.store(D[size_t(rho)], stats, statistic(i, 1));
    }
    return;
  }
  // Key rows: dk_j = sum_{i >= j} dS_ij q_i, dv_j = sum_{i >= j} P_ij g_i,
  // over the query tiles (q, g) from the block's first key row; the warp
  // visits query rows from its own first key row.
  Value first = keyFirst;
  SmallVector<Value> rows = ownRows(first);
  SmallVector<SmallVector<Value>> k, v;
  SmallVector<Value> init;
  for (Value j : rows) {
    k.push_back(loadOwn(qkv, j, 1));
    v.push_back(loadOwn(qkv, j, 2));
    init.append(zeros);
    init.append(zeros);
  }
  scf::ForOp visited = overTiles(
      first, s.c(T), init, qkv, 0, grad, 0, warpFirst(first), Value(), [&](Value i, Value at, ValueRange acc) {
        SmallVector<Value> qi = columnsOf(tileA, at), gi = columnsOf(tileB, at), next;
        Value lse = s.load(stats, statistic(i, 0)), D = s.load(stats, statistic(i, 1));
        for (int64_t rho = 0; rho < R; ++rho) {
          Value score = masked(cmp(arith::CmpIPredicate::uge, i, rows[size_t(rho)]),
                               s.mul(scoreScale, dot(k[size_t(rho)], qi)));
          Value dP = dot(v[size_t(rho)], gi);
          Value p = exp(s.sub(score, lse));
          Value dS = s.mul(scale, s.mul(p, s.sub(dP, D)));
          ValueRange mine = groupOf(acc, rho, 2 * own);
          accumulate(mine.take_front(own), dS, qi, next);
          accumulate(mine.drop_front(own), p, gi, next);
        }
        return next;
      });
  for (int64_t rho = 0; rho < R; ++rho) {
    ValueRange result = groupOf(visited.getResults(), rho, 2 * own);
    Value j = rows[size_t(rho)];
    Value inside = cmp(arith::CmpIPredicate::ult, j, s.c(T));
    storeOwn(inside, SmallVector<Value>(result.take_front(own)), j, 1, Value());
    storeOwn(inside, SmallVector<Value>(result.drop_front(own)), j, 2, Value());
  }
}


bool mlir::nova::rowsByWarps(Operation *op) {
  return computeType(op).isF32() && rowKernelShape(op).second >= 32;
}

void mlir::nova::buildWarpRows(OpBuilder &b, Operation *op, Value warp, Value lane, int64_t warps) {
  Scalar s{b, op->getLoc(), computeType(op)};
  Location l = s.l;
  auto [rows, d] = rowKernelShape(op);
  const int64_t steps = (d + 31) / 32;
  s.loop(s.c(0), s.c((rows + warps - 1) / warps), [&](Value it) {
    Value unit = s.iadd(b.create<arith::MulIOp>(l, it, s.c(warps)), warp);
    Value inside = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, unit, s.c(rows));
    Value row = b.create<arith::MinUIOp>(l, unit, s.c(rows - 1));
    SmallVector<Value> prefix = delinearizeIndex(b, l, row, leadingShape(op));
    // Lane `lane`'s column at step `step`, clamped into the row, and
    // whether it is one.
    auto column = [&](Value step, Value &c, Value &take) {
      Value raw = s.iadd(b.create<arith::MulIOp>(l, step, s.c(32)), lane);
      take = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, raw, s.c(d));
      c = b.create<arith::MinUIOp>(l, raw, s.c(d - 1));
    };
    auto guarded = [&](Value condition, function_ref<void()> body) {
      auto guard = b.create<scf::IfOp>(l, condition, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&guard.getThenRegion().front());
      body();
    };
    rowFormulas(
        s, op, prefix,
        {// The lanes' partials, then a butterfly: every lane has the result.
         [&](function_ref<Value(Value)> term, function_ref<Value(Value, Value)> combine, double identity) {
           Value partial =
               nova::buildFor(b, l, s.c(0), s.c(steps), s.c(1), {s.f(identity)}, [&](Value step, ValueRange acc) {
                 Value c, take;
                 column(step, c, take);
                 Value v = b.create<arith::SelectOp>(l, take, term(c), s.f(identity));
                 return SmallVector<Value>{combine(acc[0], v)};
               }).getResult(0);
           return warpAllReduce(b, l, partial, combine);
         },
         [&](function_ref<void(Value)> body) {
           s.loop(s.c(0), s.c(steps), [&](Value step) {
             Value c, take;
             column(step, c, take);
             guarded(b.create<arith::AndIOp>(l, take, inside), [&] { body(c); });
           });
         },
         [&](function_ref<void()> body) {
           Value first = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, lane, s.c(0));
           guarded(b.create<arith::AndIOp>(l, first, inside), body);
         }});
  });
}

bool mlir::nova::writesEachResultOnce(Operation *op) {
  if (auto norm = dyn_cast<LayerNormKernelOp>(op))
    return !norm.getBackward();
  if (isa<CrossEntropyKernelOp>(op))
    return true;
  if (auto attention = dyn_cast<AttentionKernelOp>(op))
    return !attention.getBackward() && attention.headDim() <= kAttentionRowsMaxHeadDim;
  return false;
}
