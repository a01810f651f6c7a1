//===- NovaDialect.cpp - dialect registration --------------------*- C++ -*-===//
//
// Registers the nova ops with the dialect. The ops' shape rules live in
// NovaOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"

using namespace mlir;
using namespace mlir::nova;

#include "compiler/dialect/NovaOpsDialect.cpp.inc"
#include "compiler/dialect/NovaInterfaces.cpp.inc"

void NovaDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "compiler/dialect/NovaOps.cpp.inc"
      >();
  registerAttributes();
}
