//===- Kernels.cpp - what every kernel pass needs to know --------*- C++ -*-===//

#include "compiler/transforms/Kernels.h"

using namespace mlir;

ModuleOp mlir::nova::kernelsModule(ModuleOp top) {
  for (auto m : top.getOps<ModuleOp>())
    if (m.getSymName() == kKernelsModuleName)
      return m;
  return {};
}

Operation *mlir::nova::kernelRoot(func::FuncOp kernel) {
  if (kernel.isExternal())
    return nullptr;
  Operation *term = kernel.front().getTerminator();
  return term->getPrevNode();
}

mlir::nova::LoweringConfigAttr mlir::nova::loweringConfig(func::FuncOp kernel) {
  return kernel->getAttrOfType<LoweringConfigAttr>(LoweringConfigAttr::name);
}
