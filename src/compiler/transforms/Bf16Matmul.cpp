//===- Bf16Matmul.cpp - a float32 matmul with bf16 products -----*- C++ -*-===//
//
// The kernels of a step whose user asked for bf16 matmuls:
// C[m, n] += sum_k A[m, k] B[k, n] with A and B rounded to bfloat16 and the
// sums in float32, where the CPU multiplies bf16 pairs:
//   - amx_matmul (AMX): one tdpbf16ps multiplies a 16 x 32 bf16 tile of A
//     by a 16 x 32 tile of B whose rows hold k-pairs (B[2p, n], B[2p + 1, n]
//     side by side, "VNNI" order) into a 16 x 16 f32 tile of C: 16 x 16 x 32
//     products;
//   - bf16_matmul (AVX512-BF16, no AMX: AMD Zen 4, Intel Cooper Lake): one
//     vdpbf16ps adds to each of 16 f32 lanes the two products of a lane's
//     bf16 pair, twice the products of an f32 FMA. Its rhs is the same
//     k-pair rows; its lhs pair (A[m, 2p], A[m, 2p + 1]) is one 32-bit word,
//     broadcast. A 32 x 32 block is 4 register blocks of 8 rows x 2 vectors
//     (16 accumulators through the slab's k-pairs, 2 rhs loads and 8
//     broadcasts a pair).
//
// Workgroup wg owns the block [m0, m1) x [n0, n1) of the result. Per batch
// element, per slab of kc k's:
//   - pack the block's rhs columns, rounded to bf16, as [kc / 2, 2 nc] in
//     k-pairs (a transposed rhs, read along k, through 16 x 16 transposes of
//     the pairs as 32-bit lanes): once per block and slab, so blocks are
//     as tall as the configurator can make them;
//   - for each strip of 32 rows: pack its lhs rows, rounded, as [32, kc]
//     (32 KiB at most, in L1; a transposed lhs through 16 x 16 register
//     transposes; a lhs computed by a fused producer, a GELU, computed
//     here from its inputs); then for each 32 x 32 block of C its sums
//     from the result itself (zero on the first slab when the result's
//     zero fill was folded in), the slab's products, and back into the
//     result.
// The slab past K is packed as zeros. An epilogue then runs over the block,
// reading the sums back; the dot products in one slab take it from their
// registers instead, never touching the result. AMX tiles live within one
// basic block each: MLIR 19 lowers a tile carried through a loop or an
// scf.if into a block argument of the wrong LLVM type, so the k steps of a
// slab are unrolled and the first slab (zeros, no load) is a copy of the
// loop nest, not a branch.
//
// What the 32 x 32 blocks do not cover (M % 32 rows, N % 32 columns) runs as
// a copy of the original generic, in float32.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/MatmulLowering.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::nova::matmul;
using mlir::nova::MatmulOperands;

namespace {

constexpr int64_t kLanes = 16; // f32 lanes of a 512-bit vector, rows of a tile
/// Rows of a bf16_matmul register block: 8 x 2 vectors of accumulators.
constexpr int64_t kDotRows = 8;

struct Bf16 {
  OpBuilder &b;
  Location l;
  const MatmulOperands &m;
  ValueRange batch;

  Value c(int64_t v) { return index(b, l, v); }
  Value add(Value x, Value y) { return b.create<arith::AddIOp>(l, x, y); }
  Value add(Value x, int64_t y) { return y == 0 ? x : add(x, c(y)); }
  Value sub(Value x, Value y) { return b.create<arith::SubIOp>(l, x, y); }
  Value mul(Value x, int64_t y) { return b.create<arith::MulIOp>(l, x, c(y)); }
  Value div(Value x, int64_t y) { return b.create<arith::DivUIOp>(l, x, c(y)); }
  Value minU(Value x, Value y) { return b.create<arith::MinUIOp>(l, x, y); }
  SmallVector<Value> at(ValueRange tail) {
    SmallVector<Value> idx(batch.begin(), batch.end());
    idx.append(tail.begin(), tail.end());
    return idx;
  }
  void loop(Value lo, Value hi, int64_t step, function_ref<void(Value)> body) {
    nova::buildFor(b, l, lo, hi, c(step), ValueRange{}, [&](Value iv, ValueRange) {
      body(iv);
      return SmallVector<Value>{};
    });
  }
  void when(Value cond, function_ref<void()> then, function_ref<void()> otherwise) {
    auto i = b.create<scf::IfOp>(l, cond, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&i.getThenRegion().front());
    then();
    b.setInsertionPointToStart(&i.getElseRegion().front());
    otherwise();
  }
  VectorType vec(int64_t n, Type t) { return VectorType::get({n}, t); }
  Value toBf16(Value v) { return nova::roundToBf16(b, l, v); }
  /// load() (f32) rounded to bf16 when `inside`, else bf16 zero.
  Value scalarOrZero(Value inside, function_ref<Value()> load) {
    auto i = b.create<scf::IfOp>(l, TypeRange{b.getBF16Type()}, inside, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&i.getThenRegion().front());
    b.create<scf::YieldOp>(l, ValueRange{b.create<arith::TruncFOp>(l, b.getBF16Type(), load())});
    b.setInsertionPointToStart(&i.getElseRegion().front());
    b.create<scf::YieldOp>(l, ValueRange{b.create<arith::ConstantOp>(l, b.getZeroAttr(b.getBF16Type()))});
    return i.getResult(0);
  }
  Value lt(Value x, Value y) { return b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, x, y); }

