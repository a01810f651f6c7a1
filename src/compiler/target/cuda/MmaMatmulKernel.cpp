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
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::nova;

namespace {

struct Swizzle {
  int64_t rs = 0, rm = 0, cs = 0;
};

/// For rows of `chunks` 16-byte chunks read by ldmatrix (MLIR's formula).
Swizzle ldmatrixSwizzle(int64_t chunks) {
  int64_t rowsPerLine = std::max<int64_t>(1, 8 / chunks);
  return {llvm::Log2_64(rowsPerLine), chunks - 1, 0};
}

/// Index arithmetic on `index` values, folding constants as it goes.
class Kb {
public:
  explicit Kb(ImplicitLocOpBuilder &b) : b(b) {}
  ImplicitLocOpBuilder &b;

  Value c(int64_t v) { return b.create<arith::ConstantIndexOp>(v); }
  Value add(Value x, int64_t v) { return v == 0 ? x : add(x, c(v)); }
  Value add(Value x, Value y) { return b.create<arith::AddIOp>(x, y); }
  Value mul(Value x, int64_t v) { return v == 1 ? x : b.create<arith::MulIOp>(x, c(v)).getResult(); }
  Value div(Value x, int64_t v) {
    if (v == 1)
      return x;
    if (llvm::isPowerOf2_64(v))
      return b.create<arith::ShRUIOp>(x, c(llvm::Log2_64(v)));
    return b.create<arith::DivUIOp>(x, c(v));
  }
  Value rem(Value x, int64_t v) {
    if (llvm::isPowerOf2_64(v))
      return b.create<arith::AndIOp>(x, c(v - 1));
    return b.create<arith::RemUIOp>(x, c(v));
  }
  Value shr(Value x, int64_t v) { return v == 0 ? x : b.create<arith::ShRUIOp>(x, c(v)).getResult(); }
  Value shl(Value x, int64_t v) { return v == 0 ? x : b.create<arith::ShLIOp>(x, c(v)).getResult(); }
  Value andi(Value x, int64_t v) { return b.create<arith::AndIOp>(x, c(v)); }
  Value xori(Value x, Value y) { return b.create<arith::XOrIOp>(x, y); }
  Value swizzle(Value row, Value chunk, Swizzle s) { return xori(chunk, shl(andi(shr(row, s.rs), s.rm), s.cs)); }
};

int64_t elementBytes(GpuOperand op) { return op == GpuOperand::tf32 ? 4 : 2; }

Type elementType(GpuOperand op, MLIRContext *ctx) {
  switch (op) {
  case GpuOperand::f16:
    return Float16Type::get(ctx);
  case GpuOperand::bf16:
    return BFloat16Type::get(ctx);
  default:
    return Float32Type::get(ctx);
  }
}

} // namespace

int64_t mlir::nova::mmaSyncMatmulSharedBytes(const GpuMatmulProblem &p, const GpuMatmulConfig &c) {
  return c.stages * (c.blockM + c.blockN) * c.blockK * elementBytes(p.operand);
}

