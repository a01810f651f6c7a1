//===- OutlineKernels.cpp - the nova-outline-kernels pass --------*- C++ -*-===//
//
// Cuts a bufferized step into kernels plus a launch plan. The step's entry
// block is straight-line code over buffers: allocations, views of them
// (subview, collapse/expand_shape), constants, compute ops (linalg ops,
// copies, loop nests from scatter-adds) and deallocations. Each compute op
// becomes a kernel in the nested `module @kernels`:
//
//   - its *roots* are the buffers it touches, traced back through views and
//     other side-effect-free ops to a step argument or a memref.alloc; they
//     become the kernel's parameters, after the workgroup number;
//   - the side-effect-free ops on the way (views, constants, index math) are
//     cloned into the kernel, so every parameter is a whole buffer with a
//     static identity layout (one pointer at run time);
//   - the op itself is replaced by `nova.launch @kernels::@kN(roots...)`.
//
// A scalar read at the top level (memref.load of a rank-0 seed or learning
// rate) is cloned into its kernels too, when nothing in the step writes the
// buffer it reads: then reading it at kernel time gives the same value.
//
// A fill that initializes a matmul's result, and the elementwise op that
// consumes it, share the matmul's kernel.
//
// Top-level copies become linalg.copy first, so a copy is a structured op
// that nova-distribute-workgroups can split like any other.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/MatmulKernel.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

#include <functional>

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAOUTLINEKERNELS
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

bool isPlanOp(Operation *op) {
  // nova.all_reduce stays in the step for nova-bucket-all-reduce.
  return isa<memref::AllocOp, memref::DeallocOp, func::ReturnOp, nova::LaunchOp,
             nova::AllReduceOp, nova::AllReduceStartOp, nova::AllReduceWaitOp>(op);
}

/// Ops that may be cloned into every kernel that needs their results.
bool isCloneable(Operation *op) {
  return op->getNumRegions() == 0 && isMemoryEffectFree(op) && op->getNumResults() > 0;
}

bool isWholeBuffer(Value v) {
  auto type = dyn_cast<MemRefType>(v.getType());
  return type && type.hasStaticShape() && type.getLayout().isIdentity();
}

/// Every buffer some op of the step writes (through any view).
llvm::DenseSet<Value> writtenRoots(Block &entry) {
  llvm::DenseSet<Value> written;
  for (Operation &top : entry)
    mlir::nova::forEachWrittenRoot(&top, [&](Value root) { written.insert(root); });
  return written;
}

/// `fill` is a linalg.fill of exactly the buffer `next`, a matmul generic,
/// accumulates into.
bool initializes(Operation *fill, Operation *next) {
  auto f = dyn_cast<linalg::FillOp>(fill);
  auto g = dyn_cast<linalg::GenericOp>(next);
  if (!f || !g || !f.hasPureBufferSemantics() || !g.hasPureBufferSemantics())
    return false;
  return mlir::nova::isTaggedMatmul(g) && g.getNumDpsInits() == 1 &&
         f.getDpsInits()[0] == g.getDpsInits()[0];
}

/// For every buffer, the last of `compute` that touches it (through views).
llvm::DenseMap<Value, size_t> lastUses(ArrayRef<Operation *> compute) {
  llvm::DenseMap<Value, size_t> last;
  for (auto [i, op] : llvm::enumerate(compute))
    op->walk([&, i = i](Operation *inner) {
      for (Value v : inner->getOperands())
        if (isa<MemRefType>(v.getType()))
          last[mlir::nova::bufferRoot(v)] = i;
    });
  return last;
}

