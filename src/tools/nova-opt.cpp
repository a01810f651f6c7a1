//===- nova-opt.cpp - mlir-opt with the nova dialect and passes --*- C++ -*-===//
//
// Registers every upstream dialect, pass and extension, the nova dialect,
// every nova pass and the nova-lower-to-llvm pipeline; nothing else.
//
//===----------------------------------------------------------------------===//

#include "compiler/Context.h"
#include "compiler/Pipeline.h"
#include "compiler/target/cuda/GpuPasses.h"
#include "compiler/target/cuda/PtxEmitter.h"
#include "compiler/transforms/Passes.h"

#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::registerAllPasses();
  mlir::nova::registerNovaPasses();
  mlir::nova::registerNovaPipelines();
  mlir::nova::registerNovaGpuPasses();
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::nova::registerNovaCompilerDialects(registry);
  mlir::nova::registerGpuCodegenDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Nova optimizer driver\n", registry));
}
