//===- CpuConfigurator.cpp - lowering decisions for CPU kernels --*- C++ -*-===//
//
// The rules, each from a machine fact:
//
// matmul   In the spirit of the BLIS analytical model (Low et al., "Analytical
//          Modeling Is Enough for High-Performance BLIS", TOMS 2016):
//          register tile MR x NR, NR = nv vectors: its MR nv accumulators
//          must cover the FMA pipes' latency (>= fma_units x fma_latency
//          independent FMAs in flight) and, with nv rhs vectors and one
//          broadcast, fit the vector registers; among those, the tile with
//          the most FMAs per load (MR nv / (MR + nv)), discounted for the
//          share of the result that falls outside whole tiles (edges ran as
//          scalar loops; now rows run a smaller tile and columns a masked
//          one, kEdgeCost not yet refitted to that), wins: 6 x 4 vectors with 32 registers (AVX-512),
//          4 x 3 or 6 x 2 with 16 (AVX2), depending on N.
//          The loops (VectorizeMatmul.cpp): per kc slab, the block's rhs is
//          packed into contiguous kc x NR micro-panels; each row tile's lhs
//          micro-panel (MR x kc, broadcast) stays in L1 while the packed
//          micro-panels stream past it from L2. So kc (cache_tile) puts the
//          lhs micro-panel in a quarter of L1 (a K that fits half of it takes
//          one slab: no partial sums stored), and a block's columns are
//          capped so its packed slab (kc x columns) fits a quarter of L2.
//          (Measured on a 48 KiB-L1 / 2 MiB-L2 core: a slab larger than L2
//          halves the speed; kc = 512 beats 96 by 8% with K = 2048.) A
//          transposed lhs, or one a fused producer computes, is packed
//          too, a few row tiles' kc x rows at a time just before those
//          tiles run (small beside the rhs slab, so it caps neither kc nor
//          the block's rows; each column block packs it again, so its
//          blocks take half of L2 for the rhs slab, fewer and wider).
//          Workgroups: one per core (each more packs again), split first
//          over batch, then between column panels
//          and row blocks where the repeated packing costs least (each row
//          block packs the rhs, each column block a transposed lhs); a
//          matmul under 2^20 flops is one workgroup.
// loops    a structured op of at least 2^15 points is split along its
//          outermost parallel loop into about 4 workgroups per core (one
//          per core when that loop is the innermost of a reduction: a
//          column sum streams wide stripes best);
//          smaller ops, and ops without a parallel loop (full reductions),
//          run as one.
// attention one workgroup per (batch, head) (each owns its head's dk, dv
//          in the backward: no two workgroups write one element). Its
//          register tile is R query rows x cv vectors of head columns: the
//          R cv accumulators of a row block's output (and of its score
//          tile, cv vectors of key columns) with cv rhs vectors and one
//          broadcast fit the vector registers, cv divides the head's
//          vectors, and among those the most FMAs per load
//          (R cv / (R + cv)) wins, R at most 8: 6 x 4 vectors for hd = 64
//          with 32 zmm registers, 6 x 2 with 16 ymm. The backward takes
//          query rows in blocks of Rc (cache_tile), a multiple of R: the
//          head's dk and dv rows stream through the cache once per block,
//          so Rc is as large as half of L1 holds its two Rc x T score
//          scratches (P, dS), at most 4 R (the keys past a block's
//          diagonal are computed as zeros; 4 R keeps that under R 3 / 2
//          keys a row). (Small GPT, 2-core AVX-512: Rc = 24 against 6:
//          backward kernel 3.29 -> 2.67 ms.) Where that is R alone (long
//          sequences), 4 R with the scratches in a quarter of L2: the
//          medium GPT's T = 256 on a 32 KiB L1, backward kernel
//          0.4861-0.5399x the time of an unfused 2048x512x2048 product in
//          the same run (8 runs, mean 0.509) against 0.5520-0.6458x with
//          Rc = 6 (5 runs, mean 0.599), 0.4870-0.6190x with 12 (5, 0.546).
// rows     a LayerNorm or cross-entropy (nova.layer_norm_kernel,
//          nova.cross_entropy_kernel) splits its rows into about
//          4 workgroups per core (its passes over a row are in L1); each
//          runs fma_units x fma_latency / 2 rows at once (4 here), so each
//          pass's reductions have that many independent chains.
//          A loop nest with a split loop (kSplitLoopAttr: a scatter-add's
//          columns) of at least 2^15 points in all is split along that
//          loop into one chunk per core, whole vectors each.
// serial   anything else is one workgroup.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cpu/CpuConfigurator.h"
#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/MatmulKernel.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