  /// 16 lanes of the lhs at `idx`: loaded, or computed from the inputs of
  /// its fused producer (a GELU, FuseMatmulPrologue.cpp) as they are packed.
  Value lhsVector(ValueRange idx) {
    if (m.prologueInputs.empty())
      return b.create<vector::LoadOp>(l, vec(kLanes, b.getF32Type()), m.lhs, idx);
    return buildPrologue(b, l, m, idx, kLanes);
  }
  /// One element of the lhs at `idx`, so.
  Value lhsScalar(ValueRange idx) {
    if (m.prologueInputs.empty())
      return b.create<memref::LoadOp>(l, m.lhs, idx);
    return b.create<vector::ExtractOp>(l, buildPrologue(b, l, m, idx, 1), ArrayRef<int64_t>{0});
  }

  /// apack[r - i0, kk] = bf16(A[r, k0 + kk]) for the 32 rows r from i0,
  /// kk < klen; zero for kk in [klen, kc).
  void packLhsStrip(Value apack, Value i0, Value k0, Value klen, int64_t kc) {
    Value kFull = mul(div(klen, kLanes), kLanes);
    if (!m.transposeA) {
      loop(c(0), c(32), 1, [&](Value row) {
        Value r = add(i0, row);
        loop(c(0), kFull, kLanes, [&](Value kk) {
          Value v = lhsVector(at({r, add(k0, kk)}));
          b.create<vector::StoreOp>(l, toBf16(v), apack, ValueRange{row, kk});
        });
      });
    } else {
      // lhs [K, M], unit-stride along m: 16 k by 16 rows, transposed.
      for (int64_t half = 0; half < 2; ++half)
        loop(c(0), kFull, kLanes, [&](Value kk) {
          SmallVector<Value> rows;
          for (int64_t t = 0; t < kLanes; ++t)
            rows.push_back(lhsVector(at({add(add(k0, kk), t), add(i0, kLanes * half)})));
          SmallVector<Value> cols = nova::transposeInRegisters(b, l, rows);
          for (int64_t t = 0; t < kLanes; ++t)
            b.create<vector::StoreOp>(l, toBf16(cols[t]), apack, ValueRange{c(kLanes * half + t), kk});
        });
    }
    loop(c(0), c(32), 1, [&](Value row) {
      Value r = add(i0, row);
      loop(kFull, c(kc), 1, [&](Value kk) {
        Value v = scalarOrZero(lt(kk, klen), [&] {
          return m.transposeA ? lhsScalar(at({add(k0, kk), r})) : lhsScalar(at({r, add(k0, kk)}));
        });
        b.create<memref::StoreOp>(l, v, apack, ValueRange{row, kk});
      });
    });
  }

