//===- NovaInterfaces.td - op interfaces of the nova dialect ----*- tablegen -*-===//
//
// NovaDifferentiable: each op that has a derivative builds its own
// vector-Jacobian product out of nova ops. The autodiff pass
// (transforms/Autodiff.cpp) is generic over this interface: it never looks at
// an op's name.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_INTERFACES
#define NOVA_INTERFACES

include "mlir/IR/OpBase.td"

def NovaDifferentiableOpInterface : OpInterface<"NovaDifferentiable"> {
  let description = [{
    An op whose results have a derivative with respect to its operands.
  }];
  let cppNamespace = "::mlir::nova";
  let methods = [
    InterfaceMethod<[{
        Given one cotangent per result (same types as the results), appends to
        `operandCotangents` one value per operand: the cotangent of that
        operand (same type as the operand), or a null Value where no gradient
        flows (integer operands, masks). Ops are built with `b` at its
        current insertion point.
      }],
      "::llvm::LogicalResult", "buildVjp",
      (ins "::mlir::OpBuilder &":$b,
           "::mlir::ValueRange":$resultCotangents,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandCotangents)>,
  ];
}

#endif // NOVA_INTERFACES