#include <algorithm>

using namespace mlir;

namespace {

constexpr int64_t kWorkgroupsPerCore = 4;
/// A matmul runs as one workgroup per core: each extra block packs its rhs
/// (and a transposed lhs) again, and those packing phases do not overlap
/// the FMAs. (bench/matmul_bench, consecutive runs, 2-core AVX-512: 1 per
/// core against 4 per core is 1.04-1.09x on row-major shapes but 0.97x on
/// 1024^3, and 1.16-1.31x with a transposed lhs.)
constexpr int64_t kMatmulWorkgroupsPerCore = 1;
constexpr int64_t kMinParallelPoints = int64_t{1} << 15;
constexpr int64_t kMinParallelFlops = int64_t{1} << 20;
/// The packed rhs slab is on the stack of the thread that runs the workgroup.
constexpr int64_t kMaxPackedBytes = int64_t{1} << 20;
/// An edge element costs about this many times a register-tile element
/// (scalar loop versus vector FMAs): the penalty in the tile choice. (Set
/// when the column edge ran as generic loops; it now runs as a masked tile,
/// 1000x300x256 at 172.5-174.3 GFLOP/s against 1008x320x256's 181.7. With
/// 2 instead, the wider 6 x 4 tile for N = 300 and N = 17, two
/// alternations on an AMD EPYC: 1000x300x256 164.8 / 175.8 -> 173.1 /
/// 176.2, 1001x17x33 110.9 / 110.6 -> 118.7 / 117.1: not changed on that.)
constexpr double kEdgeCost = 10.0;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// How much longer than an even spread `cores` take over the workgroups of
/// `groups` x (M in blocks of `mc`) x (N in blocks of `nc`), taken in that
/// row-major order each by the first free core (the runtime's pool), their
/// work their elements: 1 where every core gets the same. (A weight
/// gradient with 2048 columns in blocks of 384 makes 6 workgroups but
/// 1152 / 896 columns a core: 1.125.)
double makespanOverEven(int64_t groups, int64_t M, int64_t mc, int64_t N, int64_t nc, int64_t cores) {
  SmallVector<int64_t> load(std::max<int64_t>(cores, 1), 0);
  int64_t total = 0;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = 0; r < M; r += mc)
      for (int64_t c = 0; c < N; c += nc) {
        int64_t work = std::min(mc, M - r) * std::min(nc, N - c);
        *std::min_element(load.begin(), load.end()) += work;
        total += work;
      }
  int64_t most = *std::max_element(load.begin(), load.end());
  return total == 0 ? 1.0 : double(most) * double(load.size()) / double(total);
}

nova::LoweringConfigAttr serial(MLIRContext *ctx, size_t loops = 0) {
  SmallVector<int64_t> tile(loops, 0);
  return nova::LoweringConfigAttr::get(ctx, "serial", 1, tile, {}, {});
}

struct RegisterTile {
  int64_t mr = 0, vectors = 0; // NR = vectors x width
};