/// `next` (compute op `index`) consumes `matmul`'s result element for
/// element in a way the matmul's register tiles can apply before they are
/// stored (a bias add, an activation, a residual add: MatmulKernel.h), and no
/// later op reads that result: so it never has to be written out.
bool isEpilogue(Operation *matmul, Operation *next, size_t index,
                const llvm::DenseMap<Value, size_t> &last) {
  auto mm = dyn_cast<linalg::GenericOp>(matmul);
  auto g = dyn_cast<linalg::GenericOp>(next);
  if (!mm || !g || !mlir::nova::isRegisterEpilogue(mm, g))
    return false;
  Value root = mlir::nova::bufferRoot(mm.getDpsInits()[0]);
  if (!isa_and_nonnull<memref::AllocOp>(root.getDefiningOp()))
    return false; // a step argument: the caller reads it
  auto it = last.find(root);
  return it != last.end() && it->second == index;
}

ModuleOp getOrCreateKernelsModule(ModuleOp top) {
  if (ModuleOp m = mlir::nova::kernelsModule(top))
    return m;
  OpBuilder b = OpBuilder::atBlockEnd(top.getBody());
  return b.create<ModuleOp>(top.getLoc(), mlir::nova::kKernelsModuleName);
}

class Outliner {
public:
  Outliner(ModuleOp kernels) : kernels(kernels), symbols(kernels) {}

  /// Buffers written anywhere in the step being outlined.
  llvm::DenseSet<Value> written;

  bool isClonedRead(Operation *def) const {
    auto load = dyn_cast<memref::LoadOp>(def);
    return load && !written.contains(mlir::nova::bufferRoot(load.getMemref()));
  }

  /// Outlines `group` (consecutive compute ops of the step, run in order by
  /// one kernel) and replaces it with one launch.
  LogicalResult outline(ArrayRef<Operation *> group) {
    Operation *op = group.front();
    llvm::SetVector<Value> roots;
    llvm::SetVector<Operation *> clones;
    SmallVector<Value> work;
    llvm::SetVector<Value> above;
    for (Operation *member : group) {
      if (member->getNumResults() > 0 && !member->use_empty())
        return member->emitError("nova-outline-kernels: a compute op whose results are used by "
                                 "other ops cannot become a kernel");
      work.append(member->getOperands().begin(), member->getOperands().end());
      getUsedValuesDefinedAbove(member->getRegions(), above);
    }
    work.append(above.begin(), above.end());
    while (!work.empty()) {
      Value v = work.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!def || isa<memref::AllocOp>(def)) {
        if (!isWholeBuffer(v))
          return op->emitError("nova-outline-kernels: buffer of type ")
                 << v.getType() << " is not a static, identity-layout memref";
        roots.insert(v);
        continue;
      }
      if (!isCloneable(def) && !isClonedRead(def))
        return op->emitError("nova-outline-kernels: uses a value of '")
               << def->getName() << "', which is neither a buffer, side-effect free, nor "
               << "a read of a buffer the step never writes";
      if (clones.insert(def))
        work.append(def->getOperands().begin(), def->getOperands().end());
    }

    // Parameters in the order of the operands they are reached from (through
    // views), then those only the op's regions use: readable, deterministic IR.
    SmallVector<Value> params;
    std::function<void(Value)> visit = [&](Value v) {
      if (roots.contains(v)) {
        if (!llvm::is_contained(params, v))
          params.push_back(v);
        return;
      }
      if (Operation *def = v.getDefiningOp(); def && clones.contains(def))
        for (Value operand : def->getOperands())
          visit(operand);
    };
    for (Operation *member : group)
      for (Value v : member->getOperands())
        visit(v);
    for (Value v : above)
      visit(v);

    OpBuilder b(kernels.getContext());
    b.setInsertionPointToEnd(kernels.getBody());
    SmallVector<Type> types{b.getIndexType()};
    for (Value v : params)
      types.push_back(v.getType());
    // (A Twine: GCC 12 warned, wrongly, of an overflow in "k" + std::to_string.)
    auto kernel = b.create<func::FuncOp>(op->getLoc(), (llvm::Twine("k") + llvm::Twine(next++)).str(),
                                         b.getFunctionType(types, {}));
    symbols.insert(kernel);
    Block *body = kernel.addEntryBlock();
    b.setInsertionPointToStart(body);
    IRMapping map;
    for (auto [i, v] : llvm::enumerate(params))
      map.map(v, body->getArgument(i + 1));
    // Clones in the order they appear in the step, so definitions precede uses.
    SmallVector<Operation *> ordered(clones.begin(), clones.end());
    llvm::sort(ordered, [](Operation *a, Operation *c) { return a->isBeforeInBlock(c); });
    for (Operation *c : ordered)
      b.clone(*c, map);
    for (Operation *member : group)
      b.clone(*member, map);
    b.create<func::ReturnOp>(op->getLoc());

