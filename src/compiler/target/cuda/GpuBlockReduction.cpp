//===- GpuBlockReduction.cpp - a reduction with no parallel loop on one block ===//

#include "compiler/target/cuda/GpuBlockReduction.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/SmallBitVector.h"

#include <limits>

using namespace mlir;

void mlir::nova::forEachThreadUnit(OpBuilder &b, Location l, int64_t count, int64_t perIteration, Value first,
                                   function_ref<void(Value)> body) {
  auto c = [&](int64_t v) { return b.create<arith::ConstantIndexOp>(l, v); };
  int64_t iterations = (count + perIteration - 1) / perIteration;
  auto guarded = [&](Value unit) {
    Value inside = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, unit, c(count));
    auto guard = b.create<scf::IfOp>(l, inside, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&guard.getThenRegion().front());
    body(unit);
  };
  if (iterations <= 1) {
    guarded(first);
    return;
  }
  buildFor(b, l, c(0), c(iterations), c(1), {}, [&](Value it, ValueRange) {
    guarded(b.create<arith::AddIOp>(l, b.create<arith::MulIOp>(l, it, c(perIteration)), first));
    return SmallVector<Value>{};
  });
}

Value mlir::nova::warpAllReduce(OpBuilder &b, Location l, Value value, function_ref<Value(Value, Value)> combine,
                                int64_t lanes) {
  Value width = b.create<arith::ConstantIntOp>(l, 32, 32);
  for (int64_t offset = lanes / 2; offset >= 1; offset /= 2) {
    Value off = b.create<arith::ConstantIntOp>(l, offset, 32);
    value = combine(value, b.create<gpu::ShuffleOp>(l, value, off, width, gpu::ShuffleMode::XOR).getShuffleResult());
  }
  return value;
}

Value mlir::nova::sfuExp2(OpBuilder &b, Location l, Value x) {
  return b.create<LLVM::CallIntrinsicOp>(l, b.getF32Type(), "llvm.nvvm.ex2.approx.ftz.f", ValueRange{x}).getResult(0);
}

scf::ForOp mlir::nova::buildMaskedFor(OpBuilder &b, Location l, Value lb, Value ub, ValueRange init,
                                      function_ref<Value(Value)> take,
                                      function_ref<SmallVector<Value>(Value, ValueRange)> step) {
  return buildFor(b, l, lb, ub, b.create<arith::ConstantIndexOp>(l, 1), init, [&](Value iv, ValueRange carried) {
    auto branch = b.create<scf::IfOp>(l, carried.getTypes(), take(iv), /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&branch.getThenRegion().front());
      b.create<scf::YieldOp>(l, step(iv, carried));
      b.setInsertionPointToStart(&branch.getElseRegion().front());
      b.create<scf::YieldOp>(l, carried);
    }
    return SmallVector<Value>(branch.getResults());
  });
}

SmallVector<Value> mlir::nova::indicesAt(OpBuilder &b, Location l, AffineMap map, ArrayRef<Value> loops) {
  SmallVector<Value> at;
  for (AffineExpr e : map.getResults())
    at.push_back(isa<AffineDimExpr>(e)
                     ? loops[cast<AffineDimExpr>(e).getPosition()]
                     : b.create<arith::ConstantIndexOp>(l, cast<AffineConstantExpr>(e).getValue()).getResult());
  return at;
}

SmallVector<Value> mlir::nova::cloneBodyAt(OpBuilder &b, Block &body, IRMapping &map, ArrayRef<Value> loops) {
  for (Operation &inside : body.without_terminator()) {
    if (auto index = dyn_cast<linalg::IndexOp>(inside)) {
      map.map(index.getResult(), loops[index.getDim()]);
      continue;
    }
    b.clone(inside, map);
  }
  SmallVector<Value> yielded;
  for (Value v : body.getTerminator()->getOperands())
    yielded.push_back(map.lookupOrDefault(v));
  return yielded;
}

Value mlir::nova::vectorOf(OpBuilder &b, Location l, ArrayRef<Value> elements) {
  auto type = VectorType::get({int64_t(elements.size())}, elements.front().getType());
  Value vector = b.create<arith::ConstantOp>(l, b.getZeroAttr(type));
  for (auto [i, element] : llvm::enumerate(elements))
    vector = b.create<vector::InsertOp>(l, element, vector, int64_t(i));
  return vector;
}