/// The register tile for an M x N result (see the file comment).
RegisterTile chooseRegisterTile(int64_t M, int64_t N, int64_t width, const nova::CpuFacts &f) {
  RegisterTile best;
  double bestScore = -1;
  int64_t inFlight = f.fmaUnits * f.fmaLatency;
  for (int64_t nv = 1; nv <= 4; ++nv) {
    for (int64_t mr = 1; mr <= 16; ++mr) {
      int64_t accumulators = mr * nv;
      if (accumulators + nv + 1 > f.vectorRegisters)
        continue;
      // Latency: fewer independent accumulators than FMAs in flight stall
      // the pipes in proportion.
      double pipes = std::min(1.0, double(accumulators) / double(inFlight));
      double perLoad = double(accumulators) / double(mr + nv);
      int64_t nr = nv * width;
      double whole = double(M - M % mr) * double(N - N % nr) / (double(M) * double(N));
      double efficiency = whole + (1.0 - whole) / kEdgeCost;
      double score = perLoad * pipes * efficiency;
      if (score > bestScore + 1e-12) {
        bestScore = score;
        best = {mr, nv};
      }
    }
  }
  return best;
}

/// What packing a matmul's lhs once costs against copying it: 1, or for a
/// lhs its fused producer computes while packed (GELU(h)), the producer's
/// ops before the multiply (GELU: 8).
double lhsPackWeight(const nova::MatmulOperands &m) {
  if (m.prologueInputs.empty())
    return 1.0;
  int64_t ops = int64_t(linalg::GenericOp(m.op).getRegion().front().getOperations().size());
  return double(std::max<int64_t>(1, ops - 2));
}

/// AMX tiles (bf16 products, f32 sums, accumulated in the result): the
/// tile unit multiplies many times faster than the FMAs, so the kernel is
/// bound by packing the operands to bf16 (Bf16Matmul.cpp); AVX512-BF16 dot
/// products (kind bf16_matmul, 8 x 32 register blocks) take the same
/// blocks, their products twice an FMA's and the packing the same. Per block and
/// slab of kc k's (a multiple of 32, at most 512) the rhs columns are
/// packed once (kc x nc bf16, in half of L2: nc from that), and each
/// 32-row strip's lhs rows once per block. So the blocks split the result
/// into as few parts as make one workgroup per core, in the direction
/// that packs least: a column split packs the lhs again (M x K per extra
/// block, its fused producer's ops each time), a row split the rhs (N x K).
nova::LoweringConfigAttr configureBf16Matmul(linalg::GenericOp op, const nova::MatmulOperands &m,
                                             const nova::CpuFacts &facts) {
  auto roundUp = [](int64_t v, int64_t q) { return ceilDiv(v, q) * q; };
  int64_t slabs = ceilDiv(m.K, 512);
  int64_t kc = roundUp(ceilDiv(m.K, slabs), 32);
  int64_t ncMax = std::max<int64_t>(32, facts.l2Bytes / 2 / (2 * kc) / 32 * 32);
  int64_t batch = m.batch();
  double flops = 2.0 * double(batch) * double(m.M) * double(m.N) * double(m.K);
  int64_t target = facts.cores <= 1 || flops < double(kMinParallelFlops) ? 1 : facts.cores;
  int64_t need = std::max<int64_t>(1, ceilDiv(target, batch));
  int64_t rowStrips = ceilDiv(m.M, 32), colStrips = ceilDiv(m.N, 32);
  int64_t minCols = ceilDiv(roundUp(m.N, 32), ncMax);
  int64_t bestRows = 1, bestCols = minCols;
  double bestCost = -1;
  bool bestBalanced = false;
  // Past the fewest blocks that fill the cores only to find a split that
  // loads them evenly (makespanOverEven, as for the vector kernel): 3 column
  // blocks that the slab's cap forces on 2 cores become 4.
  int64_t fill = std::max(minCols, std::min(colStrips, need));
  int64_t lastCols = std::max(fill, std::min(colStrips, 2 * std::max(minCols, need)));
  for (int64_t cols = minCols; cols <= lastCols; ++cols) {
    int64_t rows = std::min(rowStrips, std::max<int64_t>(1, ceilDiv(need, cols)));
    int64_t count = batch * rows * cols;
    bool balanced = count <= facts.cores || makespanOverEven(batch, m.M, roundUp(ceilDiv(m.M, rows), 32), m.N,
                                                             roundUp(ceilDiv(m.N, cols), 32), facts.cores) <= 1.05;
    if (cols > fill && !balanced)
      continue;
    double cost = double(m.M) * double(cols) * lhsPackWeight(m) + double(m.N) * double(rows);
    if (bestCost < 0 || (balanced && !bestBalanced) || (balanced == bestBalanced && cost < bestCost)) {
      bestCost = cost;
      bestBalanced = balanced;
      bestRows = rows;
      bestCols = cols;
    }
  }
  int64_t mc = roundUp(ceilDiv(m.M, bestRows), 32);
  int64_t nc = roundUp(ceilDiv(m.N, bestCols), 32);
  SmallVector<int64_t> tile(m.batchRank, 1);
  tile.push_back(mc);
  tile.push_back(nc);
  int64_t workgroups = batch * ceilDiv(m.M, mc) * ceilDiv(m.N, nc);
  if (facts.amxBf16Matmul)
    return nova::LoweringConfigAttr::get(op.getContext(), "amx_matmul", workgroups, tile,
                                         SmallVector<int64_t>{kc}, SmallVector<int64_t>{32, 32});
  return nova::LoweringConfigAttr::get(op.getContext(), "bf16_matmul", workgroups, tile,
                                       SmallVector<int64_t>{kc}, SmallVector<int64_t>{8, 32});
}

