//===- ParallelPtx.h - a step's PTX emitted on every CPU ------*- C++ -*-===//
//
// LLVM's NVPTX backend compiles one module on one thread, and a step's
// module holds every kernel of the step. So the step's gpu.module is cut
// into shards of whole kernels, each printed and parsed into a context of
// its own and emitted (emitPtx) on one of the machine's threads, and the
// shards' PTX is merged back into one module, the kernels in their first
// order. The merge takes only what it knows at module scope (the header,
// each shard's dynamic shared memory symbol, `.extern` declarations); a
// shard with anything else there (a global that two shards could both
// define) makes the whole step go through emitPtx on one thread instead.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_PARALLELPTX_H
#define NOVA_COMPILER_TARGET_CUDA_PARALLELPTX_H

#include "nova/target.hpp"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::nova {

/// Kernels a shard. The shards depend on the step alone, not on the
/// machine, so every machine emits the same PTX for a step; its threads
/// take the shards in turn.
inline constexpr size_t kKernelsPerShard = 16;

/// emitPtx's PTX for `module` (one gpu.module of kernels), in shards of
/// `kernelsPerShard` kernels on up to `threads` threads (one shard, or one
/// thread: emitPtx itself). `module` is left as it was when the work was
/// sharded, lowered in place otherwise.
FailureOr<std::string> emitPtxInParallel(ModuleOp module, const ::nova::TargetDesc &target, unsigned threads,
                                         std::string &error, size_t kernelsPerShard = kKernelsPerShard);

/// One PTX module of `shards` (each a whole module LLVM's NVPTX backend
/// wrote), with the entries in the order of `kernels` (every entry of every
/// shard named once); none where a shard has module-scope text the merge
/// does not know, or the shards' headers differ.
std::optional<std::string> mergePtxShards(const std::vector<std::string> &shards,
                                          const std::vector<std::string> &kernels);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_PARALLELPTX_H
