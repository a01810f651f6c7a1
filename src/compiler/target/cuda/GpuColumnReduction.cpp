//===- GpuColumnReduction.cpp - reductions across rows on a GPU ----------===//

#include "compiler/target/cuda/GpuColumnReduction.h"
#include "compiler/target/cuda/CudaTarget.h"
#include "compiler/target/cuda/GpuBlockReduction.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <functional>

using namespace mlir;
using namespace mlir::nova;

namespace {

bool readsLinalgIndex(linalg::GenericOp op) {
  return llvm::any_of(op.getBody()->getOperations(), [](Operation &inner) { return isa<linalg::IndexOp>(inner); });
}

/// The positions among `map`'s results of the reduction loops `dims` (in
/// loop order): {first, count} where they stand side by side in that
/// order, {0, 0} where the map reads none of them, nullopt otherwise.
std::optional<std::pair<unsigned, unsigned>> reductionRun(AffineMap map, ArrayRef<unsigned> dims) {
  std::optional<unsigned> first;
  unsigned count = 0;
  for (auto [i, e] : llvm::enumerate(map.getResults())) {
    auto d = dyn_cast<AffineDimExpr>(e);
    bool reduction = d && llvm::is_contained(dims, d.getPosition());
    if (!reduction)
      continue;
    if (!first)
      first = unsigned(i);
    if (unsigned(i) != *first + count || d.getPosition() != dims[count])
      return std::nullopt;
    ++count;
  }
  if (!first)
    return std::make_pair(0u, 0u);
  if (count != dims.size())
    return std::nullopt;
  return std::make_pair(*first, count);
}

/// The kernel argument (numbered after the workgroup number) `view` is all
/// of, or nullopt.
std::optional<unsigned> wholeArgumentOf(func::FuncOp kernel, Value view) {
  auto arg = dyn_cast<BlockArgument>(view);
  if (!arg || arg.getOwner() != &kernel.getBody().front() || arg.getArgNumber() == 0)
    return std::nullopt;
  return arg.getArgNumber() - 1;
}

} // namespace

bool mlir::nova::foldsInRegisters(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumReductionLoops() == 0 || op.getNumParallelLoops() == 0 ||
      llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic) ||
      !llvm::all_of(op.getIndexingMapsArray(), readsThroughDimsAndConstants))
    return false;
  for (unsigned o = 0; o < op.getNumDpsInits(); ++o) {
    OpOperand *out = op.getDpsInitOperand(o);
    auto type = dyn_cast<MemRefType>(out->get().getType());
    if (!type || !isa<FloatType>(type.getElementType()) || !combinerOf(op, o) ||
        !indexedByParallelLoops(op, op.getMatchingIndexingMap(out)))
      return false;
    // Held in a register, the output must not be read as an input too.
    Value root = bufferRoot(out->get());
    if (llvm::any_of(op.getDpsInputs(), [&](Value in) { return bufferRoot(in) == root; }))
      return false;
  }
  return true;
}

LogicalResult mlir::nova::buildFoldingPoints(linalg::GenericOp op, int64_t count, int64_t perIteration, Value first,
                                             FloatAttr init) {
  OpBuilder b(op);
  Location l = op.getLoc();
  auto c = [&](int64_t v) -> Value { return b.create<arith::ConstantIndexOp>(l, v); };
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  const ReductionLoops loops = reductionLoopsOf(op);
  if (loops.points != count)
    return op.emitError("nova-gpu-map-threads: ") << loops.points << " parallel points, configured for " << count;
  const unsigned inputs = unsigned(op.getNumDpsInputs()), outputs = unsigned(op.getNumDpsInits());
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  Block &body = op.getRegion().front();
  const Folds folds = foldsOf(b, l, op);
  forEachThreadUnit(b, l, count, perIteration, first, [&](Value unit) {
    SmallVector<Value> ivs(ranges.size(), c(0));
    for (auto [d, v] : llvm::zip(loops.parallelDims, delinearizeIndex(b, l, unit, loops.parallelExtents)))
      ivs[d] = v;
    // The reduction loops nested in loop order, the partials carried.
    std::function<SmallVector<Value>(size_t, ValueRange)> fold = [&](size_t k, ValueRange partials) {
      if (k == loops.reductionDims.size()) {
        IRMapping map;
        for (unsigned i = 0; i < inputs; ++i)
          map.map(body.getArgument(i),
                  b.create<memref::LoadOp>(l, op.getDpsInputs()[i], indicesAt(b, l, maps[i], ivs)));
        for (unsigned o = 0; o < outputs; ++o)
          map.map(body.getArgument(inputs + o), partials[o]);
        return cloneBodyAt(b, body, map, ivs);
      }
      const unsigned dim = loops.reductionDims[k];
      scf::ForOp loop = buildFor(b, l, c(0), c(ranges[dim]), c(1), partials,
                                 [&](Value iv, ValueRange carried) {
                                   ivs[dim] = iv;
                                   return fold(k + 1, carried);
                                 });
      return SmallVector<Value>(loop.getResults());
    };
    SmallVector<Value> totals = fold(0, folds.identities);
    for (unsigned o = 0; o < outputs; ++o)
      storeFolded(b, l, op, o, folds.combiners[o], indicesAt(b, l, maps[inputs + o], ivs), totals[o], init);
  });
  op.erase();
  return success();
}