std::optional<nova::LoweringConfigAttr> configureMatmul(linalg::GenericOp op,
                                                        const nova::CpuFacts &facts) {
  std::optional<nova::MatmulOperands> m = nova::matchMatmul(op);
  if (!m || m->M == 0 || m->N == 0)
    return std::nullopt;
  // bf16 on AMX or by AVX512-BF16 dot products: float32 matmuls with at
  // least one whole 32 x 32 block. Its lhs packing reads rows with vector
  // loads (of a fused producer's inputs, where it has one): a row-major lhs
  // needs a unit-stride k (a transposed one has unit-stride m, matchMatmul).
  if ((facts.amxBf16Matmul || facts.dotBf16Matmul) && m->outType.getElementType().isF32() && m->M >= 32 &&
      m->N >= 32 &&
      m->K >= 1 && (m->transposeA || nova::hasUnitInnerStride(cast<MemRefType>(m->lhs.getType()))))
    return configureBf16Matmul(op, *m, facts);
  int64_t elemBytes = m->outType.getElementTypeBitWidth() / 8;
  int64_t width = facts.vectorBits / (8 * elemBytes);
  if (width < 2)
    return std::nullopt;
  RegisterTile reg = chooseRegisterTile(m->M, m->N, width, facts);
  int64_t mr = reg.mr, nr = reg.vectors * width;
  // kc: the lhs micro-panel (MR x kc, the broadcast operand) in a quarter of
  // L1 (the rest holds the rhs lines streaming past, the accumulators' lines
  // and the stack); a multiple of 8.
  int64_t kc = std::max<int64_t>(8, facts.l1dBytes / 4 / (mr * elemBytes) / 8 * 8);
  // A K that fits half of L1 so takes one slab: a product with an epilogue
  // and more than one slab stores its partial sums in a result buffer of
  // its own (read back by the last slab), which one slab drops (MatmulKernel.h
  // resultNeverStored). On a 32 KiB L1 (kc 336), the medium GPT's K = 512
  // products with a bias, residual or GELU-gradient epilogue kept a 16 MiB
  // buffer each, one of them at the step's peak: arena 316.8 -> 304.8 MiB,
  // the step 1.018 / 1.065 / 1.030x tokens/s (alternated, 2-core AMD EPYC);
  // plain products of K = 512 alike within noise (matmul_bench).
  if (m->K <= 2 * kc)
    kc = m->K;
  kc = std::min(kc, std::max<int64_t>(m->K, 1));
  int64_t batch = m->batch();
  double flops = 2.0 * double(batch) * double(m->M) * double(m->N) * double(m->K);
  int64_t target =
      facts.cores <= 1 || flops < double(kMinParallelFlops) ? 1 : facts.cores * kMatmulWorkgroupsPerCore;

  SmallVector<int64_t> tile;
  // Batch dims: one workgroup per batch element while there are fewer than
  // the target; all of them in one workgroup otherwise is never better.
  int64_t groups = 1;
  for (int64_t d = 0; d < m->batchRank; ++d) {
    tile.push_back(1);
    groups *= m->outType.getDimSize(d);
  }
  if (target == 1 && m->batchRank > 0) {
    // Small: everything in one workgroup.
    for (int64_t d = 0; d < m->batchRank; ++d)
      tile[d] = m->outType.getDimSize(d);
    groups = 1;
  }
  int64_t left = std::max<int64_t>(1, ceilDiv(target, groups));
  int64_t nTiles = std::max<int64_t>(1, ceilDiv(m->N, nr));
  int64_t mTiles = std::max<int64_t>(1, ceilDiv(m->M, mr));
  // Columns per block: its packed rhs slab (kc x columns) in a quarter of
  // L2 beside the lhs rows and result tiles streaming through it (half when
  // the lhs is packed: each column block packs it again), and at most
  // kMaxPackedBytes (it is on the
  // workgroup's stack). (bench/matmul_bench, two runs each, 2-core
  // AVX-512: a quarter against half is 1.01-1.06x on 1024^3 and 2048^3;
  // with a transposed lhs, half is 1.16-1.17x on 256x1024x2048, the extra
  // column block packing the lhs again.)
  int64_t slabBudget = std::min<int64_t>(facts.l2Bytes / (m->packsLhs() ? 2 : 4), kMaxPackedBytes);
  // A lhs computed while it is packed (a prologue: GELU(h), feeding the
  // MLP's down projection and its weight gradient) is computed again for
  // every column block: where all the columns' slab fits three quarters of
  // L2, they take one block. (The medium GPT's 2048x512x2048 products, kc
  // 296, on a 2-core AMD EPYC, 1 MiB L2: 2 column blocks of 256 to 1 of
  // 512; NOVA_PROFILE, 4 alternations, ms a launch: the down projection
  // 23.27 -> 21.59 mean, its weight gradient 23.16 -> 21.85.)
  if (!m->prologueInputs.empty() && kc * nTiles * nr * elemBytes <= facts.l2Bytes * 3 / 4)
    slabBudget = std::max(slabBudget, std::min<int64_t>(facts.l2Bytes * 3 / 4, kMaxPackedBytes));
  int64_t maxColTiles = std::max<int64_t>(1, slabBudget / (kc * nr * elemBytes));
  int64_t minChunks = ceilDiv(nTiles, maxColTiles);
  // Split the rest of the workgroups between columns and rows where packing
  // costs least: every row block packs the rhs again (N x K per block) and,
  // for a transposed lhs, every column block packs the lhs again (M x K).
  // And the cores evenly loaded where the split allows it: when the slab
  // cap forces more column blocks than the target (3 blocks of a
  // 1536-column weight gradient on 2 cores), the last round would run on
  // part of the cores (measured: 286 GFLOP/s against ~400 for balanced
  // shapes, bench/gpt_step medium); and a count that is a multiple of the
  // cores is not enough where the last block is short (6 blocks of 384
  // over 2048 columns: the medium GPT's first MLP weight gradient at 188
  // GFLOP/s beside 210 for its 2048x512x2048 twin, 1.125 of the even time).
  // A lhs computed while packed costs its ops again in each column block:
  // its packing weighs 1 + the body's ops before the multiply (GELU: 8).
  double lhsWeight = m->packsLhs() ? lhsPackWeight(*m) : 0.0;
  int64_t nChunks = minChunks;
  double bestCost = -1;
  bool bestBalanced = false;
  int64_t lastN = std::min(nTiles, 2 * std::max(minChunks, left));
  for (int64_t n = minChunks; n <= std::max(minChunks, lastN); ++n) {
    int64_t columnBlocks = ceilDiv(m->N, ceilDiv(nTiles, n) * nr);
    int64_t rowsChunks = std::min(mTiles, std::max<int64_t>(1, ceilDiv(left, columnBlocks)));
    int64_t rowTiles = ceilDiv(mTiles, rowsChunks);
    int64_t count = groups * columnBlocks * ceilDiv(mTiles, rowTiles);
    // Balanced: no core waits on another for more than 1/20 of its work
    // (or fewer workgroups than cores, the target's own choice).
    bool balanced = count <= facts.cores ||
                    makespanOverEven(groups, m->M, rowTiles * mr, m->N, ceilDiv(nTiles, n) * nr, facts.cores) <= 1.05;
    double cost = double(rowsChunks) * double(m->N) + double(n) * double(m->M) * lhsWeight;
    if (n > std::max(minChunks, std::min(nTiles, left)) && !balanced)
      continue; // past the old range only to find a balanced split
    if (bestCost < 0 || (balanced && !bestBalanced) || (balanced == bestBalanced && cost < bestCost)) {
      bestCost = cost;
      bestBalanced = balanced;
      nChunks = n;
    }
  }
  int64_t nc = ceilDiv(nTiles, nChunks) * nr;
  nChunks = ceilDiv(m->N, nc);
  left = std::max<int64_t>(1, ceilDiv(left, nChunks));
  int64_t mChunks = std::min(mTiles, left);
  int64_t mc = ceilDiv(mTiles, mChunks) * mr;
  mChunks = ceilDiv(m->M, mc);
  tile.push_back(std::min(mc, std::max<int64_t>(m->M, 1)));
  tile.push_back(std::min(nc, std::max<int64_t>(m->N, 1)));
  // Equal slabs: the same number of them, none a short remainder.
  int64_t slabs = ceilDiv(std::max<int64_t>(m->K, 1), kc);
  kc = std::min(kc, ceilDiv(ceilDiv(std::max<int64_t>(m->K, 1), slabs), 8) * 8);
  int64_t workgroups = groups * std::max<int64_t>(1, mChunks) * std::max<int64_t>(1, nChunks);
  SmallVector<int64_t> regTile{mr, nr}, cacheTile{kc};
  // A transposed lhs is packed a run of row tiles at a time (cache_tile[1]
  // rows, whole groups of lcm(MR, lanes)), just before those tiles run, each
  // lhs row's run of values read contiguously: the block's rows at once
  // where their slab fits L2 (the longest runs), else as many as fit a
  // quarter of L2. Measured (NOVA_PROFILE, each against the same product
  // unfused, means of 2-5 runs; matmul_bench, 2 runs), 2-core AMD EPYC,
  // 1 MiB L2: the small GPT's GELU-fed 1024x256x2048, a block of 516 rows
  // (625 KiB at kc 296), 1.160x at once, 1.219x by 192 rows; the medium's 2048x512x2048,
  // 2048 rows, 1.080x by 192 rows, 1.125x by 432, 1.135x by 864; batched
  // 600x256x900, 600 rows, 173.7-175.1 GFLOP/s by 192 rows, 181.5-189.1
  // at once. (One group alone, 48 rows: 1.246-1.312x; the block at once at
  // the kc its slab capped: 1.102-1.196x and 1.170-1.333x.)
  if (m->transposeA) {
    int64_t group = nova::transposedLhsGroupRows(mr, width);
    int64_t rows = ceilDiv(tile[tile.size() - 2], group) * group;
    int64_t bytes = kc * elemBytes;
    int64_t packRows = rows * bytes <= std::min(facts.l2Bytes, kMaxPackedBytes)
                           ? rows
                           : std::max<int64_t>(1, std::min(facts.l2Bytes / 4, kMaxPackedBytes) / bytes / group) * group;
    cacheTile.push_back(std::min(packRows, rows));
  }
  return nova::LoweringConfigAttr::get(op.getContext(), "matmul", workgroups, tile, cacheTile,
                                       regTile);
}

