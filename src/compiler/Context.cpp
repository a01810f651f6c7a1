//===- Context.cpp - dialect registration for the compiler -------*- C++ -*-===//

#include "compiler/Context.h"
#include "compiler/dialect/NovaBufferization.h"
#include "compiler/dialect/NovaDialect.h"
#include "compiler/target/cuda/PtxEmitter.h"

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Async/IR/Async.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Target/LLVMIR/Dialect/AMX/AMXToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"

using namespace mlir;

void mlir::nova::registerNovaCompilerDialects(DialectRegistry &registry) {
  registry.insert<nova::NovaDialect, func::FuncDialect, arith::ArithDialect,
                  math::MathDialect, linalg::LinalgDialect, tensor::TensorDialect,
                  bufferization::BufferizationDialect, memref::MemRefDialect,
                  scf::SCFDialect, cf::ControlFlowDialect, affine::AffineDialect,
                  index::IndexDialect, vector::VectorDialect, async::AsyncDialect,
                  LLVM::LLVMDialect, amx::AMXDialect>();
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  scf::registerBufferizableOpInterfaceExternalModels(registry);
  registerNovaBufferizationModels(registry);
  bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerAMXDialectTranslation(registry);
  registerGpuCodegenDialects(registry); // the CUDA target's kernels and their translation
}

MLIRContext &mlir::nova::compilerContext() {
  static MLIRContext *ctx = [] {
    DialectRegistry registry;
    registerNovaCompilerDialects(registry);
    auto *c = new MLIRContext(registry);
    // Only what tracing builds: the other dialects are loaded by
    // loadCompilerDialects() when a step is compiled, so that a step found
    // in the disk cache never pages in the code of the whole compiler.
    c->getOrLoadDialect<nova::NovaDialect>();
    c->getOrLoadDialect<func::FuncDialect>();
    return c;
  }();
  return *ctx;
}

void mlir::nova::loadCompilerDialects(MLIRContext &ctx) { ctx.loadAllAvailableDialects(); }

std::recursive_mutex &mlir::nova::compilerMutex() {
  static std::recursive_mutex m;
  return m;
}
