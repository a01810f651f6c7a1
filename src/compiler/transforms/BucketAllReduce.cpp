//===- BucketAllReduce.cpp - the nova-bucket-all-reduce pass --------------===//
//
// Data-parallel training sums every gradient over the ranks (nova.all_reduce,
// put there by the front end). One collective per gradient would pay the
// per-message cost hundreds of times; one for all of them could only start
// once the whole backward is done. So, as PyTorch DDP does at run time with
// hooks, gradients are grouped into buckets of about `bucket-bytes` in the
// order they are produced, and each bucket's sum starts right after the
// launch that produces its last gradient, while the rest of the backward
// runs, and is waited for right before the first launch that reads one of
// its sums. Here the order is the launch plan's, known before the step ever
// runs: no hooks and no graph splitting.
//
// On the step function after nova-outline-kernels: each memref
// nova.all_reduce names its gradient's buffer (through shape-only views of
// a whole allocation or step argument). For each, `ready` is the last launch
// before it that touches the buffer (its producer; accumulations included)
// and `firstUse` the first launch after it that does (its update). Sorted
// by `ready`, gradients join the open bucket while it has room and holds the
// same element type, and while every sum in it is still unread at the new
// gradient's `ready` (so starting the bucket there delays no reader). Then
// each bucket becomes
//   nova.all_reduce_start(%buffers) {bucket = k}  right after its last `ready`
//   nova.all_reduce_wait(%buffers) {bucket = k}   right before its first `firstUse`
// and the nova.all_reduce ops go. The bucket size is the pass option, else
// the module's `nova.bucket_bytes`, else 25 MiB (PyTorch DDP's default).
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"
#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"

#include <algorithm>

namespace mlir::nova {
#define GEN_PASS_DEF_NOVABUCKETALLREDUCE
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

constexpr int64_t kDefaultBucketBytes = 25 * 1024 * 1024;

struct Gradient {
  nova::AllReduceOp op;
  Value root;
  int64_t bytes = 0;
  Type element;
  size_t ready = 0;    // position of the last op before `op` touching root
  size_t firstUse = 0; // position of the first op after `op` touching root
};

/// A launch or a deallocation of `root` (views of it only matter where a
/// launch uses them: outlining put them in the kernels).
bool touches(Operation *op, Value root) {
  if (!isa<nova::LaunchOp, memref::DeallocOp>(op))
    return false;
  return llvm::any_of(op->getOperands(),
                      [&](Value v) { return isa<MemRefType>(v.getType()) && nova::bufferRoot(v) == root; });
}

LogicalResult bucketStep(func::FuncOp step, int64_t bucketBytes) {
  Block &entry = step.front();
  SmallVector<Operation *> ops;
  for (Operation &op : entry)
    ops.push_back(&op);
  llvm::DenseMap<Operation *, size_t> position;
  for (auto [i, op] : llvm::enumerate(ops))
    position[op] = i;

  SmallVector<Gradient> grads;
  for (auto [i, op] : llvm::enumerate(ops)) {
    auto reduce = dyn_cast<nova::AllReduceOp>(op);
    if (!reduce)
      continue;
    Value buffer = reduce.getInit();
    auto type = dyn_cast<MemRefType>(buffer.getType());
    if (!type)
      return reduce.emitOpError("nova-bucket-all-reduce: runs after bufferization, on buffers");
    Value root = nova::bufferRoot(buffer);
    auto rootType = cast<MemRefType>(root.getType());
    if (!rootType.hasStaticShape() || !rootType.getLayout().isIdentity() ||
        rootType.getNumElements() != type.getNumElements() ||
        rootType.getElementType() != type.getElementType())
      return reduce.emitOpError("nova-bucket-all-reduce: the gradient ")
             << type << " is a part of the buffer " << rootType
             << "; only a whole, identity-layout buffer can be summed over the ranks";
    Gradient g{reduce, root, type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8),
               type.getElementType()};
    g.ready = 0;
    if (Operation *def = root.getDefiningOp(); def && def->getBlock() == &entry)
      g.ready = position[def];
    for (size_t p = i; p-- > 0;)
      if (touches(ops[p], root)) {
        g.ready = std::max(g.ready, p);
        break;
      }
    g.firstUse = ops.size() - 1; // the terminator
    for (size_t p = i + 1; p < ops.size(); ++p)
      if (touches(ops[p], root)) {
        g.firstUse = p;
        break;
      }
    grads.push_back(g);
  }
  if (grads.empty())
    return success();

  llvm::stable_sort(grads, [](const Gradient &a, const Gradient &b) { return a.ready < b.ready; });
  SmallVector<SmallVector<Gradient *>> buckets;
  int64_t open = 0;
  size_t openFirstUse = 0;
  for (Gradient &g : grads) {
    bool join = !buckets.empty() && open + g.bytes <= bucketBytes &&
                buckets.back().front()->element == g.element && g.ready < openFirstUse;
    if (!join) {
      buckets.emplace_back();
      open = 0;
      openFirstUse = SIZE_MAX;
    }
    buckets.back().push_back(&g);
    open += g.bytes;
    openFirstUse = std::min(openFirstUse, g.firstUse);
  }

  OpBuilder b(step.getContext());
  for (auto [k, bucket] : llvm::enumerate(buckets)) {
    size_t ready = 0, firstUse = SIZE_MAX;
    SmallVector<Value> buffers;
    for (Gradient *g : bucket) {
      ready = std::max(ready, g->ready);
      firstUse = std::min(firstUse, g->firstUse);
      buffers.push_back(g->root);
    }
    Location loc = bucket.front()->op.getLoc();
    auto index = b.getI64IntegerAttr(static_cast<int64_t>(k));
    b.setInsertionPointAfter(ops[ready]);
    b.create<nova::AllReduceStartOp>(loc, index, buffers);
    b.setInsertionPoint(ops[firstUse]);
    b.create<nova::AllReduceWaitOp>(loc, index, buffers);
  }
  for (Gradient &g : grads) {
    Value view = g.op.getInit();
    g.op.erase();
    // Views that only fed the sum.
    while (Operation *def = view.getDefiningOp()) {
      if (!isa<ViewLikeOpInterface>(def) || !def->use_empty())
        break;
      view = cast<ViewLikeOpInterface>(def).getViewSource();
      def->erase();
    }
  }
  return success();
}

struct NovaBucketAllReduce : mlir::nova::impl::NovaBucketAllReduceBase<NovaBucketAllReduce> {
  using NovaBucketAllReduceBase::NovaBucketAllReduceBase;

  void runOnOperation() override {
    ModuleOp top = getOperation();
    int64_t bytes = bucketBytes;
    if (bytes <= 0) {
      auto attr = top->getAttrOfType<IntegerAttr>(mlir::nova::kBucketBytesAttr);
      bytes = attr && attr.getInt() > 0 ? attr.getInt() : kDefaultBucketBytes;
    }
    for (auto step : top.getOps<func::FuncOp>()) {
      if (step.isExternal() || !step.isPublic() || !step.getBody().hasOneBlock())
        continue;
      if (failed(bucketStep(step, bytes)))
        return signalPassFailure();
    }
  }
};

} // namespace