nova::LoweringConfigAttr configureLoops(linalg::LinalgOp op, const nova::CpuFacts &facts) {
  MLIRContext *ctx = op.getContext();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  SmallVector<int64_t> tile(ranges.size(), 0);
  int64_t points = 1;
  for (int64_t r : ranges) {
    if (ShapedType::isDynamic(r))
      return nova::LoweringConfigAttr::get(ctx, "loops", 1, tile, {}, {});
    points *= r;
  }
  if (facts.cores <= 1 || points < kMinParallelPoints)
    return nova::LoweringConfigAttr::get(ctx, "loops", 1, tile, {}, {});
  for (size_t d = 0; d < ranges.size(); ++d) {
    if (iterators[d] != utils::IteratorType::parallel || ranges[d] < 2)
      continue;
    // A reduction whose split loop is the innermost (a column sum: bias and
    // LayerNorm-weight gradients) streams its input a stripe of columns at
    // a time, every row a stride apart: one wide stripe per core streams
    // best (each row's stripe whole lines, the accumulators in registers).
    bool columnReduction = op.getNumReductionLoops() > 0 && d + 1 == ranges.size();
    int64_t perCore = columnReduction ? 1 : kWorkgroupsPerCore;
    int64_t groups = std::min(ranges[d], facts.cores * perCore);
    tile[d] = ceilDiv(ranges[d], groups);
    return nova::LoweringConfigAttr::get(ctx, "loops", ceilDiv(ranges[d], tile[d]), tile, {}, {});
  }
  return nova::LoweringConfigAttr::get(ctx, "loops", 1, tile, {}, {});
}

