//===- Target.h - the seam between the shared pipeline and a device -*- C++ -*-===//
//
// A Target is a TargetDesc (every fact about the device, include/nova/target.hpp)
// plus what the compiler does differently for it:
//   - configure: the passes that give each kernel its #nova.lowering_config
//     and split it over workgroups (end of the shared "kernels" stage);
//   - codegen stages: the tail of the pipeline, run on the kernels module
//     once the launch plan has been taken out of the step;
//   - emit: the kernels module, lowered, to object code the runtime loads.
// Pipeline.cpp lists the shared stages and asks the target for the rest.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_TARGET_H
#define NOVA_COMPILER_TARGET_TARGET_H

#include "compiler/CompileReport.h"
#include "nova/target.hpp"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mlir::nova {

/// A named list of passes; the IR after each stage can be dumped.
struct Stage {
  std::string name;
  std::function<void(OpPassManager &)> addPasses;
};

/// Object code for the runtime (executable_desc.hpp).
struct Artifact {
  std::string format;
  std::vector<uint8_t> bytes;
  /// Machine code the object was assembled into, where the compiling
  /// machine could ("cubin" for PTX), or empty.
  std::string binaryFormat;
  std::vector<uint8_t> binary;
};

struct PipelineOptions;

class Target {
public:
  explicit Target(::nova::TargetDesc desc) : desc(std::move(desc)) {}
  virtual ~Target() = default;

  const ::nova::TargetDesc &description() const { return desc; }

  /// Passes on the step's linalg ops on tensors before elementwise fusion
  /// (run on the top module); none by default.
  virtual void addBeforeFusionPasses(OpPassManager &) const {}
  /// Whether the linalg stage fuses an elementwise producer of a matmul's
  /// lhs into it (FuseMatmulPrologue.cpp): the CPU's register kernels
  /// compute it as they pack the lhs; no GPU matmul kernel takes one.
  virtual bool fusesMatmulPrologues() const { return true; }
  /// Whether the backward recomputes a fused attention's output instead of
  /// keeping it from the forward (nova-rematerialize at its default level;
  /// NOVA_REMAT=cheap / =1 override): the CPU's attention is cheap beside
  /// the memory it saves.
  virtual bool recomputesAttention() const { return true; }
  /// Passes after outlining and deduplication that configure and distribute
  /// each kernel (run on the top module).
  virtual void addConfigurePasses(OpPassManager &pm) const = 0;
  /// The codegen tail, run on the kernels module alone.
  virtual std::vector<Stage> codegenStages() const = 0;
  /// Object code for the lowered kernels module, exporting each kernel's
  /// entry (nova_<kernel>); its phases go into `report`. On failure,
  /// `error` says why.
  virtual FailureOr<Artifact> emit(ModuleOp kernels, const PipelineOptions &options,
                                   CompileReport &report, std::string &error) const = 0;

protected:
  ::nova::TargetDesc desc;
};

/// The target for a description: CpuTarget, or CudaTarget for a GPU.
std::unique_ptr<Target> makeTarget(const ::nova::TargetDesc &desc);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_TARGET_H
