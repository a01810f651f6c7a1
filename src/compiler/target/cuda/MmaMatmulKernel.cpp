//===- MmaMatmulKernel.cpp - the tensor-core matmul kernel, lane by lane -===//
//
// Lane maps (notes/ptx-semantics.md), with lane l, g = l / 4, t = l % 4:
//   A fragment  ldmatrix.x4 with lane l at (row l % 16, 16-byte chunk l / 16
//               of the k step): registers a0..a3 of m16n8k16 (16-bit), and of
//               m16n8k8 for 32-bit data (a .b16 load gives lane l the word
//               l % 4 of row l / 4, which is the tf32 A fragment) (§4).
//   B fragment  16-bit, B stored k x n: ldmatrix.x4.trans with lane l at
//               (k row l % 16, n chunk 2p + l / 16): registers {0, 1} are the
//               fragment of n-block 2p, {2, 3} of 2p + 1 (§4).
//               tf32: no b32 transposing ldmatrix exists, so b_i = B[k = t +
//               4 i][n = g] by scalar shared loads (§1).
//   C fragment  lane l holds rows g, g + 8 and columns 2t, 2t + 1 (§1, §2).
// bf16: MLIR 19's nvgpu.mma.sync cannot type bf16 operands, so the mma is
// the LLVM intrinsic on i32 registers (notes/mlir19-gpu.md §3).
// tf32x3 (GpuConfigurator.h): the tf32 kernel, each fragment element x split
// in registers into big = rna-tf32(x) by bit arithmetic (adding half of the
// dropped 13 bits' unit to the magnitude, then clearing them: an exact tf32
// value) and small = x - big (exact in f32, its low bits left to the MMA:
// MatmulKernelParts.h's splitTf32), and three MMAs a tile: small x big,
// big x small, big x big.
//
// Shared memory is one dynamic buffer: `stages` A slabs (blockM x blockK)
// then `stages` B slabs (blockK x blockN), each row XOR-swizzled in 16-byte
// chunks, chunk' = chunk ^ (((row >> rs) & rm) << cs), at every write and
// read alike:
//   rows read by ldmatrix (A; 16-bit B) take MLIR's nvgpu-optimize-shared-
//     memory formula (ptx-semantics.md §8): V chunks a row, P = max(1, 8 / V)
//     rows a 128-byte line: rs = log2 P, rm = V - 1, cs = 0; every 8-lane
//     ldmatrix phase then hits 8 distinct 16-byte bank groups;
//   tf32 B rows, read by scalar loads of 4 rows (t) x 8 columns (g):
//     rs = 0, rm = 3, cs = 1 shifts the 4 rows' 2 chunks apart (MLIR's
//     formula left 2-way conflicts there; the template's emulator measured
//     both).
// The copies: each thread copies whole 16-byte chunks (cp.async.cg), chunk
// tid % chunks-per-row of rows tid / chunks-per-row + i x (threads /
// chunks-per-row).
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cuda/MmaMatmulKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <functional>
#include <limits>

using namespace mlir;
using namespace mlir::nova;

gpu::GPUModuleOp mlir::nova::addKernelsModule(ModuleOp top) {
  top->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), UnitAttr::get(top.getContext()));
  OpBuilder b(top.getContext());
  b.setInsertionPointToEnd(top.getBody());
  return b.create<gpu::GPUModuleOp>(top.getLoc(), "nova_kernels");
}

