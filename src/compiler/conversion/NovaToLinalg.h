//===- NovaToLinalg.h - nova → linalg patterns, by op family -----*- C++ -*-===//

#ifndef NOVA_COMPILER_CONVERSION_NOVATOLINALG_H
#define NOVA_COMPILER_CONVERSION_NOVATOLINALG_H

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::nova {

/// add, sub, mul, div, max, greater, neg, exp, log, tanh, sqrt, rsqrt,
/// relu, erf, gelu.
void populateElementwiseToLinalgPatterns(RewritePatternSet &patterns);
/// matmul, reduce_*, softmax and log_softmax (via nova ops), broadcast,
/// reshape, transpose, one_hot, constant.
void populateStructuredToLinalgPatterns(RewritePatternSet &patterns);

/// slice, pad, gather, scatter_add, causal_mask.
void populateIndexingToLinalgPatterns(RewritePatternSet &patterns);

} // namespace mlir::nova

#endif // NOVA_COMPILER_CONVERSION_NOVATOLINALG_H