  /// bpack[p, 2 (j - n0) + t] = bf16(B[k0 + 2p + t, j]) for j in [n0, nv),
  /// 2p + t < klen; zero up to kc.
  void packRhs(Value bpack, Value n0, Value nv, Value k0, Value klen, int64_t kc) {
    Value pFull; // pairs packed by vectors; the rest element by element
    if (!m.rhsColumns) {
      pFull = div(klen, 2);
      loop(c(0), pFull, 1, [&](Value p) {
        Value k = add(k0, mul(p, 2));
        loop(n0, nv, kLanes, [&](Value j) {
          Value v0 = b.create<vector::LoadOp>(l, vec(kLanes, b.getF32Type()), m.rhs, at({k, j}));
          Value v1 = b.create<vector::LoadOp>(l, vec(kLanes, b.getF32Type()), m.rhs, at({add(k, 1), j}));
          b.create<vector::StoreOp>(l, nova::interleaveBf16Rows(b, l, v0, v1), bpack,
                                    ValueRange{p, mul(sub(j, n0), 2)});
        });
      });
    } else {
      // rhs [K, N] unit-stride along k (a transposed weight read in place):
      // its [N, K] view gives each column's k contiguous. 16 columns x 16
      // pairs (32 k) at a time: per column the pairs as 16 x i32 lanes,
      // transposed so that each row is one pair index across the columns.
      Value view = nova::rhsColumnsView(b, l, m);
      pFull = mul(div(klen, 2 * kLanes), kLanes);
      loop(c(0), pFull, kLanes, [&](Value p0) {
        Value k = add(k0, mul(p0, 2));
        loop(n0, nv, kLanes, [&](Value j0) {
          SmallVector<Value> lo, hi;
          for (int64_t t = 0; t < kLanes; ++t) {
            Value j = add(j0, t);
            lo.push_back(b.create<vector::LoadOp>(l, vec(kLanes, b.getF32Type()), view, at({j, k})));
            hi.push_back(b.create<vector::LoadOp>(l, vec(kLanes, b.getF32Type()), view, at({j, add(k, kLanes)})));
          }
          SmallVector<Value> rows = nova::transposeBf16Pairs(b, l, lo, hi);
          for (int64_t t = 0; t < kLanes; ++t)
            b.create<vector::StoreOp>(l, rows[t], bpack, ValueRange{add(p0, t), mul(sub(j0, n0), 2)});
        });
      });
    }
    loop(pFull, c(kc / 2), 1, [&](Value p) {
      loop(n0, nv, 1, [&](Value j) {
        for (int64_t t = 0; t < 2; ++t) {
          Value kk = add(mul(p, 2), t);
          Value v = scalarOrZero(lt(kk, klen), [&] {
            return b.create<memref::LoadOp>(l, m.rhs, at({add(k0, kk), j}));
          });
          b.create<memref::StoreOp>(l, v, bpack, ValueRange{p, add(mul(sub(j, n0), 2), t)});
        }
      });
    });
  }

  /// For each 32 x 32 register block of the strip [i0, i0 + 32) x [n0, nv)
  /// of `out` (the result, 2-D): its four C tiles (zero when `first`, else
  /// the result's), plus kc / 32 products of the packed strip and slab, back.
  void products(Value apack, Value bpack, Value out, Value i0, Value n0, Value nv, int64_t kc,
                bool first) {
    auto cType = VectorType::get({16, 16}, b.getF32Type());
    auto abType = VectorType::get({16, 32}, b.getBF16Type());
    loop(n0, nv, 32, [&](Value j0) {
      Value cj = sub(j0, n0);
      Value tiles[2][2];
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 2; ++j)
          tiles[i][j] = first ? b.create<amx::TileZeroOp>(l, cType).getResult()
                              : b.create<amx::TileLoadOp>(l, cType, out,
                                                          ValueRange{add(i0, 16 * i), add(j0, 16 * j)})
                                    .getResult();
      for (int64_t s = 0; s < kc / 32; ++s) {
        Value a[2], bt[2];
        for (int64_t i = 0; i < 2; ++i)
          a[i] = b.create<amx::TileLoadOp>(l, abType, apack, ValueRange{c(16 * i), c(32 * s)});
        for (int64_t j = 0; j < 2; ++j)
          bt[j] = b.create<amx::TileLoadOp>(l, abType, bpack,
                                            ValueRange{c(16 * s), add(mul(cj, 2), 32 * j)});
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t j = 0; j < 2; ++j)
            tiles[i][j] = b.create<amx::TileMulFOp>(l, cType, a[i], bt[j], tiles[i][j]);
      }
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 2; ++j)
          b.create<amx::TileStoreOp>(l, out, ValueRange{add(i0, 16 * i), add(j0, 16 * j)}, tiles[i][j]);
    });
  }

  /// products() by AVX512-BF16 dot products: each 32 x 32 block of the
  /// strip as 4 register blocks of kDotRows rows x 2 vectors, the rows' lhs
  /// (8 KiB of the strip at kc = 512) in L1 while the slab's pairs stream
  /// past from L2. With `epilogue` (the last slab) the sums go through it
  /// from the registers instead of into the result.
  void dotProducts(Value apack, Value bpack, Value out, Value i0, Value n0, Value nv, int64_t kc,
                   bool first, linalg::GenericOp epilogue) {
    auto f32s = vec(kLanes, b.getF32Type()), pairs = vec(2 * kLanes, b.getBF16Type());
    for (int64_t g = 0; g < 32 / kDotRows; ++g)
      loop(n0, nv, 32, [&](Value j0) {
        Value cj = sub(j0, n0);
        SmallVector<Value> init;
        for (int64_t r = 0; r < kDotRows; ++r)
          for (int64_t v = 0; v < 2; ++v)
            init.push_back(first ? b.create<arith::ConstantOp>(l, b.getZeroAttr(f32s)).getResult()
                                 : b.create<vector::LoadOp>(l, f32s, out,
                                                            ValueRange{add(i0, kDotRows * g + r), add(j0, kLanes * v)})
                                       .getResult());
        scf::ForOp slab = nova::buildFor(
            b, l, c(0), c(kc / 2), c(1), init, [&](Value p, ValueRange acc) {
              Value rhs[2];
              for (int64_t v = 0; v < 2; ++v)
                rhs[v] = b.create<vector::LoadOp>(l, pairs, bpack, ValueRange{p, add(mul(cj, 2), 2 * kLanes * v)});
              SmallVector<Value> next;
              for (int64_t r = 0; r < kDotRows; ++r) {
                Value lhs = nova::broadcastBf16Pair(b, l, apack, ValueRange{c(kDotRows * g + r), mul(p, 2)}, kLanes);
                for (int64_t v = 0; v < 2; ++v)
                  next.push_back(nova::dotBf16(b, l, acc[2 * r + v], lhs, rhs[v]));
              }
              return next;
            });
        ValueRange sums = slab.getResults();
        for (int64_t r = 0; r < kDotRows; ++r)
          for (int64_t v = 0; v < 2; ++v) {
            Value row = add(i0, kDotRows * g + r), col = add(j0, kLanes * v);
            if (epilogue)
              storeThroughEpilogue(b, l, epilogue, m.out, batch, row, col, sums[2 * r + v], kLanes);
            else
              b.create<vector::StoreOp>(l, sums[2 * r + v], out, ValueRange{row, col});
          }
      });
  }

  /// The epilogue over [m0, mv) x [n0, nv), on the sums in the result.
  void epilogueOver(linalg::GenericOp epilogue, Value m0, Value mv, Value n0, Value nv) {
    auto type = vec(kLanes, b.getF32Type());
    loop(m0, mv, 1, [&](Value r) {
      loop(n0, nv, kLanes, [&](Value j) {
        Value v = b.create<vector::LoadOp>(l, type, m.out, at({r, j}));
        storeThroughEpilogue(b, l, epilogue, m.out, batch, r, j, v, kLanes);
      });
    });
  }

  /// The result as [M, N] for this batch element (tiles address 2-D rows).
  Value out2d() {
    if (m.batchRank == 0)
      return m.out;
    SmallVector<OpFoldResult> offsets, sizes, strides;
    for (Value v : batch) {
      offsets.push_back(v);
      sizes.push_back(b.getIndexAttr(1));
      strides.push_back(b.getIndexAttr(1));
    }
    offsets.append({b.getIndexAttr(0), b.getIndexAttr(0)});
    sizes.append({b.getIndexAttr(m.M), b.getIndexAttr(m.N)});
    strides.append({b.getIndexAttr(1), b.getIndexAttr(1)});
    auto type = memref::SubViewOp::inferRankReducedResultType(
        {m.M, m.N}, cast<MemRefType>(m.out.getType()), offsets, sizes, strides);
    return b.create<memref::SubViewOp>(l, cast<MemRefType>(type), m.out, offsets, sizes, strides);
  }
};

} // namespace