    // At the last member: every buffer the group uses is allocated by then.
    OpBuilder at(group.back());
    auto ref = SymbolRefAttr::get(b.getStringAttr(mlir::nova::kKernelsModuleName),
                                  {FlatSymbolRefAttr::get(kernel.getSymNameAttr())});
    at.create<nova::LaunchOp>(op->getLoc(), ref, params);
    for (Operation *member : llvm::reverse(group))
      member->erase();
    return success();
  }

private:
  ModuleOp kernels;
  SymbolTable symbols;
  int64_t next = 0;
};

LogicalResult outlineStep(func::FuncOp step, Outliner &outliner) {
  Block &entry = step.front();
  // Copies as structured ops.
  for (auto copy : llvm::make_early_inc_range(entry.getOps<memref::CopyOp>())) {
    OpBuilder b(copy);
    b.create<linalg::CopyOp>(copy.getLoc(), ValueRange{copy.getSource()},
                             ValueRange{copy.getTarget()});
    copy.erase();
  }
  outliner.written = writtenRoots(entry);
  SmallVector<Operation *> compute;
  for (Operation &op : entry)
    if (!isPlanOp(&op) && !isCloneable(&op) && !outliner.isClonedRead(&op))
      compute.push_back(&op);
  llvm::DenseMap<Value, size_t> last = lastUses(compute);
  // A data-parallel sum between two compute ops reads the first one's
  // result and is read by the second: they stay apart (one kernel would run
  // both after the sum).
  auto sumBetween = [](Operation *a, Operation *b) {
    for (Operation *op = a->getNextNode(); op && op != b; op = op->getNextNode())
      if (isa<nova::AllReduceOp>(op))
        return true;
    return false;
  };
  for (size_t i = 0; i < compute.size();) {
    // A matmul's kernel also takes the fill that initializes its result (the
    // matmul then starts from zero in registers) and the elementwise op that
    // consumes the result (applied to the register tiles before they are
    // stored: the result itself is never written).
    SmallVector<Operation *> group{compute[i++]};
    if (i < compute.size() && initializes(group.back(), compute[i]) && !sumBetween(group.back(), compute[i]))
      group.push_back(compute[i++]);
    if (i < compute.size() && isEpilogue(group.back(), compute[i], i, last) &&
        !sumBetween(group.back(), compute[i]))
      group.push_back(compute[i++]);
    if (failed(outliner.outline(group)))
      return failure();
  }
  // Views and constants now live in the kernels.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(entry)))
    if ((isCloneable(&op) || outliner.isClonedRead(&op)) && op.use_empty())
      op.erase();
  return success();
}

struct NovaOutlineKernels : mlir::nova::impl::NovaOutlineKernelsBase<NovaOutlineKernels> {
  using NovaOutlineKernelsBase::NovaOutlineKernelsBase;
  void runOnOperation() override {
    ModuleOp top = getOperation();
    SmallVector<func::FuncOp> steps;
    for (auto f : top.getOps<func::FuncOp>())
      if (!f.isExternal() && f.isPublic())
        steps.push_back(f);
    if (steps.empty())
      return;
    Outliner outliner(getOrCreateKernelsModule(top));
    for (func::FuncOp step : steps) {
      if (!step.getBody().hasOneBlock()) {
        step.emitError("nova-outline-kernels: the step must be one block of buffer code");
        return signalPassFailure();
      }
      if (failed(outlineStep(step, outliner)))
        return signalPassFailure();
    }
  }
};

} // namespace
