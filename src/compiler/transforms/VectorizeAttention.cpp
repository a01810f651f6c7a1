//===- VectorizeAttention.cpp - the nova-vectorize-attention pass -*- C++ -*-===//
//
// Expands each bufferized nova.attention_kernel of a kernel configured
// `attention` into vector code. Workgroup wg is the head (b, h) =
// (wg / heads, wg % heads); it reads its q, k, v columns of qkv [B, T, 3d]
// in place (no permuted copies) and never stores a T x T matrix: the
// scores of R query rows at a time (R = register_tile[0]) live in an
// R x T scratch, in L1 / L2, and are gone when the rows are done.
//
// Per head, k (and in the backward v) is first transposed into a scratch
// [hd, T'] (T' = T rounded up to whole vectors, zero-padded), so that a
// score block is a small matmul with broadcast lhs and contiguous rhs rows:
// for rows [i0, i0 + R) only key columns j < i0 + R are computed (the causal
// half, rounded up to whole vectors, plus a scalar mask of the diagonal
// block). Every product below is this one register-tiled loop
// (emitProduct): acc[r][v] += lhs(r, kk) * rhs(kk, v) over kk, R x cv
// accumulators (cv = register_tile[1] / W vectors), R broadcasts and cv
// vector loads per kk.
//
// Forward, per row block:     S = scale q k^T (masked), e = exp(S - max),
//                             out = (e v) / sum(e).
// Backward, per row block:    P = softmax(S) recomputed, dP = grad v^T,
//                             dS = P (dP - rowsum(P dP)), dq = scale dS k,
//                             dk += scale dS^T q, dv += P^T grad,
// dk and dv of the head accumulated in place across row blocks (set by
// the first block to reach a key, which is the one holding that key's own
// query row): a head is one workgroup, so no two workgroups write one
// element.
// The backward needs nothing from the forward but qkv: the softmax's
// normalization is recomputed from S (as FlashAttention-2 does with its
// saved log-sum-exp, here without even that).
//
// Reference: Dao, "FlashAttention-2: Faster Attention with Better
// Parallelism and Work Partitioning", 2023 (the backward's equations);
// IREE's iree_linalg_ext.attention (one op that the target decomposes).
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

#include <limits>

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAVECTORIZEATTENTION
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

/// Builds one head's code; every value it holds is of that head.
struct HeadEmitter {
  OpBuilder &b;
  Location l;
  nova::AttentionKernelOp op;
  VectorType vec;      // W lanes
  int64_t W, R, cv;    // lanes, rows per register block, vectors per block
  int64_t Rc;          // query rows per backward block (a multiple of R)
  int64_t T, d, hd, Tp;
  double scale;
  Value qkv, grad, out; // grad: null in the forward
  Value bIdx, qCol, kCol, vCol; // batch index; first column of q, k, v of the head
  Value oCol;                   // first column of the head in out (forward) or dq (backward)
  Value kt, vt, s, dp;          // scratch: k^T, v^T [hd, Tp]; S / P, dP / dS [R, Tp]
  /// The forward's products, and the backward's S, dP and dq (below), as
  /// AVX512-BF16 dot products (bf16 matmuls asked for, W = 16, hd a
  /// multiple of 32): their operands rounded to bf16 pairs. kp [hd / 2,
  /// 2 Tp]: row p holds each key's (k[j, 2p], k[j, 2p + 1]); vp [Tp / 2,
  /// 2 hd]: row p holds each column's (v[2p, c], v[2p + 1, c]); qb [R, hd]
  /// and eb [R, Tp]: the block's q rows and exp(S - max) rows, rounded.
  bool dot = false;
  Value kp, vp, qb, eb;
  /// The backward's dot products: S = scale q k^T from kp and dP = grad
  /// v^T from vtp (v's pairs along the head, as kp's), the rows rounded
  /// into qb in turn; dq = dS k from dS rounded into eb and kvp (k's
  /// pairs along the keys, as vp's); dk = dS^T q and dv = P^T grad, per
  /// backward block, from its rows paired (row 2p with row 2p + 1, the
  /// products' k): dSp and Pp [Rc / 2, 2 Tp] each key's pairs, qp and gp
  /// [Rc / 2, 2 hd] each column's. The softmax and dS stay f32.
  Value vtp, kvp, dSp, Pp, qp, gp;

  Value c(int64_t v) { return b.create<arith::ConstantIndexOp>(l, v); }
  Value add(Value x, Value y) { return b.create<arith::AddIOp>(l, x, y); }
  Value add(Value x, int64_t y) { return y == 0 ? x : add(x, c(y)); }
  Value mul(Value x, int64_t y) { return b.create<arith::MulIOp>(l, x, c(y)); }
  Type elem() { return vec.getElementType(); }
  Value scalar(double v) { return b.create<arith::ConstantOp>(l, b.getFloatAttr(elem(), v)); }
  Value splat(double v) {
    return b.create<arith::ConstantOp>(l, DenseElementsAttr::get(vec, b.getFloatAttr(elem(), v)));
  }
  /// An element or W lanes of `m`, widened to f32 where `m` is bf16 (a
  /// qkv made in bf16: nova-bf16-attention-qkv).
  Value load(OpBuilder &ib, Value m, ValueRange idx) {
    Value v = ib.create<memref::LoadOp>(l, m, idx);
    return v.getType() == elem() ? v : ib.create<arith::ExtFOp>(l, elem(), v).getResult();
  }
  Value vload(OpBuilder &ib, Value m, ValueRange idx) {
    Type stored = cast<MemRefType>(m.getType()).getElementType();
    if (stored == elem())
      return ib.create<vector::LoadOp>(l, vec, m, idx);
    Value v = ib.create<vector::LoadOp>(l, VectorType::get({W}, stored), m, idx);
    return ib.create<arith::ExtFOp>(l, vec, v);
  }