SmallVector<Value> mlir::nova::delinearizeIndex(OpBuilder &b, Location l, Value linear, ArrayRef<int64_t> shape) {
  SmallVector<Value> at(shape.size());
  for (int64_t i = int64_t(shape.size()) - 1; i > 0; --i) {
    Value extent = b.create<arith::ConstantIndexOp>(l, shape[size_t(i)]);
    at[size_t(i)] = b.create<arith::RemUIOp>(l, linear, extent);
    linear = b.create<arith::DivUIOp>(l, linear, extent);
  }
  if (!shape.empty())
    at[0] = linear;
  return at;
}

Operation *mlir::nova::combinerOf(linalg::GenericOp op, unsigned output) {
  Block &body = op.getRegion().front();
  BlockArgument out = body.getArgument(op.getNumDpsInputs() + output);
  Value yielded = body.getTerminator()->getOperand(output);
  Operation *combine = yielded.getDefiningOp();
  if (!combine || !out.hasOneUse() || combine->getNumOperands() != 2 ||
      !isa<arith::AddFOp, arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp, arith::MinNumFOp>(combine) ||
      (combine->getOperand(0) != out && combine->getOperand(1) != out))
    return nullptr;
  return combine;
}

Value mlir::nova::combineLike(OpBuilder &b, Location l, Operation *combine, Value x, Value y) {
  OperationState state(l, combine->getName().getStringRef(), ValueRange{x, y}, TypeRange{x.getType()},
                       combine->getAttrs());
  return b.create(state)->getResult(0);
}

double mlir::nova::identityOf(Operation *combine) {
  if (isa<arith::AddFOp>(combine))
    return 0.0;
  const double inf = std::numeric_limits<double>::infinity();
  return isa<arith::MaximumFOp, arith::MaxNumFOp>(combine) ? -inf : inf;
}

bool mlir::nova::readsThroughDimsAndConstants(AffineMap map) {
  return llvm::all_of(map.getResults(), [](AffineExpr e) { return isa<AffineDimExpr, AffineConstantExpr>(e); });
}

bool mlir::nova::indexedByParallelLoops(linalg::GenericOp op, AffineMap map) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  llvm::SmallBitVector seen(iterators.size());
  for (AffineExpr e : map.getResults()) {
    if (isa<AffineConstantExpr>(e))
      continue;
    auto d = dyn_cast<AffineDimExpr>(e);
    if (!d || iterators[d.getPosition()] != utils::IteratorType::parallel || seen.test(d.getPosition()))
      return false;
    seen.set(d.getPosition());
  }
  return seen.count() == op.getNumParallelLoops();
}

mlir::nova::ReductionLoops mlir::nova::reductionLoopsOf(linalg::GenericOp op) {
  ReductionLoops loops;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  for (auto [i, range] : llvm::enumerate(op.getStaticLoopRanges())) {
    const bool parallel = iterators[i] == utils::IteratorType::parallel;
    (parallel ? loops.parallelExtents : loops.reductionExtents).push_back(range);
    (parallel ? loops.parallelDims : loops.reductionDims).push_back(unsigned(i));
    (parallel ? loops.points : loops.reductionPoints) *= range;
  }
  return loops;
}

mlir::nova::Folds mlir::nova::foldsOf(OpBuilder &b, Location l, linalg::GenericOp op) {
  Folds folds;
  for (unsigned o = 0; o < op.getNumDpsInits(); ++o) {
    folds.combiners.push_back(combinerOf(op, o));
    Type element = cast<MemRefType>(op.getDpsInits()[o].getType()).getElementType();
    folds.identities.push_back(
        b.create<arith::ConstantOp>(l, b.getFloatAttr(element, identityOf(folds.combiners.back()))));
  }
  return folds;
}

void mlir::nova::storeFolded(OpBuilder &b, Location l, linalg::GenericOp op, unsigned output, Operation *combine,
                             ValueRange indices, Value total, FloatAttr init) {
  Value out = op.getDpsInits()[output];
  Value initial = init ? b.create<arith::ConstantOp>(l, init).getResult()
                       : b.create<memref::LoadOp>(l, out, indices).getResult();
  b.create<memref::StoreOp>(l, combineLike(b, l, combine, initial, total), out, indices);
}

