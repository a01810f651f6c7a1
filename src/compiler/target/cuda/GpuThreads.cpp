//===- GpuThreads.cpp - every kernel as GPU threads, one unit of work each ===//
//
// The CUDA target's general kernel form, which every kernel kind takes until
// a faster one is generated for it (the tiled tensor-core matmuls exist,
// MmaMatmulKernel.cpp, but are not wired into steps yet):
//
//   nova-gpu-threads (configure, on the top module): a kernel whose body
//     holds several compute ops (a matmul's fill, the matmul, its epilogue)
//     is split into one kernel per op, launched in order (a kernel boundary
//     is the grid-wide barrier between them); each kernel gets
//     #nova.lowering_config<gpu_threads, workgroups = blocks, tile =
//     [threads]> from its units of work: the points of a structured op's
//     parallel loops (reductions run inside a thread), a LayerNorm's rows,
//     an attention's (batch, head) pairs, a scatter-add's split columns
//     (one block: rows in order, so no two threads add into one element),
//     or one thread (an op with no parallel loop, e.g. a sum to a scalar).
//   nova-gpu-map-threads (codegen): the op becomes loops, the units spread
//     over the grid: unit = (iteration * blocks + block) * threads + thread,
//     guarded by unit < units; every loop bound stays uniform over a block.
//   nova-gpu-outline-kernels (codegen): each func.func kernel becomes a
//     gpu.func `nova_<kernel>` of gpu.module @nova_kernels (its workgroup
//     argument dropped, known_block_size set), ready for the emulator and
//     for PTX.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cuda/CudaTarget.h"
#include "compiler/target/cuda/GpuScalarKernels.h"
#include "compiler/target/cuda/MmaMatmulKernel.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/Pass.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::nova;

namespace {

/// The ops of a kernel body that compute (write memory); the rest (views,
/// constants) are cloned wherever they are used.
SmallVector<Operation *> computeOps(func::FuncOp kernel) {
  SmallVector<Operation *> ops;
  for (Operation &op : kernel.getBody().front())
    if (!op.hasTrait<OpTrait::IsTerminator>() && !isa<memref::DeallocOp>(op) && !isMemoryEffectFree(&op))
      ops.push_back(&op);
  return ops;
}

/// Erases the side-effect-free ops of `block` nothing uses, last first.
void eraseDeadPureOps(Block &block) {
  for (bool changed = true; changed;) {
    changed = false;
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (op.use_empty() && !op.hasTrait<OpTrait::IsTerminator>() && isMemoryEffectFree(&op)) {
        op.erase();
        changed = true;
      }
  }
}

scf::ForOp splitLoopIn(Operation *op) {
  scf::ForOp found;
  op->walk([&](scf::ForOp loop) {
    if (loop->hasAttr(kSplitLoopAttr))
      found = loop;
  });
  return found;
}

std::optional<int64_t> tripCount(scf::ForOp loop) {
  auto lb = getConstantIntValue(loop.getLowerBound()), ub = getConstantIntValue(loop.getUpperBound()),
       st = getConstantIntValue(loop.getStep());
  if (!lb || !ub || !st || *st <= 0)
    return std::nullopt;
  return std::max<int64_t>(0, (*ub - *lb + *st - 1) / *st);
}

/// How a compute op's work is shared out.
struct Units {
  enum Kind { points, splitColumns, one } kind = one;
  int64_t count = 1;
  std::string what;
};

Units unitsOf(Operation *op) {
  if (auto norm = dyn_cast<LayerNormKernelOp>(op))
    return {Units::points, norm.rows(), llvm::formatv("{0} LayerNorm rows of {1}", norm.rows(), norm.width())};
  if (auto attention = dyn_cast<AttentionKernelOp>(op)) {
    int64_t n = attention.batch() * attention.getHeads();
    return {Units::points, n, llvm::formatv("{0} attention (batch, head) pairs", n)};
  }
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
    SmallVector<int64_t> ranges = linalgOp.getStaticLoopRanges();
    int64_t n = 1;
    bool any = false;
    for (auto [range, iterator] : llvm::zip(ranges, linalgOp.getIteratorTypesArray()))
      if (iterator == utils::IteratorType::parallel) {
        n *= range;
        any = true;
      }
    if (any && !ShapedType::isDynamic(n))
      return {Units::points, n, llvm::formatv("{0} points of its parallel loops", n)};
    return {Units::one, 1, "no parallel loop"};
  }
  if (scf::ForOp split = splitLoopIn(op))
    if (split.getInitArgs().empty())
      if (std::optional<int64_t> trips = tripCount(split))
        return {Units::splitColumns, *trips, llvm::formatv("{0} columns of a scatter-add", *trips)};
  return {Units::one, 1, "a loop nest with no split loop"};
}

