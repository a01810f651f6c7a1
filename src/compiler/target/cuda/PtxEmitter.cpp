//===- PtxEmitter.cpp - gpu.module -> PTX --------------------------------===//

#include "compiler/target/cuda/PtxEmitter.h"
#include "compiler/target/cuda/GpuPasses.h"
#include "compiler/target/cuda/MmaMatmulKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/GPU/Pipelines/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "llvm/Support/raw_ostream.h"

#include <mutex>

using namespace mlir;

void mlir::nova::registerGpuCodegenDialects(DialectRegistry &registry) {
  // What the kernels are written in, and what they become.
  registry.insert<gpu::GPUDialect, nvgpu::NVGPUDialect, NVVM::NVVMDialect, arith::ArithDialect, math::MathDialect,
                  memref::MemRefDialect, scf::SCFDialect, vector::VectorDialect, LLVM::LLVMDialect>();
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
}

std::string mlir::nova::ptxFeatures(const ::nova::TargetDesc &target) {
  return "+ptx" + std::to_string(target.ptx_version > 0 ? target.ptx_version : 76);
}

FailureOr<std::string> mlir::nova::emitPtx(ModuleOp module, const ::nova::TargetDesc &target,
                                           std::string &error) {
  if (!target.is_gpu() || target.compute_capability < 80) {
    // LLVM aborts the process on cp.async below sm_80 ("Cannot select").
    error = "PTX is emitted for CUDA targets of compute capability 8.0 or later, not " + target.name;
    return failure();
  }
  std::string diagnostics;
  ScopedDiagnosticHandler handler(module.getContext(), [&](Diagnostic &d) {
    // The serializer reports a missing CUDA toolkit as an error even for
    // `isa`, which needs none; only failures count (the pass result).
    llvm::raw_string_ostream os(diagnostics);
    os << d << "\n";
    return success();
  });
  // MLIR's gpu-lower-to-nvvm pipeline (19.1: the GPU half of
  // buildLowerToNVVMPassPipeline; there is no host code), stopped before
  // serialization to raise the alignment of kernels' paired accesses.
  static std::once_flag registered;
  std::call_once(registered, [] { registerAllPasses(); });
  PassManager pm(module.getContext());
  pm.addPass(createGpuInlineMath());
  std::string pipeline =
      "convert-nvgpu-to-nvvm,convert-vector-to-scf,convert-scf-to-cf,convert-nvvm-to-llvm,"
      "expand-strided-metadata,nvvm-attach-target{chip=" + target.cpu + " features=" + ptxFeatures(target) +
      " O=3},lower-affine,convert-arith-to-llvm,convert-index-to-llvm{index-bitwidth=64},canonicalize,cse,"
      "gpu.module(strip-debuginfo,convert-math-to-llvm,convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=true},canonicalize,cse,"
      "reconcile-unrealized-casts)";
  if (failed(parsePassPipeline(pipeline, pm))) {
    error = "the PTX pipeline does not parse: " + pipeline;
    return failure();
  }
  if (failed(pm.run(module))) {
    error = "lowering to PTX for " + target.cpu + " failed:\n" + diagnostics;
    return failure();
  }
  // A multiply feeding an add or subtract becomes one FMA, as nvcc's
  // default (-fmad=true) has it, and as the configurator counts the CUDA
  // cores (one fma.f32 a multiply-add): without the contract flag LLVM
  // keeps them apart and NVPTX pins each as mul.rn / add.rn, so ptxas
  // cannot fuse them either: two instructions a multiply-add. One rounding
  // instead of two: within every fp32 bound the kernels are checked at.
  module.walk([](Operation *op) {
    if (!isa<LLVM::FMulOp, LLVM::FAddOp, LLVM::FSubOp>(op))
      return;
    auto fm = cast<LLVM::FastmathFlagsInterface>(op);
    op->setAttr(fm.getFastmathAttrName(),
                LLVM::FastmathFlagsAttr::get(op->getContext(),
                                             fm.getFastmathAttr().getValue() | LLVM::FastmathFlags::contract));
  });
  // Kernels that promise it (kAlignedVectorsAttr): each vector load and
  // store aligned to its size, up to 16 bytes (LLVM keeps the element's
  // alignment, and NVPTX then splits each into scalar accesses).
  module.walk([](LLVM::LLVMFuncOp func) {
    if (!func->hasAttr(kAlignedVectorsAttr))
      return;
    auto alignment = [](Type t) -> int64_t {
      auto v = dyn_cast<VectorType>(t);
      if (!v || !v.getElementType().isIntOrFloat())
        return 0;
      int64_t bytes = v.getNumElements() * v.getElementTypeBitWidth() / 8;
      return bytes <= 16 && llvm::isPowerOf2_64(uint64_t(bytes)) ? bytes : 0;
    };
    func.walk([&](Operation *op) {
      if (auto store = dyn_cast<LLVM::StoreOp>(op))
        if (int64_t a = alignment(store.getValue().getType()))
          store.setAlignment(a);
      if (auto load = dyn_cast<LLVM::LoadOp>(op))
        if (int64_t a = alignment(load.getType()))
          load.setAlignment(a);
    });
  });
  PassManager serialize(module.getContext());
  if (failed(parsePassPipeline("gpu-module-to-binary{format=isa}", serialize)) || failed(serialize.run(module))) {
    error = "serializing PTX for " + target.cpu + " failed:\n" + diagnostics;
    return failure();
  }
  std::string ptx;
  module.walk([&](gpu::BinaryOp binary) {
    for (Attribute a : binary.getObjects())
      if (auto object = dyn_cast<gpu::ObjectAttr>(a)) {
        StringRef text = object.getObject().getValue();
        // The serializer's string ends with a NUL, which ptxas refuses.
        ptx += text.rtrim(StringRef("\0", 1)).str();
      }
  });
  if (ptx.empty()) {
    error = "lowering to PTX for " + target.cpu + " produced no PTX:\n" + diagnostics;
    return failure();
  }
  return ptx;
}
