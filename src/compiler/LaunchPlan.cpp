//===- LaunchPlan.cpp - the step function → the runtime's launch plan -===//
//
// See LaunchPlan.h. Kernels are numbered in order of first launch, and their
// exported symbols are nova_<kernel> (nova-emit-kernel-entries).
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cuda/CudaTarget.h"
#include "compiler/target/cuda/StepMmaMatmul.h"
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

} // namespace

uint64_t mlir::nova::placeBuffers(ArrayRef<BufferLife> buffers, std::vector<uint64_t> &offsets,
                                  bool reuse) {
  offsets.assign(buffers.size(), 0);
  if (!reuse) {
    uint64_t end = 0;
    for (size_t i = 0; i < buffers.size(); ++i) {
      offsets[i] = end;
      end += (buffers[i].bytes + kAlignment - 1) / kAlignment * kAlignment;
    }
    return end;
  }
  std::vector<size_t> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> placed;
  uint64_t arena = 0;
  for (size_t i : order) {
    const BufferLife &iv = buffers[i];
    // Occupied ranges of overlapping lifetimes, by offset.
    std::vector<std::pair<uint64_t, uint64_t>> taken;
    for (size_t p : placed)
      if (buffers[p].first <= iv.last && iv.first <= buffers[p].last)
        taken.emplace_back(offsets[p], offsets[p] + buffers[p].bytes);
    std::sort(taken.begin(), taken.end());
    uint64_t offset = 0;
    for (auto [lo, hi] : taken) {
      if (offset + iv.bytes <= lo)
        break;
      offset = std::max(offset, (hi + kAlignment - 1) / kAlignment * kAlignment);
    }
    offsets[i] = offset;
    arena = std::max(arena, offset + iv.bytes);
    placed.push_back(i);
  }
  return arena;
}

std::string mlir::nova::checkPlacement(ArrayRef<BufferLife> buffers, ArrayRef<uint64_t> offsets) {
  for (size_t a = 0; a < buffers.size(); ++a) {
    if (offsets[a] % kAlignment != 0)
      return "buffer " + std::to_string(a) + " is at offset " + std::to_string(offsets[a]) +
             ", not a multiple of " + std::to_string(kAlignment);
    for (size_t b = a + 1; b < buffers.size(); ++b) {
      bool together = buffers[a].first <= buffers[b].last && buffers[b].first <= buffers[a].last;
      bool overlap = offsets[a] < offsets[b] + buffers[b].bytes && offsets[b] < offsets[a] + buffers[a].bytes &&
                     buffers[a].bytes > 0 && buffers[b].bytes > 0;
      if (together && overlap)
        return "buffers " + std::to_string(a) + " and " + std::to_string(b) +
               " are live together (launches " + std::to_string(buffers[a].first) + ".." +
               std::to_string(buffers[a].last) + " and " + std::to_string(buffers[b].first) + ".." +
               std::to_string(buffers[b].last) + ") and overlap in the arena";
    }
  }
  return "";
}

mlir::nova::MemoryPlan mlir::nova::summarizeMemory(ArrayRef<BufferLife> buffers, size_t launches,
                                                   uint64_t arenaBytes, size_t largest) {
  MemoryPlan plan;
  plan.arenaBytes = arenaBytes;
  // Live bytes per launch: +bytes at first, -bytes after last.
  std::vector<int64_t> delta(launches + 1, 0);
  for (const BufferLife &b : buffers) {
    delta[b.first] += static_cast<int64_t>(b.bytes);
    delta[b.last + 1] -= static_cast<int64_t>(b.bytes);
  }
  int64_t live = 0;
  for (size_t l = 0; l < launches; ++l) {
    live += delta[l];
    if (static_cast<uint64_t>(live) > plan.peakLiveBytes) {
      plan.peakLiveBytes = static_cast<uint64_t>(live);
      plan.peakLaunch = l;
    }
  }
  std::vector<size_t> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  order.resize(std::min(order.size(), largest));
  plan.largest = order;
  return plan;
}

