//===- CpuConfigurator.cpp - lowering decisions for CPU kernels --*- C++ -*-===//
//
// The rules, each from a machine fact:
//
// matmul   register tile MR x NR with NR = 2 vectors: 2 MR accumulators + 2
//          rhs vectors + 1 broadcast must fit the vector registers, and
//          2 MR >= FMA pipes x latency (8) keeps the pipes busy; MR = 6
//          satisfies both with 16 and with 32 registers (BLIS's 6x16 / 6x32
//          shapes). Workgroups: about 4 per core (the pool balances them
//          dynamically), split first over batch, then over column panels
//          (a K x nc panel of rhs is what one core reuses from its L2), then
//          over row blocks; a matmul under 2^20 flops is one workgroup.
// loops    a structured op of at least 2^15 points is split along its
//          outermost parallel loop into about 4 workgroups per core;
//          smaller ops, and ops without a parallel loop (full reductions),
//          run as one.
// serial   anything else (the loop nest of a scatter-add) is one workgroup.
//
// The cache-blocking model (kc/mc/nc from L1/L2/L3) and packing are the
// analytic configurator of the CPU-speed issue; this file is where they go.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cpu/CpuConfigurator.h"
#include "compiler/transforms/MatmulKernel.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

using namespace mlir;

namespace {

constexpr int64_t kWorkgroupsPerCore = 4;
constexpr int64_t kMinParallelPoints = int64_t{1} << 15;
constexpr int64_t kMinParallelFlops = int64_t{1} << 20;
constexpr int64_t kTileRows = 6;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

nova::LoweringConfigAttr serial(MLIRContext *ctx, size_t loops = 0) {
  SmallVector<int64_t> tile(loops, 0);
  return nova::LoweringConfigAttr::get(ctx, "serial", 1, tile, {});
}

std::optional<nova::LoweringConfigAttr> configureMatmul(linalg::GenericOp op,
                                                        const nova::CpuFacts &facts) {
  std::optional<nova::MatmulOperands> m = nova::matchMatmul(op);
  if (!m || m->M == 0 || m->N == 0)
    return std::nullopt;
  int64_t width = facts.vectorBits / m->outType.getElementTypeBitWidth();
  if (width < 2)
    return std::nullopt;
  int64_t mr = kTileRows, nr = 2 * width;
  int64_t batch = m->batch();
  double flops = 2.0 * double(batch) * double(m->M) * double(m->N) * double(m->K);
  int64_t target =
      facts.cores <= 1 || flops < double(kMinParallelFlops) ? 1 : facts.cores * kWorkgroupsPerCore;

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
  int64_t nChunks = std::min(nTiles, left);
  int64_t nc = ceilDiv(nTiles, nChunks) * nr;
  nChunks = ceilDiv(m->N, nc);
  left = std::max<int64_t>(1, ceilDiv(left, nChunks));
  int64_t mTiles = std::max<int64_t>(1, ceilDiv(m->M, mr));
  int64_t mChunks = std::min(mTiles, left);
  int64_t mc = ceilDiv(mTiles, mChunks) * mr;
  mChunks = ceilDiv(m->M, mc);
  tile.push_back(std::min(mc, std::max<int64_t>(m->M, 1)));
  tile.push_back(std::min(nc, std::max<int64_t>(m->N, 1)));
  int64_t workgroups = groups * std::max<int64_t>(1, mChunks) * std::max<int64_t>(1, nChunks);
  SmallVector<int64_t> reg{mr, nr};
  return nova::LoweringConfigAttr::get(op.getContext(), "matmul", workgroups, tile, reg);
}

nova::LoweringConfigAttr configureLoops(linalg::LinalgOp op, const nova::CpuFacts &facts) {
  MLIRContext *ctx = op.getContext();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  SmallVector<int64_t> tile(ranges.size(), 0);
  int64_t points = 1;
  for (int64_t r : ranges) {
    if (ShapedType::isDynamic(r))
      return nova::LoweringConfigAttr::get(ctx, "loops", 1, tile, {});
    points *= r;
  }
  if (facts.cores <= 1 || points < kMinParallelPoints)
    return nova::LoweringConfigAttr::get(ctx, "loops", 1, tile, {});
  for (size_t d = 0; d < ranges.size(); ++d) {
    if (iterators[d] != utils::IteratorType::parallel || ranges[d] < 2)
      continue;
    int64_t groups = std::min(ranges[d], facts.cores * kWorkgroupsPerCore);
    tile[d] = ceilDiv(ranges[d], groups);
    return nova::LoweringConfigAttr::get(ctx, "loops", ceilDiv(ranges[d], tile[d]), tile, {});
  }
  return nova::LoweringConfigAttr::get(ctx, "loops", 1, tile, {});
}

} // namespace

nova::LoweringConfigAttr mlir::nova::configureCpuKernel(Operation *root, const CpuFacts &facts) {
  if (auto generic = dyn_cast<linalg::GenericOp>(root))
    if (auto config = configureMatmul(generic, facts))
      return *config;
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(root))
    if (linalgOp.hasPureBufferSemantics())
      return configureLoops(linalgOp, facts);
  return serial(root->getContext());
}