  /// scf.for over [lb, ub) with step, carrying nothing (nova::buildFor).
  void loop(Value lb, Value ub, int64_t step, function_ref<void(OpBuilder &, Value)> body) {
    nova::buildFor(b, l, lb, ub, c(step), {}, [&](Value i, ValueRange) {
      body(b, i);
      return SmallVector<Value>{};
    });
  }

  /// `count` items in groups of `size`: body(size, first item) for each
  /// whole group, then the n < size items left as blocks of the powers of
  /// two in n, largest first (a block of 4 then one of 1 for n = 5: the
  /// rows' FMA chains stay independent, not one chain a block; and the
  /// code holds one copy of body per power of two below size, not one per
  /// n, which made the attention backward the largest kernel of a GPT
  /// step). Where the caller knows the values count % size can take
  /// (`possibleLeft`), one block of each of them instead.
  void emitGroups(Value count, int64_t size, function_ref<void(int64_t n, Value first)> body,
                  ArrayRef<int64_t> possibleLeft = {}) {
    Value groups = b.create<arith::DivUIOp>(l, count, c(size));
    loop(c(0), groups, 1, [&](OpBuilder &, Value g) { body(size, mul(g, size)); });
    Value done = mul(groups, size);
    Value left = b.create<arith::SubIOp>(l, count, done);
    auto emitIf = [&](Value cond, int64_t n, Value first) {
      b.create<scf::IfOp>(l, cond, [&](OpBuilder &ib, Location) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
        body(n, first);
        b.create<scf::YieldOp>(l);
      });
    };
    if (!possibleLeft.empty()) {
      for (int64_t n : possibleLeft) {
        if (n == 0)
          continue;
        if (possibleLeft.size() == 1)
          body(n, done);
        else
          emitIf(b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, left, c(n)), n, done);
      }
      return;
    }
    int64_t p = 1;
    while (p * 2 < size)
      p *= 2;
    for (; p >= 1 && p < size; p /= 2) { // none where size is 1
      // Blocks already emitted cover left's bits above p.
      Value first = add(done, b.create<arith::AndIOp>(l, left, c(~(2 * p - 1))));
      emitIf(b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ne, b.create<arith::AndIOp>(l, left, c(p)),
                                     c(0)),
             p, first);
    }
  }

  /// acc[r][v] = init(r, v) (0 without init) + sum over kk in [K0, K) of
  /// lhs(r, kk) * rhs(kk, v), r < rows, v < nv; then finish(r, v, acc[r][v]).
  /// With `bf16Pairs` kk runs over k-pairs: lhs(r, kk) is a bf16 pair in
  /// every lane (broadcastBf16Pair), rhs(kk, v) 16 lanes' pairs, and each
  /// step one dot product (dotBf16) instead of an FMA.
  void emitProduct(int64_t rows, int64_t nv, Value K,
                   function_ref<Value(int64_t r, Value kk)> lhs,
                   function_ref<Value(Value kk, int64_t v)> rhs,
                   function_ref<void(int64_t r, int64_t v, Value acc)> finish,
                   function_ref<Value(int64_t r, int64_t v)> init = nullptr, Value K0 = {},
                   bool bf16Pairs = false) {
    SmallVector<Value> start(rows * nv, splat(0.0));
    if (init)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t v = 0; v < nv; ++v)
          start[r * nv + v] = init(r, v);
    auto kLoop = nova::buildFor(
        b, l, K0 ? K0 : c(0), K, c(1), start, [&](Value kk, ValueRange acc) {
          SmallVector<Value> row, next;
          for (int64_t v = 0; v < nv; ++v)
            row.push_back(rhs(kk, v));
          for (int64_t r = 0; r < rows; ++r) {
            if (bf16Pairs) {
              Value a = lhs(r, kk);
              for (int64_t v = 0; v < nv; ++v)
                next.push_back(nova::dotBf16(b, l, acc[r * nv + v], a, row[v]));
              continue;
            }
            Value a = b.create<vector::BroadcastOp>(l, vec, lhs(r, kk));
            for (int64_t v = 0; v < nv; ++v)
              next.push_back(b.create<vector::FMAOp>(l, a, row[v], acc[r * nv + v]));
          }
          return next;
        });
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t v = 0; v < nv; ++v)
        finish(r, v, kLoop.getResult(r * nv + v));
  }

  VectorType bf16s(int64_t n) { return VectorType::get({n}, b.getBF16Type()); }
  Value toBf16(Value v) { return nova::roundToBf16(b, l, v); }

  /// kp (see `dot`), or vtp from v's columns: 16 keys x 16 pairs at a
  /// time, each key's 32 values rounded and read as 16 i32 pairs,
  /// transposed in registers so that a row is one pair across the keys;
  /// the keys past the last whole 16 element by element, zeros up to Tp.
  void emitPackHeadPairs(Value dst, Value col) {
    int64_t full = T / W * W;
    if (full > 0)
      loop(c(0), c(full), W, [&](OpBuilder &, Value j0) {
        loop(c(0), c(hd / 2), W, [&](OpBuilder &, Value p0) {
          SmallVector<Value> lo, hi;
          for (int64_t t = 0; t < W; ++t) {
            Value ch = add(col, mul(p0, 2));
            lo.push_back(vload(b, qkv, {bIdx, add(j0, t), ch}));
            hi.push_back(vload(b, qkv, {bIdx, add(j0, t), add(ch, W)}));
          }
          SmallVector<Value> pairs = nova::transposeBf16Pairs(b, l, lo, hi);
          for (int64_t t = 0; t < W; ++t)
            b.create<vector::StoreOp>(l, pairs[t], dst, ValueRange{add(p0, t), mul(j0, 2)});
        });
      });
    loop(c(0), c(hd), 1, [&](OpBuilder &, Value ch) {
      Value p = b.create<arith::DivUIOp>(l, ch, c(2)), half = b.create<arith::RemUIOp>(l, ch, c(2));
      if (full < T)
        loop(c(full), c(T), 1, [&](OpBuilder &, Value j) {
          Value v = b.create<arith::TruncFOp>(l, b.getBF16Type(), load(b, qkv, {bIdx, j, add(col, ch)}));
          b.create<memref::StoreOp>(l, v, dst, ValueRange{p, add(mul(j, 2), half)});
        });
      if (Tp > T)
        loop(c(T), c(Tp), 1, [&](OpBuilder &, Value j) {
          Value zero = b.create<arith::ConstantOp>(l, b.getZeroAttr(b.getBF16Type()));
          b.create<memref::StoreOp>(l, zero, dst, ValueRange{p, add(mul(j, 2), half)});
        });
    });
  }

  /// vp (see `dot`), or kvp from k's columns: rows 2p and 2p + 1 of the
  /// head's columns rounded and interleaved (emitPackRowPairs); a row past
  /// T (odd T) as zeros.
  void emitPackKeyRowPairs(Value dst, Value col) {
    emitPackRowPairs(dst, T, c(0), Value(), c(hd),
                     [&](Value j, Value at) { return vload(b, qkv, {bIdx, j, add(col, at)}); });
  }

  /// out[b, j, col + c] += sum_r coef(r, j) * rowAt(r, c) for r in [skip,
  /// rows), j in [0, jEnd), c < hd, where the keys from `newFrom` (a
  /// multiple of R) on start from 0 (`=`, not `+=`: no block before this
  /// one reached them, so nothing zeroes them first): keys in groups of R
  /// (the rest as one group, (jEnd - newFrom) % R one of `possibleLeft`),
  /// each group an emitProduct over the block's rows with the keys' out
  /// rows as its accumulators: R x cv independent FMA chains, each key row
  /// loaded (if not new) and stored once per block.
  /// With `pairs` r runs over the rows' pairs [kBegin, kEnd) (coef a
  /// broadcast pair, rowAt a vector of pairs) and each step is a dot
  /// product; else over the rows [kBegin, kEnd).
  void emitKeyAccumulate(Value kBegin, Value kEnd, bool pairs, Value newFrom, Value jEnd,
                         ArrayRef<int64_t> possibleLeft, Value col,
                         function_ref<Value(Value r, Value j)> coef,
                         function_ref<Value(Value r, int64_t c)> rowAt) {
    auto group = [&](int64_t keys, Value j0, bool fresh) {
      SmallVector<Value> js;
      for (int64_t g = 0; g < keys; ++g)
        js.push_back(add(j0, g));
      for (int64_t c0 = 0; c0 < hd; c0 += cv * W) {
        auto at = [&](int64_t v) { return add(col, c0 + v * W); };
        emitProduct(
            keys, cv, kEnd, [&](int64_t g, Value r) { return coef(r, js[g]); },
            [&](Value r, int64_t v) { return rowAt(r, c0 + v * W); },
            [&](int64_t g, int64_t v, Value acc) {
              b.create<vector::StoreOp>(l, acc, out, ValueRange{bIdx, js[g], at(v)});
            },
            [&](int64_t g, int64_t v) { return fresh ? splat(0.0) : vload(b, out, {bIdx, js[g], at(v)}); }, kBegin,
            pairs);
      }
    };
    emitGroups(newFrom, R, [&](int64_t n, Value j0) { group(n, j0, false); }, {0});
    emitGroups(b.create<arith::SubIOp>(l, jEnd, newFrom), R,
               [&](int64_t n, Value j0) { group(n, add(newFrom, j0), true); }, possibleLeft);
  }

  /// dst[c, j] = qkv[b, j, col + c] for j < T, 0 for j in [T, Tp): W x W
  /// blocks transposed in registers (W row loads, W vector stores; a loop
  /// over the head's column blocks, not a copy of the shuffles for each:
  /// those were a fifth of the kernels' code), the keys past the last
  /// whole block element by element.
  void emitTranspose(Value dst, Value col) {
    int64_t full = T / W * W;
    if (full > 0)
      loop(c(0), c(full), W, [&](OpBuilder &, Value j0) {
        loop(c(0), c(hd), W, [&](OpBuilder &, Value c0) {
          SmallVector<Value> rows;
          for (int64_t t = 0; t < W; ++t)
            rows.push_back(vload(b, qkv, {bIdx, add(j0, t), add(col, c0)}));
          SmallVector<Value> cols = nova::transposeInRegisters(b, l, rows);
          for (int64_t t = 0; t < W; ++t)
            b.create<vector::StoreOp>(l, cols[t], dst, ValueRange{add(c0, t), j0});
        });
      });
    loop(c(0), c(hd), 1, [&](OpBuilder &, Value ch) {
      if (full < T)
        loop(c(full), c(T), 1, [&](OpBuilder &, Value j) {
          b.create<memref::StoreOp>(l, load(b, qkv, {bIdx, j, add(col, ch)}), dst, ValueRange{ch, j});
        });
      if (Tp > T)
        loop(c(T), c(Tp), 1, [&](OpBuilder &, Value j) {
          b.create<memref::StoreOp>(l, scalar(0.0), dst, ValueRange{ch, j});
        });
    });
  }

  /// dst[base + r, j] = mult sum_c src[b, rowIdx[r], col + c] key[j, c] for j
  /// in [0, nvec W), the keys (k or v) from `transposed` ([hd, Tp]: kt,
  /// vt) or, with `dot`, from `pairs` (kp, vtp) with the rows rounded into
  /// qb first: whole groups of cv vectors, then the rest (emitGroups).
  void emitScoreBlock(int64_t rows, Value base, Value nvec, Value dst, Value src, ArrayRef<Value> rowIdx,
                      Value col, Value transposed, Value pairs, double mult) {
    if (dot)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c0 = 0; c0 < hd; c0 += W)
          b.create<vector::StoreOp>(l, toBf16(vload(b, src, {bIdx, rowIdx[r], add(col, c0)})), qb,
                                    ValueRange{c(r), c(c0)});
    emitGroups(nvec, cv, [&](int64_t nv, Value v0) {
      Value j0 = mul(v0, W);
      auto finish = [&](int64_t r, int64_t v, Value acc) {
        if (mult != 1.0)
          acc = b.create<arith::MulFOp>(l, acc, splat(mult));
        b.create<vector::StoreOp>(l, acc, dst, ValueRange{add(base, r), add(j0, v * W)});
      };
      if (!dot)
        return emitProduct(
            rows, nv, c(hd), [&](int64_t r, Value ch) { return load(b, src, {bIdx, rowIdx[r], add(col, ch)}); },
            [&](Value kk, int64_t v) { return vload(b, transposed, {kk, add(j0, v * W)}); }, finish);
      emitProduct(
          rows, nv, c(hd / 2),
          [&](int64_t r, Value p) { return nova::broadcastBf16Pair(b, l, qb, ValueRange{c(r), mul(p, 2)}, W); },
          [&](Value p, int64_t v) {
            return b.create<vector::LoadOp>(l, bf16s(2 * W), pairs, ValueRange{p, mul(add(j0, v * W), 2)});
          },
          finish, nullptr, {}, /*bf16Pairs=*/true);
    });
  }

  /// Softmax of rows [base, base + rows) of `s`, row r over its first limits[r]
  /// columns, the rest (up to nvec W) set to -inf first so they come out 0.
  /// The rows go through each pass together (rows independent max / sum
  /// chains, not one row's latency at a time). Returns 1 / sum per row;
  /// with `normalize` the rows hold the probabilities, else exp(S - max).
  SmallVector<Value> emitSoftmaxBlock(int64_t rows, Value base, ArrayRef<Value> limits,
                                      Value nvec, bool normalize) {
    Value jPad = mul(nvec, W);
    Value negInf = scalar(-std::numeric_limits<double>::infinity());
    for (int64_t r = 0; r < rows; ++r)
      loop(limits[r], jPad, 1, [&](OpBuilder &, Value j) {
        b.create<memref::StoreOp>(l, negInf, s, ValueRange{add(base, r), j});
      });
    // One pass over the block's vectors, a value per row carried through it.
    auto pass = [&](Value init, function_ref<Value(int64_t r, Value acc, Value at)> step) {
      auto f = nova::buildFor(b, l, c(0), nvec, c(1), SmallVector<Value>(rows, init),
                              [&](Value jv, ValueRange acc) {
                                SmallVector<Value> next;
                                for (int64_t r = 0; r < rows; ++r)
                                  next.push_back(step(r, acc[r], mul(jv, W)));
                                return next;
                              });
      return SmallVector<Value>(f.getResults());
    };
    SmallVector<Value> maxVecs =
        pass(splat(-std::numeric_limits<double>::infinity()), [&](int64_t r, Value acc, Value at) {
          return nova::softmaxMax(b, l, acc, vload(b, s, {add(base, r), at}));
        });
    SmallVector<Value> maxes;
    for (Value m : maxVecs)
      maxes.push_back(b.create<vector::BroadcastOp>(
          l, vec, nova::maxLanes(b, l, m)));
    SmallVector<Value> sumVecs = pass(splat(0.0), [&](int64_t r, Value acc, Value at) {
      Value e = b.create<math::ExpOp>(l, b.create<arith::SubFOp>(l, vload(b, s, {add(base, r), at}), maxes[r]));
      b.create<vector::StoreOp>(l, e, s, ValueRange{add(base, r), at});
      return b.create<arith::AddFOp>(l, acc, e);
    });
    SmallVector<Value> inv, invVecs;
    for (Value sv : sumVecs) {
      Value sum = nova::sumLanes(b, l, sv);
      inv.push_back(b.create<arith::DivFOp>(l, scalar(1.0), sum));
      invVecs.push_back(b.create<vector::BroadcastOp>(l, vec, inv.back()));
    }
    if (normalize)
      loop(c(0), nvec, 1, [&](OpBuilder &, Value jv) {
        Value at = mul(jv, W);
        for (int64_t r = 0; r < rows; ++r)
          b.create<vector::StoreOp>(l, b.create<arith::MulFOp>(l, vload(b, s, {add(base, r), at}), invVecs[r]),
                                    s, ValueRange{add(base, r), at});
      });
    return inv;
  }

  /// Rows [i0, i0 + rows) of the head, their scores in rows [base, base +
  /// rows) of the scratch. Forward: out. Backward: P in s, dS in dp, dq;
  /// their columns from the rows' own key range up to `jPadBlock` (the
  /// enclosing backward block's) zeroed, so the block's dk, dv products
  /// can run over all its keys.
  void emitRowBlock(int64_t rows, Value i0, Value base, Value jPadBlock) {
    Value jEnd = add(i0, rows);
    Value nvec = b.create<arith::DivUIOp>(l, add(jEnd, W - 1), c(W));
    SmallVector<Value> rowIdx;
    for (int64_t r = 0; r < rows; ++r)
      rowIdx.push_back(add(i0, r));
    bool backward = static_cast<bool>(grad);
    if (dot && !backward)
      return emitRowBlockDot(rows, rowIdx, nvec, jEnd);
    // S = scale q k^T over the block's key columns.
    emitScoreBlock(rows, base, nvec, s, qkv, rowIdx, qCol, kt, kp, scale);
    SmallVector<Value> limits;
    for (int64_t r = 0; r < rows; ++r)
      limits.push_back(add(rowIdx[r], 1));
    SmallVector<Value> inv = emitSoftmaxBlock(rows, base, limits, nvec, backward);
    // Rows of `from` (s or dp) times rows j of qkv at `col`, into out at oCol,
    // each row times rowScale(r) if given.
    auto rowsTimesHead = [&](Value from, Value col, function_ref<Value(int64_t r)> rowScale) {
      for (int64_t c0 = 0; c0 < hd; c0 += cv * W)
        emitProduct(
            rows, cv, jEnd, [&](int64_t r, Value j) { return load(b, from, {add(base, r), j}); },
            [&](Value j, int64_t v) { return vload(b, qkv, {bIdx, j, add(col, c0 + v * W)}); },
            [&](int64_t r, int64_t v, Value acc) {
              Value scaled = rowScale ? b.create<arith::MulFOp>(l, acc, b.create<vector::BroadcastOp>(l, vec, rowScale(r)))
                                      : acc;
              b.create<vector::StoreOp>(l, scaled, out,
                                        ValueRange{bIdx, rowIdx[r], add(oCol, c0 + v * W)});
            });
    };
    if (!backward) {
      rowsTimesHead(s, vCol, [&](int64_t r) { return inv[r]; });
      return;
    }
    // dP = grad v^T; dS = P (dP - rowsum(P dP)) times the scale, in place
    // of dP: dq = dS k and dk = dS^T q both take the scale, and dk's
    // product reads dS as its broadcast operand, where multiplying each
    // element by the scale cost a multiply and a register broadcast per
    // FMA row (vbroadcastss from memory otherwise).
    emitScoreBlock(rows, base, nvec, dp, grad, rowIdx, oCol, vt, vtp, 1.0);
    Value zero = splat(0.0), scaleVec = splat(scale);
    for (int64_t r = 0; r < rows; ++r) {
      Value row = add(base, r);
      auto dotLoop = nova::buildFor(
          b, l, c(0), nvec, c(1), ValueRange{splat(0.0)}, [&](Value jv, ValueRange acc) {
            Value at = mul(jv, W);
            return SmallVector<Value>{
                b.create<vector::FMAOp>(l, vload(b, s, {row, at}), vload(b, dp, {row, at}), acc[0])};
          });
      Value dot = b.create<vector::BroadcastOp>(
          l, vec, nova::sumLanes(b, l, dotLoop.getResult(0)));
      loop(c(0), nvec, 1, [&](OpBuilder &, Value jv) {
        Value at = mul(jv, W);
        Value ds = b.create<arith::MulFOp>(
            l, b.create<arith::MulFOp>(l, vload(b, s, {row, at}), scaleVec),
            b.create<arith::SubFOp>(l, vload(b, dp, {row, at}), dot));
        b.create<vector::StoreOp>(l, ds, dp, ValueRange{row, at});
      });
      loop(mul(nvec, W), jPadBlock, W, [&](OpBuilder &, Value at) {
        b.create<vector::StoreOp>(l, zero, s, ValueRange{row, at});
        b.create<vector::StoreOp>(l, zero, dp, ValueRange{row, at});
      });
    }
    // dq = (scale dS) k, rows of the block.
    if (dot)
      emitRowsTimesPairsDot(rows, rowIdx, base, nvec, jEnd, dp, kvp, nullptr);
    else
      rowsTimesHead(dp, kCol, nullptr);
  }

  /// The forward's row block with dot products (see `dot`): the rows' q
  /// rounded into qb; S = scale q k^T from the key pairs, its softmax in
  /// f32 as emitRowBlock's; exp(S - max) rounded into eb; out = (e v) / sum
  /// from the value pairs, over the key pairs up to the block's last key
  /// (an odd last key's partner is past the rows' limits: e is 0 there).
  void emitRowBlockDot(int64_t rows, ArrayRef<Value> rowIdx, Value nvec, Value jEnd) {
    emitScoreBlock(rows, c(0), nvec, s, qkv, rowIdx, qCol, kt, kp, scale);
    SmallVector<Value> limits;
    for (int64_t r = 0; r < rows; ++r)
      limits.push_back(add(rowIdx[r], 1));
    SmallVector<Value> inv = emitSoftmaxBlock(rows, c(0), limits, nvec, /*normalize=*/false);
    emitRowsTimesPairsDot(rows, rowIdx, c(0), nvec, jEnd, s, vp, [&](int64_t r) { return inv[r]; });
  }

  /// out[b, rowIdx[r], oCol + c] = sum over the keys j of from[base + r,
  /// j] (rounded into eb) times the pairs' row j (vp: v, kvp: k, paired
  /// along the keys), times rowScale(r) if given: the keys in pairs up to
  /// jEnd (an odd jEnd's partner is past every row's limit: 0 in `from`).
  void emitRowsTimesPairsDot(int64_t rows, ArrayRef<Value> rowIdx, Value base, Value nvec, Value jEnd, Value from,
                             Value pairs, function_ref<Value(int64_t r)> rowScale) {
    loop(c(0), nvec, 1, [&](OpBuilder &, Value jv) {
      Value at = mul(jv, W);
      for (int64_t r = 0; r < rows; ++r)
        b.create<vector::StoreOp>(l, toBf16(vload(b, from, {add(base, r), at})), eb, ValueRange{c(r), at});
    });
    Value count = b.create<arith::DivUIOp>(l, add(jEnd, 1), c(2));
    for (int64_t c0 = 0; c0 < hd; c0 += cv * W)
      emitProduct(
          rows, cv, count,
          [&](int64_t r, Value p) { return nova::broadcastBf16Pair(b, l, eb, ValueRange{c(r), mul(p, 2)}, W); },
          [&](Value p, int64_t v) {
            return b.create<vector::LoadOp>(l, bf16s(2 * W), pairs, ValueRange{p, c(2 * (c0 + v * W))});
          },
          [&](int64_t r, int64_t v, Value acc) {
            if (rowScale)
              acc = b.create<arith::MulFOp>(l, acc, b.create<vector::BroadcastOp>(l, vec, rowScale(r)));
            b.create<vector::StoreOp>(l, acc, out, ValueRange{bIdx, rowIdx[r], add(oCol, c0 + v * W)});
          },
          nullptr, {}, /*bf16Pairs=*/true);
  }

  /// Backward rows [i0, i0 + blockRows): row blocks of R (a loop: one copy
  /// of their code; and one of the rest), then dk += scale dS^T q and dv +=
  /// P^T grad over all the block's rows from `skip` on and all its keys:
  /// the head's dk and dv rows stream through the cache once per block, not
  /// once per R rows. i0 is a multiple of Rc, or T - Rc (the last block,
  /// whose first `skip` rows the block before it did).
  void emitBackwardBlock(int64_t blockRows, Value i0, Value skip) {
    Value jEnd = add(i0, blockRows);
    Value jPad = mul(b.create<arith::DivUIOp>(l, add(jEnd, W - 1), c(W)), W);
    int64_t full = blockRows / R * R;
    if (full > 0)
      loop(c(0), c(full), R, [&](OpBuilder &, Value base) { emitRowBlock(R, add(i0, base), base, jPad); });
    if (full < blockRows)
      emitRowBlock(blockRows - full, add(i0, full), c(full), jPad);
    // Keys from i0 + skip on are the block's own (the blocks before ended
    // there: a multiple of Rc); (jEnd - that) % R is blockRows % R where i0
    // is a multiple of Rc, T % R in the last block.
    Value newFrom = b.create<arith::AddIOp>(l, i0, skip);
    SmallVector<int64_t> possibleLeft{blockRows % R};
    if (T % R != blockRows % R)
      possibleLeft.push_back(T % R);
    auto qRow = [&](Value r, Value at) { return vload(b, qkv, {bIdx, add(i0, r), add(qCol, at)}); };
    auto gradRow = [&](Value r, Value at) { return vload(b, grad, {bIdx, add(i0, r), add(oCol, at)}); };
    if (dot) {
      Value pBegin = b.create<arith::DivUIOp>(l, skip, c(2)), pEnd = c((blockRows + 1) / 2);
      auto fromScratch = [&](Value m) { return [this, m](Value r, Value at) { return vload(b, m, {r, at}); }; };
      emitPackRowPairs(dSp, blockRows, pBegin, skip, jPad, fromScratch(dp));
      emitPackRowPairs(Pp, blockRows, pBegin, skip, jPad, fromScratch(s));
      emitPackRowPairs(qp, blockRows, pBegin, skip, c(hd), qRow);
      emitPackRowPairs(gp, blockRows, pBegin, skip, c(hd), gradRow);
      auto pairOf = [&](Value m) {
        return [this, m](Value p, Value j) { return nova::broadcastBf16Pair(b, l, m, ValueRange{p, mul(j, 2)}, W); };
      };
      auto pairsOf = [&](Value m) {
        return [this, m](Value p, int64_t ch) {
          return b.create<vector::LoadOp>(l, bf16s(2 * W), m, ValueRange{p, c(2 * ch)}).getResult();
        };
      };
      emitKeyAccumulate(pBegin, pEnd, true, newFrom, jEnd, possibleLeft, kCol, pairOf(dSp), pairsOf(qp));
      emitKeyAccumulate(pBegin, pEnd, true, newFrom, jEnd, possibleLeft, vCol, pairOf(Pp), pairsOf(gp));
      return;
    }
    Value rows = c(blockRows);
    emitKeyAccumulate(skip, rows, false, newFrom, jEnd, possibleLeft, kCol,
                      [&](Value r, Value j) { return load(b, dp, {r, j}); },
                      [&](Value r, int64_t ch) { return qRow(r, c(ch)); });
    emitKeyAccumulate(skip, rows, false, newFrom, jEnd, possibleLeft, vCol,
                      [&](Value r, Value j) { return load(b, s, {r, j}); },
                      [&](Value r, int64_t ch) { return gradRow(r, c(ch)); });
  }

  /// dst[p, 2 x + {0, 1}] = bf16 of (row(2p, x), row(2p + 1, x)) for the
  /// pairs p in [pBegin, (rows + 1) / 2) and x < cols (a multiple of W):
  /// the pair layout of dotBf16's non-broadcast operand along rows (vp,
  /// kvp), and a backward block's rows paired for dk's and dv's dot
  /// products. The row past an odd `rows` is zeros, and so is a row before
  /// `skip` where given (the block before did it: its P and dS rows must
  /// not count again).
  void emitPackRowPairs(Value dst, int64_t rows, Value pBegin, Value skip, Value cols,
                        function_ref<Value(Value r, Value at)> row) {
    auto pack = [&](Value p, bool oddIsZero) {
      Value even = mul(p, 2);
      Value before = skip ? b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, even, skip).getResult() : Value();
      loop(c(0), cols, W, [&](OpBuilder &, Value at) {
        Value lo = row(even, at);
        if (before)
          lo = b.create<arith::SelectOp>(l, before, splat(0.0), lo);
        Value hi = oddIsZero ? splat(0.0) : row(add(even, 1), at);
        b.create<vector::StoreOp>(l, nova::interleaveBf16Rows(b, l, lo, hi), dst, ValueRange{p, mul(at, 2)});
      });
    };
    loop(pBegin, c(rows / 2), 1, [&](OpBuilder &, Value p) { pack(p, false); });
    if (rows % 2)
      pack(c(rows / 2), true);
  }

  void emit(Value wg) {
    int64_t heads = op.getHeads();
    bIdx = b.create<arith::DivUIOp>(l, wg, c(heads));
    Value h = b.create<arith::RemUIOp>(l, wg, c(heads));
    Value hOff = mul(h, hd);
    qCol = hOff;
    kCol = add(hOff, d);
    vCol = add(hOff, 2 * d);
    auto scratch = [&](int64_t rows) {
      return b.create<memref::AllocOp>(l, MemRefType::get({rows, Tp}, elem())).getResult();
    };
    SmallVector<Value> buffers;
    if (!dot)
      buffers.push_back(kt = scratch(hd));
    buffers.push_back(s = scratch(grad ? Rc : R));
    if (dot) {
      auto bf16Buffer = [&](int64_t rows, int64_t cols) {
        Value m = b.create<memref::AllocOp>(l, MemRefType::get({rows, cols}, b.getBF16Type())).getResult();
        buffers.push_back(m);
        return m;
      };
      kp = bf16Buffer(hd / 2, 2 * Tp);
      qb = bf16Buffer(R, hd);
      eb = bf16Buffer(R, Tp);
      emitPackHeadPairs(kp, kCol);
      if (grad) {
        vtp = bf16Buffer(hd / 2, 2 * Tp);
        kvp = bf16Buffer(Tp / 2, 2 * hd);
        int64_t rowPairs = (Rc + 1) / 2;
        dSp = bf16Buffer(rowPairs, 2 * Tp);
        Pp = bf16Buffer(rowPairs, 2 * Tp);
        qp = bf16Buffer(rowPairs, 2 * hd);
        gp = bf16Buffer(rowPairs, 2 * hd);
        emitPackHeadPairs(vtp, vCol);
        emitPackKeyRowPairs(kvp, kCol);
      } else {
        vp = bf16Buffer(Tp / 2, 2 * hd);
        emitPackKeyRowPairs(vp, vCol);
      }
    } else {
      emitTranspose(kt, kCol);
    }
    if (grad) {
      // Backward: out is dqkv; dq rows go to the q columns, dk and dv are
      // accumulated in place, each key's rows set (not added to) by the
      // block that reaches it first. (Zeroing them first took 8% of the
      // small GPT's backward kernel: its first touch of those rows.)
      if (!dot)
        buffers.push_back(vt = scratch(hd));
      buffers.push_back(dp = scratch(Rc));
      if (!dot)
        emitTranspose(vt, vCol);
    }
    // The head's columns in out (or in dqkv, its dq) and in grad.
    oCol = hOff;
    // Query rows in blocks of R (forward) or Rc (backward). Where T is not
    // a multiple of the block, the last block is moved back to end at row
    // T: its first rows, done by the block before, are computed again (the
    // same out or dq rows written again) and their share of dk and dv
    // skipped. One copy of the block's code, not a second one for the rows
    // left (with the loop over R-row blocks and the power-of-two rests, the
    // small GPT's backward kernel went from 6168 lines of loops to 2731,
    // its step's cold compile from 2.05-2.27 s to 1.53-1.61 s here).
    int64_t block = grad ? Rc : R;
    auto emitBlock = [&](int64_t rows, Value i0, Value skip) {
      if (grad)
        emitBackwardBlock(rows, i0, skip);
      else
        emitRowBlock(rows, i0, c(0), Value());
    };
    if (T >= block)
      loop(c(0), c(T), block, [&](OpBuilder &, Value iv) {
        if (T % block == 0)
          return emitBlock(block, iv, c(0));
        Value i0 = b.create<arith::MinUIOp>(l, iv, c(T - block));
        emitBlock(block, i0, b.create<arith::SubIOp>(l, iv, i0));
      });
    else
      emitBlock(T, c(0), c(0));
    for (Value buffer : buffers)
      b.create<memref::DeallocOp>(l, buffer);
  }
};

