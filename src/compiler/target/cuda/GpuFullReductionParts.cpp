//===- GpuFullReductionParts.cpp - reductions to a scalar, in parts -------===//

#include "compiler/target/cuda/GpuFullReductionParts.h"
#include "compiler/target/cuda/CudaTarget.h"
#include "compiler/target/cuda/GpuBlockReduction.h"
#include "compiler/target/cuda/GpuColumnReduction.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;
using namespace mlir::nova;

namespace {
/// Below this many points one block reads them in a few microseconds,
/// about what the second launch costs.
constexpr int64_t kFullSplitMinPoints = int64_t(1) << 16;
} // namespace

std::optional<int64_t> mlir::nova::fullReductionParts(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1 || op.getNumParallelLoops() != 0 ||
      op.getNumReductionLoops() == 0 || op.getNumDpsInputs() == 0 ||
      llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic) ||
      llvm::any_of(op.getBody()->getOperations(), [](Operation &inner) { return isa<linalg::IndexOp>(inner); }))
    return std::nullopt;
  Value out = op.getDpsInits()[0];
  auto outType = dyn_cast<MemRefType>(out.getType());
  if (!outType || !outType.getElementType().isF32() || !combinerOf(op, 0))
    return std::nullopt;
  Value root = bufferRoot(out);
  for (OpOperand *in : op.getDpsInputOperands()) {
    auto type = dyn_cast<MemRefType>(in->get().getType());
    if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity() || bufferRoot(in->get()) == root ||
        !op.getMatchingIndexingMap(in).isIdentity())
      return std::nullopt;
  }
  const int64_t points = reductionLoopsOf(op).reductionPoints;
  if (points < kFullSplitMinPoints)
    return std::nullopt;
  // About sqrt(points) parts, a power of two dividing them: a part a warp,
  // the parts' and the total's loops about as long.
  int64_t parts = 1;
  while (parts * parts < points && points % (parts * 2) == 0)
    parts *= 2;
  if (parts < 32 || points / parts < kWarpReductionMinPoints)
    return std::nullopt;
  return parts;
}

LogicalResult mlir::nova::splitFullReductions(ModuleOp top, ModuleOp kernels) {
  MLIRContext *ctx = top.getContext();
  for (auto [kernel, op, parts, outArgument] : kernelsToSplit(kernels, fullReductionParts)) {
    Location l = op.getLoc();
    auto outType = cast<MemRefType>(op.getDpsInits()[0].getType());
    const int64_t points = reductionLoopsOf(op).reductionPoints;
    // Loops (part: parallel, point of the part: a reduction); each input
    // viewed as [parts, points / parts], in loop order.
    OpBuilder b(op);
    AffineExpr part = getAffineDimExpr(0, ctx), point = getAffineDimExpr(1, ctx);
    SmallVector<Value> ins;
    SmallVector<AffineMap> maps;
    for (Value in : op.getDpsInputs()) {
      auto type = cast<MemRefType>(in.getType());
      Value view = in;
      if (type.getRank() > 1) {
        ReassociationIndices all;
        for (int64_t i = 0; i < type.getRank(); ++i)
          all.push_back(i);
        view = b.create<memref::CollapseShapeOp>(l, view, SmallVector<ReassociationIndices>{all});
      }
      view = b.create<memref::ExpandShapeOp>(l, SmallVector<int64_t>{parts, points / parts}, view,
                                             SmallVector<ReassociationIndices>{{0, 1}});
      ins.push_back(view);
      maps.push_back(AffineMap::get(2, 0, {part, point}, ctx));
    }
    auto partialType = MemRefType::get({parts}, outType.getElementType());
    maps.push_back(AffineMap::get(2, 0, {part}, ctx));
    if (failed(splitIntoParts(top, kernel, op, outArgument, ins, maps,
                              {utils::IteratorType::parallel, utils::IteratorType::reduction}, partialType)))
      return failure();
  }
  return success();
}
