//===- GpuPasses.h - nova-opt entries of the CUDA target --------*- C++ -*-===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUPASSES_H
#define NOVA_COMPILER_TARGET_CUDA_GPUPASSES_H

namespace mlir::nova {

/// --nova-test-mma-matmul (TestMmaMatmul.cpp).
void registerNovaGpuPasses();

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUPASSES_H
