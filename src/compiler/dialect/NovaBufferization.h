//===- NovaBufferization.h - nova ops under one-shot bufferization -*- C++ -*-===//

#ifndef NOVA_COMPILER_DIALECT_NOVABUFFERIZATION_H
#define NOVA_COMPILER_DIALECT_NOVABUFFERIZATION_H

#include "mlir/IR/DialectRegistry.h"

namespace mlir::nova {

/// Attaches the BufferizableOpInterface of nova.attention_kernel and
/// nova.layer_norm_kernel.
void registerNovaBufferizationModels(DialectRegistry &registry);

} // namespace mlir::nova

#endif // NOVA_COMPILER_DIALECT_NOVABUFFERIZATION_H
