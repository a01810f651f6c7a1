//===- GpuFullReductionParts.cpp - reductions to a scalar, in parts -------===//

#include "compiler/target/cuda/GpuFullReductionParts.h"
#include "compiler/target/cuda/CudaTarget.h"
#include "compiler/target/cuda/GpuBlockReduction.h"
#include "compiler/target/cuda/GpuColumnReduction.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::nova;

namespace {
/// Below this many points one block reads them in a few microseconds,
/// about what the second launch costs.
constexpr int64_t kFullSplitMinPoints = int64_t(1) << 16;

/// The kernel argument (numbered after the workgroup number) `view` is all
/// of, or nullopt.
std::optional<unsigned> wholeArgumentOf(func::FuncOp kernel, Value view) {
  auto arg = dyn_cast<BlockArgument>(view);
  if (!arg || arg.getOwner() != &kernel.getBody().front() || arg.getArgNumber() == 0)
    return std::nullopt;
  return arg.getArgNumber() - 1;
}
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
  int64_t points = 1;
  for (int64_t r : op.getStaticLoopRanges())
    points *= r;
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
  SmallVector<std::tuple<func::FuncOp, linalg::GenericOp, int64_t>> split;
  for (auto kernel : kernels.getOps<func::FuncOp>()) {
    auto generic = dyn_cast_or_null<linalg::GenericOp>(soleComputeOp(kernel));
    if (!generic || generic.getNumDpsInits() != 1 || !wholeArgumentOf(kernel, generic.getDpsInits()[0]))
      continue;
    if (std::optional<int64_t> parts = fullReductionParts(generic))
      split.emplace_back(kernel, generic, *parts);
  }
  for (auto [kernel, op, parts] : split) {
    Location l = op.getLoc();
    Value out = op.getDpsInits()[0];
    const unsigned outArgument = *wholeArgumentOf(kernel, out);
    auto outType = cast<MemRefType>(out.getType());
    int64_t points = 1;
    for (int64_t r : op.getStaticLoopRanges())
      points *= r;
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
    Block &entry = kernel.getBody().front();
    BlockArgument partials = entry.addArgument(partialType, l);
    maps.push_back(AffineMap::get(2, 0, {part}, ctx));
    auto partOp = b.create<linalg::GenericOp>(
        l, TypeRange{}, ins, ValueRange{partials}, maps,
        SmallVector<utils::IteratorType>{utils::IteratorType::parallel, utils::IteratorType::reduction});
    IRMapping same;
    op.getRegion().cloneInto(&partOp.getRegion(), same);
    op.erase();
    Operation *combiner = combinerOf(partOp, 0);
    if (!out.use_empty())
      return kernel.emitError("nova-gpu-threads: the output of a split full reduction has other uses");
    // The kernel's type: the output's argument gone, the partials' added;
    // the partials start from the combiner's identity.
    entry.eraseArgument(outArgument + 1);
    kernel.setFunctionType(FunctionType::get(ctx, entry.getArgumentTypes(), {}));
    kernel->setAttr(kGpuOutputInitAttr, FloatAttr::get(outType.getElementType(), identityOf(combiner)));
    forgetDescription(kernel);

    auto fold = [&](OpBuilder &nb, Location nl, Value v, Value p) { return combineLike(nb, nl, combiner, v, p); };
    func::FuncOp total = buildPartsTotal(kernel, partialType, outType, fold);
    launchInParts(top, kernel, outArgument, partialType, total);
  }
  return success();
}
