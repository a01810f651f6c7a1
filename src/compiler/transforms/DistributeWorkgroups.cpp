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
// A `loops` kernel whose root is a loop nest (not a linalg op) is split along
// its split loop (kSplitLoopAttr, [0, N) step 1) the same way: workgroup wg
// runs the whole nest with that loop narrowed to
// [wg * tile, min(wg * tile + tile, N)).
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"


namespace mlir::nova {
#define GEN_PASS_DEF_NOVADISTRIBUTEWORKGROUPS
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

LogicalResult distributeSplitLoop(func::FuncOp kernel, Operation *root,
                                  nova::LoweringConfigAttr config) {
  scf::ForOp loop = nova::splitLoopOf(root);
  std::optional<int64_t> ub = loop ? getConstantIntValue(loop.getUpperBound()) : std::nullopt;
  if (!loop)
    return kernel.emitError("nova-distribute-workgroups: a `loops` kernel needs a linalg root op "
                            "or a split loop over [0, N) with step 1");
  if (config.getTile().size() != 1 || config.getTile()[0] < 1)
    return kernel.emitError("nova-distribute-workgroups: a split loop takes one tile size");
  int64_t tile = config.getTile()[0];
  if ((*ub + tile - 1) / tile != config.getWorkgroups())
    return kernel.emitError("nova-distribute-workgroups: tile gives ")
           << (*ub + tile - 1) / tile << " workgroups, the config says " << config.getWorkgroups();
  Location loc = kernel.getLoc();
  OpBuilder b = OpBuilder::atBlockBegin(&kernel.front());
  Value t = b.create<arith::ConstantIndexOp>(loc, tile);
  Value lo = b.create<arith::MulIOp>(loc, kernel.getArgument(0), t);
  Value hi = b.create<arith::MinUIOp>(loc, b.create<arith::AddIOp>(loc, lo, t),
                                      b.create<arith::ConstantIndexOp>(loc, *ub));
  loop.setLowerBound(lo);
  loop.setUpperBound(hi);
  return success();
}

LogicalResult distribute(func::FuncOp kernel, nova::LoweringConfigAttr config) {
  Operation *root = nova::kernelRoot(kernel);
  auto op = dyn_cast_or_null<linalg::LinalgOp>(root);
  if (!op && root)
    return distributeSplitLoop(kernel, root, config);
  if (!op)
    return kernel.emitError("nova-distribute-workgroups: a `loops` kernel needs a linalg root op");
  return nova::restrictToWorkgroupTile(op, config.getTile(), config.getWorkgroups());
}

} // namespace

namespace {

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
