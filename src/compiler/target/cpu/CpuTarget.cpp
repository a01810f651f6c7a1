//===- CpuTarget.cpp - the CPU target's passes -------------------*- C++ -*-===//
//
// The CPU's tail of the pipeline, stage by stage:
//   loops  matmul kernels → register-blocked vector code over their
//          workgroup's block; reductions allowed to reassociate (so they
//          vectorize); every other linalg op → loops → cf; strided
//          metadata expanded
//   llvm   f32 transcendentals as polynomials, math/vector/arith/memref/func
//          → LLVM (memrefs as bare pointers: every kernel parameter is a
//          whole static buffer), then the runtime entry of each kernel
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cpu/CpuTarget.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace {
/// AVX512-BF16 dot products on 512-bit vectors (the kernels' vdpbf16ps).
bool hasDotBf16(const ::nova::TargetDesc &desc) { return desc.has("avx512_bf16") && desc.vector_bits >= 512; }
} // namespace

void mlir::nova::CpuTarget::addBeforeFusionPasses(OpPassManager &pm) const {
  NovaBf16AttentionQkvOptions qkv;
  qkv.vectorBits = desc.vector_bits;
  qkv.dotBf16 = hasDotBf16(desc);
  pm.addPass(createNovaBf16AttentionQkv(qkv));
}

void mlir::nova::CpuTarget::addConfigurePasses(OpPassManager &pm) const {
  NovaConfigureKernelsOptions facts;
  facts.vectorBits = desc.vector_bits;
  facts.vectorRegisters = desc.vector_registers;
  facts.cores = desc.cores;
  facts.l1dBytes = desc.l1d_bytes;
  facts.l2Bytes = desc.l2_bytes;
  facts.fmaUnits = desc.fma_units;
  facts.fmaLatency = desc.fma_latency;
  facts.amxBf16 = desc.has("amx_bf16") && desc.has("amx_tile");
  facts.avx512Bf16 = desc.has("avx512_bf16");
  pm.addPass(createNovaConfigureKernels(facts));
  pm.addPass(createNovaDistributeWorkgroups());
  pm.addPass(createNovaDropUnstoredResults());
}

std::vector<mlir::nova::Stage> mlir::nova::CpuTarget::codegenStages() const {
  int64_t vectorBits = desc.vector_bits;
  bool dotBf16 = hasDotBf16(desc);
  auto loops = [vectorBits, dotBf16](OpPassManager &pm) {
    NovaVectorizeMatmulOptions matmul;
    matmul.vectorBits = vectorBits;
    pm.addPass(createNovaVectorizeMatmul(matmul));
    NovaVectorizeAttentionOptions attention;
    attention.vectorBits = vectorBits;
    attention.dotBf16 = dotBf16;
    pm.addPass(createNovaVectorizeAttention(attention));
    NovaVectorizeRowsOptions rows;
    rows.vectorBits = vectorBits;
    pm.addPass(createNovaVectorizeRows(rows));
    pm.addPass(createNovaRelaxReductions());
    pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
    pm.addPass(memref::createExpandStridedMetadataPass());
    pm.addPass(createLowerAffinePass());
    pm.addPass(createConvertSCFToCFPass());
    pm.addPass(createCanonicalizerPass());
  };
  auto llvm = [](OpPassManager &pm) {
    // f32 transcendentals as inline polynomials; then math ops with an LLVM
    // intrinsic; the rest (f64 tanh, erf) call libm.
    pm.addPass(createNovaApproximateMath());
    pm.addPass(createConvertMathToLLVMPass());
    pm.addPass(createConvertMathToLibmPass());
    ConvertVectorToLLVMPassOptions vector;
    vector.amx = true; // amx_matmul kernels' tiles (nothing else uses the dialect)
    pm.addPass(createConvertVectorToLLVMPass(vector));
    pm.addPass(createArithToLLVMConversionPass());
    pm.addPass(createFinalizeMemRefToLLVMConversionPass());
    ConvertFuncToLLVMPassOptions func;
    func.useBarePtrCallConv = true;
    pm.addPass(createConvertFuncToLLVMPass(func));
    pm.addPass(createConvertControlFlowToLLVMPass());
    pm.addPass(createConvertIndexToLLVMPass());
    pm.addPass(createReconcileUnrealizedCastsPass());
    pm.addPass(createNovaEmitKernelEntries());
  };
  return {{"loops", loops}, {"llvm", llvm}};
}

FailureOr<mlir::nova::Artifact> mlir::nova::CpuTarget::emit(ModuleOp kernels,
                                                           const PipelineOptions &,
                                                           CompileReport &report,
                                                           std::string &error) const {
  return emitCpuSharedObject(kernels, desc, report, error);
}
