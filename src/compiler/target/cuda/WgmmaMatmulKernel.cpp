//===- WgmmaMatmulKernel.cpp - the Hopper matmul kernel: TMA + wgmma -----===//
//
// Shared memory (dynamic, its base rounded up to 1024 bytes): `stages`
// stages, each the A tile then the B tile of one K slab, as TMA lands them:
// box after box, each box's rows packed (dim 0 fastest) and XOR-swizzled.
//   K-major operand (K contiguous: A stored M x K, B stored N x K): one box
//     {blockK, rows}; row x at x * 128: blockK x element bytes is 128, the
//     swizzle width (MLIR 19 verifies no narrower swizzled box). Descriptor: SBO = 8 R, LBO unused; the k step
//     kk starts kk x mmaK x element bytes further (inside the swizzled row).
//   MN-major operand (16-bit only; M or N contiguous): boxes {64, blockK} of
//     128-byte rows (k), one per 64 columns; descriptor SBO = 1024 (8 k rows),
//     LBO = blockK x 128 (the next 64 columns); the k step kk starts
//     kk x (mmaK / 8) x 1024 bytes further.
// (ptx-semantics.md §7b, §7c; the descriptor's base offset is 0 because
// every tile starts on a 1024-byte boundary.)
// tf32 with an M/N-contiguous operand (convertA / convertB): as tf32x3
// below, that operand's raw slabs transposed into one set of K-major tiles
// (no halves) and one wgmma a k step; the other operand read from the raw
// stage, which is released with the set once the wgmmas reading it are
// done (instead of after the conversion).
// tf32x3 (f32 operands at about f32's accuracy, GpuConfigurator.h): the
// stages hold the operands' raw f32 slabs as TMA lands them (K-major as
// above; MN-major in boxes {32, blockK}: 128-byte rows of 32 columns, one
// row a k); the consumers convert each slab into two K-major sets of tiles,
// big = rna-tf32(x) and small = x - big (MatmulKernelParts.h's splitTf32;
// wgmma drops small's low 13 bits), released as soon as it is read, and run three wgmmas a
// k step on them (small x big, big x small, big x big). Two sets of
// converted tiles alternate, so a slab's conversion overlaps the previous
// slab's wgmmas: mbarriers convDone[set] (every consumer thread, after its
// stores and a fence.proxy.async) and setFree[set] (each warpgroup, once
// its wgmmas reading the set are done) order them.
// Fragments of the result (§7a): in warpgroup w's 64 rows, thread
// (warp q, lane g t) holds d_i at row 16 q + g + 8 ((i >> 1) & 1), column
// 8 (i >> 2) + 2 t + (i & 1): pairs of adjacent columns.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cuda/WgmmaMatmulKernel.h"
#include "compiler/target/cuda/GpuBlockReduction.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/FormatVariadic.h"

#include <functional>

using namespace mlir;
using namespace mlir::nova;

namespace {

/// One operand's tiles: how TMA lands them and how wgmma reads them.
struct OperandTiles {
  bool kMajor = true;
  int64_t rows = 0;        ///< M or N extent of the block's tile
  int64_t tileBytes = 0;   ///< per stage
  int64_t boxBytes = 0;    ///< one TMA box
  int64_t swizzle = 0;     ///< bytes: 128, 64 or 32
  int64_t lbo = 16, sbo = 0;
  int64_t kStepBytes = 0;  ///< descriptor start advance per k step
  ::nova::TensorMapDesc map;
};

/// The descriptor's swizzle field (bits 62-63): 1 = 128B, 2 = 64B, 3 = 32B.
int64_t swizzleMode(int64_t bytes) { return bytes == 128 ? 1 : bytes == 64 ? 2 : bytes == 32 ? 3 : 0; }

/// The descriptor bits that do not depend on the start address.
uint64_t descriptorHigh(int64_t lbo, int64_t sbo, int64_t swizzle) {
  return (uint64_t((lbo >> 4) & 0x3FFF) << 16) | (uint64_t((sbo >> 4) & 0x3FFF) << 32) |
         (uint64_t(swizzleMode(swizzle)) << 62);
}

nvgpu::TensorMapSwizzleKind tmaSwizzle(int64_t bytes) {
  switch (bytes) {
  case 128:
    return nvgpu::TensorMapSwizzleKind::SWIZZLE_128B;
  case 64:
    return nvgpu::TensorMapSwizzleKind::SWIZZLE_64B;
  case 32:
    return nvgpu::TensorMapSwizzleKind::SWIZZLE_32B;
  default:
    return nvgpu::TensorMapSwizzleKind::SWIZZLE_NONE;
  }
}

NVVM::WGMMATypes wgmmaType(GpuOperand op) {
  return op == GpuOperand::f16 ? NVVM::WGMMATypes::f16 : op == GpuOperand::bf16 ? NVVM::WGMMATypes::bf16
                                                                                : NVVM::WGMMATypes::tf32;
}

} // namespace

