//===- NovaBufferization.cpp - bufferizing nova.attention_kernel -*- C++ -*-===//
//
// nova.attention_kernel is destination style: one-shot bufferization gives
// its init a buffer (the caller's output when empty-tensor elimination finds
// one), passes its inputs' buffers, and the op then writes that buffer and
// returns nothing. Its init is written whole and never read, so an empty
// init needs no copy and no initialization (the DPS default says otherwise).
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaBufferization.h"
#include "compiler/dialect/NovaDialect.h"

#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"

using namespace mlir;
using namespace mlir::bufferization;

namespace {

struct AttentionKernelBufferization
    : DstBufferizableOpInterfaceExternalModel<AttentionKernelBufferization,
                                              nova::AttentionKernelOp> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand, const AnalysisState &) const {
    return !cast<DestinationStyleOpInterface>(op).isDpsInit(&operand);
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options) const {
    auto kernel = cast<nova::AttentionKernelOp>(op);
    SmallVector<Value> inputs;
    for (Value in : kernel.getInputs()) {
      FailureOr<Value> buffer = getBuffer(rewriter, in, options);
      if (failed(buffer))
        return failure();
      inputs.push_back(*buffer);
    }
    FailureOr<Value> init = getBuffer(rewriter, kernel.getInit(), options);
    if (failed(init))
      return failure();
    rewriter.setInsertionPoint(op);
    rewriter.create<nova::AttentionKernelOp>(op->getLoc(), TypeRange{}, inputs, *init,
                                             kernel.getHeadsAttr(), kernel.getScaleAttr(),
                                             kernel.getBackwardAttr());
    replaceOpWithBufferizedValues(rewriter, op, *init);
    return success();
  }
};

} // namespace

void mlir::nova::registerNovaBufferizationModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, NovaDialect *) {
    AttentionKernelOp::attachInterface<AttentionKernelBufferization>(*ctx);
  });
}