FailureOr<gpu::GPUFuncOp> mlir::nova::buildMmaSyncMatmulKernel(gpu::GPUModuleOp module, StringRef name,
                                                                const GpuMatmulProblem &p,
                                                                const GpuMatmulConfig &cfg, std::string &error,
                                                                const MmaMatmulFaults &faults,
                                                                const MmaEpilogue &epilogue, bool linearGrid) {
  auto fail = [&](const std::string &why) -> FailureOr<gpu::GPUFuncOp> {
    error = llvm::formatv("the mma.sync matmul kernel {0} ({1} x {2} x {3}, batch {4}, {5}{6}, {7}, {8}): {9}",
                          name, p.m, p.n, p.k, p.batch, p.lhsTransposed ? "T" : "N", p.rhsTransposed ? "T" : "N",
                          nameOf(p.operand), cfg.describe(), why)
                .str();
    return failure();
  };
  const bool sixteen = p.operand == GpuOperand::f16 || p.operand == GpuOperand::bf16;
  const bool x3 = p.operand == GpuOperand::tf32x3;
  if (cfg.kind != GpuMmaKind::mma_sync || !(sixteen || p.operand == GpuOperand::tf32 || x3))
    return fail("not an mma.sync configuration of f16, bf16, tf32 or 3xtf32 operands");
  if (cfg.splitK < 1 || (cfg.splitK > 1 && (p.batch > 1 || epilogue.any())))
    return fail("split-K takes one product with no epilogue (its partial products are summed afterwards)");
  const int64_t BM = cfg.blockM, BN = cfg.blockN, BK = cfg.blockK, S = cfg.stages;
  const int64_t WM = cfg.warpM, WN = cfg.warpN;
  const int64_t threads = 32 * cfg.warpsM * cfg.warpsN;
  // Edge tiles: chunks past the matrix are zero-filled (cp.async with a
  // source size of 0), results past it not stored. A chunk is 16 bytes of a
  // row, so each operand's contiguous extent must be a multiple of 16 bytes.
  const bool edges = p.m % BM || p.n % BN || p.k % BK;
  if (WM % 16 || WN % 16 || BM != cfg.warpsM * WM || BN != cfg.warpsN * WN || S < 2 || p.batch < 1)
    return fail("the warps must tile the block in 16 x 16 steps, with at least 2 stages");
  const int64_t es = operandBytes(p.operand), epc = 16 / es; // elements per 16-byte chunk
  const int64_t mmaK = sixteen ? 16 : 8;
  if (BK % mmaK)
    return fail("the K slab must be a multiple of the MMA's K");

  // Each operand's shared tile, per stage, is stored as it lies in global
  // memory: A [BM][BK] (or [BK][BM] transposed), B [BK][BN] (or [BN][BK]).
  struct Tile {
    int64_t rows, cols, chunks; // chunks: 16-byte chunks a row
    bool kRows;                 // rows run along K (else along M or N)
    Swizzle swizzle;
  };
  auto tileOf = [&](bool kRows, int64_t mn, bool scalarReads) {
    Tile t;
    t.kRows = kRows;
    t.rows = kRows ? BK : mn;
    t.cols = kRows ? mn : BK;
    t.chunks = t.cols / epc;
    // Scalar 32-bit reads (tf32 fragments of an M/N-contiguous tile) touch 4
    // k-rows x 8 columns a warp: shift the 4 rows' chunks apart.
    t.swizzle = faults.noSwizzle ? Swizzle{} : scalarReads ? Swizzle{0, 3, 1} : ldmatrixSwizzle(t.chunks);
    return t;
  };
  // Fragment loads by layout and width: the configurator's rule.
  const bool scalarA = lhsFragmentLoad(p.operand, p.lhsTransposed) == FragmentLoad::scalar;
  const bool scalarB = rhsFragmentLoad(p.operand, p.rhsTransposed) == FragmentLoad::scalar;
  const Tile tA = tileOf(p.lhsTransposed, BM, scalarA), tB = tileOf(!p.rhsTransposed, BN, scalarB);
  for (const Tile *t : {&tA, &tB})
    if (t->chunks < 1 || threads % t->chunks || (t->rows * t->chunks) % threads)
      return fail("the block's threads cannot copy its slabs in whole 16-byte chunks");
  if ((scalarA && tA.chunks < 8) || (scalarB && tB.chunks < 8))
    return fail("an M/N-contiguous tf32 tile needs rows of at least 128 bytes (32 elements)");
  if ((p.lhsTransposed ? p.m : p.k) % epc || (p.rhsTransposed ? p.k : p.n) % epc)
    return fail(llvm::formatv("each operand's contiguous extent ({0} of the lhs, {1} of the rhs) must be a "
                              "multiple of {2} elements (16-byte copies)",
                              p.lhsTransposed ? p.m : p.k, p.rhsTransposed ? p.k : p.n, epc)
                    .str());
  const int64_t KT = (p.k + BK - 1) / BK;
  const MmaSyncProbe probe = faults.probe;
  const bool interleave = cfg.interleaveCopies && probe == MmaSyncProbe::none;
  if (interleave && faults.refillBeforeBarrier)
    return fail("an interleaved refill comes after the barrier");
  if (probe != MmaSyncProbe::none && (x3 || cfg.splitK > 1 || epilogue.any() || edges || KT < S - 1))
    return fail("a probe takes f16, bf16 or tf32 operands, no split-K, no epilogue, whole tiles and at least "
                "stages - 1 slabs");

  MLIRContext *ctx = module.getContext();
  ctx->loadDialect<arith::ArithDialect, math::MathDialect, memref::MemRefDialect, scf::SCFDialect,
                   vector::VectorDialect, nvgpu::NVGPUDialect, LLVM::LLVMDialect>();
  ImplicitLocOpBuilder b(module.getLoc(), ctx);
  IndexMath k(b);
  Type et = operandElementType(p.operand, ctx), f32 = b.getF32Type();
  const bool batched = p.batch > 1;
  auto global = [&](int64_t rows, int64_t cols, Type t) {
    SmallVector<int64_t> shape;
    if (batched)
      shape.push_back(p.batch);
    shape.push_back(rows);
    shape.push_back(cols);
    return MemRefType::get(shape, t);
  };
  auto aType = p.lhsTransposed ? global(p.k, p.m, et) : global(p.m, p.k, et);
  auto bType = p.rhsTransposed ? global(p.n, p.k, et) : global(p.k, p.n, et);
  MatmulKernelFrame frame =
      beginMatmulKernel(b, module, name, p, aType, bType, BM, BN, threads, epilogue, linearGrid, cfg.splitK);
  auto func = frame.func;
  Value A = func.getArgument(0), B = func.getArgument(1);
  Value tid = frame.thread, row0 = frame.row0, col0 = frame.col0;

  // Shared memory: stages A tiles, then stages B tiles, in one dynamic buffer.
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  Value dyn = b.create<gpu::DynamicSharedMemoryOp>(MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                                                                   MemRefLayoutAttrInterface(), wg));
  auto sAType = MemRefType::get({S, tA.rows, tA.cols}, et, MemRefLayoutAttrInterface(), wg);
  auto sBType = MemRefType::get({S, tB.rows, tB.cols}, et, MemRefLayoutAttrInterface(), wg);
  Value sA = b.create<memref::ViewOp>(sAType, dyn, k.c(0), ValueRange{});
  Value sB = b.create<memref::ViewOp>(sBType, dyn, k.c(S * BM * BK * es), ValueRange{});

  Value lane = k.rem(tid, 32), warp = k.div(tid, 32);
  Value wm = k.div(warp, cfg.warpsN), wn = k.rem(warp, cfg.warpsN);
  Value g = k.shr(lane, 2), t = k.andi(lane, 3);
  // Indices of a [batch,] rows x columns operand (C's, and A's and B's as stored).
  auto globalIndex = [&](Value r, Value c) { return frame.operandAt(r, c); };
  // This block's slabs: kt0 + [0, slabs) (all KT without split-K).
  auto [kt0, slabs] = frame.slabRange(k, KT, cfg.splitK);

  // This thread's copies: chunk tid % chunks of rows tid / chunks + i x
  // (threads / chunks), the same in every slab; the slab moves the K
  // coordinate (rows or columns of the global operand).
  struct Copies {
    SmallVector<Value> rows, dstCols;
    Value chunkCol;
  };
  auto copiesOf = [&](const Tile &tile) {
    Copies c;
    Value chunk = k.rem(tid, tile.chunks);
    c.chunkCol = k.mul(chunk, epc);
    for (int64_t i = 0; i < tile.rows * tile.chunks / threads; ++i) {
      c.rows.push_back(k.add(k.div(tid, tile.chunks), i * (threads / tile.chunks)));
      c.dstCols.push_back(k.mul(swizzleChunk(k, c.rows.back(), chunk, tile.swizzle), epc));
    }
    return c;
  };
  const Copies cA = copiesOf(tA), cB = copiesOf(tB);
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(ctx);
  // `live` (i1, or null for always): false copies nothing (zero-fill from a
  // valid address), so that the loop's refills need no branch.
  // Copies [first, first + count) of the slab's (A's, then B's; all by
  // default).
  const int64_t copiesA = int64_t(cA.rows.size()), copiesASlab = copiesA + int64_t(cB.rows.size());
  auto issueSlab = [&](Value kt, Value stage, Value live = Value(), int64_t first = 0,
                       int64_t count = std::numeric_limits<int64_t>::max()) {
    SmallVector<Value> tokens;
    Value k0 = k.mul(kt, BK);
    Value liveElements = live && !edges ? b.create<arith::SelectOp>(live, k.c(epc), k.c(0)).getResult() : Value();
    auto copy = [&](const Tile &tile, const Copies &c, Value src, Value dst, Value mn0, int64_t rowsExtent,
                    int64_t colsExtent, int64_t from, int64_t to) {
      for (size_t i = size_t(std::max<int64_t>(0, from)); i < c.rows.size() && int64_t(i) < to; ++i) {
        // Global (row, column) of this chunk: K runs along the tile's rows or columns.
        Value gr = tile.kRows ? k.add(k0, c.rows[i]) : k.add(mn0, c.rows[i]);
        Value gc = tile.kRows ? k.add(mn0, c.chunkCol) : k.add(k0, c.chunkCol);
        Value srcElements;
        if (edges) {
          // Past the matrix: copy nothing (zero-fill) from a valid address.
          Value inRows = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, gr, k.c(rowsExtent));
          Value inCols = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, gc, k.c(colsExtent));
          Value inside = b.create<arith::AndIOp>(inRows, inCols);
          if (live)
            inside = b.create<arith::AndIOp>(inside, live);
          srcElements = b.create<arith::SelectOp>(inside, k.c(epc), k.c(0));
          gr = b.create<arith::SelectOp>(inside, gr, k.c(0));
          gc = b.create<arith::SelectOp>(inside, gc, k.c(0));
        } else if (live) {
          srcElements = liveElements;
        }
        tokens.push_back(b.create<nvgpu::DeviceAsyncCopyOp>(tokenType, dst, ValueRange{stage, c.rows[i], c.dstCols[i]},
                                                            src, globalIndex(gr, gc), b.getIndexAttr(epc), srcElements,
                                                            b.getUnitAttr()));
      }
    };
    const int64_t last = count > copiesASlab - first ? copiesASlab : first + count;
    copy(tA, cA, A, sA, row0, p.lhsTransposed ? p.k : p.m, p.lhsTransposed ? p.m : p.k, first, last);
    copy(tB, cB, B, sB, col0, p.rhsTransposed ? p.n : p.k, p.rhsTransposed ? p.k : p.n, first - copiesA,
         last - copiesA);
    return tokens;
  };
  // Prologue: slabs 0 .. S-2, one group each (empty past the last slab, so
  // that the loop's wait always counts S - 1 groups before slab 0's refill).
  // Split-K knows how many slabs a part has at run time only: there a slab
  // past the part's copies nothing (zero-fill from slab 0's address).
  Value prologueGroup;
  for (int64_t s = 0; s + 1 < S; ++s) {
    SmallVector<Value> tokens;
    if (frame.split) {
      Value live = b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, k.c(s), slabs);
      tokens = issueSlab(b.create<arith::SelectOp>(live, k.add(kt0, s), k.c(0)), k.c(s), live);
    } else if (s < KT) {
      tokens = issueSlab(k.c(s), k.c(s));
    }
    prologueGroup = b.create<nvgpu::DeviceAsyncCreateGroupOp>(tokenType, tokens);
  }

  const int64_t MT = WM / 16, NT = WN / 8;
  auto accType = VectorType::get({2, 2}, f32);
  Value zero = b.create<arith::ConstantOp>(accType, DenseElementsAttr::get(accType, b.getF32FloatAttr(0)));
  SmallVector<Value> inits(MT * NT, zero);
  Value l16 = k.rem(lane, 16), lhi = k.div(lane, 16), l8 = k.rem(lane, 8), lq = k.div(lane, 8);
  const int64_t regsPer = 4 / es; // elements of one 32-bit register
  auto aFragType = VectorType::get({4, regsPer}, et);
  auto pairType = VectorType::get({4, regsPer}, et);
  auto mma = [&](Value a, Value bf, Value acc) -> Value {
    if (p.operand != GpuOperand::bf16)
      return b.create<nvgpu::MmaSyncOp>(a, bf, acc, ArrayRef<int64_t>{16, 8, mmaK},
                                        /*tf32Enabled=*/!sixteen);
    return mmaSyncBf16(b, a, bf, acc);
  };
  // A shared element (row, col) of stage `stage`, swizzled (col in elements).
  auto swizzled = [&](const Tile &tile, Value row, Value chunk, bool unswizzled = false) {
    return k.mul(unswizzled ? chunk : swizzleChunk(k, row, chunk, tile.swizzle), epc);
  };
  // Scalar fragment: `count` elements at (k, mn) pairs, as a vector<count x 1 x f32>.
  auto scalarFragment = [&](Value tile, const Tile &desc, Value stage, ArrayRef<std::pair<Value, Value>> at,
                            bool unswizzled) {
    auto type = VectorType::get({int64_t(at.size()), 1}, et);
    Value frag = b.create<arith::ConstantOp>(type, DenseElementsAttr::get(type, b.getF32FloatAttr(0)));
    for (auto [i, km] : llvm::enumerate(at)) {
      auto [kRow, mn] = km; // the tile's rows run along K here
      Value col = k.add(swizzled(desc, kRow, k.shr(mn, 2), unswizzled), k.andi(mn, 3));
      Value s = b.create<memref::LoadOp>(tile, ValueRange{stage, kRow, col});
      frag = b.create<vector::InsertOp>(s, frag, ArrayRef<int64_t>{int64_t(i), 0});
    }
    return frag;
  };
  auto split = [&](Value pair, SmallVector<Value> &out) {
    for (int64_t half : {0, 2})
      out.push_back(b.create<vector::ExtractStridedSliceOp>(pair, ArrayRef<int64_t>{half, 0},
                                                            ArrayRef<int64_t>{2, regsPer}, ArrayRef<int64_t>{1, 1}));
  };

  // The fragments of k step kk of `stage`: A's of each 16-row tile (af),
  // B's of each 8-column one (bfs).
  auto loadFragments = [&](Value stage, int64_t kk, SmallVector<Value> &af, SmallVector<Value> &bfs) {
    const int64_t kChunk0 = kk * mmaK / epc; // the k step's first 16-byte chunk along K
    for (int64_t mi = 0; mi < MT; ++mi) {
      Value m0 = k.add(k.mul(wm, WM), mi * 16);
      if (!p.lhsTransposed) {
        // Lane l: row m0 + l % 16, chunk l / 16 of the k step (§4).
        Value r = k.add(m0, l16), chunk = k.add(lhi, kChunk0);
        af.push_back(b.create<nvgpu::LdMatrixOp>(aFragType, sA, ValueRange{stage, r, swizzled(tA, r, chunk)},
                                                 /*transpose=*/false, /*numTiles=*/4));
      } else if (sixteen) {
        // Stored k x m: matrix j = l / 8 is (k rows 8 (j / 2), m columns 8 (j % 2)),
        // row l % 8; .trans gives registers a0a1, a2a3, a4a5, a6a7.
        Value r = k.add(k.add(l8, k.mul(k.shr(lq, 1), 8)), kk * 16);
        Value chunk = k.add(k.div(m0, epc), k.andi(lq, 1));
        af.push_back(b.create<nvgpu::LdMatrixOp>(aFragType, sA, ValueRange{stage, r, swizzled(tA, r, chunk)},
                                                 /*transpose=*/true, /*numTiles=*/4));
      } else {
        // tf32 stored k x m: a_i = A[g + 8 (i & 1)][t + 4 (i >> 1)] (§1).
        SmallVector<std::pair<Value, Value>> at;
        for (int64_t i = 0; i < 4; ++i)
          at.push_back({k.add(t, kk * 8 + 4 * (i >> 1)), k.add(k.add(m0, g), 8 * (i & 1))});
        af.push_back(scalarFragment(sA, tA, stage, at, false));
      }
    }
    for (int64_t pr = 0; pr < NT / 2; ++pr) {
      Value n0 = k.add(k.mul(wn, WN), pr * 16); // two n-blocks of 8
      if (p.rhsTransposed) {
        // Stored n x k: matrix j = l / 8 is (n rows 8 (j / 2), k chunk j % 2),
        // row l % 8; no .trans: registers {0, 1} are n-block 2p, {2, 3} 2p + 1.
        Value r = k.add(k.add(n0, l8), k.mul(k.shr(lq, 1), 8));
        Value chunk = k.add(k.andi(lq, 1), kChunk0);
        Value v = b.create<nvgpu::LdMatrixOp>(pairType, sB,
                                              ValueRange{stage, r, swizzled(tB, r, chunk, faults.unswizzledRhsReads)},
                                              /*transpose=*/false, /*numTiles=*/4);
        split(v, bfs);
      } else if (sixteen) {
        // Stored k x n: lane l at (k row l % 16, n chunk 2p + l / 16); .trans (§4).
        Value r = k.add(l16, kk * 16);
        Value chunk = k.add(k.div(n0, epc), lhi);
        Value v = b.create<nvgpu::LdMatrixOp>(pairType, sB,
                                              ValueRange{stage, r, swizzled(tB, r, chunk, faults.unswizzledRhsReads)},
                                              /*transpose=*/true, /*numTiles=*/4);
        split(v, bfs);
      } else {
        // tf32 stored k x n: b_i = B[k = t + 4 i][n = g] (§1).
        for (int64_t half = 0; half < 2; ++half) {
          Value n = k.add(k.add(n0, half * 8), g);
          SmallVector<std::pair<Value, Value>> at;
          for (int64_t i = 0; i < 2; ++i)
            at.push_back({k.add(t, kk * 8 + 4 * i), n});
          bfs.push_back(scalarFragment(sB, tB, stage, at, faults.unswizzledRhsReads));
        }
      }
    }
  };
  // The k step's MMAs on those fragments, into accs.
  auto multiply = [&](ArrayRef<Value> af, ArrayRef<Value> bfs, SmallVector<Value> &accs) {
    if (!x3) {
      for (int64_t mi = 0; mi < MT; ++mi)
        for (int64_t ni = 0; ni < NT; ++ni)
          accs[mi * NT + ni] = mma(af[mi], bfs[ni], accs[mi * NT + ni]);
      return;
    }
    // tf32x3: the small terms first, then the big one.
    SmallVector<std::pair<Value, Value>> as, bs;
    for (Value a : af)
      as.push_back(splitTf32Fragment(b, a));
    for (Value f : bfs)
      bs.push_back(splitTf32Fragment(b, f));
    for (int64_t mi = 0; mi < MT; ++mi)
      for (int64_t ni = 0; ni < NT; ++ni) {
        Value &acc = accs[mi * NT + ni];
        acc = mma(as[mi].second, bs[ni].first, acc);
        acc = mma(as[mi].first, bs[ni].second, acc);
        acc = mma(as[mi].first, bs[ni].first, acc);
      }
  };

  // The mmaOnly probe's fragments: the first k step's, loaded once.
  SmallVector<Value> heldA, heldB;
  if (probe == MmaSyncProbe::mmaOnly) {
    b.create<nvgpu::DeviceAsyncWaitOp>(prologueGroup, b.getI32IntegerAttr(0));
    b.create<gpu::BarrierOp>();
    loadFragments(k.c(0), 0, heldA, heldB);
  }
  auto loop = b.create<scf::ForOp>(k.c(0), slabs, k.c(1), inits);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kt = loop.getInductionVar(); // the block's own slab number
    SmallVector<Value> accs(loop.getRegionIterArgs().begin(), loop.getRegionIterArgs().end());
    // (The interleaved refill's copies, when there is one.)
    std::function<SmallVector<Value>(int64_t, int64_t)> refillShare;
    if (probe == MmaSyncProbe::mmaOnly) {
      for (int64_t kk = 0; kk < BK / mmaK; ++kk)
        multiply(heldA, heldB, accs);
    } else {
      // The sharedOnly probe reads the prologue's stages over and over.
      Value stage = probe == MmaSyncProbe::sharedOnly ? k.rem(kt, S - 1) : k.rem(kt, S);
      if (probe == MmaSyncProbe::sharedOnly) {
        b.create<nvgpu::DeviceAsyncWaitOp>(prologueGroup, b.getI32IntegerAttr(0));
        b.create<gpu::BarrierOp>();
      } else {
        // One barrier a slab (CUTLASS's multistage loop): S - 1 + kt groups are
        // committed here and slab kt is group kt, so waiting until at most S - 2
        // are pending means it has landed in this thread; the barrier makes
        // every thread's copies visible, and also means every warp is done with
        // slab kt - 1, whose stage ((kt + S - 1) mod S) is refilled after it
        // with slab kt + S - 1. The refill is one group in every iteration, past
        // the last slab copying nothing (zero-fill from slab kt's address, into
        // the stage no later iteration reads), so the loop body is one basic
        // block in which ptxas may interleave the copies with the MMAs.
        Value next = k.add(kt, S - 1);
        Value more = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, next, slabs);
        auto refill = [&] {
          Value slab = b.create<arith::SelectOp>(more, next, kt);
          b.create<nvgpu::DeviceAsyncCreateGroupOp>(
              tokenType, issueSlab(frame.split ? k.add(kt0, slab) : slab, k.rem(next, S), more));
        };
        if (interleave) {
          // A share of the refill's copies at each k step (below).
          Value slab = b.create<arith::SelectOp>(more, next, kt);
          refillShare = [&, slab, next, more](int64_t first, int64_t count) {
            return issueSlab(frame.split ? k.add(kt0, slab) : slab, k.rem(next, S), more, first, count);
          };
        }
        if (faults.refillBeforeBarrier)
          refill();
        // With the refill committed first, one more group may be pending. (The
        // wait's token is only an operand: its count is what it waits for.)
        const int64_t pending = (faults.refillBeforeBarrier ? S - 1 : S - 2) + (faults.waitOneGroupShort ? 1 : 0);
        b.create<nvgpu::DeviceAsyncWaitOp>(prologueGroup, b.getI32IntegerAttr(pending));
        if (!faults.noBarrierAfterWait)
          b.create<gpu::BarrierOp>();
        if (!faults.refillBeforeBarrier && !interleave)
          refill();
      }
      // Interleaved: k step kk's share of the refill issued after its
      // fragment loads, before its MMAs; the shares one group.
      SmallVector<Value> refillTokens;
      const int64_t steps = BK / mmaK, share = (copiesASlab + steps - 1) / steps;
      for (int64_t kk = 0; kk < steps; ++kk) {
        SmallVector<Value> af, bfs;
        loadFragments(stage, kk, af, bfs);
        if (refillShare)
          llvm::append_range(refillTokens, refillShare(kk * share, share));
        multiply(af, bfs, accs);
      }
      if (refillShare)
        b.create<nvgpu::DeviceAsyncCreateGroupOp>(tokenType, refillTokens);
    }
    b.create<scf::YieldOp>(accs);
  }

  // Epilogue: lane (g, t) holds rows g, g + 8 and columns 2t, 2t + 1 of each
  // 16 x 8 tile.
  const MatmulResultStore &out = frame.out;
  // A lane's rows of every 16-row tile at the same columns: the
  // epilogue's column inputs (a bias) loaded once for them (storePairs).
  for (int64_t ni = 0; ni < NT; ++ni) {
    Value col = k.add(col0, k.add(k.add(k.mul(wn, WN), ni * 8), k.mul(t, 2)));
    SmallVector<Value> pairs, rows;
    for (int64_t mi = 0; mi < MT; ++mi) {
      Value r = k.add(row0, k.add(k.add(k.mul(wm, WM), mi * 16), g));
      Value acc = loop.getResult(mi * NT + ni);
      for (int64_t h = 0; h < 2; ++h) {
        pairs.push_back(b.create<vector::ExtractOp>(acc, ArrayRef<int64_t>{h}));
        rows.push_back(h ? k.add(r, 8) : r);
      }
    }
    out.storePairs(k, pairs, rows, col);
  }
  b.create<gpu::ReturnOp>();
  return func;
}