struct GpuThreadsConfigure : PassWrapper<GpuThreadsConfigure, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GpuThreadsConfigure)
  GpuThreadsConfigure() = default;
  GpuThreadsConfigure(const GpuThreadsConfigure &other) : PassWrapper(other) {}
  explicit GpuThreadsConfigure(const ::nova::TargetDesc &t) : fixed(t), hasFixed(true) {}
  StringRef getArgument() const final { return "nova-gpu-threads"; }
  StringRef getDescription() const final {
    return "Split each kernel into one GPU kernel per compute op and share each one's units of work "
           "out over blocks of threads (gpu_threads)";
  }
  Option<std::string> targetName{*this, "target", llvm::cl::desc("a built-in GPU target (sm_80, ..., h200)"),
                                 llvm::cl::init("sm_90a")};
  ::nova::TargetDesc fixed;
  bool hasFixed = false;

  void runOnOperation() override {
    ModuleOp top = getOperation();
    ModuleOp kernels = kernelsModule(top);
    if (!kernels)
      return;
    ::nova::TargetDesc target = hasFixed ? fixed : ::nova::builtin_gpu_target(targetName);
    if (!target.is_gpu()) {
      top.emitError("nova-gpu-threads: '" + targetName + "' is not a built-in GPU target");
      return signalPassFailure();
    }
    // Split: kernel kN of several compute ops -> kN_0, kN_1, ... in order.
    llvm::StringMap<SmallVector<std::string>> parts;
    for (auto kernel : llvm::make_early_inc_range(kernels.getOps<func::FuncOp>())) {
      SmallVector<Operation *> ops = computeOps(kernel);
      if (ops.size() < 2)
        continue;
      OpBuilder b(kernel);
      b.setInsertionPointAfter(kernel);
      for (size_t i = 0; i < ops.size(); ++i) {
        auto part = cast<func::FuncOp>(b.clone(*kernel));
        std::string name = (kernel.getSymName() + "_" + Twine(i)).str();
        part.setSymName(name);
        SmallVector<Operation *> partOps = computeOps(part);
        for (size_t j = 0; j < partOps.size(); ++j)
          if (j != i)
            partOps[j]->erase();
        eraseDeadPureOps(part.getBody().front());
        // The configurator's matmul explanation stays with the matmul.
        if (!isTaggedMatmul(partOps[i]))
          part->removeAttr(kGpuWhyAttr);
        parts[kernel.getSymName()].push_back(name);
        b.setInsertionPointAfter(part);
      }
      kernel.erase();
    }
    if (!parts.empty()) {
      SmallVector<LaunchOp> launches;
      top.walk([&](LaunchOp launch) { launches.push_back(launch); });
      for (LaunchOp launch : launches) {
        auto it = parts.find(launch.getKernelAttr().getLeafReference().getValue());
        if (it == parts.end())
          continue;
        OpBuilder b(launch);
        for (const std::string &name : it->second) {
          auto part = cast<LaunchOp>(b.clone(*launch));
          part.setKernelAttr(SymbolRefAttr::get(&getContext(), kKernelsModuleName,
                                                {FlatSymbolRefAttr::get(&getContext(), name)}));
        }
        launch.erase();
      }
    }
    // Configure.
    MLIRContext *ctx = &getContext();
    const int64_t maxBlocks = std::max<int64_t>(1, target.multiprocessors) * 32;
    for (auto kernel : kernels.getOps<func::FuncOp>()) {
      SmallVector<Operation *> ops = computeOps(kernel);
      Units units = ops.size() == 1 ? unitsOf(ops[0]) : Units{Units::one, 1, "no compute op"};
      int64_t threads = 1, blocks = 1;
      if (units.kind != Units::one) {
        threads = units.count >= 256 ? 256 : std::max<int64_t>(32, (units.count + 31) / 32 * 32);
        if (units.kind == Units::points)
          blocks = std::clamp<int64_t>((units.count + threads - 1) / threads, 1, maxBlocks);
      }
      kernel->setAttr(LoweringConfigAttr::name, LoweringConfigAttr::get(ctx, "gpu_threads", blocks, {threads}, {}, {}));
      SmallVector<Attribute> why;
      if (auto planned = kernel->getAttrOfType<ArrayAttr>(kGpuWhyAttr)) {
        why.push_back(StringAttr::get(ctx, "generated as scalar threads, one per output element: the tiled "
                                           "matmul kernel below is planned, not yet generated for steps"));
        why.append(planned.begin(), planned.end());
      }
      why.push_back(StringAttr::get(
          ctx, llvm::formatv("threads: {0} ({1}) over {2} blocks of {3}", units.what,
                             units.kind == Units::one ? "one thread" : "one unit a thread", blocks, threads)));
      kernel->setAttr(kGpuWhyAttr, ArrayAttr::get(ctx, why));
    }
  }
};

