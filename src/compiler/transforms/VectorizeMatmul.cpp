//===- VectorizeMatmul.cpp - the nova-vectorize-matmul pass ------*- C++ -*-===//
//
// A register-blocked matmul microkernel, written with vector/scf ops, for the
// contraction generics nova-lower-to-linalg tags `nova.kernel = "matmul"`,
// split over the workgroups of its kernel's #nova.lowering_config.
//
// Workgroup wg owns one block of the result: row-major over the tile counts
// of (batch..., m, n), block = [b0, b1) x [m0, m1) x [n0, n1). Inside it,
// the reduction is swept in slabs of kc: per slab the block's rhs is packed
// into contiguous kc x NR micro-panels (and a transposed or producer-fed lhs,
// a run of row tiles at a time just before they run, into MR-row slots:
// cache_tile[1] rows for a transposed one), then for each row tile, for each column tile, the MR x NR
// register tile (NR = nv vectors) is carried through the k loop: per k one
// rhs row of nv vectors, MR lhs broadcasts, MR*nv FMAs (6 x 4 vectors on
// AVX-512: 24 accumulators + 4 + 1 of the 32 zmm registers). The lhs
// micro-panel stays in L1 while the packed rhs streams from L2. Block tiles
// are multiples of MR / NR: rows left over (M % MR, in the last row block)
// get a microkernel of M % MR rows; columns left over (N % NR) run as a
// copy of the original generic on (dynamic) subviews.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/MatmulKernel.h"
#include "compiler/transforms/MatmulLowering.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/IR/Matchers.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAVECTORIZEMATMUL
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;
using nova::MatmulOperands;

namespace mlir::nova::matmul {

WorkgroupBlock blockOf(OpBuilder &b, Location loc, Value wg, const MatmulOperands &m,
              ArrayRef<int64_t> tile) {
  SmallVector<int64_t> extents;
  for (int64_t d = 0; d < m.batchRank; ++d)
    extents.push_back(m.outType.getDimSize(d));
  extents.push_back(m.M);
  extents.push_back(m.N);
  SmallVector<Value> lo(extents.size()), hi(extents.size());
  Value rest = wg;
  for (size_t i = extents.size(); i-- > 0;) {
    int64_t count = (extents[i] + tile[i] - 1) / tile[i];
    Value c = rest;
    if (i > 0) {
      c = b.create<arith::RemUIOp>(loc, rest, index(b, loc, count));
      rest = b.create<arith::DivUIOp>(loc, rest, index(b, loc, count));
    }
    lo[i] = b.create<arith::MulIOp>(loc, c, index(b, loc, tile[i]));
    hi[i] = b.create<arith::MinUIOp>(
        loc, b.create<arith::AddIOp>(loc, lo[i], index(b, loc, tile[i])),
        index(b, loc, extents[i]));
  }
  WorkgroupBlock block;
  block.batchLo.assign(lo.begin(), lo.begin() + m.batchRank);
  block.batchHi.assign(hi.begin(), hi.begin() + m.batchRank);
  block.m0 = lo[m.batchRank];
  block.m1 = hi[m.batchRank];
  block.n0 = lo[m.batchRank + 1];
  block.n1 = hi[m.batchRank + 1];
  return block;
}

void vectorizeBody(OpBuilder &b, Location l, Block &body, IRMapping &map, Operation *stop, int64_t width) {
  auto vectorOf = [&](Type t) { return VectorType::get({width}, t); };
  for (Operation &op : body) {
    if (&op == stop)
      break;
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      Value scalar = b.clone(op)->getResult(0);
      map.map(c.getResult(), b.create<vector::BroadcastOp>(l, vectorOf(c.getType()), scalar));
      continue;
    }
    OperationState state(l, op.getName());
    for (Value operand : op.getOperands()) {
      Value v = map.lookupOrNull(operand);
      if (!v) // defined outside the body: a scalar, the same in every lane
        v = b.create<vector::BroadcastOp>(l, vectorOf(operand.getType()), operand);
      state.addOperands(v);
    }
    state.addTypes(vectorOf(op.getResult(0).getType()));
    state.addAttributes(op.getAttrs());
    map.map(op.getResult(0), b.create(state)->getResult(0));
  }
}

Value loadVector(OpBuilder &b, Location l, VectorType type, Value memref, ValueRange idx, Value mask) {
  if (!mask)
    return b.create<vector::LoadOp>(l, type, memref, idx);
  return b.create<vector::MaskedLoadOp>(l, type, memref, idx, mask,
                                        b.create<arith::ConstantOp>(l, type, b.getZeroAttr(type)));
}

void storeVector(OpBuilder &b, Location l, Value value, Value memref, ValueRange idx, Value mask) {
  if (mask)
    b.create<vector::MaskedStoreOp>(l, memref, idx, mask, value);
  else
    b.create<vector::StoreOp>(l, value, memref, idx);
}

/// A matmul's epilogue (MatmulKernel.h: isRegisterEpilogue), applied to
/// one accumulator vector (row `row`, columns [col, col + width)) instead of
/// storing it: the epilogue's body, vectorized, on the accumulator and its
/// other inputs at the same element, stored into the epilogue's output.
void storeThroughEpilogue(OpBuilder &b, Location l, linalg::GenericOp epi, Value result,
                          ValueRange batch, Value row, Value col, Value acc, int64_t width, Value mask) {
  unsigned n = epi.getNumLoops() - 1;
  // The epilogue's loop values at this element: (batch..., row, col), or,
  // where it reads the result with its rows split (MatmulKernel.h), the
  // row's coordinates in the split dims, then col.
  SmallVector<Value> dims(batch.begin(), batch.end());
  if (epi.getNumLoops() == batch.size() + 2) {
    dims.push_back(row);
  } else {
    auto type = cast<MemRefType>(epi.getDpsInits()[0].getType());
    SmallVector<Value> split(n);
    Value rest = row;
    for (unsigned d = n; d-- > 0;) {
      Value extent = index(b, l, type.getDimSize(d));
      split[d] = d == 0 ? rest : b.create<arith::RemUIOp>(l, rest, extent).getResult();
      if (d > 0)
        rest = b.create<arith::DivUIOp>(l, rest, extent);
    }
    dims.append(split.begin(), split.end());
  }
  dims.push_back(col);
  auto dimValue = [&](unsigned d) -> Value { return dims[d]; };
  auto vectorOf = [&](Type t) { return VectorType::get({width}, t); };
  mlir::Block &body = epi.getRegion().front();
  IRMapping map;
  Value out = epi.getDpsInits()[0];
  for (OpOperand &operand : epi->getOpOperands()) {
    BlockArgument arg = body.getArgument(operand.getOperandNumber());
    if (nova::readsMatmulResult(operand.get(), result) && !epi.isDpsInit(&operand)) {
      map.map(arg, acc);
      continue;
    }
    if (arg.use_empty())
      continue;
    AffineMap m = epi.getMatchingIndexingMap(&operand);
    SmallVector<Value> idx;
    for (AffineExpr e : m.getResults()) {
      if (auto c = dyn_cast<AffineConstantExpr>(e))
        idx.push_back(index(b, l, c.getValue()));
      else
        idx.push_back(dimValue(cast<AffineDimExpr>(e).getPosition()));
    }
    Type elem = cast<MemRefType>(operand.get().getType()).getElementType();
    bool alongColumns = m.getNumResults() > 0 && m.getResults().back().isFunctionOfDim(n);
    Value v = alongColumns ? loadVector(b, l, vectorOf(elem), operand.get(), idx, mask)
                           : b.create<vector::BroadcastOp>(l, vectorOf(elem),
                                                           b.create<memref::LoadOp>(l, operand.get(), idx));
    map.map(arg, v);
  }
  vectorizeBody(b, l, body, map, body.getTerminator(), width);
  Value yielded = map.lookup(body.getTerminator()->getOperand(0));
  storeVector(b, l, yielded, out, dims, mask);
}