nova::LoweringConfigAttr configureAttention(nova::AttentionKernelOp op,
                                           const nova::CpuFacts &facts) {
  int64_t elemBits = cast<ShapedType>(op.getInit().getType()).getElementTypeBitWidth();
  int64_t hd = op.headDim();
  int64_t width = nova::vectorLanesDividing(hd, elemBits, facts.vectorBits);
  int64_t headVectors = hd / width;
  int64_t bestRows = 1, bestVectors = 1;
  double bestRatio = 0.0;
  for (int64_t cv = 1; cv <= headVectors; ++cv) {
    if (headVectors % cv != 0)
      continue;
    int64_t rows = std::min<int64_t>({8, op.seq(), (facts.vectorRegisters - cv - 1) / cv});
    if (rows < 1)
      continue;
    double ratio = double(rows * cv) / double(rows + cv);
    if (ratio > bestRatio) {
      bestRatio = ratio;
      bestRows = rows;
      bestVectors = cv;
    }
  }
  int64_t paddedSeq = (op.seq() + width - 1) / width * width;
  int64_t scratchBytes = 2 * bestRows * paddedSeq * (elemBits / 8);
  int64_t blocks = std::clamp<int64_t>(facts.l1dBytes / 2 / std::max<int64_t>(1, scratchBytes), 1, 4);
  // Where half of L1 holds the scratches of one R-row block only (long
  // sequences), the dk / dv accumulation would load and store its register
  // tiles around R-long loops; 4 R rows with the scratches in L2 instead
  // (while they fit a quarter of it).
  if (blocks < 2)
    blocks = std::clamp<int64_t>(facts.l2Bytes / 4 / std::max<int64_t>(1, scratchBytes), 1, 4);
  blocks = std::min(blocks, ceilDiv(op.seq(), bestRows));
  SmallVector<int64_t> tile{1, 1}, cacheTile{bestRows * blocks},
      regTile{bestRows, bestVectors * width};
  return nova::LoweringConfigAttr::get(op.getContext(), "attention", op.batch() * op.getHeads(),
                                       tile, cacheTile, regTile);
}