LogicalResult expand(nova::AttentionKernelOp op, Value wg, ArrayRef<int64_t> registerTile,
                     int64_t blockRows, int64_t vectorBits, bool bf16Dot) {
  auto outType = cast<MemRefType>(op.getInit().getType());
  Type elem = outType.getElementType();
  int64_t hd = op.headDim();
  int64_t W = nova::vectorLanesDividing(hd, outType.getElementTypeBitWidth(), vectorBits);
  int64_t R = registerTile[0], cols = registerTile[1];
  if (R < 1 || cols % W != 0 || hd % cols != 0)
    return op.emitError("nova-vectorize-attention: register tile [")
           << R << ", " << cols << "] does not split head dim " << hd << " into vectors of " << W;
  if (blockRows < R || blockRows % R != 0)
    return op.emitError("nova-vectorize-attention: backward block of ")
           << blockRows << " rows is not a multiple of the register block's " << R;
  OpBuilder b(op);
  Location l = op.getLoc();
  int64_t T = op.seq();
  // Views whose columns are not unit-stride (a transposed slice feeding
  // the op, found by the fuzzer) go through contiguous copies: the kernel's
  // vector loads need unit-stride rows. Rare; each workgroup then copies
  // the inputs whole and writes back only its head's columns.
  SmallVector<Value> temps, in;
  for (Value v : op.getInputs())
    in.push_back(nova::hasUnitInnerStride(cast<MemRefType>(v.getType()))
                     ? v
                     : nova::contiguousCopy(b, l, v, /*copyIn=*/true, temps));
  Value init = op.getInit();
  bool copyOut = !nova::hasUnitInnerStride(cast<MemRefType>(init.getType()));
  Value result = copyOut ? nova::contiguousCopy(b, l, init, /*copyIn=*/false, temps) : init;
  HeadEmitter e{b, l, op, VectorType::get({W}, elem), W, R, cols / W, blockRows, T,
                op.model(), hd,
                (T + W - 1) / W * W, op.getScale().convertToDouble(), in[0],
                op.getBackward() ? in[1] : Value(), result};
  e.dot = bf16Dot && elem.isF32() && nova::attentionDotsBf16(hd, vectorBits);
  e.emit(wg);
  if (copyOut) {
    // This head's columns: of the result (forward), or of its q, k and v
    // gradients (backward).
    SmallVector<Value> firstColumns{e.qCol};
    if (op.getBackward())
      firstColumns.append({e.kCol, e.vCol});
    for (Value col : firstColumns) {
      auto part = [&](Value m) {
        return b.create<memref::SubViewOp>(
            l, m, ArrayRef<OpFoldResult>{e.bIdx, b.getIndexAttr(0), col},
            ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(T), b.getIndexAttr(hd)},
            ArrayRef<OpFoldResult>{b.getIndexAttr(1), b.getIndexAttr(1), b.getIndexAttr(1)});
      };
      b.create<linalg::CopyOp>(l, ValueRange{part(result)}, ValueRange{part(init)});
    }
  }
  for (Value t : temps)
    b.create<memref::DeallocOp>(l, t);
  op.erase();
  return success();
}

