//===- DistributeWorkgroups.cpp - the nova-distribute-workgroups pass -===//
//
// A `loops` kernel with W > 1 workgroups: its root op is tiled with the
// config's `tile` (linalg's tiling: one scf.for per split loop, the op on
// subviews inside), and each tile loop, which would visit every tile, is
// narrowed to the single tile the workgroup number selects:
//
//   wg -> (c_0, ..., c_n-1), row-major over the tile counts ceil(extent/tile)
//   loop i: lb = c_i * tile_i, ub = min(lb + tile_i, extent_i), step tile_i
//
// so workgroup wg runs exactly one iteration of every tile loop (the last
// tile of a loop may be partial; linalg's tiling already clamps its size).
// Workgroups write disjoint parts of the output: only parallel loops are
// ever split (the configurator's rule, checked again here).
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVADISTRIBUTEWORKGROUPS
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

LogicalResult distribute(func::FuncOp kernel, nova::LoweringConfigAttr config) {
  auto op = dyn_cast_or_null<linalg::LinalgOp>(nova::kernelRoot(kernel));
  if (!op)
    return kernel.emitError("nova-distribute-workgroups: a `loops` kernel needs a linalg root op");
  ArrayRef<int64_t> tile = config.getTile();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (tile.size() != ranges.size())
    return kernel.emitError("nova-distribute-workgroups: tile has ")
           << tile.size() << " entries for " << ranges.size() << " loops";
  SmallVector<int64_t> counts, splitDims;
  int64_t product = 1;
  for (auto [d, t] : llvm::enumerate(tile)) {
    if (t == 0)
      continue;
    if (iterators[d] != utils::IteratorType::parallel || ShapedType::isDynamic(ranges[d]))
      return kernel.emitError("nova-distribute-workgroups: loop ")
             << d << " is not a static parallel loop and cannot be split";
    counts.push_back((ranges[d] + t - 1) / t);
    splitDims.push_back(static_cast<int64_t>(d));
    product *= counts.back();
  }
  if (product != config.getWorkgroups())
    return kernel.emitError("nova-distribute-workgroups: tile gives ")
           << product << " workgroups, the config says " << config.getWorkgroups();

  IRRewriter rewriter(kernel.getContext());
  rewriter.setInsertionPoint(op);
  linalg::LinalgTilingOptions options;
  options.setTileSizes(tile);
  options.setLoopType(linalg::LinalgTilingLoopType::Loops);
  FailureOr<linalg::TiledLinalgOp> tiled = linalg::tileLinalgOp(rewriter, op, options);
  if (failed(tiled) || tiled->loops.size() != splitDims.size())
    return kernel.emitError("nova-distribute-workgroups: tiling the root op failed");
  rewriter.eraseOp(op);

  // Workgroup coordinates, at the top of the kernel.
  Location loc = kernel.getLoc();
  OpBuilder b = OpBuilder::atBlockBegin(&kernel.front());
  Value rest = kernel.getArgument(0);
  SmallVector<Value> coords(counts.size());
  for (size_t i = counts.size(); i-- > 0;) {
    Value n = b.create<arith::ConstantIndexOp>(loc, counts[i]);
    coords[i] = i == 0 ? rest : b.create<arith::RemUIOp>(loc, rest, n).getResult();
    if (i > 0)
      rest = b.create<arith::DivUIOp>(loc, rest, n);
  }
  for (auto [i, loopOp] : llvm::enumerate(tiled->loops)) {
    auto loop = cast<scf::ForOp>(loopOp);
    int64_t d = splitDims[i];
    Value t = b.create<arith::ConstantIndexOp>(loc, tile[d]);
    Value extent = b.create<arith::ConstantIndexOp>(loc, ranges[d]);
    Value lb = b.create<arith::MulIOp>(loc, coords[i], t);
    Value ub = b.create<arith::MinUIOp>(loc, b.create<arith::AddIOp>(loc, lb, t), extent);
    loop.setLowerBound(lb);
    loop.setUpperBound(ub);
  }
  return success();
}

struct NovaDistributeWorkgroups
    : mlir::nova::impl::NovaDistributeWorkgroupsBase<NovaDistributeWorkgroups> {
  void runOnOperation() override {
    ModuleOp kernels = nova::kernelsModule(getOperation());
    if (!kernels)
      return;
    for (auto kernel : kernels.getOps<func::FuncOp>()) {
      nova::LoweringConfigAttr config = nova::loweringConfig(kernel);
      if (!config || !config.isLoops() || config.getWorkgroups() == 1)
        continue;
      if (failed(distribute(kernel, config)))
        return signalPassFailure();
    }
  }
};

} // namespace
