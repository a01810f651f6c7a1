//===- GpuAttentionBackward.cpp - an attention backward in two kernels ---===//

#include "compiler/target/cuda/GpuAttentionBackward.h"
#include "compiler/target/cuda/GpuScalarKernels.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::nova;

LogicalResult mlir::nova::splitAttentionBackward(ModuleOp top, ModuleOp kernels) {
  MLIRContext *ctx = top.getContext();
  SmallVector<std::pair<func::FuncOp, AttentionKernelOp>> split;
  for (auto kernel : kernels.getOps<func::FuncOp>())
    if (auto op = dyn_cast_or_null<AttentionKernelOp>(soleComputeOp(kernel)))
      if (op.getBackward() && op.headDim() <= kAttentionRowsMaxHeadDim && !kernel->hasAttr(kAttentionPartAttr))
        split.emplace_back(kernel, op);
  for (auto [queries, op] : split) {
    MemRefType stats = attentionStatsType(op);
    addKernelArgument(queries, stats);
    OpBuilder kb(queries);
    kb.setInsertionPointAfter(queries);
    auto keys = cast<func::FuncOp>(kb.clone(*queries));
    keys.setSymName((queries.getSymName() + "_keys").str());
    queries->setAttr(kAttentionPartAttr, StringAttr::get(ctx, "queries"));
    keys->setAttr(kAttentionPartAttr, StringAttr::get(ctx, "keys"));
    auto keysRef = SymbolRefAttr::get(ctx, kKernelsModuleName, {FlatSymbolRefAttr::get(keys.getSymNameAttr())});
    for (LaunchOp launch : launchesOf(top, queries.getSymName())) {
      OpBuilder lb(launch);
      Value workspace = lb.create<memref::AllocOp>(launch.getLoc(), stats, lb.getI64IntegerAttr(64));
      SmallVector<Value> buffers(launch.getBuffers());
      buffers.push_back(workspace);
      launch.getBuffersMutable().assign(buffers);
      lb.setInsertionPointAfter(launch);
      lb.create<LaunchOp>(launch.getLoc(), keysRef, buffers);
    }
  }
  return success();
}
