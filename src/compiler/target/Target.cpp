//===- Target.cpp - the target for a description ------------------------===//

#include "compiler/target/Target.h"
#include "compiler/target/cpu/CpuTarget.h"
#include "compiler/target/cuda/CudaTarget.h"

std::unique_ptr<mlir::nova::Target> mlir::nova::makeTarget(const ::nova::TargetDesc &desc) {
  if (desc.is_gpu())
    return std::make_unique<CudaTarget>(desc);
  return std::make_unique<CpuTarget>(desc);
}
