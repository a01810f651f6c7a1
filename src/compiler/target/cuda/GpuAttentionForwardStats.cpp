//===- GpuAttentionForwardStats.cpp - the backward reads the forward's statistics -===//

#include "compiler/target/cuda/GpuAttentionForwardStats.h"
#include "compiler/target/cuda/CudaTarget.h"
#include "compiler/target/cuda/GpuAttentionMma.h"
#include "compiler/target/cuda/GpuScalarKernels.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"

using namespace mlir;
using namespace mlir::nova;

MemRefType mlir::nova::attentionLseType(AttentionKernelOp op) {
  return MemRefType::get({op.batch() * int64_t(op.getHeads()), op.seq()}, Float32Type::get(op.getContext()));
}

namespace {

/// The launch buffer (numbered after the workgroup number) that `value`
/// of `op`'s kernel is all of (itself, or a view of all its elements: a
/// reshape), or none.
std::optional<unsigned> bufferIndex(Operation *op, Value value) {
  auto arg = dyn_cast<BlockArgument>(bufferRoot(value));
  if (!arg || arg.getOwner() != op->getBlock() || arg.getArgNumber() == 0 ||
      cast<MemRefType>(value.getType()).getNumElements() != cast<MemRefType>(arg.getType()).getNumElements())
    return std::nullopt;
  return arg.getArgNumber() - 1;
}

/// Adds `line` to `kernel`'s NOVA_EXPLAIN lines.
void explain(func::FuncOp kernel, StringRef line) {
  SmallVector<Attribute> why;
  if (auto old = kernel->getAttrOfType<ArrayAttr>(kGpuWhyAttr))
    why.assign(old.begin(), old.end());
  why.push_back(StringAttr::get(kernel.getContext(), line));
  kernel->setAttr(kGpuWhyAttr, ArrayAttr::get(kernel.getContext(), why));
}

} // namespace

