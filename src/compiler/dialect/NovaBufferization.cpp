//===- NovaBufferization.cpp - bufferizing nova's kernel ops -----*- C++ -*-===//
//
// nova.attention_kernel, nova.layer_norm_kernel and nova.cross_entropy_kernel
// are destination style: one-shot bufferization gives
// each init a buffer (the caller's output when empty-tensor elimination finds
// one), passes its inputs' buffers, and the op then writes those buffers and
// returns nothing. Inits are written whole and never read, so an empty
// init needs no copy and no initialization (the DPS default says otherwise).
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaBufferization.h"
#include "compiler/dialect/NovaDialect.h"

#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"

using namespace mlir;
using namespace mlir::bufferization;

namespace {

/// For the destination-style kernel ops (nova.attention_kernel,
/// nova.layer_norm_kernel, nova.cross_entropy_kernel): an `inputs` list and
/// the inits (one, or a cross-entropy forward's two), attributes kept.
template <typename KernelOp>
struct KernelOpBufferization
    : DstBufferizableOpInterfaceExternalModel<KernelOpBufferization<KernelOp>, KernelOp> {
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand, const AnalysisState &) const {
    return !cast<DestinationStyleOpInterface>(op).isDpsInit(&operand);
  }

  /// A row kernel reads each position of an input (after the row's sums)
  /// before it writes that position of its result, so a result written
  /// over a dying input (nova-reuse-dying-inputs) needs no copy of it.
  /// Attention reads every key row for every query row: never.
  bool bufferizesToElementwiseAccess(Operation *op, const AnalysisState &, ArrayRef<OpOperand *>) const {
    return !isa<nova::AttentionKernelOp>(op);
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options) const {
    auto kernel = cast<KernelOp>(op);
    SmallVector<Value> inputs;
    for (Value in : kernel.getInputs()) {
      FailureOr<Value> buffer = getBuffer(rewriter, in, options);
      if (failed(buffer))
        return failure();
      inputs.push_back(*buffer);
    }
    SmallVector<Value> inits;
    for (Value init : cast<DestinationStyleOpInterface>(op).getDpsInits()) {
      FailureOr<Value> buffer = getBuffer(rewriter, init, options);
      if (failed(buffer))
        return failure();
      inits.push_back(*buffer);
    }
    rewriter.setInsertionPoint(op);
    OperationState state(op->getLoc(), op->getName());
    state.addOperands(inputs);
    state.addOperands(inits);
    state.addAttributes(op->getAttrs()); // operand segment sizes too: one buffer per value
    rewriter.create(state);
    replaceOpWithBufferizedValues(rewriter, op, inits);
    return success();
  }
};

/// nova.all_reduce: its init is read and written in place (a sum over the
/// ranks of what it holds), so one-shot bufferization gives it the
/// gradient's own buffer when nothing reads the gradient later.
struct AllReduceOpBufferization
    : DstBufferizableOpInterfaceExternalModel<AllReduceOpBufferization, nova::AllReduceOp> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &, const AnalysisState &) const {
    return true;
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options) const {
    auto reduce = cast<nova::AllReduceOp>(op);
    FailureOr<Value> init = getBuffer(rewriter, reduce.getInit(), options);
    if (failed(init))
      return failure();
    rewriter.setInsertionPoint(op);
    rewriter.create<nova::AllReduceOp>(op->getLoc(), TypeRange{}, ValueRange{*init}, op->getAttrs());
    replaceOpWithBufferizedValues(rewriter, op, *init);
    return success();
  }
};

} // namespace

void mlir::nova::registerNovaBufferizationModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, NovaDialect *) {
    AttentionKernelOp::attachInterface<KernelOpBufferization<AttentionKernelOp>>(*ctx);
    LayerNormKernelOp::attachInterface<KernelOpBufferization<LayerNormKernelOp>>(*ctx);
    CrossEntropyKernelOp::attachInterface<KernelOpBufferization<CrossEntropyKernelOp>>(*ctx);
    AllReduceOp::attachInterface<AllReduceOpBufferization>(*ctx);
  });
}