LogicalResult mlir::nova::buildLaunchPlan(func::FuncOp step, ModuleOp kernels,
                                          ::nova::ExecutableDesc &desc, std::string &error,
                                          MemoryPlan *memory, bool reuse) {
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
  std::vector<BufferLife> lives;
  std::map<std::string, uint32_t> kernelIndex;
  // Arena references are patched with offsets once all lifetimes are known.
  std::vector<std::pair<size_t, size_t>> arenaArgs; // (launch, arg) → buffer in bufferOfArg
  std::vector<size_t> bufferOfArg;
  // Arena buffers of collectives: (collective, buffer slot, buffer), and the
  // collectives started and not yet waited for, by bucket.
  struct CollectiveArg {
    size_t collective, slot, buffer;
  };
  std::vector<CollectiveArg> collectiveArgs;
  std::map<int64_t, size_t> bucketOf;
  // A step argument's reference, or an arena buffer's (offset patched later).
  auto refOf = [&](Value buffer, const char *what) -> FailureOr<BufferRef> {
    if (auto arg = dyn_cast<BlockArgument>(buffer))
      return argRefs[arg.getArgNumber()];
    auto found = bufferOf.find(buffer);
    if (found == bufferOf.end()) {
      error = std::string(what) + " is neither a step argument nor an allocation";
      return failure();
    }
    return BufferRef{BufferRef::Kind::arena, 0, 0, bufferBytes[found->second]};
  };

  for (Operation &op : entry) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
      auto type = alloc.getType();
      if (!type.hasStaticShape() || !type.getLayout().isIdentity()) {
        error = "an allocation is not a static, identity-layout buffer";
        return failure();
      }
      bufferOf[alloc.getResult()] = bufferBytes.size();
      bufferBytes.push_back(bytesOf(type));
      lives.push_back({bufferBytes.back(), SIZE_MAX, 0, 0});
      continue;
    }
    if (isa<memref::DeallocOp, func::ReturnOp>(op))
      continue;
    // A bucket's sum over the ranks: started once the launches so far have
    // run, waited for before the next launch (nova-bucket-all-reduce).
    if (auto start = dyn_cast<AllReduceStartOp>(op)) {
      ::nova::CollectiveDesc c;
      c.after_launch = static_cast<uint32_t>(desc.launches.size());
      c.before_launch = c.after_launch;
      Type element = cast<MemRefType>(start.getBuffers()[0].getType()).getElementType();
      c.dtype = element.isF64() ? ::nova::DType::f64 : ::nova::DType::f32;
      for (Value buffer : start.getBuffers()) {
        if (cast<MemRefType>(buffer.getType()).getElementType() != element) {
          error = "an all-reduce bucket mixes element types";
          return failure();
        }
        FailureOr<BufferRef> ref = refOf(buffer, "an all-reduce buffer");
        if (failed(ref))
          return failure();
        if (ref->kind == BufferRef::Kind::arena)
          collectiveArgs.push_back({desc.collectives.size(), c.buffers.size(), bufferOf.lookup(buffer)});
        c.buffers.push_back(*ref);
      }
      bucketOf[start.getBucket()] = desc.collectives.size();
      desc.collectives.push_back(std::move(c));
      continue;
    }
    if (auto wait = dyn_cast<AllReduceWaitOp>(op)) {
      auto it = bucketOf.find(wait.getBucket());
      if (it == bucketOf.end()) {
        error = "all-reduce bucket " + std::to_string(wait.getBucket()) + " is waited for before it starts";
        return failure();
      }
      desc.collectives[it->second].before_launch = static_cast<uint32_t>(desc.launches.size());
      bucketOf.erase(it);
      continue;
    }
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
      if (auto threads = kernel->getAttrOfType<IntegerAttr>(kGpuBlockThreadsAttr))
        desc.kernels.back().threads = static_cast<uint32_t>(threads.getInt());
      if (auto shared = kernel->getAttrOfType<IntegerAttr>(kGpuSharedBytesAttr))
        desc.kernels.back().shared_bytes = static_cast<uint32_t>(shared.getInt());
      if (auto cluster = kernel->getAttrOfType<IntegerAttr>(kGpuClusterAttr))
        desc.kernels.back().cluster = static_cast<uint32_t>(cluster.getInt());
      FailureOr<std::vector<::nova::TensorMapDesc>> maps = tensorMapsOf(kernel);
      if (failed(maps)) {
        error = "kernel " + name.str() + " has a malformed tensor map (f32, bf16 or f16 elements)";
        return failure();
      }
      desc.kernels.back().tensor_maps = std::move(*maps);
    }
    ::nova::LaunchDesc l;
    l.kernel = it->second;
    LoweringConfigAttr config = loweringConfig(kernel);
    l.workgroups = config ? static_cast<uint64_t>(config.getWorkgroups()) : 1;
    size_t launchIndex = desc.launches.size();
    for (Value buffer : launch.getBuffers()) {
      FailureOr<BufferRef> ref = refOf(buffer, "a launch argument");
      if (failed(ref))
        return failure();
      if (ref->kind != BufferRef::Kind::arena) {
        l.args.push_back(*ref);
        continue;
      }
      size_t b = bufferOf.lookup(buffer);
      if (lives[b].first == SIZE_MAX)
        lives[b].kernel = it->second; // the kernel that first touches it: its producer
      lives[b].first = std::min(lives[b].first, launchIndex);
      lives[b].last = std::max(lives[b].last, launchIndex);
      arenaArgs.emplace_back(launchIndex, l.args.size());
      bufferOfArg.push_back(b);
      l.args.push_back(*ref);
    }
    desc.launches.push_back(std::move(l));
  }

  if (!bucketOf.empty()) {
    error = "all-reduce bucket " + std::to_string(bucketOf.begin()->first) + " is never waited for";
    return failure();
  }
  // A buffer being summed over the ranks is live from the launch before its
  // start to the launch its wait precedes: no other buffer may take its
  // bytes while a peer's sum may still land in them.
  if (desc.launches.empty() && !collectiveArgs.empty()) {
    error = "an all-reduce of an arena buffer in a plan with no launch";
    return failure();
  }
  if (!desc.launches.empty())
    for (const CollectiveArg &a : collectiveArgs) {
      const ::nova::CollectiveDesc &c = desc.collectives[a.collective];
      size_t lastLaunch = desc.launches.size() - 1;
      size_t from = std::min<size_t>(c.after_launch == 0 ? 0 : c.after_launch - 1, lastLaunch);
      size_t to = std::min<size_t>(c.before_launch, lastLaunch);
      BufferLife &life = lives[a.buffer];
      if (life.first == SIZE_MAX) {
        life.first = from;
        life.last = to;
      } else {
        life.first = std::min(life.first, from);
        life.last = std::max(life.last, to);
      }
    }

  std::vector<BufferLife> used;
  std::vector<size_t> usedIndex(lives.size(), SIZE_MAX);
  for (size_t b = 0; b < lives.size(); ++b)
    if (lives[b].first != SIZE_MAX) {
      usedIndex[b] = used.size();
      used.push_back(lives[b]);
    }
  std::vector<uint64_t> offsets;
  desc.arena_bytes = placeBuffers(used, offsets, reuse);
  // The planner's one invariant, checked on every plan (the fuzzer's random
  // graphs make this a property test).
  if (std::string overlap = checkPlacement(used, offsets); !overlap.empty()) {
    error = "the arena plan is wrong: " + overlap;
    return failure();
  }
  for (size_t i = 0; i < arenaArgs.size(); ++i) {
    auto [launch, arg] = arenaArgs[i];
    desc.launches[launch].args[arg].offset = offsets[usedIndex[bufferOfArg[i]]];
  }
  for (const CollectiveArg &a : collectiveArgs)
    desc.collectives[a.collective].buffers[a.slot].offset = offsets[usedIndex[a.buffer]];
  if (memory) {
    *memory = summarizeMemory(used, desc.launches.size(), desc.arena_bytes, 8);
    memory->buffers = std::move(used);
  }
  return success();
}
