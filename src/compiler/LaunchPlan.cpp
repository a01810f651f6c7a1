//===- LaunchPlan.cpp - the step function → the runtime's launch plan -===//
//
// See LaunchPlan.h. Kernels are numbered in order of first launch, and their
// exported symbols are nova_<kernel> (nova-emit-kernel-entries).
//
//===----------------------------------------------------------------------===//

#include "compiler/LaunchPlan.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <map>

using namespace mlir;

namespace {

constexpr uint64_t kAlignment = 64;

uint64_t bytesOf(MemRefType type) {
  return static_cast<uint64_t>(type.getNumElements()) *
         static_cast<uint64_t>((type.getElementTypeBitWidth() + 7) / 8);
}

struct Interval {
  size_t buffer;
  uint64_t bytes;
  size_t first, last;
};

/// Greedy by size: each buffer at the lowest aligned offset clear of every
/// already placed buffer whose lifetime overlaps. Returns the arena size.
uint64_t placeBuffers(std::vector<Interval> intervals, std::vector<uint64_t> &offsets) {
  std::stable_sort(intervals.begin(), intervals.end(),
                   [](const Interval &a, const Interval &b) { return a.bytes > b.bytes; });
  std::vector<const Interval *> placed;
  uint64_t arena = 0;
  for (const Interval &iv : intervals) {
    // Occupied ranges of overlapping lifetimes, by offset.
    std::vector<std::pair<uint64_t, uint64_t>> taken;
    for (const Interval *p : placed)
      if (p->first <= iv.last && iv.first <= p->last)
        taken.emplace_back(offsets[p->buffer], offsets[p->buffer] + p->bytes);
    std::sort(taken.begin(), taken.end());
    uint64_t offset = 0;
    for (auto [lo, hi] : taken) {
      if (offset + iv.bytes <= lo)
        break;
      offset = std::max(offset, (hi + kAlignment - 1) / kAlignment * kAlignment);
    }
    offsets[iv.buffer] = offset;
    arena = std::max(arena, offset + iv.bytes);
    placed.push_back(&iv);
  }
  return arena;
}

} // namespace

LogicalResult mlir::nova::buildLaunchPlan(func::FuncOp step, ModuleOp kernels,
                                          ::nova::ExecutableDesc &desc, std::string &error) {
  using ::nova::BufferRef;
  Block &entry = step.front();
  size_t numInputs = desc.inputs.size();
  // Step arguments: inputs, then the outputs that have a buffer of their own.
  std::vector<BufferRef> argRefs;
  for (size_t i = 0; i < numInputs; ++i)
    argRefs.push_back({BufferRef::Kind::input, static_cast<uint32_t>(i), 0,
                       static_cast<uint64_t>(::nova::numel(desc.inputs[i].shape)) *
                           ::nova::size_of(desc.inputs[i].dtype)});
  for (size_t o = 0; o < desc.outputs.size(); ++o)
    if (desc.aliases[o] < 0)
      argRefs.push_back({BufferRef::Kind::output, static_cast<uint32_t>(o), 0,
                         static_cast<uint64_t>(::nova::numel(desc.outputs[o].shape)) *
                             ::nova::size_of(desc.outputs[o].dtype)});
  if (argRefs.size() != entry.getNumArguments()) {
    error = "the step has " + std::to_string(entry.getNumArguments()) + " buffer arguments, its signature " +
            std::to_string(argRefs.size());
    return failure();
  }

  SymbolTable symbols(kernels);
  llvm::DenseMap<Value, size_t> bufferOf; // alloc result → buffer number
  std::vector<uint64_t> bufferBytes;
  std::vector<Interval> lives;
  std::map<std::string, uint32_t> kernelIndex;
  // Arena references are patched with offsets once all lifetimes are known.
  std::vector<std::pair<size_t, size_t>> arenaArgs; // (launch, arg) → buffer in bufferOfArg
  std::vector<size_t> bufferOfArg;

  for (Operation &op : entry) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      auto type = alloc.getType();
      if (!type.hasStaticShape() || !type.getLayout().isIdentity()) {
        error = "an allocation is not a static, identity-layout buffer";
        return failure();
      }
      bufferOf[alloc.getResult()] = bufferBytes.size();
      bufferBytes.push_back(bytesOf(type));
      lives.push_back({bufferBytes.size() - 1, bufferBytes.back(), SIZE_MAX, 0});
      continue;
    }
    if (isa<memref::DeallocOp, func::ReturnOp>(op))
      continue;
    auto launch = dyn_cast<mlir::nova::LaunchOp>(op);
    if (!launch) {
      std::string text;
      llvm::raw_string_ostream os(text);
      op.print(os);
      error = "the step still holds an op that is not part of a launch plan: " + text;
      return failure();
    }
    StringRef name = launch.getKernelAttr().getLeafReference().getValue();
    auto kernel = symbols.lookup<func::FuncOp>(name);
    if (!kernel) {
      error = "launch of unknown kernel " + name.str();
      return failure();
    }
    auto [it, inserted] = kernelIndex.try_emplace(name.str(), desc.kernels.size());
    if (inserted) {
      KernelDescription about = describedKernel(kernel);
      desc.kernels.push_back({"nova_" + name.str(), about.summary, about.flops, about.bytes});
    }
    ::nova::LaunchDesc l;
    l.kernel = it->second;
    LoweringConfigAttr config = loweringConfig(kernel);
    l.workgroups = config ? static_cast<uint64_t>(config.getWorkgroups()) : 1;
    size_t launchIndex = desc.launches.size();
    for (Value buffer : launch.getBuffers()) {
      if (auto arg = dyn_cast<BlockArgument>(buffer)) {
        l.args.push_back(argRefs[arg.getArgNumber()]);
        continue;
      }
      auto found = bufferOf.find(buffer);
      if (found == bufferOf.end()) {
        error = "a launch argument is neither a step argument nor an allocation";
        return failure();
      }
      size_t b = found->second;
      lives[b].first = std::min(lives[b].first, launchIndex);
      lives[b].last = std::max(lives[b].last, launchIndex);
      arenaArgs.emplace_back(launchIndex, l.args.size());
      bufferOfArg.push_back(b);
      l.args.push_back({BufferRef::Kind::arena, 0, 0, bufferBytes[b]});
    }
    desc.launches.push_back(std::move(l));
  }

  std::vector<Interval> used;
  for (const Interval &iv : lives)
    if (iv.first != SIZE_MAX)
      used.push_back(iv);
  std::vector<uint64_t> offsets(bufferBytes.size(), 0);
  desc.arena_bytes = placeBuffers(used, offsets);
  for (size_t i = 0; i < arenaArgs.size(); ++i) {
    auto [launch, arg] = arenaArgs[i];
    desc.launches[launch].args[arg].offset = offsets[bufferOfArg[i]];
  }
  return success();
}
