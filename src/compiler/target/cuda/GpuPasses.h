//===- GpuPasses.h - nova-opt entries of the CUDA target --------*- C++ -*-===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUPASSES_H
#define NOVA_COMPILER_TARGET_CUDA_GPUPASSES_H

#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlir::nova {

/// --nova-test-mma-matmul (TestMmaMatmul.cpp) and --nova-gpu-inline-math.
void registerNovaGpuPasses();

/// f32 math without libdevice calls (GpuInlineMath.cpp).
std::unique_ptr<Pass> createGpuInlineMath();
void registerGpuInlineMath();

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUPASSES_H