/// The index of this thread's unit in iteration `it` of the grid-stride
/// loop, and the guard, around `body`.
struct ThreadIndex {
  OpBuilder &b;
  Location l;
  int64_t blocks, threads;
  Value thread, global;

  Value c(int64_t v) { return b.create<arith::ConstantIndexOp>(l, v); }

  /// For each unit u < count given to this thread: body(u).
  void forEachUnit(int64_t count, int64_t perIteration, Value first, function_ref<void(Value)> body) {
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
};

/// scf.parallel (no reductions) as nested scf.for, in place.
void parallelToFor(scf::ParallelOp parallel) {
  OpBuilder b(parallel);
  IRMapping map;
  for (auto [lb, ub, st, iv] : llvm::zip(parallel.getLowerBound(), parallel.getUpperBound(), parallel.getStep(),
                                         parallel.getInductionVars())) {
    auto loop = b.create<scf::ForOp>(parallel.getLoc(), lb, ub, st);
    map.map(iv, loop.getInductionVar());
    b.setInsertionPointToStart(loop.getBody());
  }
  for (Operation &op : parallel.getBody()->without_terminator())
    b.clone(op, map);
  parallel.erase();
}

LogicalResult mapKernel(func::FuncOp kernel, LoweringConfigAttr config) {
  SmallVector<Operation *> ops = computeOps(kernel);
  if (ops.size() > 1)
    return kernel.emitError("nova-gpu-map-threads: a gpu_threads kernel holds ") << ops.size()
           << " compute ops (nova-gpu-threads splits them)";
  if (ops.empty())
    return success();
  Operation *op = ops[0];
  Units units = unitsOf(op);
  IRRewriter rewriter(kernel.getContext());
  Location l = op->getLoc();
  OpBuilder b(op);
  const int64_t blocks = config.getWorkgroups(), threads = config.getTile()[0];
  ThreadIndex at{b, l, blocks, threads, {}, {}};
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&kernel.getBody().front());
    at.thread = b.create<gpu::ThreadIdOp>(l, gpu::Dimension::x);
    Value block = b.create<gpu::BlockIdOp>(l, gpu::Dimension::x);
    at.global = b.create<arith::AddIOp>(l, b.create<arith::MulIOp>(l, block, at.c(threads)), at.thread);
  }
  // An op with no parallel loop: thread 0 of block 0 runs all of it.
  if (units.kind == Units::one) {
    Value first = b.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, at.global, at.c(0));
    auto guard = b.create<scf::IfOp>(l, first, /*withElseRegion=*/false);
    op->moveBefore(guard.thenBlock()->getTerminator());
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
      rewriter.setInsertionPoint(op);
      if (failed(linalg::linalgOpToLoops(rewriter, linalgOp)))
        return op->emitError("nova-gpu-map-threads: cannot lower to loops");
      rewriter.eraseOp(op);
    }
    return success();
  }
  // A scatter-add: its split loop over one block's threads.
  if (units.kind == Units::splitColumns) {
    scf::ForOp split = splitLoopIn(op);
    b.setInsertionPoint(split);
    ThreadIndex inner{b, l, 1, threads, at.thread, at.thread};
    inner.forEachUnit(units.count, threads, at.thread, [&](Value unit) {
      IRMapping map;
      Value iv = b.create<arith::AddIOp>(l, split.getLowerBound(), b.create<arith::MulIOp>(l, unit, split.getStep()));
      map.map(split.getInductionVar(), iv);
      for (Operation &inside : split.getBody()->without_terminator())
        b.clone(inside, map);
    });
    split.erase();
    return success();
  }
  // Points: one unit a thread over the grid.
  const int64_t perIteration = blocks * threads;
  if (auto norm = dyn_cast<LayerNormKernelOp>(op)) {
    at.forEachUnit(units.count, perIteration, at.global, [&](Value row) { buildLayerNormRow(b, norm, row); });
    op->erase();
    return success();
  }
  if (auto attention = dyn_cast<AttentionKernelOp>(op)) {
    at.forEachUnit(units.count, perIteration, at.global, [&](Value unit) { buildAttentionHead(b, attention, unit); });
    op->erase();
    return success();
  }
  auto linalgOp = cast<linalg::LinalgOp>(op);
  // Parallel loops first, so that one scf.parallel holds every unit.
  if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
    SmallVector<unsigned> order;
    for (auto [i, iterator] : llvm::enumerate(generic.getIteratorTypesArray()))
      if (iterator == utils::IteratorType::parallel)
        order.push_back(unsigned(i));
    for (auto [i, iterator] : llvm::enumerate(generic.getIteratorTypesArray()))
      if (iterator != utils::IteratorType::parallel)
        order.push_back(unsigned(i));
    bool identity = llvm::all_of(llvm::enumerate(order), [](auto p) { return p.index() == p.value(); });
    if (!identity) {
      rewriter.setInsertionPoint(generic);
      FailureOr<linalg::GenericOp> swapped = linalg::interchangeGenericOp(rewriter, generic, order);
      if (failed(swapped))
        return generic.emitError("nova-gpu-map-threads: cannot put the parallel loops first");
      linalgOp = cast<linalg::LinalgOp>(swapped->getOperation());
    }
  }
  rewriter.setInsertionPoint(linalgOp);
  FailureOr<linalg::LinalgLoops> loops = linalg::linalgOpToParallelLoops(rewriter, linalgOp);
  if (failed(loops) || loops->empty())
    return linalgOp->emitError("nova-gpu-map-threads: cannot lower to parallel loops");
  rewriter.eraseOp(linalgOp);
  auto outer = dyn_cast<scf::ParallelOp>(loops->front());
  if (!outer)
    return kernel.emitError("nova-gpu-map-threads: the outermost loop is not parallel");
  SmallVector<int64_t> trips;
  int64_t count = 1;
  for (auto [lb, ub, st] : llvm::zip(outer.getLowerBound(), outer.getUpperBound(), outer.getStep())) {
    auto lo = getConstantIntValue(lb), hi = getConstantIntValue(ub), step = getConstantIntValue(st);
    if (!lo || !hi || !step || *step <= 0)
      return kernel.emitError("nova-gpu-map-threads: a parallel loop with dynamic bounds");
    trips.push_back((*hi - *lo + *step - 1) / *step);
    count *= trips.back();
  }
  if (count != units.count)
    return kernel.emitError("nova-gpu-map-threads: ") << count << " parallel points, configured for "
                                                      << units.count;
  b.setInsertionPoint(outer);
  at.forEachUnit(count, perIteration, at.global, [&](Value unit) {
    IRMapping map;
    Value rest = unit;
    SmallVector<Value> ivs(trips.size());
    for (int64_t i = int64_t(trips.size()) - 1; i >= 0; --i) {
      Value position = i == 0 ? rest : b.create<arith::RemUIOp>(l, rest, at.c(trips[size_t(i)]));
      if (i > 0)
        rest = b.create<arith::DivUIOp>(l, rest, at.c(trips[size_t(i)]));
      ivs[size_t(i)] = b.create<arith::AddIOp>(l, outer.getLowerBound()[size_t(i)],
                                               b.create<arith::MulIOp>(l, position, outer.getStep()[size_t(i)]));
    }
    for (auto [iv, value] : llvm::zip(outer.getInductionVars(), ivs))
      map.map(iv, value);
    for (Operation &inside : outer.getBody()->without_terminator())
      b.clone(inside, map);
  });
  outer.erase();
  SmallVector<scf::ParallelOp> nested;
  kernel.walk([&](scf::ParallelOp p) { nested.push_back(p); });
  for (scf::ParallelOp p : llvm::reverse(nested))
    parallelToFor(p);
  return success();
}

struct GpuMapThreads : PassWrapper<GpuMapThreads, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GpuMapThreads)
  StringRef getArgument() const final { return "nova-gpu-map-threads"; }
  StringRef getDescription() const final {
    return "Lower each gpu_threads kernel (of a kernels module) to loops whose units of work are spread over "
           "the grid's threads";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<gpu::GPUDialect, scf::SCFDialect, arith::ArithDialect, memref::MemRefDialect>();
  }
  void runOnOperation() override {
    for (auto kernel : getOperation().getOps<func::FuncOp>()) {
      LoweringConfigAttr config = loweringConfig(kernel);
      if (!config || !config.isGpuThreads())
        continue;
      if (failed(mapKernel(kernel, config)))
        return signalPassFailure();
    }
  }
};

struct GpuOutlineKernels : PassWrapper<GpuOutlineKernels, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GpuOutlineKernels)
  StringRef getArgument() const final { return "nova-gpu-outline-kernels"; }
  StringRef getDescription() const final {
    return "Turn each func.func kernel of a kernels module into a gpu.func nova_<kernel> of gpu.module "
           "@nova_kernels";
  }
  void getDependentDialects(DialectRegistry &registry) const override { registry.insert<gpu::GPUDialect>(); }
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> kernels(module.getOps<func::FuncOp>());
    if (kernels.empty())
      return;
    gpu::GPUModuleOp gpuModule = addKernelsModule(module);
    OpBuilder b(gpuModule.getBodyRegion());
    for (func::FuncOp kernel : kernels) {
      LoweringConfigAttr config = loweringConfig(kernel);
      if (!config || !config.isGpuThreads()) {
        kernel.emitError("nova-gpu-outline-kernels: kernel ")
            << kernel.getSymName() << " has no GPU kernel form (its config: " << config << ")";
        return signalPassFailure();
      }
      Block &entry = kernel.getBody().front();
      if (entry.getNumArguments() == 0 || !entry.getArgument(0).getType().isIndex()) {
        kernel.emitError("nova-gpu-outline-kernels: a kernel's first argument is its workgroup number");
        return signalPassFailure();
      }
      // The workgroup number is the block's.
      Value wg = entry.getArgument(0);
      if (!wg.use_empty()) {
        OpBuilder at = OpBuilder::atBlockBegin(&entry);
        wg.replaceAllUsesWith(at.create<gpu::BlockIdOp>(kernel.getLoc(), gpu::Dimension::x));
      }
      entry.eraseArgument(0);
      auto type = FunctionType::get(&getContext(), entry.getArgumentTypes(), {});
      b.setInsertionPoint(gpuModule.getBody()->getTerminator());
      auto gpuFunc = b.create<gpu::GPUFuncOp>(kernel.getLoc(), ("nova_" + kernel.getSymName()).str(), type);
      gpuFunc->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
      const int32_t threads = int32_t(config.getTile()[0]);
      gpuFunc.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({threads, 1, 1}));
      gpuFunc->setAttr(LoweringConfigAttr::name, config);
      gpuFunc.getBody().front().erase();
      gpuFunc.getBody().takeBody(kernel.getBody());
      for (Block &block : gpuFunc.getBody())
        if (auto ret = dyn_cast<func::ReturnOp>(block.getTerminator())) {
          OpBuilder r(ret);
          r.create<gpu::ReturnOp>(ret.getLoc());
          ret.erase();
        }
      kernel.erase();
    }
  }
};

} // namespace

std::unique_ptr<Pass> mlir::nova::createGpuThreadsConfigure(const ::nova::TargetDesc &target) {
  return std::make_unique<GpuThreadsConfigure>(target);
}
std::unique_ptr<Pass> mlir::nova::createGpuMapThreads() { return std::make_unique<GpuMapThreads>(); }
std::unique_ptr<Pass> mlir::nova::createGpuOutlineKernels() { return std::make_unique<GpuOutlineKernels>(); }

void mlir::nova::registerGpuThreadsPasses() {
  PassRegistration<GpuThreadsConfigure>();
  PassRegistration<GpuMapThreads>();
  PassRegistration<GpuOutlineKernels>();
}