bool mlir::nova::isBlockReduction(linalg::GenericOp op, int64_t threads, int64_t *sharedBytes) {
  if (!op.hasPureBufferSemantics() || op.getNumParallelLoops() != 0 || op.getNumLoops() == 0 ||
      llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic))
    return false;
  int64_t bytes = 0;
  for (auto [i, map] : llvm::enumerate(op.getIndexingMapsArray())) {
    if (!readsThroughDimsAndConstants(map))
      return false;
    if (int64_t(i) < op.getNumDpsInputs())
      continue;
    unsigned output = unsigned(i - op.getNumDpsInputs());
    auto type = dyn_cast<MemRefType>(op.getDpsInits()[output].getType());
    if (!type || !type.getElementType().isIntOrFloat())
      return false;
    if (map.getNumResults() == 0) { // a scalar, folded
      if (!combinerOf(op, output) || !isa<FloatType>(type.getElementType()))
        return false;
      bytes += threads * std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
    } else if (!map.isPermutation()) { // written once a point
      return false;
    }
  }
  if (bytes == 0) // nothing folded: not a reduction to a scalar
    return false;
  if (sharedBytes)
    *sharedBytes = bytes;
  return true;
}

LogicalResult mlir::nova::buildBlockReduction(linalg::GenericOp op, Value thread, int64_t threads, FloatAttr init) {
  OpBuilder b(op);
  Location l = op.getLoc();
  auto c = [&](int64_t v) { return b.create<arith::ConstantIndexOp>(l, v); };
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  int64_t points = 1;
  for (int64_t r : ranges)
    points *= r;
  const unsigned inputs = op.getNumDpsInputs();
  Block &body = op.getRegion().front();
  // One slot a thread for each folded scalar, in dynamic shared memory.
  auto wg = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Value dyn = b.create<gpu::DynamicSharedMemoryOp>(
      l, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(), wg));
  struct Folded {
    unsigned output;
    Operation *combine;
    Value slots;
  };
  SmallVector<Folded> folded;
  int64_t offset = 0;
  for (unsigned o = 0; o < op.getNumDpsInits(); ++o) {
    if (op.getIndexingMapsArray()[inputs + o].getNumResults() != 0)
      continue;
    Type element = cast<MemRefType>(op.getDpsInits()[o].getType()).getElementType();
    auto type = MemRefType::get({threads}, element, MemRefLayoutAttrInterface(), wg);
    Value slots = b.create<memref::ViewOp>(l, type, dyn, c(offset), ValueRange{});
    offset += threads * std::max<int64_t>(1, element.getIntOrFloatBitWidth() / 8);
    Operation *combine = combinerOf(op, o);
    folded.push_back({o, combine, slots});
  }
  // The folded output `output`'s place among them, or -1.
  auto foldedIndex = [&](unsigned output) -> int {
    for (auto [k, f] : llvm::enumerate(folded))
      if (f.output == output)
        return int(k);
    return -1;
  };
  // Each thread's points (point = it * threads + thread), its partials in
  // registers from the combiners' identities (not a load and a store of its
  // slot a point: a chain through shared memory), into its slots once.
  SmallVector<Value> identities;
  for (const Folded &f : folded)
    identities.push_back(b.create<arith::ConstantOp>(
        l, b.getFloatAttr(cast<MemRefType>(op.getDpsInits()[f.output].getType()).getElementType(),
                          identityOf(f.combine))));
  // Flat where every operand read or written a point is a whole
  // identity-layout buffer indexed by all the loops in order (or a scalar
  // read at no index) and the body reads no linalg.index: each such buffer
  // viewed as 1-D and indexed by the point itself, not by loop indices the
  // point is divided into (64-bit divisions a point; with its partials in
  // registers the medium GPT's 101 sums of squares, each on one SM, still
  // took 0.354 ms on the H200: this change is unmeasured there).
  const bool readsIndex =
      llvm::any_of(body.getOperations(), [](Operation &inside) { return isa<linalg::IndexOp>(inside); });
  bool flat = !readsIndex;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  SmallVector<Value> operands(op->getOperands().take_front(inputs + op.getNumDpsInits()));
  for (auto [i, operand] : llvm::enumerate(operands)) {
    if (i >= inputs && foldedIndex(unsigned(i - inputs)) >= 0)
      continue;
    auto type = cast<MemRefType>(operand.getType());
    if (maps[i].getNumResults() != 0 &&
        (!maps[i].isIdentity() || !type.getLayout().isIdentity() || !type.hasStaticShape()))
      flat = false;
  }
  if (flat)
    for (auto [i, operand] : llvm::enumerate(operands)) {
      auto type = cast<MemRefType>(operand.getType());
      if (type.getRank() < 2 || (i >= inputs && foldedIndex(unsigned(i - inputs)) >= 0))
        continue;
      ReassociationIndices all;
      for (int64_t d = 0; d < type.getRank(); ++d)
        all.push_back(d);
      operand = b.create<memref::CollapseShapeOp>(l, operand, SmallVector<ReassociationIndices>{all});
    }
  auto pointStep = [&](Value point, ValueRange carried) {
    SmallVector<Value> ivs = flat ? SmallVector<Value>{} : delinearizeIndex(b, l, point, ranges);
    auto indices = [&](unsigned i) -> SmallVector<Value> {
      if (!flat)
        return indicesAt(b, l, maps[i], ivs);
      return maps[i].getNumResults() == 0 ? SmallVector<Value>{} : SmallVector<Value>{point};
    };
    IRMapping map;
    for (auto [i, operand] : llvm::enumerate(operands)) {
      BlockArgument arg = body.getArgument(unsigned(i));
      if (int k = i >= inputs ? foldedIndex(unsigned(i - inputs)) : -1; k >= 0) {
        map.map(arg, carried[size_t(k)]);
        continue;
      }
      map.map(arg, b.create<memref::LoadOp>(l, operand, indices(unsigned(i))));
    }
    SmallVector<Value> next(carried);
    for (auto [o, value] : llvm::enumerate(cloneBodyAt(b, body, map, ivs))) {
      if (int k = foldedIndex(unsigned(o)); k >= 0)
        next[size_t(k)] = value;
      else
        b.create<memref::StoreOp>(l, value, operands[inputs + o], indices(unsigned(inputs + o)));
    }
    return next;
  };
  // No branch a point where the threads divide the points.
  const int64_t iterations = (points + threads - 1) / threads;
  auto pointOf = [&](Value it) -> Value {
    return b.create<arith::AddIOp>(l, b.create<arith::MulIOp>(l, it, c(threads)), thread);
  };
  Value point;
  scf::ForOp partials =
      points % threads == 0
          ? buildFor(b, l, c(0), c(iterations), c(1), identities,
                     [&](Value it, ValueRange carried) { return pointStep(pointOf(it), carried); })
          : buildMaskedFor(
                b, l, c(0), c(iterations), identities,
                [&](Value it) {
                  point = pointOf(it);
                  return b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, point, c(points));
                },
                [&](Value, ValueRange carried) { return pointStep(point, carried); });
  for (auto [f, partial] : llvm::zip(folded, partials.getResults()))
    b.create<memref::StoreOp>(l, partial, f.slots, thread);
  // The tree: slot t folds in slot t + s, for s = threads / 2, ..., 1.
  b.create<gpu::BarrierOp>(l);
  for (int64_t s = threads / 2; s >= 1; s /= 2) {
    Value lower = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, thread, c(s));
    auto guard = b.create<scf::IfOp>(l, lower, /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&guard.getThenRegion().front());
      Value partner = b.create<arith::AddIOp>(l, thread, c(s));
      for (const Folded &f : folded) {
        Value mine = b.create<memref::LoadOp>(l, f.slots, thread);
        Value theirs = b.create<memref::LoadOp>(l, f.slots, partner);
        b.create<memref::StoreOp>(l, combineLike(b, l, f.combine, mine, theirs), f.slots, thread);
      }
    }
    b.create<gpu::BarrierOp>(l);
  }
  // Thread 0: the output's initial value folded with the total.
  Value first = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, thread, c(0));
  auto guard = b.create<scf::IfOp>(l, first, /*withElseRegion=*/false);
  b.setInsertionPointToStart(&guard.getThenRegion().front());
  for (const Folded &f : folded) {
    Value out = op.getDpsInits()[f.output];
    Value initial = init ? b.create<arith::ConstantOp>(l, init).getResult()
                         : b.create<memref::LoadOp>(l, out, ValueRange{}).getResult();
    Value total = b.create<memref::LoadOp>(l, f.slots, ValueRange{c(0)});
    b.create<memref::StoreOp>(l, combineLike(b, l, f.combine, initial, total), out, ValueRange{});
  }
  op.erase();
  return success();
}

