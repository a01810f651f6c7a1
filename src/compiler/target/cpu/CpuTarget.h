//===- CpuTarget.h - the CPU target ------------------------------*- C++ -*-===//
//
// Configures kernels with the CPU configurator, lowers them through
// vector/scf to the LLVM dialect with bare-pointer memrefs and the runtime's
// entry ABI, and emits one ELF shared object (CpuCodegen.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CPU_CPUTARGET_H
#define NOVA_COMPILER_TARGET_CPU_CPUTARGET_H

#include "compiler/target/Target.h"

namespace mlir::nova {

class CpuTarget final : public Target {
public:
  using Target::Target;
  void addBeforeFusionPasses(OpPassManager &pm) const override;
  void addConfigurePasses(OpPassManager &pm) const override;
  std::vector<Stage> codegenStages() const override;
  FailureOr<Artifact> emit(ModuleOp kernels, const PipelineOptions &options, CompileReport &report,
                           std::string &error) const override;
};

/// Object code for a lowered kernels module: one LLVM module per kernel,
/// optimized (-O3) and compiled in parallel, linked into a shared object.
FailureOr<Artifact> emitCpuSharedObject(ModuleOp kernels, const ::nova::TargetDesc &desc,
                                        CompileReport &report, std::string &error);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CPU_CPUTARGET_H