namespace {
/// Splitting below this many reduction points gains less than the second
/// launch costs (about 2 us).
constexpr int64_t kSplitMinRows = 512;
/// Above this many columns the columns alone fill the GPU's threads.
constexpr int64_t kSplitMaxColumns = 16384;
/// The partial kernel's points at most (about 8 waves of an H200's threads).
constexpr int64_t kSplitMaxPoints = int64_t(1) << 20;
} // namespace

std::optional<int64_t> mlir::nova::columnSplitParts(linalg::GenericOp op) {
  // A matmul is the matmul kernels' (its reduction runs along both inputs).
  if (op.getNumDpsInits() != 1 || isTaggedMatmul(op) || !foldsInRegisters(op) || isWarpReduction(op) ||
      readsLinalgIndex(op))
    return std::nullopt;
  const ReductionLoops loops = reductionLoopsOf(op);
  const int64_t rows = loops.reductionPoints, columns = loops.points;
  if (rows < kSplitMinRows || columns > kSplitMaxColumns)
    return std::nullopt;
  // The first input's innermost index a parallel loop: threads side by
  // side read side by side.
  AffineMap first = op.getIndexingMapsArray()[0];
  auto innermost = first.getNumResults() ? dyn_cast<AffineDimExpr>(first.getResults().back()) : nullptr;
  if (!innermost || op.getIteratorTypesArray()[innermost.getPosition()] != utils::IteratorType::parallel)
    return std::nullopt;
  for (OpOperand *in : op.getDpsInputOperands()) {
    auto type = dyn_cast<MemRefType>(in->get().getType());
    if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity() ||
        !reductionRun(op.getMatchingIndexingMap(in), loops.reductionDims))
      return std::nullopt;
  }
  // About sqrt(rows) parts, a power of two dividing the rows: the partial
  // kernel's and the total's loops about as long.
  int64_t parts = 1;
  while (parts * parts < rows && rows % (parts * 2) == 0 && columns * parts * 2 <= kSplitMaxPoints)
    parts *= 2;
  if (parts < 4)
    return std::nullopt;
  return parts;
}

func::FuncOp mlir::nova::buildPartsTotal(func::FuncOp kernel, MemRefType parts, MemRefType result,
                                         function_ref<Value(OpBuilder &, Location, Value, Value)> combine) {
  MLIRContext *ctx = kernel.getContext();
  Location l = kernel.getLoc();
  OpBuilder kb(kernel);
  kb.setInsertionPointAfter(kernel);
  auto total = kb.create<func::FuncOp>(l, (kernel.getSymName() + "_total").str(),
                                       kb.getFunctionType({kb.getIndexType(), parts, result}, {}));
  total->setAttr(kGpuPartsTotalAttr, kb.getUnitAttr());
  Block *entry = total.addEntryBlock();
  OpBuilder tb = OpBuilder::atBlockBegin(entry);
  const unsigned rank = unsigned(result.getRank());
  SmallVector<AffineExpr> resultDims, partDims{getAffineDimExpr(0, ctx)};
  for (unsigned i = 0; i < rank; ++i) {
    resultDims.push_back(getAffineDimExpr(i + 1, ctx));
    partDims.push_back(getAffineDimExpr(i + 1, ctx));
  }
  SmallVector<utils::IteratorType> iterators(rank + 1, utils::IteratorType::parallel);
  iterators[0] = utils::IteratorType::reduction;
  tb.create<linalg::GenericOp>(
      l, TypeRange{}, ValueRange{entry->getArgument(1)}, ValueRange{entry->getArgument(2)},
      SmallVector<AffineMap>{AffineMap::get(rank + 1, 0, partDims, ctx), AffineMap::get(rank + 1, 0, resultDims, ctx)},
      iterators, [&](OpBuilder &nb, Location nl, ValueRange args) {
        nb.create<linalg::YieldOp>(nl, combine(nb, nl, args[1], args[0]));
      });
  tb.create<func::ReturnOp>(l);
  return total;
}