Value buildPrologue(OpBuilder &b, Location l, const MatmulOperands &m, ValueRange at, int64_t width, Value mask,
                    Value passThrough) {
  linalg::GenericOp op = m.op;
  Block &body = op.getRegion().front();
  BlockArgument rhs = body.getArgument(body.getNumArguments() - 2);
  auto mul = cast<arith::MulFOp>(*rhs.getUsers().begin());
  IRMapping map;
  for (auto [i, in] : llvm::enumerate(m.prologueInputs)) {
    auto type = VectorType::get({width}, cast<MemRefType>(in.getType()).getElementType());
    // An input narrower than the lhs (a bf16 activation the body widens:
    // nova-bf16-saved-activations) takes zeros of its own type.
    Value pass = !mask || passThrough.getType() == type
                     ? passThrough
                     : b.create<arith::ConstantOp>(l, type, b.getZeroAttr(type)).getResult();
    map.map(body.getArgument(i), mask ? b.create<vector::MaskedLoadOp>(l, type, in, at, mask, pass).getResult()
                                      : b.create<vector::LoadOp>(l, type, in, at).getResult());
  }
  vectorizeBody(b, l, body, map, mul, width);
  return map.lookup(mul.getLhs() == rhs ? mul.getRhs() : mul.getLhs());
}

} // namespace mlir::nova::matmul

using namespace mlir::nova::matmul;