bool mlir::nova::isWarpReduction(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumParallelLoops() == 0 || op.getNumReductionLoops() == 0 ||
      op.getNumDpsInputs() == 0 || llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic))
    return false;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  int64_t reductionPoints = 1;
  for (auto [range, iterator] : llvm::zip(ranges, iterators))
    if (iterator == utils::IteratorType::reduction)
      reductionPoints *= range;
  if (reductionPoints < kWarpReductionMinPoints)
    return false;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  if (!llvm::all_of(maps, readsThroughDimsAndConstants))
    return false;
  // The first input's innermost index runs over a reduction loop.
  AffineMap first = maps[0];
  if (first.getNumResults() == 0)
    return false;
  auto innermost = dyn_cast<AffineDimExpr>(first.getResults().back());
  if (!innermost || iterators[innermost.getPosition()] != utils::IteratorType::reduction)
    return false;
  const unsigned inputs = unsigned(op.getNumDpsInputs());
  for (unsigned o = 0; o < op.getNumDpsInits(); ++o) {
    AffineMap map = maps[inputs + o];
    auto type = dyn_cast<MemRefType>(op.getDpsInits()[o].getType());
    // Each parallel loop exactly once (and constants: a kept dim), no
    // reduction loop: one element a point.
    if (!type || !type.getElementType().isF32() || !combinerOf(op, o) || !indexedByParallelLoops(op, map))
      return false;
  }
  return true;
}