void mlir::nova::launchInParts(ModuleOp top, func::FuncOp kernel, unsigned resultArgument, MemRefType parts,
                               func::FuncOp total, func::FuncOp first) {
  MLIRContext *ctx = top.getContext();
  auto launchOf = [&](OpBuilder &lb, Location l, func::FuncOp f, ValueRange buffers) {
    lb.create<LaunchOp>(l, SymbolRefAttr::get(ctx, kKernelsModuleName, {FlatSymbolRefAttr::get(f.getSymNameAttr())}),
                        buffers);
  };
  for (LaunchOp launch : launchesOf(top, kernel.getSymName())) {
    OpBuilder lb(launch);
    Location l = launch.getLoc();
    Value workspace = lb.create<memref::AllocOp>(l, parts, lb.getI64IntegerAttr(64));
    if (first)
      launchOf(lb, l, first, ValueRange{workspace});
    SmallVector<Value> buffers(launch.getBuffers());
    Value result = buffers[resultArgument];
    buffers.erase(buffers.begin() + resultArgument);
    buffers.push_back(workspace);
    launch.getBuffersMutable().assign(buffers);
    lb.setInsertionPointAfter(launch);
    launchOf(lb, l, total, ValueRange{workspace, result});
  }
}

LogicalResult mlir::nova::splitIntoParts(ModuleOp top, func::FuncOp kernel, linalg::GenericOp op,
                                         unsigned outArgument, ValueRange ins, ArrayRef<AffineMap> maps,
                                         ArrayRef<utils::IteratorType> iterators, MemRefType partials) {
  MLIRContext *ctx = top.getContext();
  Location l = op.getLoc();
  Value out = op.getDpsInits()[0];
  auto outType = cast<MemRefType>(out.getType());
  BlockArgument partialsArg = addKernelArgument(kernel, partials);
  OpBuilder b(op);
  auto partOp = b.create<linalg::GenericOp>(l, TypeRange{}, ins, ValueRange{partialsArg}, maps, iterators);
  IRMapping same;
  op.getRegion().cloneInto(&partOp.getRegion(), same);
  op.erase();
  // The partials' op's combiner (the original's went with it).
  Operation *combiner = combinerOf(partOp, 0);
  // The kernel's type: the output's argument gone (the partials' added).
  if (!out.use_empty())
    return kernel.emitError("nova-gpu-threads: the output of a reduction split into parts has other uses");
  Block &entry = kernel.getBody().front();
  entry.eraseArgument(outArgument + 1);
  kernel.setFunctionType(FunctionType::get(ctx, entry.getArgumentTypes(), {}));
  // The partials start from the combiner's identity.
  kernel->setAttr(kGpuOutputInitAttr, FloatAttr::get(outType.getElementType(), identityOf(combiner)));
  auto fold = [&](OpBuilder &nb, Location nl, Value v, Value p) { return combineLike(nb, nl, combiner, v, p); };
  func::FuncOp total = buildPartsTotal(kernel, partials, outType, fold);
  launchInParts(top, kernel, outArgument, partials, total);
  return success();
}

