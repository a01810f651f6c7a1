//===- NovaDialect.td - the nova dialect ------------------------*- tablegen -*-===//
//
// `nova` is the dialect a traced training step lives in: value semantics on
// ranked tensors, one op per user-level operation. Shapes are static; every
// op infers its result type from its operands and attributes, so the shape
// rules are written once (inferReturnTypes) and serve as verifier too.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_DIALECT
#define NOVA_DIALECT

include "mlir/IR/OpBase.td"

def Nova_Dialect : Dialect {
  let name = "nova";
  let summary = "Tensor-level ops of a traced training step";
  let cppNamespace = "::mlir::nova";
  // Inherent attributes stay in the attribute dictionary: the front-end builder
  // creates ops generically by name (OperationState) and infers their types.
  let usePropertiesForAttributes = 0;
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
}

class Nova_Op<string mnemonic, list<Trait> traits = []>
    : Op<Nova_Dialect, mnemonic, traits>;

#endif // NOVA_DIALECT