FailureOr<WgmmaMatmulKernel> mlir::nova::buildWgmmaMatmulKernel(gpu::GPUModuleOp module, StringRef name,
                                                                const GpuMatmulProblem &p, const GpuMatmulConfig &cfg,
                                                                std::string &error, const WgmmaMatmulFaults &faults,
                                                                const MmaEpilogue &epilogue, bool linearGrid) {
  auto fail = [&](const std::string &why) -> FailureOr<WgmmaMatmulKernel> {
    error = llvm::formatv("the wgmma matmul kernel {0} ({1} x {2} x {3}, batch {4}, {5}{6}, {7}, {8}): {9}", name,
                          p.m, p.n, p.k, p.batch, p.lhsTransposed ? "T" : "N", p.rhsTransposed ? "T" : "N",
                          nameOf(p.operand), cfg.describe(), why)
                .str();
    return failure();
  };
  const bool sixteen = p.operand == GpuOperand::f16 || p.operand == GpuOperand::bf16;
  const bool x3 = p.operand == GpuOperand::tf32x3;
  if (cfg.kind != GpuMmaKind::wgmma || !(sixteen || p.operand == GpuOperand::tf32 || x3))
    return fail("not a wgmma configuration of f16, bf16, tf32 or 3xtf32 operands");
  if (cfg.splitK < 1 || (cfg.splitK > 1 && (p.batch > 1 || epilogue.any())))
    return fail("split-K takes one product with no epilogue (its partial products are summed afterwards)");
  const int64_t WG = cfg.warpsM, BM = cfg.blockM, BN = cfg.blockN, BK = cfg.blockK, S = cfg.stages;
  const int64_t es = operandBytes(p.operand), mmaK = sixteen ? 16 : 8;
  // Ping-pong: two consumer warpgroups, each its own 64-row tiles in turn.
  const bool pingPong = cfg.pingPong;
  if (pingPong && (WG != 2 || cfg.persistentBlocks < 1))
    return fail("a ping-pong block is persistent, its two consumer warpgroups taking its tiles in turn");
  if (WG < 1 || BM != 64 * (pingPong ? 1 : WG) || BN % 8 || BN < 8 || BN > 256 || S < 2 || p.batch < 1)
    return fail("a block is 64-row warpgroups, 8 to 256 columns, at least 2 stages");
  // The consumer warpgroups that read each slab (and release it).
  const int64_t readers = pingPong ? 1 : WG;
  // Clusters along M: each CTA loads 1/CM of the B tile, multicast.
  const int64_t CM = cfg.clusterM;
  const bool clustered = CM > 1;
  if (CM < 1 || (clustered && (CM != 2 || cfg.persistentBlocks < 1 || cfg.persistentBlocks % CM || cfg.splitK > 1)))
    return fail("a cluster is 2 CTAs of a persistent kernel (on whole clusters) without split-K");
  if (BK % mmaK)
    return fail("the K slab must be a multiple of the wgmma's K");
  if (cfg.threads != wgmmaBlockThreads(WG))
    return fail(llvm::formatv("a block of {0} consumer warpgroups and a producer is {1} threads, not {2}", WG,
                              wgmmaBlockThreads(WG), cfg.threads)
                    .str());
  // setmaxnreg: the producer's registers shared out to the consumers, within
  // the pool the block is launched with (an inc the pool cannot meet waits
  // forever).
  if (cfg.consumerRegisters > 0 &&
      (cfg.consumerRegisters % 8 || cfg.consumerRegisters < 24 || cfg.consumerRegisters > 256 ||
       128 * (WG * cfg.consumerRegisters + kWgmmaProducerRegisters) >
           launchedRegistersPerThread(cfg.threads) * cfg.threads))
    return fail(llvm::formatv("{0} registers a consumer thread by setmaxnreg: a multiple of 8 from 24 to 256, "
                              "within the {1} registers a thread the block of {2} is launched with beside a "
                              "producer of {3}",
                              cfg.consumerRegisters, launchedRegistersPerThread(cfg.threads), cfg.threads,
                              kWgmmaProducerRegisters)
                    .str());
  const bool aKMajor = !p.lhsTransposed, bKMajor = p.rhsTransposed;
  // Operands converted in shared memory before wgmma reads them.
  const bool tf32 = p.operand == GpuOperand::tf32;
  const auto [convA, convB] = wgmmaConvertedOperands(p);
  if (tf32 && (cfg.convertA != convA || cfg.convertB != convB))
    return fail(llvm::formatv("a tf32 operand stored M/N-contiguous is converted in shared memory (A {0}, B {1}), "
                              "as the configuration must say",
                              convA ? "converted" : "read as stored", convB ? "converted" : "read as stored")
                    .str());
  if ((p.lhsTransposed ? p.m : p.k) * es % 16 || (p.rhsTransposed ? p.k : p.n) * es % 16)
    return fail(llvm::formatv("each operand's rows ({0} elements of the lhs, {1} of the rhs) must be whole 16-byte "
                              "chunks (TMA's global strides)",
                              p.lhsTransposed ? p.m : p.k, p.rhsTransposed ? p.k : p.n)
                    .str());
  const bool batched = p.batch > 1;
  // The maps' elements: 16-bit floats, or f32 (tf32 and 3xtf32 read f32).
  const ::nova::MapElement mapElement = p.operand == GpuOperand::f16    ? ::nova::MapElement::f16
                                        : p.operand == GpuOperand::bf16 ? ::nova::MapElement::bf16
                                                                        : ::nova::MapElement::f32;
  // Each operand's tiles and its tensor map (the operand as stored).
  // (`parts`: the CTAs that each load a part of the tile: K-major, one box
  // of rows / parts rows each.)
  auto tilesOf = [&](int operand, bool kMajor, int64_t rows, int64_t mnExtent,
                     int64_t parts = 1) -> FailureOr<OperandTiles> {
    OperandTiles t;
    t.kMajor = kMajor;
    t.rows = rows;
    t.tileBytes = rows * BK * es;
    t.map.arg = uint32_t(operand);
    t.map.element = mapElement;
    const int64_t contiguous = kMajor ? p.k : mnExtent, outer = kMajor ? mnExtent : p.k;
    t.map.dims = {uint64_t(contiguous), uint64_t(outer)};
    t.map.strides = {uint64_t(contiguous * es)};
    if (batched) {
      t.map.dims.push_back(uint64_t(p.batch));
      t.map.strides.push_back(uint64_t(contiguous * outer * es));
    }
    if (kMajor) {
      // 128-byte rows: MLIR 19's verifier takes a swizzled TMA box only
      // with 128-byte rows (the hardware also has 64- and 32-byte ones).
      t.swizzle = BK * es;
      if (t.swizzle != 128)
        return failure();
      t.sbo = 8 * t.swizzle;
      t.kStepBytes = mmaK * es;
      if (!wgmmaTileSplits(true, rows, es, parts))
        return failure();
      t.map.box = {uint64_t(BK), uint64_t(rows / parts)};
      t.boxBytes = t.tileBytes / parts;
    } else {
      // Boxes of 128-byte rows: 64 16-bit columns, or (3xtf32, converted
      // before wgmma reads them) 32 f32 ones.
      const int64_t boxColumns = 128 / es;
      if (!wgmmaTileSplits(false, rows, es, parts) || BK % 8)
        return failure();
      t.swizzle = 128;
      t.sbo = 1024;
      t.lbo = BK * 128;
      t.kStepBytes = (mmaK / 8) * 1024;
      t.map.box = {uint64_t(boxColumns), uint64_t(BK)};
      t.boxBytes = BK * 128;
    }
    if (batched)
      t.map.box.push_back(1);
    t.map.swizzle_bytes = uint32_t(t.swizzle);
    return t;
  };
  FailureOr<OperandTiles> tA = tilesOf(0, aKMajor, BM, p.m), tB = tilesOf(1, bKMajor, BN, p.n, CM);
  if (failed(tA) || failed(tB))
    return fail("a K slab must be 128 bytes of K (64 16-bit or 32 tf32 elements), an MN-major tile whole "
                "64-column boxes (in a cluster, B's tile whole boxes a CTA)");
  const int64_t stageBytes = tA->tileBytes + tB->tileBytes;
  // Converted tiles after the stages: two sets, each of `halves` (tf32x3:
  // big, small; tf32: one), each the converted operands' K-major tiles, A's
  // (BM rows) then B's (BN rows).
  const int64_t halves = x3 ? 2 : 1;
  const int64_t convA0 = 0, convB0 = convA ? BM * BK * 4 : 0;
  const int64_t convBytes = ((convA ? BM : 0) + (convB ? BN : 0)) * BK * 4;
  // (Clusters: the stages' `empty` mbarriers after the tiles, 8 bytes each.)
  const int64_t emptyOffset = S * stageBytes + 2 * halves * convBytes;
  if (emptyOffset + (clustered ? 8 * S : 0) + 1023 > gpuMatmulSmemBytes(cfg, p.operand))
    return fail("the stages do not fit the shared memory the configuration asks for");
  // The converted tiles as wgmma reads them: K-major, 128-byte rows.
  OperandTiles convTilesA, convTilesB;
  for (OperandTiles *t : {&convTilesA, &convTilesB}) {
    t->swizzle = 128;
    t->sbo = 8 * 128;
    t->kStepBytes = mmaK * 4;
  }
  const int64_t KT = (p.k + BK - 1) / BK;
  if (faults.probeShared &&
      (cfg.persistentBlocks > 0 || clustered || cfg.splitK > 1 || cfg.convertA || cfg.convertB ||
       p.operand == GpuOperand::tf32x3 || epilogue.any() || KT < S))
    return fail("the probe takes a block a tile, no cluster, split-K, conversion or epilogue, and at least stages "
                "slabs");

  MLIRContext *ctx = module.getContext();
  ctx->loadDialect<arith::ArithDialect, math::MathDialect, memref::MemRefDialect, scf::SCFDialect,
                   vector::VectorDialect, nvgpu::NVGPUDialect, NVVM::NVVMDialect, LLVM::LLVMDialect>();
  ImplicitLocOpBuilder b(module.getLoc(), ctx);
  IndexMath k(b);
  Type et = operandElementType(p.operand, ctx), f32 = b.getF32Type(), i64 = b.getI64Type();
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  const bool persistent = cfg.persistentBlocks > 0;
  // (A cluster's tiles are CM row tiles, one a CTA.)
  MatmulKernelFrame frame = beginMatmulKernel(b, module, name, p, ptr, ptr, CM * BM, BN, wgmmaBlockThreads(WG),
                                              epilogue, linearGrid, cfg.splitK, cfg.persistentBlocks);
  gpu::GPUFuncOp func = frame.func;
  Value ctaRank;
  if (clustered) {
    func->setAttr(kClusterDimsAttr, b.getDenseI32ArrayAttr({int32_t(CM), 1, 1}));
    ctaRank = b.create<arith::IndexCastOp>(b.getIndexType(), b.create<NVVM::ClusterId>(b.getI32Type()));
  }
  // setmaxnreg needs the registers a thread has at entry to be known:
  // ptxas takes .maxntid with .minnctapersm 1 (CUDA's __launch_bounds__(384,
  // 1)) as all a thread may have, 168 at 384 threads; from .maxntid alone it
  // chose the count itself in a split-K kernel (106) and ignored setmaxnreg
  // (info C7508), where an inc it honoured would have waited forever.
  if (cfg.consumerRegisters > 0)
    func->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(), b.getI32IntegerAttr(1));
  Value tid = frame.thread;
  // Each role runs `perTile` on its block's tiles: the block's own, or
  // (persistent) tiles blockIdx.x, + persistentBlocks, ... < all, with
  // `used`, the slabs the block's pipeline ran before the tile (null: none),
  // and the tile's ordinal among the block's (null: none); perTile returns
  // the count after it. The ring's stages and phases follow that running
  // count, so the producer runs on into the next tile's slabs while the
  // consumers finish the present one.
  const int64_t allTiles = frame.tilesN * frame.tilesM * frame.layers;
  // (Clusters: the cluster's tiles, clusters apart, each CTA its row tile
  // of them.)
  auto forEachTile = [&](const std::function<Value(const MatmulKernelFrame &, Value, Value)> &perTile) {
    if (!persistent) {
      perTile(frame, Value(), Value());
      return;
    }
    Value first = b.create<gpu::BlockIdOp>(gpu::Dimension::x);
    if (clustered)
      first = k.div(first, CM);
    auto tiles =
        b.create<scf::ForOp>(first, k.c(allTiles), k.c(cfg.persistentBlocks / CM), ValueRange{k.c(0)});
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(tiles.getBody());
    Value ordinal =
        pingPong ? k.div(b.create<arith::SubIOp>(tiles.getInductionVar(), first), cfg.persistentBlocks / CM) : Value();
    MatmulKernelFrame at = frame.atTile(k, tiles.getInductionVar());
    if (clustered)
      at.row0 = k.add(at.row0, k.mul(ctaRank, BM));
    b.create<scf::YieldOp>(perTile(at, tiles.getRegionIterArgs()[0], ordinal));
  };
  // The pipeline's use of slab kt of a tile that `used` slabs preceded.
  auto useOf = [&](Value used, Value kt) { return used ? k.add(used, kt) : kt; };

  // The tensor maps, typed as the boxes they land.
  auto wg = gpu::AddressSpaceAttr::get(ctx, gpu::AddressSpace::Workgroup);
  auto boxType = [&](const OperandTiles &t) {
    SmallVector<int64_t> shape;
    for (uint64_t d : llvm::reverse(t.map.box))
      shape.push_back(int64_t(d));
    return MemRefType::get(shape, et, MemRefLayoutAttrInterface(), wg);
  };
  auto mapOf = [&](Value arg, const OperandTiles &t) -> Value {
    auto type = nvgpu::TensorMapDescriptorType::get(
        ctx, boxType(t), tmaSwizzle(t.swizzle), nvgpu::TensorMapL2PromoKind::L2PROMO_NONE,
        nvgpu::TensorMapOOBKind::OOB_ZERO, nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE);
    return b.create<UnrealizedConversionCastOp>(type, arg).getResult(0);
  };
  Value mapA = mapOf(func.getArgument(0), *tA), mapB = mapOf(func.getArgument(1), *tB);
  Value leader = b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, tid, k.c(0));

  // Two mbarriers a stage. full[s]: the producer's arrive.expect_tx is its
  // one arrival, the TMA loads' bytes complete its phase; empty[s]: one
  // thread of each consumer warpgroup arrives once the warpgroup's wgmmas
  // reading the stage are done (wgmma.wait_group waits for the warpgroup's
  // whole operations; CUTLASS's consumer release does the same).
  // The inits are published to the async proxy (fence.mbarrier_init) and
  // to the block (the one block barrier).
  // In a cluster, `empty` counts the readers of every CTA of it, each
  // consumer warpgroup arriving in each CTA (releaseStage); its mbarriers
  // lie in dynamic shared memory after the tiles, where mapa reaches a
  // peer's (an nvgpu.mbarrier.group's address is out of reach).
  auto barsType = nvgpu::MBarrierGroupType::get(ctx, wg, unsigned(S));
  Value full = b.create<nvgpu::MBarrierCreateOp>(barsType);
  Value empty = clustered ? Value() : b.create<nvgpu::MBarrierCreateOp>(barsType);
  Type i32 = b.getI32Type();
  auto i32Of = [&](int64_t v) -> Value { return b.create<arith::ConstantIntOp>(v, 32); };
  // The tiles: the dynamic shared memory's base rounded up to 1024 bytes
  // (in a cluster before the inits, its `empty` mbarriers lying after them).
  Value dyn, tiles, pad;
  auto locateTiles = [&] {
    dyn = b.create<gpu::DynamicSharedMemoryOp>(
        MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(), wg));
    Value base = b.create<memref::ExtractAlignedPointerAsIndexOp>(dyn);
    tiles = b.create<arith::AndIOp>(k.add(base, 1023), k.c(-1024));
    pad = b.create<arith::SubIOp>(tiles, base);
  };
  if (clustered)
    locateTiles();
  // Stage `stage`'s `empty` in a cluster: its shared address (this CTA's
  // window, u32) and as the NVVM ops' pointer.
  auto emptyAddress = [&](Value stage) -> Value {
    return b.create<arith::IndexCastOp>(i32, k.add(k.add(tiles, emptyOffset), k.mul(stage, 8)));
  };
  auto sharedPointer = [&](Value address) -> Value {
    return b.create<LLVM::IntToPtrOp>(LLVM::LLVMPointerType::get(ctx, 3), address);
  };
  Value ctaRank32 = clustered ? b.create<arith::IndexCastOp>(i32, ctaRank).getResult() : Value();
  for (int64_t s = 0; s < S; ++s) {
    b.create<nvgpu::MBarrierInitOp>(full, k.c(1), k.c(s), leader);
    if (clustered)
      b.create<NVVM::MBarrierInitSharedOp>(sharedPointer(emptyAddress(k.c(s))),
                                           i32Of((faults.releaseOnlyLocally ? 1 : CM) * readers), leader);
    else
      b.create<nvgpu::MBarrierInitOp>(empty, k.c(readers), k.c(s), leader);
  }
  // Converted operands: convDone[set] (every consumer thread arrives),
  // setFree[set] (each consumer warpgroup).
  Value convDone, setFree;
  if (convA || convB) {
    auto twoType = nvgpu::MBarrierGroupType::get(ctx, wg, 2u);
    convDone = b.create<nvgpu::MBarrierCreateOp>(twoType);
    setFree = b.create<nvgpu::MBarrierCreateOp>(twoType);
    for (int64_t c = 0; c < 2; ++c) {
      b.create<nvgpu::MBarrierInitOp>(convDone, k.c(128 * readers), k.c(c), leader);
      b.create<nvgpu::MBarrierInitOp>(setFree, k.c(readers), k.c(c), leader);
    }
  }
  // Ping-pong: turn[w] (one arrival, the other warpgroup's first thread,
  // once its tile's slabs are all in hand): warpgroup w's next tile waits
  // for it, so the two take the ring's slabs in order. Without it a
  // warpgroup could wait on a stage's `full` two phases ahead, which a
  // parity wait takes for the phase before (CUTLASS's ping-pong order
  // barrier).
  Value turn;
  if (pingPong) {
    turn = b.create<nvgpu::MBarrierCreateOp>(nvgpu::MBarrierGroupType::get(ctx, wg, 2u));
    for (int64_t w = 0; w < 2; ++w)
      b.create<nvgpu::MBarrierInitOp>(turn, k.c(1), k.c(w), leader);
  }
  b.create<NVVM::FenceMbarrierInitOp>();
  b.create<gpu::BarrierOp>();
  // A cluster's mbarriers are all initialized before any CTA reaches a
  // peer's.
  auto clusterBarrier = [&] {
    b.create<NVVM::ClusterArriveOp>(b.getUnitAttr());
    b.create<NVVM::ClusterWaitOp>(b.getUnitAttr());
  };
  if (clustered && !faults.noClusterSyncAfterInit)
    clusterBarrier();
  if (!clustered)
    locateTiles();

  // The phase parity of use u = kt / ring of a barrier in a ring of
  // `ring` (a stage's: its full phase u, then its empty phase u; a
  // converted set's likewise), `ahead` phases on.
  auto ringParity = [&](Value kt, int64_t ring, int64_t ahead) -> Value {
    return b.create<arith::CmpIOp>(arith::CmpIPredicate::ne, k.andi(k.add(k.div(kt, ring), ahead), 1), k.c(0));
  };
  auto useParity = [&](Value kt, int64_t ahead) { return ringParity(kt, S, ahead); };
  // A consumer warpgroup's release of ring stage `stage`: its `empty`, in
  // a cluster in each CTA of it (each one's producer writes into the
  // stage here).
  auto releaseStage = [&](Value stage) {
    if (!clustered) {
      b.create<nvgpu::MBarrierArriveOp>(nvgpu::MBarrierTokenType::get(ctx), empty, stage);
      return;
    }
    Value address = emptyAddress(stage);
    SmallVector<Value> ranks;
    if (faults.releaseOnlyLocally)
      ranks.push_back(ctaRank32);
    else
      for (int64_t r = 0; r < CM; ++r)
        ranks.push_back(i32Of(r));
    for (Value r : ranks)
      b.create<LLVM::InlineAsmOp>(TypeRange{}, ValueRange{address, r}, kRemoteArriveAsm, "r,r",
                                  /*has_side_effects=*/true, /*is_align_stack=*/false, LLVM::AsmDialectAttr(),
                                  ArrayAttr());
  };
  // One thread (where `who`) arrives on barrier `index` of `bars` (when
  // given) and releases ring stage `stage` (when given), in one branch.
  auto arriveWhere = [&](Value who, Value bars, Value index, Value stage = Value()) {
    auto arrive = b.create<scf::IfOp>(who, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(&arrive.getThenRegion().front());
    if (bars)
      b.create<nvgpu::MBarrierArriveOp>(nvgpu::MBarrierTokenType::get(ctx), bars, index);
    if (stage)
      releaseStage(stage);
  };

  // Warpgroups 0 .. WG - 1 consume (rows 64 w of the block), warpgroup WG
  // produces: one of its threads runs the TMA pipeline.
  Value warpgroup = k.div(tid, 128);
  auto roles = b.create<scf::IfOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, warpgroup, k.c(WG)),
                                   /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&roles.getThenRegion().front());
    // The producer warpgroup keeps few registers (its one thread's loop
    // issues the loads), the consumers take the rest (below).
    if (cfg.consumerRegisters > 0 && !faults.producerKeepsRegisters)
      b.create<NVVM::SetMaxRegisterOp>(int32_t(kWgmmaProducerRegisters), NVVM::SetMaxRegisterAction::decrease);
    auto issuer = b.create<scf::IfOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, tid, k.c(128 * WG)),
                                      /*withElseRegion=*/false);
    b.setInsertionPointToStart(&issuer.getThenRegion().front());
    forEachTile([&](const MatmulKernelFrame &f, Value used, Value) -> Value {
      // The tile's slabs: kt0 + [0, slabs) (all KT without split-K).
      auto [kt0, slabs] = f.slabRange(k, KT, cfg.splitK);
      // Use u of the ring into stage u % S once its consumers released
      // use u - S: count the bytes, then issue each box (coordinates
      // fastest first, as the map's dims).
      auto produce = b.create<scf::ForOp>(k.c(0), slabs, k.c(1));
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(produce.getBody());
      Value kt = produce.getInductionVar(), use = useOf(used, kt), stage = k.rem(use, S);
      if (!faults.noStageRelease) {
        auto reuse = b.create<scf::IfOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::uge, use, k.c(S)),
                                         /*withElseRegion=*/false);
        OpBuilder::InsertionGuard then(b);
        b.setInsertionPointToStart(&reuse.getThenRegion().front());
        if (clustered)
          b.create<NVVM::MBarrierTryWaitParitySharedOp>(sharedPointer(emptyAddress(stage)),
                                                        b.create<arith::ExtUIOp>(i32, useParity(use, 1)),
                                                        i32Of(10000000));
        else
          b.create<nvgpu::MBarrierTryWaitParityOp>(empty, useParity(use, 1), k.c(10000000), stage);
      }
      if (faults.probeShared) {
        // The probe: past the first fill, a plain arrival, no load.
        auto refill = b.create<scf::IfOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::uge, use, k.c(S)),
                                          /*withElseRegion=*/true);
        b.setInsertionPointToStart(&refill.getThenRegion().front());
        b.create<nvgpu::MBarrierArriveOp>(nvgpu::MBarrierTokenType::get(ctx), full, stage);
        b.setInsertionPointToStart(&refill.getElseRegion().front());
      }
      Value k0 = k.mul(k.add(kt0, kt), BK);
      b.create<nvgpu::MBarrierArriveExpectTxOp>(full, k.c(stageBytes), stage, Value());
      Value stageOffset = k.add(pad, k.mul(stage, stageBytes));
      // The tile's boxes (a K-major tile's rows / boxes rows each, an
      // MN-major one's 128-byte columns each); `multicast`: this CTA's
      // 1/CM of them, into every CTA of the cluster.
      auto load = [&](Value map, const OperandTiles &t, int64_t tileOffset, Value mn0, bool multicast) {
        const int64_t boxColumns = int64_t(t.map.box[0]);
        const int64_t boxes = t.kMajor ? t.tileBytes / t.boxBytes : t.rows / boxColumns;
        const int64_t mine = multicast ? boxes / CM : boxes, boxMN = t.kMajor ? t.rows / boxes : boxColumns;
        for (int64_t j = 0; j < mine; ++j) {
          // Box j of this CTA's (multicast: of its rank's share).
          Value box = multicast ? k.add(k.mul(ctaRank, mine), j) : k.c(j);
          Value dst = b.create<memref::ViewOp>(
              boxType(t), dyn, k.add(k.add(stageOffset, tileOffset), k.mul(box, t.boxBytes)), ValueRange{});
          Value mn = k.add(mn0, k.mul(box, boxMN));
          SmallVector<Value> coords;
          if (t.kMajor)
            coords = {k0, mn};
          else
            coords = {mn, k0};
          if (batched)
            coords.push_back(f.out.batch);
          Value mask = multicast ? b.create<arith::ConstantIntOp>((int64_t(1) << CM) - 1, 16).getResult() : Value();
          b.create<nvgpu::TmaAsyncLoadOp>(dst, full, map, coords, stage, mask, Value());
        }
      };
      load(mapA, *tA, 0, f.row0, false);
      load(mapB, *tB, tA->tileBytes, f.col0, clustered);
      b.setInsertionPointAfter(produce);
      return used ? k.add(used, slabs) : Value();
    });
  }
  b.setInsertionPointToStart(&roles.getElseRegion().front());
  // Every consumer warpgroup as a whole (.sync.aligned), before the
  // accumulators exist; it waits until the producer's registers are back
  // in the pool.
  if (cfg.consumerRegisters > 0)
    b.create<NVVM::SetMaxRegisterOp>(int32_t(cfg.consumerRegisters), NVVM::SetMaxRegisterAction::increase);

  // Descriptors of stage `stage`: start address (bits 0-13, 16-byte units)
  // over constant LBO / SBO / swizzle bits.
  auto descriptor = [&](Value address, const OperandTiles &t) -> Value {
    int64_t swizzle = faults.wrongDescriptorSwizzle ? t.swizzle / 2 : t.swizzle;
    Value a = b.create<arith::IndexCastOp>(i64, address);
    Value field = b.create<arith::ShRUIOp>(b.create<arith::AndIOp>(a, b.create<arith::ConstantIntOp>(0x3FFFF, 64)),
                                           b.create<arith::ConstantIntOp>(4, 64));
    return b.create<arith::OrIOp>(field,
                                  b.create<arith::ConstantIntOp>(int64_t(descriptorHigh(t.lbo, t.sbo, swizzle)), 64));
  };
  auto advance = [&](Value desc, int64_t bytes) -> Value {
    if (bytes == 0)
      return desc;
    return b.create<arith::AddIOp>(desc, b.create<arith::ConstantIntOp>(bytes >> 4, 64));
  };

  // Consumer warpgroup w: rows 64 w of the block; its A starts 64 w rows in
  // (ping-pong: its tile's rows, all of them).
  Value rowsOf = pingPong ? k.c(0) : warpgroup;
  const int64_t accs = BN / 2;
  auto accType = LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(size_t(accs), f32));
  Value zero = b.create<LLVM::ZeroOp>(accType);
  const int64_t aWarpgroupBytes = aKMajor ? 64 * tA->swizzle : tA->boxBytes;

  // One wgmma of k step kk into `acc`: A and B through descriptors
  // advanced by kk steps of their tiles.
  auto shape = NVVM::MMAShapeAttr::get(ctx, 64, int(BN), int(mmaK));
  auto wgmmaStep = [&](Value acc, Value descA, Value descB, int64_t kk, const OperandTiles &ta,
                       const OperandTiles &tb) -> Value {
    return b.create<NVVM::WgmmaMmaAsyncOp>(
        accType, acc, advance(descA, kk * ta.kStepBytes), advance(descB, kk * tb.kStepBytes), shape,
        wgmmaType(p.operand), wgmmaType(p.operand), NVVM::WGMMATypes::f32, NVVM::WGMMAScaleOut::one,
        NVVM::WGMMAScaleIn::one, NVVM::WGMMAScaleIn::one, ta.kMajor ? NVVM::MMALayout::row : NVVM::MMALayout::col,
        tb.kMajor ? NVVM::MMALayout::col : NVVM::MMALayout::row, NVVM::MMAIntOverflowAttr());
  };

  auto consumerTiles = [&](int64_t owner) {
    forEachTile([&](const MatmulKernelFrame &f, Value used, Value ordinal) -> Value {
      Value slabs = f.slabRange(k, KT, cfg.splitK).second; // (where they start is the producer's business)
      // Ping-pong: the tile is warpgroup (ordinal mod 2)'s (`owner` runs this
      // copy of the loop); the other counts its slabs and goes on to its own
      // next one.
      scf::IfOp mine;
      if (pingPong) {
        mine = b.create<scf::IfOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, k.rem(ordinal, 2), k.c(owner)),
                                   /*withElseRegion=*/false);
        b.setInsertionPointToStart(&mine.getThenRegion().front());
        // The other warpgroup's previous tile (ordinal - 1, its
        // ((ordinal - 1) / 2)th) has all its slabs: this one's come next.
        if (!faults.noPingPongOrder) {
          auto after = b.create<scf::IfOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::uge, ordinal, k.c(1)),
                                           /*withElseRegion=*/false);
          OpBuilder::InsertionGuard inner(b);
          b.setInsertionPointToStart(&after.getThenRegion().front());
          Value previous = k.div(b.create<arith::SubIOp>(ordinal, k.c(1)), 2);
          b.create<nvgpu::MBarrierTryWaitParityOp>(
              turn, b.create<arith::CmpIOp>(arith::CmpIPredicate::ne, k.andi(previous, 1), k.c(0)), k.c(10000000),
              k.c(owner));
        }
      }
      scf::ForOp loop;
      if (convA || convB) {
        // Converted tiles: two sets after the stages, each of `halves` (big,
        // small), each the converted operands' (A's BM rows, then B's BN
        // rows), K-major rows of 128 bytes.
        const int64_t convBase = S * stageBytes;
        const int64_t words = (convBase + 2 * halves * convBytes) / 4;
        Value flat = b.create<memref::ViewOp>(MemRefType::get({words}, f32, MemRefLayoutAttrInterface(), wg), dyn, pad,
                                              ValueRange{});
        // Byte offset (from the tiles' base) of element (mn, k) of a K-major
        // tile of 128-byte rows starting at `base`, and of an MN-major raw tile
        // (boxes of 32 columns, a row a k).
        // (TMA's and wgmma's 128-byte swizzle on an offset from a 1024-byte
        // boundary: TmaMap.h's swizzledAddress, in index ops.)
        auto swizzled128 = [&](Value logical) { return k.xori(logical, k.shl(k.andi(k.shr(logical, 7), 7), 4)); };
        auto kMajorAt = [&](int64_t base, Value mn, Value kIdx) {
          return k.add(swizzled128(k.add(k.mul(mn, 128), k.mul(kIdx, 4))), base);
        };
        auto mnMajorAt = [&](int64_t base, Value mn, Value kIdx, const OperandTiles &t) {
          Value inBox = swizzled128(k.add(k.mul(kIdx, 128), k.mul(k.rem(mn, 32), 4)));
          return k.add(k.add(inBox, k.mul(k.div(mn, 32), t.boxBytes)), base);
        };
        Value consumer = k.rem(tid, 128 * readers);
        const int64_t consumers = 128 * readers;
        loop = b.create<scf::ForOp>(k.c(0), slabs, k.c(1), ValueRange{zero});
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(loop.getBody());
        Value kt = loop.getInductionVar(), use = useOf(used, kt);
        Value stage = k.rem(use, S), set = k.rem(use, 2);
        if (!faults.noMbarrierWait)
          b.create<nvgpu::MBarrierTryWaitParityOp>(full, useParity(use, 0), k.c(10000000), stage);
        // The set's last readers (use u - 2's wgmmas, the set's use u / 2 - 1)
        // are done in every warpgroup.
        {
          auto reuse = b.create<scf::IfOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::uge, use, k.c(2)),
                                           /*withElseRegion=*/false);
          OpBuilder::InsertionGuard inner(b);
          b.setInsertionPointToStart(&reuse.getThenRegion().front());
          b.create<nvgpu::MBarrierTryWaitParityOp>(setFree, ringParity(use, 2, 1), k.c(10000000), set);
        }
        // Convert, an operand at a time, a 16-byte chunk (4 k of one row) a
        // thread: a K-major raw tile lies as its converted tiles do (the
        // swizzle permutes whole chunks), consecutive threads along k, one
        // 16-byte read; an MN-major one is read 4 elements (k rows) a chunk,
        // consecutive threads along the row's 32 columns, so each read is one
        // 128-byte row (no bank conflicts) and each 8-thread phase of the
        // 16-byte writes hits 8 distinct chunk positions.
        Value rawStage = k.mul(stage, stageBytes);
        Value bigSet = k.add(k.c(convBase), k.mul(set, halves * convBytes));
        Value smallSet = x3 ? k.add(bigSet, k.c(convBytes)) : Value();
        auto chunk = VectorType::get({4}, f32);
        auto convertOperand = [&](const OperandTiles &t, int64_t rawTile, int64_t convTile) {
          const int64_t units = t.rows * BK / 4;
          for (int64_t r = 0; r < (units + consumers - 1) / consumers; ++r) {
            Value u = k.add(consumer, r * consumers);
            auto body = [&] {
              Value mn = t.kMajor ? k.div(u, BK / 4) : k.rem(u, t.rows);
              Value k0 = k.mul(t.kMajor ? k.rem(u, BK / 4) : k.div(u, t.rows), 4);
              Value x;
              if (t.kMajor) {
                x = b.create<vector::LoadOp>(chunk, flat,
                                             ValueRange{k.div(k.add(rawStage, kMajorAt(rawTile, mn, k0)), 4)});
              } else {
                x = b.create<arith::ConstantOp>(chunk, DenseElementsAttr::get(chunk, b.getF32FloatAttr(0)));
                for (int64_t i = 0; i < 4; ++i) {
                  Value at = k.div(k.add(rawStage, mnMajorAt(rawTile, mn, k.add(k0, i), t)), 4);
                  x = b.create<vector::InsertOp>(b.create<memref::LoadOp>(flat, ValueRange{at}), x,
                                                 ArrayRef<int64_t>{i});
                }
              }
              Value dst = kMajorAt(convTile, mn, k0);
              if (!x3) { // tf32: transposed only (wgmma reads the f32 bits as tf32, as it reads a raw tile)
                b.create<vector::StoreOp>(x, flat, ValueRange{k.div(k.add(bigSet, dst), 4)});
                return;
              }
              Value big = x, small = x;
              for (int64_t i = 0; i < 4; ++i) {
                auto [hi, lo] = splitTf32(b, b.getLoc(), b.create<vector::ExtractOp>(x, ArrayRef<int64_t>{i}));
                big = b.create<vector::InsertOp>(hi, big, ArrayRef<int64_t>{i});
                small = b.create<vector::InsertOp>(lo, small, ArrayRef<int64_t>{i});
              }
              b.create<vector::StoreOp>(big, flat, ValueRange{k.div(k.add(bigSet, dst), 4)});
              b.create<vector::StoreOp>(small, flat, ValueRange{k.div(k.add(smallSet, dst), 4)});
            };
            if (units % consumers == 0) {
              body();
              continue;
            }
            auto inside = b.create<scf::IfOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, u, k.c(units)),
                                              /*withElseRegion=*/false);
            OpBuilder::InsertionGuard inner(b);
            b.setInsertionPointToStart(&inside.getThenRegion().front());
            body();
          }
        };
        if (convA)
          convertOperand(*tA, 0, convA0);
        if (convB)
          convertOperand(*tB, tA->tileBytes, convB0);
        // The stores reach the async proxy; every consumer's are in. With both
        // operands converted the raw stage is read: released to the producer
        // (by each warpgroup's first thread); else wgmma still reads an
        // operand there, and the stage goes with the set, below.
        if (!faults.noConversionFence)
          b.create<NVVM::FenceProxyOp>(NVVM::ProxyKind::async_shared,
                                       NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
        b.create<nvgpu::MBarrierArriveOp>(nvgpu::MBarrierTokenType::get(ctx), convDone, set);
        b.create<nvgpu::MBarrierTryWaitParityOp>(convDone, ringParity(use, 2, 0), k.c(10000000), set);
        Value firstThread = b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, k.rem(tid, 128), k.c(0));
        if (convA && convB)
          arriveWhere(firstThread, Value(), Value(), stage);
        // The wgmmas of a k step on the converted set (tf32x3: three, on the
        // halves), an operand read as stored from the raw stage.
        Value stageAddress = k.add(tiles, rawStage);
        auto descA = [&](Value setAddress) {
          return convA ? descriptor(k.add(setAddress, k.add(k.c(convA0), k.mul(rowsOf, 64 * 128))), convTilesA)
                       : descriptor(k.add(stageAddress, k.mul(rowsOf, aWarpgroupBytes)), *tA);
        };
        auto descB = [&](Value setAddress) {
          return convB ? descriptor(k.add(setAddress, k.c(convB0)), convTilesB)
                       : descriptor(k.add(stageAddress, tA->tileBytes), *tB);
        };
        const OperandTiles &readA = convA ? convTilesA : *tA, &readB = convB ? convTilesB : *tB;
        Value bigAddress = k.add(tiles, bigSet);
        Value aBig = descA(bigAddress), bBig = descB(bigAddress), aSmall, bSmall;
        if (x3) {
          Value smallAddress = k.add(tiles, smallSet);
          aSmall = descA(smallAddress);
          bSmall = descB(smallAddress);
        }
        if (!faults.noWgmmaFence)
          b.create<NVVM::WgmmaFenceAlignedOp>();
        Value acc = loop.getRegionIterArgs()[0];
        for (int64_t kk = 0; kk < BK / mmaK; ++kk) {
          if (x3)
            for (auto [da, db] : {std::pair{aSmall, bBig}, std::pair{aBig, bSmall}})
              acc = wgmmaStep(acc, da, db, kk, readA, readB);
          acc = wgmmaStep(acc, aBig, bBig, kk, readA, readB);
        }
        b.create<NVVM::WgmmaGroupSyncAlignedOp>();
        // Slab kt - 1's group is done in this warpgroup: its set (and, with
        // an operand read as stored, its stage) is free here.
        b.create<NVVM::WgmmaWaitGroupSyncOp>(faults.releaseBeforeWgmmaWait ? 2 : 1);
        Value frees =
            b.create<arith::AndIOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::uge, kt, k.c(1)), firstThread);
        Value previous = b.create<arith::SubIOp>(use, k.c(1));
        arriveWhere(frees, setFree, k.rem(previous, 2), !(convA && convB) ? k.rem(previous, S) : Value());
        b.create<scf::YieldOp>(acc);
      } else {
        loop = b.create<scf::ForOp>(k.c(0), slabs, k.c(1), ValueRange{zero});
        {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPointToStart(loop.getBody());
          Value kt = loop.getInductionVar(), use = useOf(used, kt);
          Value stage = k.rem(use, S);
          if (!faults.noMbarrierWait)
            b.create<nvgpu::MBarrierTryWaitParityOp>(full, useParity(use, 0), k.c(10000000), stage);
          Value stageAddress = k.add(tiles, k.mul(stage, stageBytes));
          Value descA = descriptor(k.add(stageAddress, k.mul(rowsOf, aWarpgroupBytes)), *tA);
          Value descB = descriptor(k.add(stageAddress, tA->tileBytes), *tB);
          if (!faults.noWgmmaFence)
            b.create<NVVM::WgmmaFenceAlignedOp>(); // the accumulators were written by other instructions
          Value acc = loop.getRegionIterArgs()[0];
          for (int64_t kk = 0; kk < BK / mmaK; ++kk)
            acc = wgmmaStep(acc, descA, descB, kk, *tA, *tB);
          b.create<NVVM::WgmmaGroupSyncAlignedOp>();
          // Slab kt - 1's group is done in this warpgroup: its first thread
          // releases the stage (the producer refills it once every consumer
          // warpgroup has).
          b.create<NVVM::WgmmaWaitGroupSyncOp>(faults.releaseBeforeWgmmaWait ? 2 : 1);
          Value releases =
              b.create<arith::AndIOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::uge, kt, k.c(1)),
                                      b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, k.rem(tid, 128), k.c(0)));
          arriveWhere(releases, Value(), Value(), k.rem(b.create<arith::SubIOp>(use, k.c(1)), S));
          b.create<scf::YieldOp>(acc);
        }
      }
      // Ping-pong: the tile's slabs are all in hand: the other warpgroup's
      // turn (its wgmmas beside this one's last and its epilogue).
      if (pingPong)
        arriveWhere(b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, k.rem(tid, 128), k.c(0)), turn, k.c(1 - owner));
      if (!faults.noFinalWgmmaWait)
        b.create<NVVM::WgmmaWaitGroupSyncOp>(0);
      // A persistent block's next tile reuses the ring: the tile's last slab
      // is released here, its wgmmas done (its stage, or tf32x3's converted
      // set; a block a tile ends instead).
      if (used && !faults.noTileEndRelease) {
        Value last = k.add(used, b.create<arith::SubIOp>(slabs, k.c(1)));
        Value releases =
            b.create<arith::AndIOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::uge, slabs, k.c(1)),
                                    b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, k.rem(tid, 128), k.c(0)));
        if (convA || convB)
          arriveWhere(releases, setFree, k.rem(last, 2), !(convA && convB) ? k.rem(last, S) : Value());
        else
          arriveWhere(releases, Value(), Value(), k.rem(last, S));
      }

      // Epilogue: thread (warp q of its warpgroup, lane g, t) holds the pairs
      // (d_i, d_i+1), i = 4 j + 2 h: row 16 q + g + 8 h, columns 8 j + 2 t, + 1.
      Value acc = loop.getResult(0);
      Value lane = k.rem(tid, 32), q = k.rem(k.div(tid, 32), 4);
      Value g = k.shr(lane, 2), t = k.andi(lane, 3);
      Value rowBase = k.add(k.add(f.row0, k.mul(rowsOf, 64)), k.add(k.mul(q, 16), g));
      Value colBase = k.add(f.col0, k.mul(t, 2));
      // Rows g and g + 8 at the same columns: the epilogue's column
      // inputs (a bias) loaded once for both (storePairs).
      for (int64_t j = 0; j < BN / 8; ++j) {
        SmallVector<Value, 2> pairs, rows;
        for (int64_t h = 0; h < 2; ++h) {
          const int64_t i = 4 * j + 2 * h;
          pairs.push_back(vectorOf(b, b.getLoc(),
                                   {b.create<LLVM::ExtractValueOp>(acc, ArrayRef<int64_t>{i}),
                                    b.create<LLVM::ExtractValueOp>(acc, ArrayRef<int64_t>{i + 1})}));
          rows.push_back(k.add(rowBase, 8 * h));
        }
        f.out.storePairs(k, pairs, rows, k.add(colBase, 8 * j));
      }
      if (pingPong)
        b.setInsertionPointAfter(mine);
      return used ? k.add(used, slabs) : Value();
    });
  };
  // Ping-pong: each warpgroup its own copy of the loop (an scf.if on the
  // warpgroup: on a GPU as in the emulator, where each then runs as a
  // context of its own, the two interleaving at their waits).
  if (pingPong) {
    auto split = b.create<scf::IfOp>(b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, warpgroup, k.c(0)),
                                     /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&split.getThenRegion().front());
    consumerTiles(0);
    b.setInsertionPointToStart(&split.getElseRegion().front());
    consumerTiles(1);
  } else {
    consumerTiles(-1);
  }
  b.setInsertionPointAfter(roles);
  // No CTA of a cluster exits while a peer may still arrive on its `empty`.
  if (clustered && !faults.noClusterSyncBeforeExit)
    clusterBarrier();
  b.create<gpu::ReturnOp>();
  return WgmmaMatmulKernel{func, {tA->map, tB->map}};
}
