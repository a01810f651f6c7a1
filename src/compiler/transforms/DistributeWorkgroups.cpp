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