/// A row kernel (LayerNorm, cross-entropy): its rows' vectors as
/// nova::rowVectorLanes says.
nova::LoweringConfigAttr configureRows(Operation *op, const nova::CpuFacts &facts) {
  auto [count, width] = nova::rowKernelShape(op);
  int64_t rows = std::max<int64_t>(1, count);
  int64_t groups = count * width < kMinParallelPoints || facts.cores <= 1
                       ? 1
                       : std::min(rows, facts.cores * kWorkgroupsPerCore);
  int64_t tile = ceilDiv(rows, groups);
  int64_t interleaved = std::clamp<int64_t>(facts.fmaUnits * facts.fmaLatency / 2, 1, tile);
  SmallVector<int64_t> tiles{tile},
      regTile{interleaved, nova::rowVectorLanes(op, facts.vectorBits)};
  return nova::LoweringConfigAttr::get(op->getContext(), "rows", ceilDiv(rows, tile), tiles, {}, regTile);
}

/// The split loop (nova::splitLoopOf) of a loop nest, if it has one, and
/// the points of the nest around and in it (its constant trip counts
/// multiplied).
std::optional<std::pair<scf::ForOp, int64_t>> splitLoop(Operation *root) {
  scf::ForOp found = nova::splitLoopOf(root);
  if (!found)
    return std::nullopt;
  auto constant = [](Value v) { return getConstantIntValue(v); };
  int64_t points = 1;
  for (Operation *op = found; op && op != root->getParentOp(); op = op->getParentOp())
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      auto lb = constant(loop.getLowerBound()), ub = constant(loop.getUpperBound()),
           step = constant(loop.getStep());
      if (lb && ub && step && *step > 0)
        points *= std::max<int64_t>(0, ceilDiv(*ub - *lb, *step));
    }
  return std::make_pair(found, points);
}