void mlir::nova::reuseAttentionForwardStats(ModuleOp top, ModuleOp kernels) {
  SymbolTable symbols(kernels);
  auto kernelOf = [&](LaunchOp launch) {
    return symbols.lookup<func::FuncOp>(launch.getKernelAttr().getLeafReference().getValue());
  };
  auto attentionOf = [](func::FuncOp kernel) {
    return kernel && kernel->hasAttr(kGpuAttentionMmaAttr) ? dyn_cast_or_null<AttentionKernelOp>(soleComputeOp(kernel))
                                                           : AttentionKernelOp();
  };
  // The buffers a kernel writes (launch buffer numbers), or none where it
  // writes through something else; once a kernel.
  llvm::DenseMap<Operation *, std::optional<SmallVector<unsigned>>> writtenBy;
  auto written = [&](func::FuncOp kernel) -> const std::optional<SmallVector<unsigned>> & {
    auto [it, inserted] = writtenBy.try_emplace(kernel);
    if (inserted && kernel) {
      SmallVector<unsigned> args;
      bool known = true;
      forEachWrittenRoot(kernel, [&](Value root) {
        auto arg = dyn_cast<BlockArgument>(root);
        if (arg && arg.getOwner() == &kernel.getBody().front() && arg.getArgNumber() > 0)
          args.push_back(arg.getArgNumber() - 1);
        else if (!root.getDefiningOp<memref::AllocOp>())
          known = false; // a write through something else: take it as anything
      });
      if (known)
        it->second = std::move(args);
    }
    return it->second;
  };
  // The root buffers (step arguments or allocations) a launch writes.
  auto writtenRoots = [&](LaunchOp launch, SmallVectorImpl<Value> &roots) {
    const std::optional<SmallVector<unsigned>> &args = written(kernelOf(launch));
    if (!args)
      return false;
    for (unsigned arg : *args)
      roots.push_back(bufferRoot(launch.getBuffers()[arg]));
    return true;
  };

  // The query-rows kernels on the tensor cores, and for each of their
  // launches the forward launch it reads the statistics of.
  struct Pair {
    LaunchOp queries, forward;
    /// The forward's result buffer, O.
    Value out;
  };
  llvm::MapVector<Operation *, SmallVector<Pair>> paired; // by query-rows kernel
  for (auto kernel : kernels.getOps<func::FuncOp>()) {
    AttentionKernelOp op = attentionOf(kernel);
    if (!op || attentionBackwardPart(op) != AttentionBackwardPart::queries ||
        kernel->hasAttr(kAttentionForwardStatsAttr))
      continue;
    std::optional<unsigned> qkvAt = bufferIndex(op, op.getInputs()[0]);
    SmallVector<LaunchOp> launches = launchesOf(top, kernel.getSymName());
    if (!qkvAt || launches.empty())
      continue;
    SmallVector<Pair> pairs;
    for (LaunchOp queries : launches) {
      Value qkvBuffer = queries.getBuffers()[*qkvAt], qkv = bufferRoot(qkvBuffer);
      LaunchOp forward;
      // The nearest launch before it of a matching forward on the same qkv.
      for (Operation *at = queries->getPrevNode(); at && !forward; at = at->getPrevNode()) {
        auto launch = dyn_cast<LaunchOp>(at);
        AttentionKernelOp f = launch ? attentionOf(kernelOf(launch)) : AttentionKernelOp();
        if (!f || f.getBackward() || f.getHeads() != op.getHeads() || f.getScale() != op.getScale() ||
            f.getInputs()[0].getType() != op.getInputs()[0].getType())
          continue;
        std::optional<unsigned> at0 = bufferIndex(f, f.getInputs()[0]), out = bufferIndex(f, f.getInit());
        // The same qkv buffer, and O a whole allocation or step argument.
        if (at0 && out && launch.getBuffers()[*at0] == qkvBuffer &&
            launch.getBuffers()[*out] == bufferRoot(launch.getBuffers()[*out]))
          forward = launch;
      }
      if (!forward)
        break;
      AttentionKernelOp f = attentionOf(kernelOf(forward));
      Value out = forward.getBuffers()[*bufferIndex(f, f.getInit())];
      if (!pairs.empty() && out.getType() != pairs.front().out.getType())
        break;
      // Neither qkv nor O written between them.
      bool clean = true;
      for (Operation *at = forward->getNextNode(); at != queries.getOperation() && clean; at = at->getNextNode()) {
        SmallVector<Value> roots;
        if (auto launch = dyn_cast<LaunchOp>(at))
          clean = writtenRoots(launch, roots);
        else if (isa<MemoryEffectOpInterface>(at)) // allocations, collectives
          forEachWrittenRoot(at, [&](Value root) { roots.push_back(root); });
        else
          clean = false; // effects unknown
        clean = clean && !llvm::is_contained(roots, qkv) && !llvm::is_contained(roots, out);
      }
      if (!clean)
        break;
      pairs.push_back({queries, forward, out});
    }
    if (pairs.size() == launches.size())
      paired[kernel] = std::move(pairs);
  }

  // Every launch of a forward kernel that one pair names writes its
  // log-sum-exp into a buffer of its own.
  llvm::DenseMap<Operation *, Value> lseOf; // forward launch -> its buffer
  llvm::SmallPtrSet<Operation *, 8> forwards;
  for (auto &[kernel, pairs] : paired)
    for (Pair &p : pairs)
      forwards.insert(kernelOf(p.forward));
  for (Operation *f : forwards) {
    auto kernel = cast<func::FuncOp>(f);
    MemRefType type = attentionLseType(attentionOf(kernel));
    addKernelArgument(kernel, type);
    kernel->setAttr(kAttentionWritesLseAttr, UnitAttr::get(kernel.getContext()));
    explain(kernel, "its rows' log-sum-exp into a buffer of their own, for the backward's query rows");
    for (LaunchOp launch : launchesOf(top, kernel.getSymName())) {
      OpBuilder b(launch);
      Value lse = b.create<memref::AllocOp>(launch.getLoc(), type, b.getI64IntegerAttr(64));
      launch.getBuffersMutable().append(lse);
      lseOf[launch] = lse;
    }
  }
  for (auto &[k, pairs] : paired) {
    auto kernel = cast<func::FuncOp>(k);
    addKernelArgument(kernel, pairs.front().out.getType());
    addKernelArgument(kernel, attentionLseType(attentionOf(kernelOf(pairs.front().forward))));
    kernel->setAttr(kAttentionForwardStatsAttr, UnitAttr::get(kernel.getContext()));
    explain(kernel, "the forward's log-sum-exp, and D = dO . O from its result: one pass over the keys (three "
                    "products a tile), where computing the statistics took a pass of two more");
    for (Pair &p : pairs) {
      p.queries.getBuffersMutable().append(ValueRange{p.out, lseOf.lookup(p.forward)});
      // O now lives until the query rows read it.
      for (Operation *user : llvm::make_early_inc_range(p.out.getUsers()))
        if (auto dealloc = dyn_cast<memref::DeallocOp>(user))
          if (dealloc->getBlock() == p.queries->getBlock() && dealloc->isBeforeInBlock(p.queries))
            dealloc->moveAfter(p.queries);
    }
  }
}

AttentionMmaBuffers mlir::nova::attentionKernelBuffers(func::FuncOp kernel, AttentionKernelOp op) {
  // Arguments after the op's: a backward's workspace (splitAttentionBackward),
  // then for kAttentionForwardStatsAttr O and the log-sum-exp; a forward's
  // log-sum-exp (kAttentionWritesLseAttr).
  auto args = kernel.getBody().front().getArguments();
  AttentionMmaBuffers buffers;
  const bool forwardStats = kernel->hasAttr(kAttentionForwardStatsAttr);
  if (op.getBackward())
    buffers.stats = args[args.size() - (forwardStats ? 3 : 1)];
  if (forwardStats || kernel->hasAttr(kAttentionWritesLseAttr))
    buffers.lse = args.back();
  if (forwardStats)
    buffers.forwardOut = args[args.size() - 2];
  return buffers;
}
