//===- NovaToLinalg.h - nova → linalg patterns, by op family -----*- C++ -*-===//

#ifndef NOVA_COMPILER_CONVERSION_NOVATOLINALG_H
#define NOVA_COMPILER_CONVERSION_NOVATOLINALG_H

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::nova {

/// add, sub, mul, div, max, neg, exp, log, tanh, sqrt, rsqrt, relu, gelu.
void populateElementwiseToLinalgPatterns(RewritePatternSet &patterns);
/// matmul, reduce_*, softmax (via nova ops), broadcast, reshape, transpose,
/// constant.
void populateStructuredToLinalgPatterns(RewritePatternSet &patterns);

} // namespace mlir::nova

#endif // NOVA_COMPILER_CONVERSION_NOVATOLINALG_H
