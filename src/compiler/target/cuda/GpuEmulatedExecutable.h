//===- GpuEmulatedExecutable.h - a GPU step run by the emulator -*- C++ -*-===//
//
// NOVA_GPU=emulate: a step compiled for a CUDA target runs on the CPU, each
// launch of its plan through the lane-level emulator (GpuEmulator.h) on the
// GPU IR its PTX was made from, the plan's buffers in one host arena. So
// whole training steps are checked against the float64 interpreter without
// a GPU. Slow (every thread of every block interpreted) and for tests.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUEMULATEDEXECUTABLE_H
#define NOVA_COMPILER_TARGET_CUDA_GPUEMULATEDEXECUTABLE_H

#include "nova/executable_desc.hpp"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>

namespace mlir::nova {

/// Whether NOVA_GPU=emulate asks for it.
bool gpuEmulationRequested();

/// `desc` (compiled for a GPU) run by the emulator on `kernels`, the GPU
/// kernels module the compiler captured before PTX (compileToDescription).
std::shared_ptr<::nova::Executable> makeEmulatedGpuExecutable(::nova::ExecutableDesc desc,
                                                             OwningOpRef<ModuleOp> kernels);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUEMULATEDEXECUTABLE_H
