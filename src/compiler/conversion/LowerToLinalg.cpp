//===- LowerToLinalg.cpp - the nova-lower-to-linalg pass ---------*- C++ -*-===//
//
// A full conversion: after it no nova op is left. Patterns come from the
// per-family files; ops a pattern creates (softmax's nova ops) are lowered in
// the same run.
//
//===----------------------------------------------------------------------===//

#include "compiler/conversion/NovaToLinalg.h"
#include "compiler/dialect/NovaDialect.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::nova {
#define GEN_PASS_DEF_NOVALOWERTOLINALG
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;

namespace {

struct NovaLowerToLinalg
    : mlir::nova::impl::NovaLowerToLinalgBase<NovaLowerToLinalg> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ConversionTarget target(*ctx);
    target.addIllegalDialect<nova::NovaDialect>();
    target.addLegalOp<ModuleOp>();
    // Attention, LayerNorm and cross-entropy stay one op each (destination style) for the
    // target to expand.
    target.addLegalOp<nova::AttentionKernelOp, nova::LayerNormKernelOp, nova::CrossEntropyKernelOp,
                      nova::AllReduceOp>();
    target.addLegalDialect<linalg::LinalgDialect, tensor::TensorDialect,
                           arith::ArithDialect, math::MathDialect,
                           scf::SCFDialect, func::FuncDialect>();
    RewritePatternSet patterns(ctx);
    nova::populateElementwiseToLinalgPatterns(patterns);
    nova::populateStructuredToLinalgPatterns(patterns);
    nova::populateIndexingToLinalgPatterns(patterns);
    if (failed(applyFullConversion(getOperation(), target, std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
