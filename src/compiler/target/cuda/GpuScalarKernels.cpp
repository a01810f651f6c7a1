//===- GpuScalarKernels.cpp - one GPU thread's LayerNorm row or attention head ===//

#include "compiler/target/cuda/GpuScalarKernels.h"
#include "compiler/target/cuda/GpuBlockReduction.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

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
  void store(Value v, Value m, ValueRange at) { b.create<memref::StoreOp>(l, v, m, at); }
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

} // namespace

void mlir::nova::buildLayerNormRow(OpBuilder &b, LayerNormKernelOp op, Value row) {
  auto type = cast<MemRefType>(op.getInit().getType());
  Scalar s{b, op.getLoc(), type.getElementType()};
  const int64_t d = op.width();
  SmallVector<Value> prefix = delinearizeIndex(b, s.l, row, type.getShape().drop_back());
  auto at = [&](Value column) {
    SmallVector<Value> idx(prefix);
    idx.push_back(column);
    return idx;
  };
  Value x = op.getInputs()[0], gamma = op.getInputs()[1], third = op.getInputs()[2], out = op.getInit();
  Value zero = s.c(0), width = s.c(d), invD = s.f(1.0 / double(d));
  Value mean = s.mul(s.sum(zero, width, [&](Value c) { return s.load(x, at(c)); }), invD);
  Value var = s.mul(s.sum(zero, width,
                          [&](Value c) {
                            Value centered = s.sub(s.load(x, at(c)), mean);
                            return s.mul(centered, centered);
                          }),
                    invD);
  Value rstd = s.div(s.f(1.0), b.create<math::SqrtOp>(s.l, s.add(var, s.f(op.getEps().convertToDouble()))));
  auto xhat = [&](Value c) { return s.mul(s.sub(s.load(x, at(c)), mean), rstd); };
  if (!op.getBackward()) {
    s.loop(zero, width, [&](Value c) {
      s.store(s.add(s.mul(xhat(c), s.load(gamma, c)), s.load(third, c)), out, at(c));
    });
    return;
  }
  auto g = [&](Value c) { return s.mul(s.load(third, at(c)), s.load(gamma, c)); };
  Value meanG = s.mul(s.sum(zero, width, g), invD);
  Value meanGx = s.mul(s.sum(zero, width, [&](Value c) { return s.mul(g(c), xhat(c)); }), invD);
  s.loop(zero, width, [&](Value c) {
    Value centered = s.sub(g(c), meanG);
    s.store(s.mul(s.sub(centered, s.mul(xhat(c), meanGx)), rstd), out, at(c));
  });
}

void mlir::nova::buildAttentionHead(OpBuilder &b, AttentionKernelOp op, Value unit) {
  auto type = cast<MemRefType>(op.getInit().getType());
  Scalar s{b, op.getLoc(), type.getElementType()};
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