FailureOr<gpu::GPUFuncOp> mlir::nova::buildMmaSyncMatmulKernel(gpu::GPUModuleOp module, StringRef name,
                                                                const GpuMatmulProblem &p,
                                                                const GpuMatmulConfig &cfg, std::string &error,
                                                                const MmaMatmulFaults &faults) {
  auto fail = [&](const std::string &why) -> FailureOr<gpu::GPUFuncOp> {
    error = llvm::formatv("the mma.sync matmul kernel {0} ({1} x {2} x {3}, {4}, {5}): {6}", name, p.m, p.n,
                          p.k, nameOf(p.operand), cfg.describe(), why)
                .str();
    return failure();
  };
  const bool sixteen = p.operand == GpuOperand::f16 || p.operand == GpuOperand::bf16;
  if (cfg.kind != GpuMmaKind::mma_sync || !(sixteen || p.operand == GpuOperand::tf32))
    return fail("not an mma.sync configuration of f16, bf16 or tf32 operands");
  if (p.lhsTransposed || p.rhsTransposed || p.batch != 1)
    return fail("transposed operands and batches are not supported yet (NN, one matrix)");
  if (cfg.splitK != 1)
    return fail("split-K is not supported yet");
  const int64_t BM = cfg.blockM, BN = cfg.blockN, BK = cfg.blockK, S = cfg.stages;
  const int64_t WM = cfg.warpM, WN = cfg.warpN;
  const int64_t threads = 32 * cfg.warpsM * cfg.warpsN;
  if (p.m % BM || p.n % BN || p.k % BK)
    return fail("M, N and K must be multiples of the block tile (no edge tiles yet)");
  if (WM % 16 || WN % 16 || BM != cfg.warpsM * WM || BN != cfg.warpsN * WN || S < 2)
    return fail("the warps must tile the block in 16 x 16 steps, with at least 2 stages");
  const int64_t es = elementBytes(p.operand), epc = 16 / es; // elements per 16-byte chunk
  const int64_t mmaK = sixteen ? 16 : 8;
  const int64_t cprA = BK / epc, cprB = BN / epc; // 16-byte chunks per shared row
  if (BK % mmaK || cprA < 1 || threads % cprA || threads % cprB || (BM * cprA) % threads ||
      (BK * cprB) % threads)
    return fail("the block's threads cannot copy its slabs in whole 16-byte chunks");
  if (!sixteen && cprB < 8)
    return fail("tf32 rhs rows must be at least 128 bytes (blockN >= 32)");
  const int64_t KT = p.k / BK;

  MLIRContext *ctx = module.getContext();
  ctx->loadDialect<arith::ArithDialect, memref::MemRefDialect, scf::SCFDialect, vector::VectorDialect,
                   nvgpu::NVGPUDialect, LLVM::LLVMDialect>();
  ImplicitLocOpBuilder b(module.getLoc(), ctx);
  if (Operation *end = module.getBody()->getTerminator())
    b.setInsertionPoint(end); // gpu.module_end
  else
    b.setInsertionPointToEnd(module.getBody());
  Kb k(b);
  Type et = elementType(p.operand, ctx), f32 = b.getF32Type();
  auto aType = MemRefType::get({p.m, p.k}, et), bType = MemRefType::get({p.k, p.n}, et),
       cType = MemRefType::get({p.m, p.n}, f32);
  auto func = b.create<gpu::GPUFuncOp>(name, b.getFunctionType({aType, bType, cType}, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({int32_t(threads), 1, 1}));
  func.setKnownGridSizeAttr(b.getDenseI32ArrayAttr({int32_t(p.n / BN), int32_t(p.m / BM), 1}));
  b.setInsertionPointToStart(&func.getBody().front());
  Value A = func.getArgument(0), B = func.getArgument(1), C = func.getArgument(2);

  // Shared memory: stages A slabs, then stages B slabs, in one dynamic buffer.
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  Value dyn = b.create<gpu::DynamicSharedMemoryOp>(MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                                                                   MemRefLayoutAttrInterface(), wg));
  auto sAType = MemRefType::get({S, BM, BK}, et, MemRefLayoutAttrInterface(), wg);
  auto sBType = MemRefType::get({S, BK, BN}, et, MemRefLayoutAttrInterface(), wg);
  Value sA = b.create<memref::ViewOp>(sAType, dyn, k.c(0), ValueRange{});
  Value sB = b.create<memref::ViewOp>(sBType, dyn, k.c(S * BM * BK * es), ValueRange{});
  const Swizzle swA = ldmatrixSwizzle(cprA);
  const Swizzle swB = sixteen ? ldmatrixSwizzle(cprB) : Swizzle{0, 3, 1};

  Value tid = b.create<gpu::ThreadIdOp>(gpu::Dimension::x);
  Value bx = b.create<gpu::BlockIdOp>(gpu::Dimension::x), by = b.create<gpu::BlockIdOp>(gpu::Dimension::y);
  Value lane = k.rem(tid, 32), warp = k.div(tid, 32);
  Value wm = k.div(warp, cfg.warpsN), wn = k.rem(warp, cfg.warpsN);
  Value g = k.shr(lane, 2), t = k.andi(lane, 3);
  Value row0 = k.mul(by, BM), col0 = k.mul(bx, BN);

  // This thread's copies (slab-independent parts).
  const int64_t nA = BM * cprA / threads, nB = BK * cprB / threads;
  Value chA = k.rem(tid, cprA), chB = k.rem(tid, cprB);
  SmallVector<Value> rA, rB, dA, dB;
  for (int64_t i = 0; i < nA; ++i) {
    rA.push_back(k.add(k.div(tid, cprA), i * (threads / cprA)));
    dA.push_back(k.mul(k.swizzle(rA.back(), chA, swA), epc));
  }
  for (int64_t i = 0; i < nB; ++i) {
    rB.push_back(k.add(k.div(tid, cprB), i * (threads / cprB)));
    dB.push_back(k.mul(k.swizzle(rB.back(), chB, swB), epc));
  }
  Value gColA = k.mul(chA, epc), gColB = k.add(col0, k.mul(chB, epc));
  auto tokenType = nvgpu::DeviceAsyncTokenType::get(ctx);
  auto issueSlab = [&](Value kt, Value stage) {
    SmallVector<Value> tokens;
    Value k0 = k.mul(kt, BK);
    Value ca = k.add(k0, gColA);
    for (int64_t i = 0; i < nA; ++i)
      tokens.push_back(b.create<nvgpu::DeviceAsyncCopyOp>(tokenType, sA, ValueRange{stage, rA[i], dA[i]}, A,
                                                          ValueRange{k.add(row0, rA[i]), ca},
                                                          b.getIndexAttr(epc), Value(), b.getUnitAttr()));
    for (int64_t i = 0; i < nB; ++i)
      tokens.push_back(b.create<nvgpu::DeviceAsyncCopyOp>(tokenType, sB, ValueRange{stage, rB[i], dB[i]}, B,
                                                          ValueRange{k.add(k0, rB[i]), gColB},
                                                          b.getIndexAttr(epc), Value(), b.getUnitAttr()));
    return tokens;
  };
  // Prologue: slabs 0 .. S-2, one group each (empty past the last slab, so
  // that wait_group S-1 in the loop always means "slab kt has landed").
  for (int64_t s = 0; s + 1 < S; ++s) {
    SmallVector<Value> tokens;
    if (s < KT)
      tokens = issueSlab(k.c(s), k.c(s));
    b.create<nvgpu::DeviceAsyncCreateGroupOp>(tokenType, tokens);
  }

  const int64_t MT = WM / 16, NT = WN / 8;
  auto accType = VectorType::get({2, 2}, f32);
  Value zero = b.create<arith::ConstantOp>(accType, DenseElementsAttr::get(accType, b.getF32FloatAttr(0)));
  SmallVector<Value> inits(MT * NT, zero);
  Value l16 = k.rem(lane, 16), lhi = k.div(lane, 16);
  SmallVector<Value> aRow;
  for (int64_t mi = 0; mi < MT; ++mi)
    aRow.push_back(k.add(k.add(k.mul(wm, WM), mi * 16), l16));

  auto aFragType = VectorType::get({4, 4 / es}, et);
  auto bPairType = VectorType::get({4, 2}, et), bFragType = VectorType::get({2, 4 / es}, et);
  auto i32 = b.getI32Type();
  // bf16: registers as i32, one row at a time (a 2-D vector.bitcast is not lowered).
  auto registers = [&](Value v, int64_t rows) {
    SmallVector<Value> regs;
    for (int64_t j = 0; j < rows; ++j) {
      Value row = b.create<vector::ExtractOp>(v, ArrayRef<int64_t>{j});
      Value cast = b.create<vector::BitCastOp>(VectorType::get({1}, i32), row);
      regs.push_back(b.create<vector::ExtractOp>(cast, ArrayRef<int64_t>{0}));
    }
    return regs;
  };
  auto structType = LLVM::LLVMStructType::getLiteral(ctx, {f32, f32, f32, f32});
  auto mma = [&](Value a, Value bf, Value acc) -> Value {
    if (p.operand != GpuOperand::bf16)
      return b.create<nvgpu::MmaSyncOp>(a, bf, acc, ArrayRef<int64_t>{16, 8, mmaK},
                                        /*tf32Enabled=*/p.operand == GpuOperand::tf32);
    SmallVector<Value> args = registers(a, 4);
    llvm::append_range(args, registers(bf, 2));
    for (int64_t i = 0; i < 4; ++i)
      args.push_back(b.create<vector::ExtractOp>(acc, ArrayRef<int64_t>{i >> 1, i & 1}));
    Value d = b.create<LLVM::CallIntrinsicOp>(structType, "llvm.nvvm.mma.m16n8k16.row.col.bf16", args)
                  .getResult(0);
    Value out = zero;
    for (int64_t i = 0; i < 4; ++i) {
      Value e = b.create<LLVM::ExtractValueOp>(d, ArrayRef<int64_t>{i});
      out = b.create<vector::InsertOp>(e, out, ArrayRef<int64_t>{i >> 1, i & 1});
    }
    return out;
  };

  auto loop = b.create<scf::ForOp>(k.c(0), k.c(KT), k.c(1), inits);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kt = loop.getInductionVar();
    Value stage = k.rem(kt, S);
    Value next = k.add(kt, S - 1);
    Value more = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, next, k.c(KT));
    auto ifOp = b.create<scf::IfOp>(more, /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(&ifOp.getThenRegion().front());
      issueSlab(next, k.rem(next, S));
    }
    // The copies just issued (none in the last S-1 iterations) are one group;
    // waiting until at most S-1 groups are pending means slab kt has landed
    // in this thread; the barrier then makes every thread's copies visible.
    Value group = b.create<nvgpu::DeviceAsyncCreateGroupOp>(tokenType, ValueRange{});
    b.create<nvgpu::DeviceAsyncWaitOp>(group, b.getI32IntegerAttr(faults.waitOneGroupShort ? S : S - 1));
    if (!faults.noBarrierAfterWait)
      b.create<gpu::BarrierOp>();
    SmallVector<Value> accs(loop.getRegionIterArgs().begin(), loop.getRegionIterArgs().end());
    for (int64_t kk = 0; kk < BK / mmaK; ++kk) {
      SmallVector<Value> af, bfs;
      Value aChunk = k.add(lhi, 2 * kk);
      for (Value r : aRow)
        af.push_back(b.create<nvgpu::LdMatrixOp>(aFragType, sA,
                                                 ValueRange{stage, r, k.mul(k.swizzle(r, aChunk, swA), epc)},
                                                 /*transpose=*/false, /*numTiles=*/4));
      if (sixteen) {
        Value kr = k.add(l16, kk * 16);
        for (int64_t pr = 0; pr < NT / 2; ++pr) {
          Value nChunk = k.add(k.add(k.mul(wn, WN / 8), 2 * pr), lhi);
          Value col = faults.unswizzledRhsReads ? k.mul(nChunk, epc) : k.mul(k.swizzle(kr, nChunk, swB), epc);
          Value v = b.create<nvgpu::LdMatrixOp>(bPairType, sB, ValueRange{stage, kr, col},
                                                /*transpose=*/true, /*numTiles=*/4);
          for (int64_t half : {0, 2})
            bfs.push_back(b.create<vector::ExtractStridedSliceOp>(v, ArrayRef<int64_t>{half, 0},
                                                                  ArrayRef<int64_t>{2, 2},
                                                                  ArrayRef<int64_t>{1, 1}));
        }
      } else {
        Value bZero = b.create<arith::ConstantOp>(bFragType, DenseElementsAttr::get(bFragType, b.getF32FloatAttr(0)));
        for (int64_t ni = 0; ni < NT; ++ni) {
          Value n = k.add(k.add(k.mul(wn, WN), ni * 8), g);
          Value nChunk = k.shr(n, 2), nIn = k.andi(n, 3);
          Value frag = bZero;
          for (int64_t i = 0; i < 2; ++i) {
            Value kRow = k.add(t, kk * 8 + 4 * i);
            Value col = k.add(k.mul(faults.unswizzledRhsReads ? nChunk : k.swizzle(kRow, nChunk, swB), epc), nIn);
            Value s = b.create<memref::LoadOp>(sB, ValueRange{stage, kRow, col});
            frag = b.create<vector::InsertOp>(s, frag, ArrayRef<int64_t>{i, 0});
          }
          bfs.push_back(frag);
        }
      }
      for (int64_t mi = 0; mi < MT; ++mi)
        for (int64_t ni = 0; ni < NT; ++ni)
          accs[mi * NT + ni] = mma(af[mi], bfs[ni], accs[mi * NT + ni]);
    }
    // Everyone has read `stage` before the next iteration refills it.
    if (!faults.noBarrierAtLoopEnd)
      b.create<gpu::BarrierOp>();
    b.create<scf::YieldOp>(accs);
  }

  // Epilogue: lane (g, t) holds rows g, g + 8 and columns 2t, 2t + 1 of each
  // 16 x 8 tile.
  for (int64_t mi = 0; mi < MT; ++mi) {
    Value r = k.add(row0, k.add(k.add(k.mul(wm, WM), mi * 16), g));
    Value r8 = k.add(r, 8);
    for (int64_t ni = 0; ni < NT; ++ni) {
      Value col = k.add(col0, k.add(k.add(k.mul(wn, WN), ni * 8), k.mul(t, 2)));
      Value acc = loop.getResult(mi * NT + ni);
      for (int64_t half = 0; half < 2; ++half) {
        Value rowVec = b.create<vector::ExtractOp>(acc, ArrayRef<int64_t>{half});
        b.create<vector::StoreOp>(rowVec, C, ValueRange{half ? r8 : r, col});
      }
    }
  }
  b.create<gpu::ReturnOp>();
  return func;
}
