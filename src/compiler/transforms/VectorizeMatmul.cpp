//===- VectorizeMatmul.cpp - the nova-vectorize-matmul pass ------*- C++ -*-===//
//
// A register-blocked matmul microkernel, written with vector/scf ops, for the
// contraction generics nova-lower-to-linalg tags `nova.kernel = "matmul"`.
// For each MR x NR block of the result (NR = two vector registers of
// columns) the k loop carries 2*MR vector accumulators: per k it loads one
// row segment of rhs (2 vectors), broadcasts MR scalars of lhs and issues
// 2*MR FMAs. With MR = 6 and 512-bit vectors that is 12 accumulators + 2 rhs
// + 1 broadcast = 15 of the 32 zmm registers. Column blocks are the outer
// loop so a K x NR panel of rhs is reused from cache by every row block.
// Leftover rows and columns run as copies of the original generic on
// subviews, which linalg-to-loops turns into scalar loops.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/SCF/Utils/Utils.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAVECTORIZEMATMUL
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

struct MatmulOperands {
  Value lhs, rhs, out;
  bool transposeA;
  MemRefType outType;
  int64_t batchRank, M, N, K;
};

/// Recognises a tagged, bufferized contraction with static shapes and
/// returns its operands; nullopt leaves the op to the scalar lowering.
std::optional<MatmulOperands> match(linalg::GenericOp op) {
  auto tag = op->getAttrOfType<StringAttr>("nova.kernel");
  if (!tag || tag.getValue() != "matmul" || !op.hasPureBufferSemantics() ||
      op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
    return std::nullopt;
  MatmulOperands m;
  m.lhs = op.getDpsInputs()[0];
  m.rhs = op.getDpsInputs()[1];
  m.out = op.getDpsInits()[0];
  auto lhsType = dyn_cast<MemRefType>(m.lhs.getType());
  auto rhsType = dyn_cast<MemRefType>(m.rhs.getType());
  m.outType = dyn_cast<MemRefType>(m.out.getType());
  if (!lhsType || !rhsType || !m.outType || !lhsType.hasStaticShape() ||
      !rhsType.hasStaticShape() || !m.outType.hasStaticShape() ||
      !m.outType.getLayout().isIdentity() || !rhsType.getLayout().isIdentity())
    return std::nullopt;
  Type elem = m.outType.getElementType();
  if (!elem.isF32() && !elem.isF64())
    return std::nullopt;
  int64_t rank = m.outType.getRank();
  m.batchRank = rank - 2;
  m.M = m.outType.getDimSize(rank - 2);
  m.N = m.outType.getDimSize(rank - 1);
  m.K = rhsType.getDimSize(rank - 2);
  // lhs is [.., m, k] or [.., k, m]: the map's last result tells which.
  AffineMap lhsMap = op.getIndexingMapsArray()[0];
  auto last = dyn_cast<AffineDimExpr>(lhsMap.getResult(rank - 1));
  if (!last)
    return std::nullopt;
  m.transposeA = last.getPosition() == static_cast<unsigned>(m.batchRank);
  return m;
}

Value index(OpBuilder &b, Location loc, int64_t v) {
  return b.create<arith::ConstantIndexOp>(loc, v);
}

/// The vector kernel over rows [0, mFull) x columns [0, nFull).
void buildKernel(OpBuilder &b, Location loc, const MatmulOperands &m, int64_t width,
                 int64_t tileRows, int64_t mFull, int64_t nFull, bool parallel) {
  Type elem = m.outType.getElementType();
  auto vecType = VectorType::get({width}, elem);
  const int64_t cols = 2; // vectors per row of a tile
  // Batch dims and column tiles are independent: an scf.parallel, which
  // async-parallel-for spreads over threads. Row tiles run in order inside,
  // so one thread reuses its rhs panel.
  SmallVector<Value> lbs, ubs, steps;
  for (int64_t d = 0; d < m.batchRank; ++d) {
    lbs.push_back(index(b, loc, 0));
    ubs.push_back(index(b, loc, m.outType.getDimSize(d)));
    steps.push_back(index(b, loc, 1));
  }
  lbs.push_back(index(b, loc, 0));
  ubs.push_back(index(b, loc, nFull));
  steps.push_back(index(b, loc, cols * width));

  auto body = [&](OpBuilder &pb, Location pl, ValueRange pivs) {
   pb.create<scf::ForOp>(pl, index(pb, pl, 0), index(pb, pl, mFull), index(pb, pl, tileRows),
                         ValueRange{}, [&](OpBuilder &nb, Location l, Value i0, ValueRange) {
    SmallVector<Value> ivs(pivs.begin(), pivs.end());
    ivs.push_back(i0);
    ValueRange batch = ValueRange(ivs).take_front(m.batchRank);
    Value j0 = ivs[m.batchRank];
    auto at = [&](ValueRange tail) {
      SmallVector<Value> idx(batch.begin(), batch.end());
      idx.append(tail.begin(), tail.end());
      return idx;
    };
    SmallVector<Value> rows, colStarts;
    for (int64_t r = 0; r < tileRows; ++r)
      rows.push_back(nb.create<arith::AddIOp>(l, i0, index(nb, l, r)));
    for (int64_t c = 0; c < cols; ++c)
      colStarts.push_back(nb.create<arith::AddIOp>(l, j0, index(nb, l, c * width)));

    SmallVector<Value> acc;
    for (int64_t r = 0; r < tileRows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        acc.push_back(nb.create<vector::LoadOp>(l, vecType, m.out, at({rows[r], colStarts[c]})));

    auto kLoop = nb.create<scf::ForOp>(
        l, index(nb, l, 0), index(nb, l, m.K), index(nb, l, 1), acc,
        [&](OpBuilder &kb, Location kl, Value k, ValueRange carried) {
          SmallVector<Value> rhsRow;
          for (int64_t c = 0; c < cols; ++c)
            rhsRow.push_back(kb.create<vector::LoadOp>(kl, vecType, m.rhs, at({k, colStarts[c]})));
          SmallVector<Value> next;
          for (int64_t r = 0; r < tileRows; ++r) {
            Value a = kb.create<memref::LoadOp>(
                kl, m.lhs, m.transposeA ? at({k, rows[r]}) : at({rows[r], k}));
            Value splat = kb.create<vector::BroadcastOp>(kl, vecType, a);
            for (int64_t c = 0; c < cols; ++c)
              next.push_back(kb.create<vector::FMAOp>(kl, splat, rhsRow[c], carried[r * cols + c]));
          }
          kb.create<scf::YieldOp>(kl, next);
        });
    for (int64_t r = 0; r < tileRows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        nb.create<vector::StoreOp>(l, kLoop.getResult(r * cols + c), m.out,
                                   at({rows[r], colStarts[c]}));
    nb.create<scf::YieldOp>(l);
   });
  };
  if (parallel)
    b.create<scf::ParallelOp>(loc, lbs, ubs, steps, body);
  else
    scf::buildLoopNest(b, loc, lbs, ubs, steps, body);
}

/// A copy of `op` restricted to result rows [r0, r1) and columns [c0, c1).
void buildRemainder(OpBuilder &b, linalg::GenericOp op, const MatmulOperands &m,
                    int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  if (r0 >= r1 || c0 >= c1)
    return;
  Location loc = op.getLoc();
  auto slice = [&](Value v, int64_t dim, int64_t lo, int64_t hi) -> Value {
    auto type = cast<MemRefType>(v.getType());
    SmallVector<OpFoldResult> offsets, sizes, strides;
    for (int64_t d = 0; d < type.getRank(); ++d) {
      offsets.push_back(b.getIndexAttr(d == dim ? lo : 0));
      sizes.push_back(b.getIndexAttr(d == dim ? hi - lo : type.getDimSize(d)));
      strides.push_back(b.getIndexAttr(1));
    }
    return b.create<memref::SubViewOp>(loc, v, offsets, sizes, strides);
  };
  int64_t rowDim = m.batchRank, colDim = m.batchRank + 1;
  Value lhs = slice(m.lhs, m.transposeA ? colDim : rowDim, r0, r1);
  Value rhs = slice(m.rhs, colDim, c0, c1);
  Value out = slice(slice(m.out, rowDim, r0, r1), colDim, c0, c1);
  Operation *copy = b.clone(*op);
  copy->setOperands({lhs, rhs, out});
  copy->removeAttr("nova.kernel");
}

struct NovaVectorizeMatmul
    : mlir::nova::impl::NovaVectorizeMatmulBase<NovaVectorizeMatmul> {
  using NovaVectorizeMatmulBase::NovaVectorizeMatmulBase;

  void runOnOperation() override {
    SmallVector<linalg::GenericOp> ops;
    getOperation().walk([&](linalg::GenericOp op) { ops.push_back(op); });
    for (linalg::GenericOp op : ops) {
      std::optional<MatmulOperands> m = match(op);
      if (!m)
        continue;
      int64_t width = vectorBits / m->outType.getElementTypeBitWidth();
      if (width < 2)
        continue;
      int64_t nr = 2 * width;
      int64_t mFull = m->M - m->M % tileRows, nFull = m->N - m->N % nr;
      OpBuilder b(op);
      int64_t batch = 1;
      for (int64_t d = 0; d < m->batchRank; ++d)
        batch *= m->outType.getDimSize(d);
      bool parallel = 2 * batch * mFull * nFull * m->K >= parallelMinFlops;
      if (mFull > 0 && nFull > 0 && m->K > 0)
        buildKernel(b, op.getLoc(), *m, width, tileRows, mFull, nFull, parallel);
      // The rest of the result: the columns right of the kernel's, then the
      // rows below it. When no kernel was built these cover everything (or,
      // with K == 0, there is nothing to accumulate).
      buildRemainder(b, op, *m, 0, mFull, nFull, m->N);
      buildRemainder(b, op, *m, mFull, m->M, 0, m->N);
      op.erase();
    }
  }
};

} // namespace