struct NovaVectorizeAttention
    : mlir::nova::impl::NovaVectorizeAttentionBase<NovaVectorizeAttention> {
  using NovaVectorizeAttentionBase::NovaVectorizeAttentionBase;

  void runOnOperation() override {
    SmallVector<nova::AttentionKernelOp> ops;
    getOperation().walk([&](nova::AttentionKernelOp op) { ops.push_back(op); });
    // bf16 matmuls asked for (the step's module, an ancestor of the
    // kernels' one) on a CPU with AVX512-BF16: the forward's products too.
    bool bf16 = false;
    for (Operation *m = getOperation(); m; m = m->getParentOp())
      if (auto p = m->getAttrOfType<StringAttr>(nova::kMatmulPrecisionAttr))
        bf16 = p.getValue() == "bf16";
    bool bf16Dot = dotBf16 && bf16;
    for (nova::AttentionKernelOp op : ops) {
      FailureOr<nova::LoweringConfigAttr> configured =
          nova::configForKernelOp(op, op.getInit(), getArgument(), "attention");
      if (failed(configured))
        return signalPassFailure();
      nova::LoweringConfigAttr config = *configured;
      auto func = op->getParentOfType<func::FuncOp>();
      // Outside a configured kernel: all heads in one loop, rows of 4.
      SmallVector<int64_t> reg{4, nova::vectorLanesDividing(
                                      op.headDim(),
                                      cast<MemRefType>(op.getInit().getType()).getElementTypeBitWidth(),
                                      vectorBits)};
      if (config)
        reg.assign(config.getRegisterTile().begin(), config.getRegisterTile().end());
      if (config) {
        int64_t heads = op.batch() * static_cast<int64_t>(op.getHeads());
        if (config.getWorkgroups() != heads) {
          op.emitError("nova-vectorize-attention: ")
              << config.getWorkgroups() << " workgroups for " << heads << " heads";
          return signalPassFailure();
        }
        int64_t blockRows = config.getCacheTile().empty() ? reg[0] : config.getCacheTile()[0];
        if (failed(expand(op, func.getArgument(0), reg, blockRows, vectorBits, bf16Dot)))
          return signalPassFailure();
        continue;
      }
      OpBuilder b(op);
      Location l = op.getLoc();
      auto heads = b.create<scf::ForOp>(l, b.create<arith::ConstantIndexOp>(l, 0),
                                        b.create<arith::ConstantIndexOp>(l, op.batch() * op.getHeads()),
                                        b.create<arith::ConstantIndexOp>(l, 1));
      b.setInsertionPoint(heads.getBody()->getTerminator());
      auto inner = cast<nova::AttentionKernelOp>(b.clone(*op));
      op.erase();
      if (failed(expand(inner, heads.getInductionVar(), reg, reg[0], vectorBits, bf16Dot)))
        return signalPassFailure();
    }
  }
};

} // namespace