LogicalResult mlir::nova::buildWarpReduction(linalg::GenericOp op, Value warp, Value lane, int64_t warps, FloatAttr init) {
  OpBuilder b(op);
  Location l = op.getLoc();
  auto c = [&](int64_t v) -> Value { return b.create<arith::ConstantIndexOp>(l, v); };
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  const ReductionLoops loops = reductionLoopsOf(op);
  const ArrayRef<int64_t> parallelExtents = loops.parallelExtents, reductionExtents = loops.reductionExtents;
  const ArrayRef<unsigned> parallelDims = loops.parallelDims, reductionDims = loops.reductionDims;
  const int64_t points = loops.points, reductionPoints = loops.reductionPoints;
  if (points == 0 || reductionPoints == 0)
    return op.emitError("nova-gpu-map-threads: a warp reduction over no points");
  const unsigned inputs = unsigned(op.getNumDpsInputs()), outputs = unsigned(op.getNumDpsInits());
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  Block &body = op.getRegion().front();
  const Folds folds = foldsOf(b, l, op);
  const ArrayRef<Operation *> combiners = folds.combiners;
  const ArrayRef<Value> identities = folds.identities;
  const int64_t iterations = (points + warps - 1) / warps;
  const int64_t laneSteps = (reductionPoints + 31) / 32;
  buildFor(b, l, c(0), c(iterations), c(1), {}, [&](Value it, ValueRange) {
    Value unit = b.create<arith::AddIOp>(l, b.create<arith::MulIOp>(l, it, c(warps)), warp);
    Value inside = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, unit, c(points));
    // Warps past the points run the last one's loads and store nothing.
    Value clamped = b.create<arith::MinUIOp>(l, unit, c(points - 1));
    SmallVector<Value> at = delinearizeIndex(b, l, clamped, parallelExtents);
    SmallVector<Value> ivs(ranges.size());
    for (auto [d, v] : llvm::zip(parallelDims, at))
      ivs[d] = v;
    auto indices = [&](AffineMap map) { return indicesAt(b, l, map, ivs); };
    // Each lane's partials over reduction points r = lane, lane + 32, ...
    // (the loop runs over steps; r = step * 32 + lane).
    Value r;
    scf::ForOp fold = buildMaskedFor(
        b, l, c(0), c(laneSteps), identities,
        [&](Value step) {
          r = b.create<arith::AddIOp>(l, b.create<arith::MulIOp>(l, step, c(32)), lane);
          return b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, r, c(reductionPoints));
        },
        [&](Value, ValueRange partials) {
          for (auto [d, v] : llvm::zip(reductionDims, delinearizeIndex(b, l, r, reductionExtents)))
            ivs[d] = v;
          IRMapping map;
          for (unsigned i = 0; i < inputs; ++i)
            map.map(body.getArgument(i), b.create<memref::LoadOp>(l, op.getDpsInputs()[i], indices(maps[i])));
          for (unsigned o = 0; o < outputs; ++o)
            map.map(body.getArgument(inputs + o), partials[o]);
          return cloneBodyAt(b, body, map, ivs);
        });
    // The warp's butterfly: every lane ends with the total.
    SmallVector<Value> totals(fold.getResults());
    for (unsigned o = 0; o < outputs; ++o)
      totals[o] = warpAllReduce(b, l, totals[o],
                                [&](Value x, Value y) { return combineLike(b, l, combiners[o], x, y); });
    Value first = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, lane, c(0));
    auto guard = b.create<scf::IfOp>(l, b.create<arith::AndIOp>(l, inside, first), /*withElseRegion=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&guard.getThenRegion().front());
    for (unsigned o = 0; o < outputs; ++o)
      storeFolded(b, l, op, o, combiners[o], indices(maps[inputs + o]), totals[o], init);
    return SmallVector<Value>{};
  });
  op.erase();
  return success();
}