SmallVector<mlir::nova::PartsSplit>
mlir::nova::kernelsToSplit(ModuleOp kernels, function_ref<std::optional<int64_t>(linalg::GenericOp)> partsOf) {
  SmallVector<PartsSplit> split;
  for (auto kernel : kernels.getOps<func::FuncOp>()) {
    auto generic = dyn_cast_or_null<linalg::GenericOp>(soleComputeOp(kernel));
    std::optional<unsigned> out;
    if (!generic || generic.getNumDpsInits() != 1 || !(out = wholeArgumentOf(kernel, generic.getDpsInits()[0])))
      continue;
    if (std::optional<int64_t> parts = partsOf(generic))
      split.push_back({kernel, generic, *parts, *out});
  }
  return split;
}

LogicalResult mlir::nova::splitColumnReductions(ModuleOp top, ModuleOp kernels) {
  MLIRContext *ctx = top.getContext();
  for (auto [kernel, op, parts, outArgument] : kernelsToSplit(kernels, columnSplitParts)) {
    Location l = op.getLoc();
    Value out = op.getDpsInits()[0];
    auto outType = cast<MemRefType>(out.getType());
    AffineMap outMap = op.getIndexingMapsArray().back();
    const ReductionLoops reduction = reductionLoopsOf(op);
    const ArrayRef<unsigned> reductionDims = reduction.reductionDims;
    const int64_t rows = reduction.reductionPoints;
    // The parts' loops: the part (parallel), the op's parallel loops in
    // order, the rows of a part (a reduction).
    SmallVector<AffineExpr> dimOf(op.getNumLoops());
    unsigned next = 1;
    for (unsigned d : reduction.parallelDims)
      dimOf[d] = getAffineDimExpr(next++, ctx);
    const unsigned loops = next + 1;
    AffineExpr part = getAffineDimExpr(0, ctx), row = getAffineDimExpr(next, ctx);
    auto remap = [&](AffineExpr e) {
      auto d = dyn_cast<AffineDimExpr>(e);
      return d ? dimOf[d.getPosition()] : e;
    };
    // Each input as [..., parts, rows / parts, ...] where it held the rows.
    OpBuilder b(op);
    SmallVector<Value> ins;
    SmallVector<AffineMap> maps;
    for (OpOperand *in : op.getDpsInputOperands()) {
      AffineMap map = op.getMatchingIndexingMap(in);
      auto [first, count] = *reductionRun(map, reductionDims);
      Value view = in->get();
      SmallVector<AffineExpr> results;
      if (count == 0) {
        for (AffineExpr e : map.getResults())
          results.push_back(remap(e));
      } else {
        ArrayRef<int64_t> shape = cast<MemRefType>(view.getType()).getShape();
        SmallVector<ReassociationIndices> collapse, expand;
        SmallVector<int64_t> expanded;
        for (unsigned i = 0, n = unsigned(shape.size()); i < n; ++i) {
          if (i == first) {
            ReassociationIndices group;
            for (unsigned j = 0; j < count; ++j)
              group.push_back(int64_t(i + j));
            collapse.push_back(group);
            expand.push_back({int64_t(expanded.size()), int64_t(expanded.size()) + 1});
            expanded.append({parts, rows / parts});
            results.append({part, row});
            i += count - 1;
            continue;
          }
          collapse.push_back({int64_t(i)});
          expand.push_back({int64_t(expanded.size())});
          expanded.push_back(shape[i]);
          results.push_back(remap(map.getResult(i)));
        }
        if (count > 1)
          view = b.create<memref::CollapseShapeOp>(l, view, collapse);
        view = b.create<memref::ExpandShapeOp>(l, expanded, view, expand);
      }
      ins.push_back(view);
      maps.push_back(AffineMap::get(loops, 0, results, ctx));
    }
    // The partials: [parts, ...the output's shape].
    SmallVector<int64_t> partialShape{parts};
    llvm::append_range(partialShape, outType.getShape());
    auto partialType = MemRefType::get(partialShape, outType.getElementType());
    SmallVector<AffineExpr> partialResults{part};
    for (AffineExpr e : outMap.getResults())
      partialResults.push_back(remap(e));
    maps.push_back(AffineMap::get(loops, 0, partialResults, ctx));
    SmallVector<utils::IteratorType> partIterators(loops, utils::IteratorType::parallel);
    partIterators.back() = utils::IteratorType::reduction;
    if (failed(splitIntoParts(top, kernel, op, outArgument, ins, maps, partIterators, partialType)))
      return failure();
  }
  return success();
}