nova::LoweringConfigAttr configureSplitLoop(Operation *root, scf::ForOp loop, int64_t points,
                                            const nova::CpuFacts &facts) {
  MLIRContext *ctx = root->getContext();
  int64_t extent = *getConstantIntValue(loop.getUpperBound());
  if (facts.cores <= 1 || points < kMinParallelPoints || extent < 2)
    return serial(ctx);
  int64_t lanes = std::max<int64_t>(1, facts.vectorBits / 32);
  int64_t tile = ceilDiv(ceilDiv(extent, facts.cores), lanes) * lanes;
  SmallVector<int64_t> tiles{tile};
  return nova::LoweringConfigAttr::get(ctx, "loops", ceilDiv(extent, tile), tiles, {}, {});
}

} // namespace

nova::LoweringConfigAttr mlir::nova::configureCpuKernel(Operation *root, const CpuFacts &facts) {
  if (auto attention = dyn_cast<AttentionKernelOp>(root))
    return configureAttention(attention, facts);
  if (isa<LayerNormKernelOp, CrossEntropyKernelOp>(root))
    return configureRows(root, facts);
  if (auto generic = dyn_cast<linalg::GenericOp>(root))
    if (auto config = configureMatmul(generic, facts))
      return *config;
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(root))
    if (linalgOp.hasPureBufferSemantics())
      return configureLoops(linalgOp, facts);
  if (auto split = splitLoop(root))
    return configureSplitLoop(root, split->first, split->second, facts);
  return serial(root->getContext());
}
