//===- CpuConfigurator.h - lowering decisions for CPU kernels ----*- C++ -*-===//
//
// A pure function from (kernel root op, target facts) to the kernel's
// #nova.lowering_config: no timing, no search, the same input always gives
// the same decision. The facts are the CPU's vector width and registers,
// cores and cache sizes (from ::nova::TargetDesc).
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CPU_CPUCONFIGURATOR_H
#define NOVA_COMPILER_TARGET_CPU_CPUCONFIGURATOR_H

#include "compiler/dialect/NovaDialect.h"

namespace mlir::nova {

struct CpuFacts {
  int64_t vectorBits = 512;
  int64_t vectorRegisters = 32;
  int64_t cores = 1;
  int64_t l1dBytes = 48 * 1024;
  int64_t l2Bytes = 2 * 1024 * 1024;
  int64_t fmaUnits = 2;
  int64_t fmaLatency = 4;
  /// Float32 matmuls run on AMX tiles with bf16 operands (the module asked
  /// for bf16 and the target has amx_bf16).
  bool amxBf16Matmul = false;
  /// Float32 matmuls run as AVX512-BF16 dot products with bf16 operands
  /// (the module asked for bf16, the target has avx512_bf16 and no AMX).
  bool dotBf16Matmul = false;
};

/// The decision for the kernel whose compute op is `root`.
LoweringConfigAttr configureCpuKernel(Operation *root, const CpuFacts &facts);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CPU_CPUCONFIGURATOR_H
