//===- LaunchPlan.h - the step function → the runtime's launch plan -*- C++ -*-===//
//
// After the shared stages the step is a launch plan in IR: allocations,
// nova.launch ops and deallocations over the step's memref arguments. This
// turns it into the plan half of an executable description: one entry per
// launch (kernel, workgroups, arguments), every allocation placed in one
// arena, and a summary of each kernel for humans.
//
// Arena placement: a buffer is live from the first launch that touches it to
// the last; buffers are placed largest first at the lowest 64-byte aligned
// offset that overlaps no live-at-the-same-time buffer already placed (the
// greedy-by-size planner of TFLite and XLA). The memory-planning issue
// refines this (in-place updates, rematerialization).
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_LAUNCHPLAN_H
#define NOVA_COMPILER_LAUNCHPLAN_H

#include "nova/executable_desc.hpp"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace mlir::nova {

/// One arena buffer: its size and the launches that touch it first and
/// last (it is live in between), and the kernel of the first (its producer).
struct BufferLife {
  uint64_t bytes = 0;
  size_t first = 0, last = 0;
  size_t kernel = 0;
};

/// Greedy by size: each buffer at the lowest 64-byte aligned offset clear of
/// every already placed buffer whose lifetime overlaps. Fills `offsets`
/// (one per buffer); returns the arena size. Without `reuse`
/// (NOVA_ARENA_REUSE=0), every buffer gets bytes of its own.
uint64_t placeBuffers(ArrayRef<BufferLife> buffers, std::vector<uint64_t> &offsets,
                      bool reuse = true);

/// "" when no two buffers live at the same time share arena bytes and every
/// offset is aligned; else which two do.
std::string checkPlacement(ArrayRef<BufferLife> buffers, ArrayRef<uint64_t> offsets);

/// What NOVA_EXPLAIN prints of a plan: the arena, the most bytes live at
/// once (a lower bound of any arena) and at which launch, the largest
/// buffers (indices into `buffers`).
struct MemoryPlan {
  uint64_t arenaBytes = 0;
  uint64_t peakLiveBytes = 0;
  size_t peakLaunch = 0;
  std::vector<size_t> largest;
  std::vector<BufferLife> buffers;
};
MemoryPlan summarizeMemory(ArrayRef<BufferLife> buffers, size_t launches, uint64_t arenaBytes,
                           size_t largest);

/// Fills desc.arena_bytes, desc.kernels and desc.launches from `step` (its
/// memref arguments: desc.inputs, then one per output that aliases no
/// input) and the configured kernels of the nested kernels module; and
/// `memory`, if not null. On failure, `error` names the op that does not
/// fit a plan (or the placement that broke the planner's invariant).
LogicalResult buildLaunchPlan(func::FuncOp step, ModuleOp kernels, ::nova::ExecutableDesc &desc,
                              std::string &error, MemoryPlan *memory = nullptr, bool reuse = true);

} // namespace mlir::nova

#endif // NOVA_COMPILER_LAUNCHPLAN_H