void mlir::nova::matmul::rewriteBf16(linalg::GenericOp op, const MatmulOperands &m, Value wg,
                                     ArrayRef<int64_t> tile, int64_t kc, linalg::FillOp fill,
                                     linalg::GenericOp epilogue, bool amx) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  WorkgroupBlock block = blockOf(b, loc, wg, m, tile);
  int64_t mFull = m.M / 32 * 32, nFull = m.N / 32 * 32;
  bool hasKernel = mFull > 0 && nFull > 0 && m.K > 0;
  Value fillValue = fill ? fill.getDpsInputs()[0] : Value();
  bool zeroStart = fillValue && hasKernel && matchPattern(fillValue, m_AnyZeroFloat());
  // One slab: its first is its last, no branch. The dot products' sums
  // then go through the epilogue from the registers (so the result is never
  // touched where the blocks cover it all: DropUnstoredResults.cpp).
  bool oneSlab = m.K <= kc;
  bool registerEpilogue = !amx && epilogue && zeroStart && oneSlab;
  if (fill && !zeroStart)
    b.create<linalg::FillOp>(loc, fillValue,
                             resultRegion(b, loc, m, block, block.m0, block.m1, block.n0, block.n1));
  Value mv = block.m0, nv = block.n0;
  if (hasKernel) {
    mv = b.create<arith::MaxUIOp>(loc, b.create<arith::MinUIOp>(loc, block.m1, index(b, loc, mFull)),
                                  block.m0);
    nv = b.create<arith::MaxUIOp>(loc, b.create<arith::MinUIOp>(loc, block.n1, index(b, loc, nFull)),
                                  block.n0);
    int64_t nc = tile[m.batchRank + 1];
    auto func = op->getParentOfType<func::FuncOp>();
    OpBuilder entry = OpBuilder::atBlockBegin(&func.getBody().front());
    auto stackBuffer = [&](ArrayRef<int64_t> shape, Type t) {
      return entry.create<memref::AllocaOp>(loc, MemRefType::get(shape, t), ValueRange{},
                                            entry.getI64IntegerAttr(64));
    };
    Value apack = stackBuffer({32, kc}, b.getBF16Type());
    Value bpack = stackBuffer({kc / 2, 2 * nc}, b.getBF16Type());
    SmallVector<Value> steps(m.batchRank, index(b, loc, 1));
    scf::buildLoopNest(b, loc, block.batchLo, block.batchHi, steps,
                       [&](OpBuilder &bb, Location bl, ValueRange batch) {
                         Bf16 k{bb, bl, m, batch};
                         Value out = k.out2d();
                         k.loop(k.c(0), k.c(m.K), kc, [&](Value k0) {
                           Value klen = k.sub(k.minU(k.add(k0, kc), k.c(m.K)), k0);
                           k.packRhs(bpack, block.n0, nv, k0, klen, kc);
                           k.loop(block.m0, mv, 32, [&](Value i0) {
                             k.packLhsStrip(apack, i0, k0, klen, kc);
                             auto strip = [&](bool first) {
                               if (amx)
                                 k.products(apack, bpack, out, i0, block.n0, nv, kc, first);
                               else
                                 k.dotProducts(apack, bpack, out, i0, block.n0, nv, kc, first,
                                               registerEpilogue ? epilogue : linalg::GenericOp());
                             };
                             if (!zeroStart || oneSlab) {
                               strip(zeroStart);
                               return;
                             }
                             Value first = bb.create<arith::CmpIOp>(bl, arith::CmpIPredicate::eq, k0, k.c(0));
                             k.when(first, [&] { strip(true); }, [&] { strip(false); });
                           });
                         });
                         if (epilogue && !registerEpilogue)
                           k.epilogueOver(epilogue, block.m0, mv, block.n0, nv);
                         // A batch element's view of a result nothing
                         // stores into (it may be a placeholder that must
                         // be left unused).
                         if (auto view = out.getDefiningOp<memref::SubViewOp>(); view && view->use_empty())
                           view.erase();
                       });
  }
  // What the 32 x 32 blocks do not reach: the rows below them (all the
  // block's columns), then the columns right of them.
  auto remainder = [&](Value r0, Value r1, Value c0, Value c1) {
    if (zeroStart)
      b.create<linalg::FillOp>(loc, fillValue, resultRegion(b, loc, m, block, r0, r1, c0, c1));
    buildRemainder(b, op, m, block, r0, r1, c0, c1);
    if (epilogue)
      buildEpilogueOnRegion(b, epilogue, m, block, r0, r1, c0, c1);
  };
  if (!hasKernel) {
    remainder(block.m0, block.m1, block.n0, block.n1);
  } else {
    if (mFull != m.M)
      remainder(mv, block.m1, block.n0, block.n1);
    if (nFull != m.N)
      remainder(block.m0, mv, nv, block.n1);
  }
  op.erase();
  if (fill)
    fill.erase();
  if (epilogue)
    epilogue.erase();
}
