//===- PtxEmitter.h - gpu.module -> PTX -----------------------*- C++ -*-===//
//
// The CUDA tail's last step: f32 math inlined (no libdevice), then the GPU
// half of MLIR's gpu-lower-to-nvvm pipeline (nvgpu, gpu, vector, arith ...
// -> NVVM/LLVM) on every gpu.module, for the target's chip and PTX version,
// with bare-pointer kernel parameters (the runtime passes one device pointer
// per memref); then each vector access's own size as its alignment in
// kernels that promise it (kAlignedVectorsAttr: st.global.v2.f32,
// ld.shared.v4.f32), and LLVM's NVPTX backend.
// `isa` format: no CUDA toolkit is needed to produce PTX; ptxas (tests, CI)
// or the driver (at load) assembles it.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_PTXEMITTER_H
#define NOVA_COMPILER_TARGET_CUDA_PTXEMITTER_H

#include "nova/target.hpp"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"

#include <string>

namespace mlir::nova {

/// The dialects, translations and target attributes PTX emission needs.
void registerGpuCodegenDialects(DialectRegistry &registry);

/// Lowers every gpu.module in `module` (in place: each becomes a gpu.binary)
/// and returns their PTX, concatenated in order. On failure `error` holds
/// the diagnostics.
FailureOr<std::string> emitPtx(ModuleOp module, const ::nova::TargetDesc &target, std::string &error);

/// "+ptx76": the PTX ISA feature string for the target.
std::string ptxFeatures(const ::nova::TargetDesc &target);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_PTXEMITTER_H