namespace {

/// Whether an epilogue is heavy enough to run as a loop over the tile's
/// vectors (buildMicrokernel's `epilogueScratch`): a math op or more than 8
/// ops. Unrolled beside the tile's live accumulators (24 of 32 registers on
/// AVX-512), its constants found no registers and were reloaded by a
/// broadcast at each use: the GELU gradient of the MLP backward's dy W2^T,
/// 1135 instructions for a 6 x 64 tile, 207 of them broadcasts; as a loop
/// its share of that kernel's perf samples fell to 0.145-0.171 of the
/// microkernel's from 0.187-0.209 (the small GPT step, 3 runs each).
bool rollsEpilogue(linalg::GenericOp epilogue) {
  int64_t ops = 0;
  for (Operation &op : epilogue.getRegion().front().without_terminator()) {
    if (isa<math::MathDialect>(op.getDialect()))
      return true;
    ++ops;
  }
  return ops > 8;
}

/// The MR x NR microkernel at rows [i0, i0 + MR), columns [j0, j0 + NR),
/// accumulating the products over k in [k0, k0 + klen) into the result. The
/// rhs rows come from panel `panel` of `packed` ([panels, kc, NR]: row kk is
/// rhs row k0 + kk of these columns, contiguous), the lhs values from
/// slot `slot` of `packedLhs` ([slots, kc, MR]: row kk holds lhs[i0 + r,
/// k0 + kk] for each r) when the lhs is transposed, or ([slots, MR, kc]: row
/// r holds lhs[i0 + r, k0 ..]) when a producer computes a row-major one,
/// else straight from the lhs.
///
/// `fromZero` (may be null): when true, the accumulators start at zero
/// instead of the result's values (the first slab of a matmul whose result
/// was zero-filled: the fill itself is not done).
///
/// `epilogue` (may be null): on the last slab (`isLast`), the register
/// tiles go through it into its output instead of into the result; with
/// `epilogueScratch` ([MR, NR / lanes, lanes], a heavy epilogue:
/// rollsEpilogue), by way of it, a vector at a time in a loop.
///
/// `lastMask` (may be null): the tile's last vector column is the result's
/// column edge, its lanes past N masked off wherever the result (or the
/// epilogue's operands and output) is read or written; the packed panel
/// holds zeros there.
void buildMicrokernel(OpBuilder &b, Location l, const MatmulOperands &m, ValueRange batch,
                      Value i0, Value j0, Value k0, Value klen, Value packed, Value panel,
                      Value packedLhs, Value slot, VectorType vecType, int64_t tileRows,
                      int64_t cols, Value fromZero, linalg::GenericOp epilogue, Value isLast,
                      Value epilogueScratch, Value lastMask = {}) {
  int64_t width = vecType.getNumElements();
  auto at = [&](ValueRange tail) {
    SmallVector<Value> idx(batch.begin(), batch.end());
    idx.append(tail.begin(), tail.end());
    return idx;
  };
  SmallVector<Value> rows, colStarts, packedCols;
  for (int64_t r = 0; r < tileRows; ++r)
    rows.push_back(b.create<arith::AddIOp>(l, i0, index(b, l, r)));
  for (int64_t c = 0; c < cols; ++c) {
    colStarts.push_back(b.create<arith::AddIOp>(l, j0, index(b, l, c * width)));
    packedCols.push_back(index(b, l, c * width));
  }

  auto maskOf = [&](int64_t c) { return c == cols - 1 ? lastMask : Value(); };
  auto loadAccumulators = [&](OpBuilder &ab, Location al) {
    SmallVector<Value> acc;
    for (int64_t r = 0; r < tileRows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        acc.push_back(loadVector(ab, al, vecType, m.out, at({rows[r], colStarts[c]}), maskOf(c)));
    return acc;
  };
  // In one slab (K <= kc) both flags are constants: the branch not taken
  // is not built, so a result kept only in registers is never referenced.
  auto isTrue = [](Value flag) {
    std::optional<int64_t> c = flag ? getConstantIntValue(flag) : std::nullopt;
    return c && *c != 0;
  };
  SmallVector<Value> acc;
  if (isTrue(fromZero)) {
    Value zero = b.create<arith::ConstantOp>(l, vecType, b.getZeroAttr(vecType));
    acc.assign(tileRows * cols, zero);
  } else if (fromZero) {
    SmallVector<Type> types(tileRows * cols, vecType);
    auto start = b.create<scf::IfOp>(
        l, fromZero,
        [&](OpBuilder &zb, Location zl) {
          Value zero = zb.create<arith::ConstantOp>(zl, vecType, zb.getZeroAttr(vecType));
          zb.create<scf::YieldOp>(zl, SmallVector<Value>(tileRows * cols, zero));
        },
        [&](OpBuilder &lb, Location ll) { lb.create<scf::YieldOp>(ll, loadAccumulators(lb, ll)); });
    acc.assign(start.getResults().begin(), start.getResults().end());
  } else {
    acc = loadAccumulators(b, l);
  }

  auto kLoop = b.create<scf::ForOp>(
      l, index(b, l, 0), klen, index(b, l, 1), acc,
      [&](OpBuilder &kb, Location kl, Value kk, ValueRange carried) {
        Value k = packedLhs ? Value() : kb.create<arith::AddIOp>(kl, k0, kk).getResult();
        SmallVector<Value> rhsRow;
        for (int64_t c = 0; c < cols; ++c)
          rhsRow.push_back(
              kb.create<vector::LoadOp>(kl, vecType, packed, ValueRange{panel, kk, packedCols[c]}));
        SmallVector<Value> next;
        for (int64_t r = 0; r < tileRows; ++r) {
          Value a = !packedLhs ? kb.create<memref::LoadOp>(kl, m.lhs, at({rows[r], k})).getResult()
                    : m.transposeA
                        ? kb.create<memref::LoadOp>(kl, packedLhs, ValueRange{slot, kk, index(kb, kl, r)}).getResult()
                        : kb.create<memref::LoadOp>(kl, packedLhs, ValueRange{slot, index(kb, kl, r), kk}).getResult();
          Value splat = kb.create<vector::BroadcastOp>(kl, vecType, a);
          for (int64_t c = 0; c < cols; ++c)
            next.push_back(kb.create<vector::FMAOp>(kl, splat, rhsRow[c], carried[r * cols + c]));
        }
        kb.create<scf::YieldOp>(kl, next);
      });
  auto storeAll = [&](OpBuilder &sb, Location sl) {
    for (int64_t r = 0; r < tileRows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        storeVector(sb, sl, kLoop.getResult(r * cols + c), m.out, at({rows[r], colStarts[c]}), maskOf(c));
  };
  if (!epilogue) {
    storeAll(b, l);
    return;
  }
  // The tile through the epilogue: vector by vector, unrolled; or, with
  // `epilogueScratch` (a heavy epilogue, rollsEpilogue) and no masked
  // column, the accumulators stored to it first and a loop applying the
  // epilogue to one vector at a time, its constants then kept in registers.
  auto throughEpilogue = [&](OpBuilder &eb, Location el) {
    if (!epilogueScratch || lastMask) {
      for (int64_t r = 0; r < tileRows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          storeThroughEpilogue(eb, el, epilogue, m.out, batch, rows[r], colStarts[c],
                               kLoop.getResult(r * cols + c), width, maskOf(c));
      return;
    }
    for (int64_t r = 0; r < tileRows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        eb.create<vector::StoreOp>(el, kLoop.getResult(r * cols + c), epilogueScratch,
                                   ValueRange{index(eb, el, r), index(eb, el, c), index(eb, el, 0)});
    eb.create<scf::ForOp>(
        el, index(eb, el, 0), index(eb, el, tileRows), index(eb, el, 1), ValueRange{},
        [&](OpBuilder &rb, Location rl, Value r, ValueRange) {
          rb.create<scf::ForOp>(
              rl, index(rb, rl, 0), index(rb, rl, cols), index(rb, rl, 1), ValueRange{},
              [&](OpBuilder &cb, Location cl, Value c, ValueRange) {
                Value acc =
                    cb.create<vector::LoadOp>(cl, vecType, epilogueScratch, ValueRange{r, c, index(cb, cl, 0)});
                Value col = cb.create<arith::AddIOp>(cl, j0, cb.create<arith::MulIOp>(cl, c, index(cb, cl, width)));
                storeThroughEpilogue(cb, cl, epilogue, m.out, batch, cb.create<arith::AddIOp>(cl, i0, r), col, acc,
                                     width);
                cb.create<scf::YieldOp>(cl);
              });
          rb.create<scf::YieldOp>(rl);
        });
  };
  if (isTrue(isLast)) {
    throughEpilogue(b, l);
    return;
  }
  b.create<scf::IfOp>(
      l, isLast,
      [&](OpBuilder &eb, Location el) {
        throughEpilogue(eb, el);
        eb.create<scf::YieldOp>(el);
      },
      [&](OpBuilder &sb, Location sl) {
        storeAll(sb, sl);
        sb.create<scf::YieldOp>(sl);
      });
}

/// Row kk of panel `panel`: `vectors` vectors of the row-major rhs row k
/// from column j0 on, the last under `lastMask` (zeros past it) if given.
void packRhsRowVectors(OpBuilder &b, Location l, const MatmulOperands &m, ValueRange batch, Value k, Value j0,
                       Value kk, Value packed, Value panel, VectorType vecType, int64_t vectors,
                       Value lastMask = {}) {
  int64_t width = vecType.getNumElements();
  for (int64_t c = 0; c < vectors; ++c) {
    SmallVector<Value> src(batch.begin(), batch.end());
    src.push_back(k);
    src.push_back(b.create<arith::AddIOp>(l, j0, index(b, l, c * width)));
    Value v = loadVector(b, l, vecType, m.rhs, src, c == vectors - 1 ? lastMask : Value());
    b.create<vector::StoreOp>(l, v, packed, ValueRange{panel, kk, index(b, l, c * width)});
  }
}

/// Copies rhs rows [k0, k0 + klen) of the block's columns [n0, nv) into
/// `packed` ([panels, kc, NR]), one contiguous kc x NR micro-panel per NR
/// columns: the row tiles then stream them from L2 in order, where the rhs
/// itself has its rows a whole (often power-of-two) row apart.
void buildPackRhs(OpBuilder &b, Location l, const MatmulOperands &m, ValueRange batch, Value n0,
                  Value nv, Value k0, Value klen, Value packed, VectorType vecType, int64_t nr,
                  int64_t cols) {
  int64_t width = vecType.getNumElements();
  b.create<scf::ForOp>(
      l, n0, nv, index(b, l, nr), ValueRange{}, [&](OpBuilder &jb, Location jl, Value j0, ValueRange) {
        Value panel = jb.create<arith::DivUIOp>(jl, jb.create<arith::SubIOp>(jl, j0, n0), index(jb, jl, nr));
        if (m.rhsColumns) {
          // A transposed rhs: row kk of the panel gathers NR columns, each a
          // whole rhs row apart. A group of `width` columns at a time, so
          // the group's lines stay in L1 across the kk that reuse them
          // (rows a power of two apart share a few L1 sets: all NR at once
          // would evict each other). Each width x width block of the group
          // is read as `width` vectors along k (the rhs's columns are
          // contiguous there) and transposed in registers; the k left past
          // the last whole block, element by element. (Element by element
          // throughout, LLVM vectorized the copy with gathers and scatters:
          // 3.5% of the small GPT's dy W2^T kernel on an AMD EPYC, whose
          // vscatterqps is microcoded.)
          Value columns = nova::rhsColumnsView(jb, jl, m);
          Value whole = jb.create<arith::MulIOp>(
              jl, jb.create<arith::DivUIOp>(jl, klen, index(jb, jl, width)), index(jb, jl, width));
          jb.create<scf::ForOp>(
              jl, index(jb, jl, 0), index(jb, jl, nr), index(jb, jl, width), ValueRange{},
              [&](OpBuilder &gb, Location gl, Value c0, ValueRange) {
                gb.create<scf::ForOp>(
                    gl, index(gb, gl, 0), whole, index(gb, gl, width), ValueRange{},
                    [&](OpBuilder &kb, Location kl, Value kk0, ValueRange) {
                      Value k = kb.create<arith::AddIOp>(kl, k0, kk0);
                      SmallVector<Value> rows;
                      for (int64_t t = 0; t < width; ++t) {
                        SmallVector<Value> src(batch.begin(), batch.end());
                        src.push_back(kb.create<arith::AddIOp>(kl, j0, kb.create<arith::AddIOp>(kl, c0, index(kb, kl, t))));
                        src.push_back(k);
                        rows.push_back(kb.create<vector::LoadOp>(kl, vecType, columns, src));
                      }
                      SmallVector<Value> kRows = nova::transposeInRegisters(kb, kl, rows);
                      for (int64_t t = 0; t < width; ++t)
                        kb.create<vector::StoreOp>(
                            kl, kRows[t], packed,
                            ValueRange{panel, kb.create<arith::AddIOp>(kl, kk0, index(kb, kl, t)), c0});
                      kb.create<scf::YieldOp>(kl);
                    });
                gb.create<scf::ForOp>(
                    gl, whole, klen, index(gb, gl, 1), ValueRange{},
                    [&](OpBuilder &kb, Location kl, Value kk, ValueRange) {
                      Value k = kb.create<arith::AddIOp>(kl, k0, kk);
                      kb.create<scf::ForOp>(
                          kl, index(kb, kl, 0), index(kb, kl, width), index(kb, kl, 1), ValueRange{},
                          [&](OpBuilder &cb, Location cl, Value dc, ValueRange) {
                            Value c = cb.create<arith::AddIOp>(cl, c0, dc);
                            SmallVector<Value> src(batch.begin(), batch.end());
                            src.push_back(k);
                            src.push_back(cb.create<arith::AddIOp>(cl, j0, c));
                            Value v = cb.create<memref::LoadOp>(cl, m.rhs, src);
                            cb.create<memref::StoreOp>(cl, v, packed, ValueRange{panel, kk, c});
                            cb.create<scf::YieldOp>(cl);
                          });
                      kb.create<scf::YieldOp>(kl);
                    });
                gb.create<scf::YieldOp>(gl);
              });
          jb.create<scf::YieldOp>(jl);
          return;
        }
        jb.create<scf::ForOp>(
            jl, index(jb, jl, 0), klen, index(jb, jl, 1), ValueRange{},
            [&](OpBuilder &kb, Location kl, Value kk, ValueRange) {
              packRhsRowVectors(kb, kl, m, batch, kb.create<arith::AddIOp>(kl, k0, kk), j0, kk, packed, panel,
                                vecType, cols);
              kb.create<scf::YieldOp>(kl);
            });
        jb.create<scf::YieldOp>(jl);
      });
}

/// The column edge's panel: rhs rows [k0, k0 + klen) of columns [j0, j0 +
/// rem) (rem = N % NR, j0 the last whole panel's end) into panel `panel` of
/// `packed`, as ceil(rem / width) vectors a row, zeros past column N (the
/// last vector's lanes loaded under `lastMask`, if rem is not whole vectors; a transposed rhs's
/// columns element by element), so the edge runs the microkernel too, its
/// last vector masked where the result is read and written. (Through the
/// generic loops it took longer than the rest: 1000x300x256 at 73.4-83.7
/// GFLOP/s against 1008x320x256 at 181.7 on an AMD EPYC, matmul_bench.)
void buildPackRhsEdge(OpBuilder &b, Location l, const MatmulOperands &m, ValueRange batch, Value j0, Value k0,
                      Value klen, Value packed, Value panel, VectorType vecType, int64_t rem, Value lastMask) {
  int64_t width = vecType.getNumElements(), vectors = (rem + width - 1) / width;
  b.create<scf::ForOp>(
      l, index(b, l, 0), klen, index(b, l, 1), ValueRange{}, [&](OpBuilder &kb, Location kl, Value kk, ValueRange) {
        Value k = kb.create<arith::AddIOp>(kl, k0, kk);
        auto src = [&](Value col) {
          SmallVector<Value> idx(batch.begin(), batch.end());
          idx.append({k, col});
          return idx;
        };
        if (m.rhsColumns) {
          Value scalarZero = kb.create<arith::ConstantOp>(kl, kb.getZeroAttr(vecType.getElementType()));
          for (int64_t c = 0; c < vectors * width; ++c) {
            Value v = c < rem ? kb.create<memref::LoadOp>(
                                      kl, m.rhs, src(kb.create<arith::AddIOp>(kl, j0, index(kb, kl, c))))
                                    .getResult()
                              : scalarZero;
            kb.create<memref::StoreOp>(kl, v, packed, ValueRange{panel, kk, index(kb, kl, c)});
          }
        } else {
          packRhsRowVectors(kb, kl, m, batch, k, j0, kk, packed, panel, vecType, vectors, lastMask);
        }
        kb.create<scf::YieldOp>(kl);
      });
}

/// Prefetches the `vectors` x `width` values from column i0 of the lhs's
/// (transposed: [.., K, M]) row `ahead` (rowAhead), in each input of its
/// fused producer, while row k's are computed. The producer (a GELU) takes
/// long enough per vector for the lines to land; each row is a page apart
/// in the GPT (4 KiB or more), where the hardware prefetchers stop. (The
/// small GPT's GELU-fed weight gradient: its packing loop's share of the
/// step's perf samples 1.57% -> 0.88-1.02%, three runs; a plain transposed
/// lhs's packing, no arithmetic to hide them behind, got slower, 0.28% ->
/// 0.46%, so it has none.)
constexpr int64_t kPrefetchRows = 2;
/// Row k + kPrefetchRows of the transposed lhs, or its last.
Value rowAhead(OpBuilder &b, Location l, const MatmulOperands &m, Value k) {
  auto type = cast<MemRefType>(m.lhs.getType());
  return b.create<arith::MinUIOp>(l, b.create<arith::AddIOp>(l, k, index(b, l, kPrefetchRows)),
                                  index(b, l, type.getDimSize(type.getRank() - 2) - 1));
}
void prefetchRowsAhead(OpBuilder &b, Location l, const MatmulOperands &m, ValueRange batch, Value ahead, Value i0,
                       int64_t vectors, int64_t width) {
  for (Value input : m.prologueInputs)
    for (int64_t v = 0; v < vectors; ++v) {
      SmallVector<Value> at(batch.begin(), batch.end());
      at.append({ahead, b.create<arith::AddIOp>(l, i0, index(b, l, v * width))});
      b.create<memref::PrefetchOp>(l, input, at, /*isWrite=*/false, /*localityHint=*/3, /*isDataCache=*/true);
    }
}

/// For a transposed lhs ([K, M]): packs rows [r0, r1) of the slab k in
/// [k0, k0 + klen) as register tiles of `tileRows` rows (r1 - r0 a multiple
/// of it) into `packedLhs` ([slots, kc, MR]): slot (i0 - r0) / MR, row kk
/// holds lhs[k0 + kk, i0 .. i0 + tileRows). The k loop is outside so each
/// lhs row's run [r0, r1) is read once, contiguously, and written to the
/// tiles' slots. Unpacked, one tile's MR values of consecutive k are a whole
/// lhs row apart: kc lines (and, with 4 KiB rows, kc pages) in a handful of
/// L1 sets. (A row-major lhs is broadcast in place: its MR rows are MR
/// streams.)
/// The run is read in groups of lcm(MR, width) values, whole vectors, and
/// each of the group's slots takes its MR lanes by a shuffle of the vectors
/// holding them and a masked store (constant masks): a fused producer (a
/// GELU) then runs on whole vectors, where one slot at a time ran it on MR
/// of `width` lanes (6 of 16: the small GPT's GELU-fed weight gradient
/// spent 2.3% of the step's samples in that packing). Rows after the last
/// whole group, and the edge tile (`tileRows` < the slot's MR), one slot at
/// a time.
void buildPackTransposedLhs(OpBuilder &b, Location l, const MatmulOperands &m, ValueRange batch, Value r0,
                            Value r1, Value k0, Value klen, Value packedLhs, int64_t tileRows, int64_t width) {
  auto type = cast<MemRefType>(packedLhs.getType());
  Type elem = type.getElementType();
  int64_t slotRows = type.getDimSize(2);
  int64_t padded = 1;
  while (padded < slotRows)
    padded *= 2;
  // Whole groups only for whole tiles (the edge tile is a slot alone).
  int64_t groupRows = tileRows < slotRows ? 0 : nova::transposedLhsGroupRows(tileRows, width);
  int64_t groupSlots = groupRows / tileRows, groupVectors = groupRows / width;
  auto vec = VectorType::get({width}, elem), slotVec = VectorType::get({padded}, elem);
  auto constantMask = [&](OpBuilder &mb, Location ml, int64_t lanes, int64_t on) {
    auto t = VectorType::get({lanes}, mb.getI1Type());
    return mb.create<vector::ConstantMaskOp>(ml, t, mb.getI64ArrayAttr({on})).getResult();
  };
  Value all = constantMask(b, l, width, width), slotMask = constantMask(b, l, padded, tileRows);
  Value zero = b.create<arith::ConstantOp>(l, vec, b.getZeroAttr(vec));
  Value slotZero = b.create<arith::ConstantOp>(l, slotVec, b.getZeroAttr(slotVec));
  // The rows [r0, rg) as whole groups, the rest one slot at a time. (Masks
  // computed per group and slot, to cover a last partial group, made the
  // packing 4x slower on an AMD EPYC, the masked stores waiting on them.)
  Value rg = r0;
  if (groupRows > 0) {
    Value groups = b.create<arith::DivUIOp>(l, b.create<arith::SubIOp>(l, r1, r0), index(b, l, groupRows));
    rg = b.create<arith::AddIOp>(l, r0, b.create<arith::MulIOp>(l, groups, index(b, l, groupRows)));
  }
  auto slotOf = [&](OpBuilder &sb, Location sl, Value i0) {
    return sb.create<arith::DivUIOp>(sl, sb.create<arith::SubIOp>(sl, i0, r0), index(sb, sl, slotRows)).getResult();
  };
  auto load = [&](OpBuilder &lb, Location ll, Value k, Value i0, Value mask, Value pass, int64_t lanes) -> Value {
    SmallVector<Value> src(batch.begin(), batch.end());
    src.append({k, i0});
    return m.prologueInputs.empty()
               ? lb.create<vector::MaskedLoadOp>(ll, pass.getType(), m.lhs, src, mask, pass).getResult()
               : buildPrologue(lb, ll, m, src, lanes, mask, pass);
  };
  b.create<scf::ForOp>(
      l, index(b, l, 0), klen, index(b, l, 1), ValueRange{}, [&](OpBuilder &kb, Location kl, Value kk, ValueRange) {
        Value k = kb.create<arith::AddIOp>(kl, k0, kk);
        Value ahead = groupRows > 0 && !m.prologueInputs.empty() ? rowAhead(kb, kl, m, k) : Value();
        if (groupRows > 0)
          kb.create<scf::ForOp>(
              kl, r0, rg, index(kb, kl, groupRows), ValueRange{},
              [&](OpBuilder &ib, Location il, Value i0, ValueRange) {
                if (ahead)
                  prefetchRowsAhead(ib, il, m, batch, ahead, i0, groupVectors, width);
                SmallVector<Value> vectors;
                for (int64_t v = 0; v < groupVectors; ++v)
                  vectors.push_back(
                      load(ib, il, k, ib.create<arith::AddIOp>(il, i0, index(ib, il, v * width)), all, zero, width));
                Value slot0 = slotOf(ib, il, i0);
                for (int64_t s = 0; s < groupSlots; ++s) {
                  // Lanes [s MR, s MR + MR) of the group, from the vectors
                  // first..last: a shuffle of the first two (indices count
                  // across both), then one more per further vector (MR > width).
                  int64_t at = s * tileRows, first = at / width, last = (at + tileRows - 1) / width;
                  int64_t second = std::min(first + 1, last);
                  SmallVector<int64_t> lanes;
                  for (int64_t j = 0; j < padded; ++j)
                    lanes.push_back(j < tileRows && at + j < (second + 1) * width ? at + j - first * width : 0);
                  Value part = ib.create<vector::ShuffleOp>(il, vectors[first], vectors[second], lanes);
                  for (int64_t v = second + 1; v <= last; ++v) {
                    lanes.clear();
                    for (int64_t j = 0; j < padded; ++j)
                      lanes.push_back(j < tileRows && (at + j) / width == v ? padded + at + j - v * width : j);
                    part = ib.create<vector::ShuffleOp>(il, part, vectors[v], lanes);
                  }
                  Value slot = ib.create<arith::AddIOp>(il, slot0, index(ib, il, s));
                  ib.create<vector::MaskedStoreOp>(il, packedLhs, ValueRange{slot, kk, index(ib, il, 0)}, slotMask,
                                                   part);
                }
                ib.create<scf::YieldOp>(il);
              });
        kb.create<scf::ForOp>(
            kl, rg, r1, index(kb, kl, tileRows), ValueRange{}, [&](OpBuilder &ib, Location il, Value i0, ValueRange) {
              Value v = load(ib, il, k, i0, slotMask, slotZero, padded);
              ib.create<vector::MaskedStoreOp>(il, packedLhs, ValueRange{slotOf(ib, il, i0), kk, index(ib, il, 0)},
                                               slotMask, v);
              ib.create<scf::YieldOp>(il);
            });
        kb.create<scf::YieldOp>(kl);
      });
}

/// For a row-major lhs computed by a fused producer ([M, K], k
/// unit-stride): packs rows [r0, r1) of the slab k in [k0, k0 + klen) into
/// `packedLhs` ([slots, MR, kc]: slot (i0 - r0) / MR, row r holding
/// lhs[i0 + r, k0 .. k0 + klen)), the producer computed on `width` values
/// along k at a time and stored as they come: once per element and column
/// block, where reading it in the microkernel would compute it once per
/// column tile. Row by row, not [kc, MR] as a transposed lhs is packed:
/// that layout took a scatter of each vector's lanes MR apart, and the
/// microkernel reads MR rows kc apart as well as MR consecutive values (a
/// row-major lhs is read so unpacked). The small GPT's GELU-fed down
/// projection went from 1.282-1.308x the time of the same product unfused
/// to 1.151-1.231x (NOVA_PROFILE=1 build/bench/gpt_step small 10).
void buildPackRowLhs(OpBuilder &b, Location l, const MatmulOperands &m, ValueRange batch, Value r0, Value r1,
                     Value k0, Value klen, Value packedLhs, int64_t tileRows, int64_t width) {
  auto type = cast<MemRefType>(packedLhs.getType());
  int64_t slotRows = type.getDimSize(1);
  auto vec = VectorType::get({width}, type.getElementType());
  auto maskType = VectorType::get({width}, b.getI1Type());
  Value zero = b.create<arith::ConstantOp>(l, vec, b.getZeroAttr(vec));
  b.create<scf::ForOp>(
      l, r0, r1, index(b, l, tileRows), ValueRange{}, [&](OpBuilder &ib, Location il, Value i0, ValueRange) {
        Value slot = ib.create<arith::DivUIOp>(il, ib.create<arith::SubIOp>(il, i0, r0), index(ib, il, slotRows));
        ib.create<scf::ForOp>(
            il, index(ib, il, 0), klen, index(ib, il, width), ValueRange{},
            [&](OpBuilder &kb, Location kl, Value kk, ValueRange) {
              Value left = kb.create<arith::SubIOp>(kl, klen, kk);
              Value mask = kb.create<vector::CreateMaskOp>(kl, maskType, ValueRange{left});
              Value k = kb.create<arith::AddIOp>(kl, k0, kk);
              for (int64_t r = 0; r < tileRows; ++r) {
                SmallVector<Value> src(batch.begin(), batch.end());
                src.append({kb.create<arith::AddIOp>(kl, i0, index(kb, kl, r)), k});
                Value v = buildPrologue(kb, kl, m, src, width, mask, zero);
                kb.create<vector::MaskedStoreOp>(kl, packedLhs, ValueRange{slot, index(kb, kl, r), kk}, mask, v);
              }
              kb.create<scf::YieldOp>(kl);
            });
        ib.create<scf::YieldOp>(il);
      });
}

} // namespace

namespace mlir::nova::matmul {

/// The result's region batch [lo, hi) x rows [r0, r1) x columns [c0, c1).
Value resultRegion(OpBuilder &b, Location loc, const MatmulOperands &m, const WorkgroupBlock &block,
                   Value r0, Value r1, Value c0, Value c1) {
  SmallVector<OpFoldResult> offsets, sizes, strides;
  for (int64_t d = 0; d < m.batchRank; ++d) {
    offsets.push_back(block.batchLo[d]);
    sizes.push_back(b.create<arith::SubIOp>(loc, block.batchHi[d], block.batchLo[d]).getResult());
    strides.push_back(b.getIndexAttr(1));
  }
  offsets.append({r0, c0});
  sizes.push_back(b.create<arith::SubIOp>(loc, r1, r0).getResult());
  sizes.push_back(b.create<arith::SubIOp>(loc, c1, c0).getResult());
  strides.append({b.getIndexAttr(1), b.getIndexAttr(1)});
  return b.create<memref::SubViewOp>(loc, m.out, offsets, sizes, strides);
}

/// A copy of `op` restricted to batch [lo, hi) x rows [r0, r1) x columns [c0, c1).
void buildRemainder(OpBuilder &b, linalg::GenericOp op, const MatmulOperands &m,
                    const WorkgroupBlock &block, Value r0, Value r1, Value c0, Value c1) {
  Location loc = op.getLoc();
  // A [batch..., x, y] operand's block: `first`/`second` say what its last
  // two dims are: 'r' rows, 'c' columns, 'k' the whole K.
  auto slice = [&](Value v, char first, char second) -> Value {
    auto type = cast<MemRefType>(v.getType());
    SmallVector<OpFoldResult> offsets, sizes, strides;
    for (int64_t d = 0; d < m.batchRank; ++d) {
      offsets.push_back(block.batchLo[d]);
      sizes.push_back(b.create<arith::SubIOp>(loc, block.batchHi[d], block.batchLo[d]).getResult());
      strides.push_back(b.getIndexAttr(1));
    }
    for (auto [pos, which] : llvm::enumerate(std::array<char, 2>{first, second})) {
      int64_t d = m.batchRank + static_cast<int64_t>(pos);
      if (which == 'k') {
        offsets.push_back(b.getIndexAttr(0));
        sizes.push_back(b.getIndexAttr(type.getDimSize(d)));
      } else {
        Value lo = which == 'r' ? r0 : c0, hi = which == 'r' ? r1 : c1;
        offsets.push_back(lo);
        sizes.push_back(b.create<arith::SubIOp>(loc, hi, lo).getResult());
      }
      strides.push_back(b.getIndexAttr(1));
    }
    return b.create<memref::SubViewOp>(loc, v, offsets, sizes, strides);
  };
  SmallVector<Value> operands;
  for (Value in : m.prologueInputs.empty() ? SmallVector<Value>{m.lhs} : m.prologueInputs)
    operands.push_back(m.transposeA ? slice(in, 'k', 'r') : slice(in, 'r', 'k'));
  operands.push_back(slice(m.rhs, 'k', 'c'));
  operands.push_back(slice(m.out, 'r', 'c'));
  Operation *copy = b.clone(*op);
  copy->setOperands(operands);
  copy->removeAttr("nova.kernel");
}

/// A copy of the epilogue restricted to batch [lo, hi) x rows [r0, r1) x
/// columns [c0, c1) (where the register tiles did not reach).
void buildEpilogueOnRegion(OpBuilder &b, linalg::GenericOp epi, const MatmulOperands &m,
                           const WorkgroupBlock &block, Value r0, Value r1, Value c0, Value c1) {
  Location loc = epi.getLoc();
  if (epi.getNumLoops() != static_cast<unsigned>(m.outType.getRank())) {
    // Rows split in the epilogue's dims: a block of rows is no box there,
    // so element by element (only the edges of the register tiles).
    b.create<scf::ForOp>(loc, r0, r1, index(b, loc, 1), ValueRange{}, [&](OpBuilder &rb, Location rl, Value row, ValueRange) {
      rb.create<scf::ForOp>(rl, c0, c1, index(rb, rl, 1), ValueRange{}, [&](OpBuilder &cb, Location cl, Value col, ValueRange) {
        auto one = VectorType::get({1}, m.outType.getElementType());
        Value acc = cb.create<vector::LoadOp>(cl, one, m.out, ValueRange{row, col});
        storeThroughEpilogue(cb, cl, epi, m.out, ValueRange{}, row, col, acc, 1);
        cb.create<scf::YieldOp>(cl);
      });
      rb.create<scf::YieldOp>(rl);
    });
    return;
  }
  SmallVector<OpFoldResult> offsets, sizes, bounds;
  for (int64_t d = 0; d < m.batchRank; ++d) {
    offsets.push_back(block.batchLo[d]);
    sizes.push_back(b.create<arith::SubIOp>(loc, block.batchHi[d], block.batchLo[d]).getResult());
  }
  offsets.append({r0, c0});
  sizes.push_back(b.create<arith::SubIOp>(loc, r1, r0).getResult());
  sizes.push_back(b.create<arith::SubIOp>(loc, c1, c0).getResult());
  for (int64_t d = 0; d < m.outType.getRank(); ++d)
    bounds.push_back(b.getIndexAttr(m.outType.getDimSize(d)));
  auto linalgOp = cast<linalg::LinalgOp>(epi.getOperation());
  SmallVector<Value> operands = linalg::makeTiledShapes(b, loc, linalgOp, epi->getOperands(), offsets,
                                                        sizes, bounds, /*omitPartialTileCheck=*/true);
  Operation *copy = b.clone(*epi);
  copy->setOperands(operands);
}

} // namespace mlir::nova::matmul

namespace {

/// The whole rewrite of one matmul for one workgroup `wg`: register tiles
/// MR x NR (NR a multiple of `width`), the reduction swept in slabs of kc.
///
/// `fill`, if not null, is the linalg.fill of the whole result that precedes
/// the matmul in its kernel: each workgroup initializes only its own block
/// (a zero fill by starting its accumulators at zero), and the fill goes.
///
/// `epilogue`, if not null, is the elementwise op after the matmul that is
/// applied to the register tiles on their last slab (the column edge's
/// masked); it goes too.
void rewrite(linalg::GenericOp op, const MatmulOperands &m, Value wg, ArrayRef<int64_t> tile,
             int64_t tileRows, int64_t nr, int64_t kc, int64_t lhsRows, int64_t width, linalg::FillOp fill,
             linalg::GenericOp epilogue) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Type elem = m.outType.getElementType();
  auto vecType = VectorType::get({width}, elem);
  int64_t cols = nr / width;
  int64_t mFull = m.M - m.M % tileRows, nFull = m.N - m.N % nr;
  WorkgroupBlock block = blockOf(b, loc, wg, m, tile);
  // The register tiles cover [m0, mv) x [n0, nv); both ends are multiples of
  // MR / NR because block tiles are. Rows past the last whole register tile
  // (M % MR of them, at the bottom of the last row block) get a microkernel
  // of their own, MR' = M % MR rows; columns past the last whole panel
  // likewise (below). Only an empty product has no kernel.
  int64_t edgeRows = m.M % tileRows;
  bool hasKernel = m.M > 0 && m.N > 0 && m.K > 0;
  // The columns past the last whole panel (N % NR), in the block that has
  // them: a microkernel of ceil(edgeCols / width) vectors, the last masked.
  int64_t edgeCols = hasKernel ? m.N % nr : 0, edgeVectors = (edgeCols + width - 1) / width,
          edgeLanes = edgeCols % width;
  Value fillValue = fill ? fill.getDpsInputs()[0] : Value();
  bool zeroStart = fillValue && hasKernel && matchPattern(fillValue, m_AnyZeroFloat());
  if (fill && !zeroStart) // initialize the whole block, then accumulate into it
    b.create<linalg::FillOp>(loc, fillValue,
                             resultRegion(b, loc, m, block, block.m0, block.m1, block.n0, block.n1));
  Value mv = block.m0, nv = block.n0;
  if (hasKernel) {
    mv = b.create<arith::MaxUIOp>(
        loc, b.create<arith::MinUIOp>(loc, block.m1, index(b, loc, mFull)), block.m0);
    nv = b.create<arith::MaxUIOp>(
        loc, b.create<arith::MinUIOp>(loc, block.n1, index(b, loc, nFull)), block.n0);
    // for batch in block: for k0 in [0, K) step kc: pack the block's rhs
    // slab; (for g0 in [m0, mv) step packRows: pack the lhs rows [g0, g0 +
    // packRows);) for i0 in [m0, mv) step MR: for j0 in [n0, nv) step NR: the
    // microkernel. The lhs micro-panel MR x kc (broadcast) stays in L1 while
    // the packed rhs micro-panels (the vectors) stream past it from L2. The
    // packed slab is on the kernel's stack, made once at its entry.
    int64_t blockCols = tile[m.batchRank + 1];
    int64_t panels = (blockCols + nr - 1) / nr;
    auto func = op->getParentOfType<func::FuncOp>();
    OpBuilder entry = OpBuilder::atBlockBegin(&func.getBody().front());
    Value packed = entry.create<memref::AllocaOp>(
        loc, MemRefType::get({panels, kc, nr}, elem), ValueRange{}, entry.getI64IntegerAttr(64));
    Value epilogueScratch;
    if (epilogue && rollsEpilogue(epilogue))
      epilogueScratch = entry.create<memref::AllocaOp>(loc, MemRefType::get({tileRows, nr / width, width}, elem),
                                                       ValueRange{}, entry.getI64IntegerAttr(64));
    Value packedLhs;
    // A packed lhs is packed `packRows` rows at a time, just before the row
    // tiles that read it: a transposed one `lhsRows` (the configurator's,
    // else one group of whole vectors, buildPackTransposedLhs), a row-major
    // one a producer computes a tile at a time. Its slab is then packRows x
    // kc beside the packed rhs, where packing the block's rows at once
    // capped kc (56 for the medium GPT's 2048-row GELU-fed products: their
    // results' tiles read and written 37 times).
    int64_t packRows = !m.transposeA ? tileRows : lhsRows > 0 ? lhsRows : nova::transposedLhsGroupRows(tileRows, width);
    if (m.packsLhs()) {
      int64_t slots = packRows / tileRows;
      // [slots, kc, MR] for a transposed lhs, [slots, MR, kc] for a row-major
      // one a producer computes (buildPackRowLhs).
      SmallVector<int64_t> shape = m.transposeA ? SmallVector<int64_t>{slots, kc, tileRows}
                                                : SmallVector<int64_t>{slots, tileRows, kc};
      packedLhs = entry.create<memref::AllocaOp>(loc, MemRefType::get(shape, elem), ValueRange{},
                                                 entry.getI64IntegerAttr(64));
    }
    SmallVector<Value> steps(m.batchRank, index(b, loc, 1));
    scf::buildLoopNest(
        b, loc, block.batchLo, block.batchHi, steps,
        [&](OpBuilder &bb, Location bl, ValueRange batch) {
          bb.create<scf::ForOp>(
              bl, index(bb, bl, 0), index(bb, bl, m.K), index(bb, bl, kc), ValueRange{},
              [&](OpBuilder &pb, Location pl, Value k0, ValueRange) {
                Value k1 = pb.create<arith::MinUIOp>(
                    pl, pb.create<arith::AddIOp>(pl, k0, index(pb, pl, kc)), index(pb, pl, m.K));
                Value klen = pb.create<arith::SubIOp>(pl, k1, k0);
                bool oneSlab = m.K <= kc;
                Value yes = pb.create<arith::ConstantIntOp>(pl, 1, 1);
                Value isLast = oneSlab ? yes
                                       : pb.create<arith::CmpIOp>(pl, arith::CmpIPredicate::eq, k1, index(pb, pl, m.K))
                                             .getResult();
                Value fromZero;
                if (zeroStart)
                  fromZero = oneSlab ? yes
                                     : pb.create<arith::CmpIOp>(pl, arith::CmpIPredicate::eq, k0, index(pb, pl, 0))
                                           .getResult();
                if (nFull > 0)
                  buildPackRhs(pb, pl, m, batch, block.n0, nv, k0, klen, packed, vecType, nr, cols);
                Value hasEdgeCols, edgePanel, edgeMask;
                if (edgeCols > 0) {
                  hasEdgeCols = pb.create<arith::CmpIOp>(pl, arith::CmpIPredicate::ult, nv, block.n1);
                  edgePanel = pb.create<arith::DivUIOp>(pl, pb.create<arith::SubIOp>(pl, nv, block.n0),
                                                        index(pb, pl, nr));
                  if (edgeLanes)
                    edgeMask = pb.create<vector::ConstantMaskOp>(pl, VectorType::get({width}, pb.getI1Type()),
                                                                 pb.getI64ArrayAttr({edgeLanes}));
                  pb.create<scf::IfOp>(pl, hasEdgeCols, [&](OpBuilder &eb, Location el) {
                    buildPackRhsEdge(eb, el, m, batch, nv, k0, klen, packed, edgePanel, vecType, edgeCols, edgeMask);
                    eb.create<scf::YieldOp>(el);
                  });
                }
                // Rows [r0, r1) packed into slots from 0.
                auto packLhs = [&](OpBuilder &lb, Location ll, Value r0, Value r1, int64_t rows) {
                  if (m.transposeA)
                    buildPackTransposedLhs(lb, ll, m, batch, r0, r1, k0, klen, packedLhs, rows, width);
                  else
                    buildPackRowLhs(lb, ll, m, batch, r0, r1, k0, klen, packedLhs, rows, width);
                };
                // The row tile at i0 (`rows` rows) against every column tile
                // of the block; its packed lhs (if any) is in slot (i0 - base) / MR.
                auto columnTiles = [&](OpBuilder &ib, Location il, Value i0, Value base, int64_t rows) {
                  Value slot = packedLhs ? ib.create<arith::DivUIOp>(
                                               il, ib.create<arith::SubIOp>(il, i0, base),
                                               index(ib, il, tileRows)).getResult()
                                         : Value();
                  if (nFull > 0)
                    ib.create<scf::ForOp>(
                        il, block.n0, nv, index(ib, il, nr), ValueRange{},
                        [&](OpBuilder &jb, Location jl, Value j0, ValueRange) {
                          Value panel = jb.create<arith::DivUIOp>(
                              jl, jb.create<arith::SubIOp>(jl, j0, block.n0), index(jb, jl, nr));
                          buildMicrokernel(jb, jl, m, batch, i0, j0, k0, klen, packed, panel, packedLhs,
                                           slot, vecType, rows, cols, fromZero, epilogue, isLast, epilogueScratch);
                          jb.create<scf::YieldOp>(jl);
                        });
                  if (edgeCols > 0)
                    ib.create<scf::IfOp>(il, hasEdgeCols, [&](OpBuilder &eb, Location el) {
                      buildMicrokernel(eb, el, m, batch, i0, nv, k0, klen, packed, edgePanel, packedLhs, slot,
                                       vecType, rows, edgeVectors, fromZero, epilogue, isLast, epilogueScratch,
                                       edgeMask);
                      eb.create<scf::YieldOp>(el);
                    });
                };
                if (packedLhs)
                  pb.create<scf::ForOp>(
                      pl, block.m0, mv, index(pb, pl, packRows), ValueRange{},
                      [&](OpBuilder &gb, Location gl, Value g0, ValueRange) {
                        Value g1 = gb.create<arith::MinUIOp>(
                            gl, gb.create<arith::AddIOp>(gl, g0, index(gb, gl, packRows)), mv);
                        packLhs(gb, gl, g0, g1, tileRows);
                        gb.create<scf::ForOp>(gl, g0, g1, index(gb, gl, tileRows), ValueRange{},
                                              [&](OpBuilder &ib, Location il, Value i0, ValueRange) {
                                                columnTiles(ib, il, i0, g0, tileRows);
                                                ib.create<scf::YieldOp>(il);
                                              });
                        gb.create<scf::YieldOp>(gl);
                      });
                else
                  pb.create<scf::ForOp>(
                      pl, block.m0, mv, index(pb, pl, tileRows), ValueRange{},
                      [&](OpBuilder &ib, Location il, Value i0, ValueRange) {
                        columnTiles(ib, il, i0, block.m0, tileRows);
                        ib.create<scf::YieldOp>(il);
                      });
                if (edgeRows > 0) {
                  // Only the block that holds rows [M - M % MR, M) has mv < m1.
                  Value hasEdge = pb.create<arith::CmpIOp>(pl, arith::CmpIPredicate::ult, mv, block.m1);
                  pb.create<scf::IfOp>(pl, hasEdge, [&](OpBuilder &eb, Location el) {
                    if (packedLhs)
                      packLhs(eb, el, mv, eb.create<arith::AddIOp>(el, mv, index(eb, el, edgeRows)), edgeRows);
                    columnTiles(eb, el, mv, mv, edgeRows);
                    eb.create<scf::YieldOp>(el);
                  });
                }
                pb.create<scf::YieldOp>(pl);
              });
        });
  }
  // With no kernel, the whole block through the generic loops.
  if (!hasKernel) {
    buildRemainder(b, op, m, block, block.m0, block.m1, block.n0, block.n1);
    if (epilogue)
      buildEpilogueOnRegion(b, epilogue, m, block, block.m0, block.m1, block.n0, block.n1);
  }
  op.erase();
  if (fill)
    fill.erase();
  if (epilogue)
    epilogue.erase();
}

struct NovaVectorizeMatmul
    : mlir::nova::impl::NovaVectorizeMatmulBase<NovaVectorizeMatmul> {
  using NovaVectorizeMatmulBase::NovaVectorizeMatmulBase;

  void runOnOperation() override {
    // Only the tagged matmuls: a rewrite erases its epilogue (another
    // generic), which must not be visited afterwards (ASan caught the
    // use-after-free when every generic was collected).
    SmallVector<linalg::GenericOp> ops;
    getOperation().walk([&](linalg::GenericOp op) {
      if (nova::isTaggedMatmul(op))
        ops.push_back(op);
    });
    for (linalg::GenericOp op : ops) {
      std::optional<MatmulOperands> m = nova::matchMatmul(op);
      if (!m)
        continue;
      auto func = op->getParentOfType<func::FuncOp>();
      nova::LoweringConfigAttr config = func ? nova::loweringConfig(func) : nullptr;
      auto [fill, epilogue] = nova::matmulNeighbours(*m);
      if (config && !config.isMatmul())
        continue; // the configurator chose plain loops
      int64_t elemBits = m->outType.getElementTypeBitWidth();
      int64_t width = vectorBits / elemBits;
      if (config) {
        ArrayRef<int64_t> reg = config.getRegisterTile();
        if (width < 1 || reg[1] % width != 0) {
          op.emitError("nova-vectorize-matmul: register tile columns ")
              << reg[1] << " are not a multiple of the vector width " << width;
          return signalPassFailure();
        }
        ArrayRef<int64_t> cache = config.getCacheTile();
        int64_t kc = cache.empty() ? std::max<int64_t>(m->K, 1) : cache[0];
        int64_t lhsRows = cache.size() > 1 ? cache[1] : 0;
        if (lhsRows % reg[0] != 0) {
          op.emitError("nova-vectorize-matmul: packed lhs rows ")
              << lhsRows << " are not a multiple of the register tile's " << reg[0];
          return signalPassFailure();
        }
        if (config.isBf16Matmul()) {
          rewriteBf16(op, *m, func.getArgument(0), config.getTile(), kc, fill, epilogue, config.isAmxMatmul());
          continue;
        }
        rewrite(op, *m, func.getArgument(0), config.getTile(), reg[0], reg[1], kc, lhsRows, width, fill,
                epilogue);
        continue;
      }
      // Not in a configured kernel: one workgroup covering the whole result.
      if (width < 2)
        continue;
      SmallVector<int64_t> tile;
      for (int64_t d = 0; d < m->batchRank; ++d)
        tile.push_back(m->outType.getDimSize(d));
      tile.push_back(std::max<int64_t>(m->M, 1));
      tile.push_back(std::max<int64_t>(m->N, 1));
      OpBuilder b(op);
      Value zero = index(b, op.getLoc(), 0);
      rewrite(op, *m, zero, tile, tileRows, 2 * width, std::max<int64_t>(m->K, 1), 0, width, fill,
              epilogue);
    }
    if (failed(eraseUnstored()))
      signalPassFailure();
  }

  /// The placeholders of results nova-drop-unstored-results took out of the
  /// plan: the rewrites above must have left them unused (but for views
  /// nothing reads).
  LogicalResult eraseUnstored() {
    SmallVector<memref::AllocOp> placeholders;
    getOperation().walk([&](memref::AllocOp alloc) {
      if (alloc->hasAttr(nova::kUnstoredAttr))
        placeholders.push_back(alloc);
    });
    for (memref::AllocOp alloc : placeholders) {
      for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
        if (isa<memref::ExpandShapeOp, memref::CollapseShapeOp>(user) && user->use_empty())
          user->erase();
      if (!alloc->use_empty())
        return alloc.emitError("nova-vectorize-matmul: the matmul result nova-drop-unstored-results took out of "
                               "the plan is still used by ")
               << (*alloc->getUsers().begin())->getName() << " (the register kernel did not keep it in registers)";
      alloc.erase();
    }
    return success();
  }
};

} // namespace
