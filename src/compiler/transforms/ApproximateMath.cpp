//===- ApproximateMath.cpp - the nova-approximate-math pass ------*- C++ -*-===//
//
// Applies MLIR's polynomial approximations of math ops (tanh, erf, exp,
// log, ...). They are defined for f32 (and vectors of it) only, so f64
// arithmetic keeps libm's accuracy. Accuracy is covered by the op tests,
// which compare compiled f32 results with the float64 interpreter at 1e-5.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVAAPPROXIMATEMATH
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

struct NovaApproximateMath
    : mlir::nova::impl::NovaApproximateMathBase<NovaApproximateMath> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
