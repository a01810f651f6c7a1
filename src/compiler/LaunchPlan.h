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

namespace mlir::nova {

/// Fills desc.arena_bytes, desc.kernels and desc.launches from `step` (its
/// memref arguments: desc.inputs, then one per output that aliases no
/// input) and the configured kernels of the nested kernels module. On
/// failure, `error` names the op that does not fit a plan.
LogicalResult buildLaunchPlan(func::FuncOp step, ModuleOp kernels, ::nova::ExecutableDesc &desc,
                              std::string &error);

} // namespace mlir::nova

#endif // NOVA_COMPILER_LAUNCHPLAN_H
