//===- ShareRowStatistics.cpp - the nova-share-row-statistics pass -*- C++ -*-===//
//
// Row kernels of the same rows in one block share those rows' statistics
// (see Passes.td): the first forward computes them and writes them as a
// second result, each later kernel of the same rows reads them. The same
// rows: a cross-entropy's logits and labels (the backward reads the max
// and sum), a LayerNorm's input and eps (the backward and the VJP's
// normalized input read the mean and rstd; the normalized input, gamma 1
// and beta 0, then becomes the elementwise op it is, which fuses into the
// column sum that reads it). A kernel with no earlier
// forward of its rows (a gradient whose loss value is never used, so the
// forward was dropped) keeps computing them itself; so does every kernel
// of a step traced with NOVA_ROW_STATS=0 (the module's nova.row_stats),
// to measure the pass.
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"
#include "compiler/transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseMap.h"

#include <bit>
#include <tuple>

namespace mlir::nova {
#define GEN_PASS_DEF_NOVASHAREROWSTATISTICS
#include "compiler/transforms/Passes.h.inc"
} // namespace mlir::nova

using namespace mlir;
using mlir::nova::CrossEntropyKernelOp;
using mlir::nova::LayerNormKernelOp;

namespace {

/// What makes two row kernels' statistics the same: their block, their
/// rows, and the labels (cross-entropy) or eps (LayerNorm, as bits).
using RowsKey = std::tuple<Block *, Value, Value, uint64_t>;

/// `op` (a row kernel on tensors) remade with these inputs and inits, its
/// results typed like the inits, every other attribute kept; its results'
/// uses moved to the new op's first results.
Operation *remake(Operation *op, ValueRange inputs, ValueRange inits) {
  OpBuilder b(op);
  StringRef segments = CrossEntropyKernelOp::getOperandSegmentSizeAttr();
  OperationState state(op->getLoc(), op->getName());
  state.addOperands(inputs);
  state.addOperands(inits);
  state.addTypes(inits.getTypes());
  for (NamedAttribute a : op->getAttrs())
    if (a.getName() != segments)
      state.addAttribute(a.getName(), a.getValue());
  state.addAttribute(segments, b.getDenseI32ArrayAttr({static_cast<int32_t>(inputs.size()),
                                                       static_cast<int32_t>(inits.size())}));
  Operation *made = b.create(state);
  for (auto [from, to] : llvm::zip(op->getResults(), made->getResults()))
    from.replaceAllUsesWith(to);
  op->erase();
  return made;
}

/// Row kernel `op`'s key, whether it is a forward that can write the
/// statistics and whether it could read them; nullopt for other ops and
/// for row kernels that already have them.
struct RowKernel {
  RowsKey key;
  bool writer, reader;
};
std::optional<RowKernel> rowKernel(Operation *op) {
  if (op->getNumResults() == 0)
    return std::nullopt; // on buffers
  if (auto ce = dyn_cast<CrossEntropyKernelOp>(op)) {
    if (ce.getStats())
      return std::nullopt;
    ValueRange in = ce.getInputs();
    return RowKernel{{op->getBlock(), in[0], in[1], 0}, !ce.getBackward(), ce.getBackward()};
  }
  if (auto norm = dyn_cast<LayerNormKernelOp>(op)) {
    if (norm.getStats())
      return std::nullopt;
    uint64_t eps = std::bit_cast<uint64_t>(norm.getEps().convertToDouble());
    return RowKernel{{op->getBlock(), norm.getInputs()[0], Value(), eps}, !norm.getBackward(), true};
  }
  return std::nullopt;
}

/// The stats `writer` (a forward row kernel) writes: its second result,
/// once it is remade to write them into a [..., 2] init of its own.
Value writeStats(Operation *&writer) {
  if (writer->getNumResults() > 1)
    return writer->getResult(1);
  auto dps = cast<DestinationStyleOpInterface>(writer);
  auto x = cast<RankedTensorType>(dps.getDpsInputs()[0].getType());
  SmallVector<int64_t> shape(x.getShape().drop_back());
  shape.push_back(2);
  OpBuilder b(writer);
  Value stats = b.create<tensor::EmptyOp>(writer->getLoc(), shape, x.getElementType());
  SmallVector<Value> inits(dps.getDpsInits());
  inits.push_back(stats);
  writer = remake(writer, dps.getDpsInputs(), inits);
  return writer->getResult(1);
}

/// `v` with a fill of one value seen through (a splat constant as is).
Value throughFill(Value v) {
  if (auto fill = v.getDefiningOp<linalg::FillOp>())
    return fill.getDpsInputs()[0];
  return v;
}

/// A LayerNorm forward reading `stats` with gamma 1 and beta 0 (the VJP's
/// normalized input, for d(gamma)) as the elementwise op it then is,
/// (x - mean) rstd with the mean and rstd read from the stats, the
/// formula the kernel would run: linalg fuses it into its consumer (the
/// column sum of g xhat), so it is never stored. Null where `op` is not
/// that.
Value normalizedInput(LayerNormKernelOp op, Value stats) {
  ValueRange in = op.getInputs();
  if (op.getBackward() || !matchPattern(throughFill(in[1]), m_OneFloat()) ||
      !matchPattern(throughFill(in[2]), m_AnyZeroFloat()))
    return Value();
  auto type = cast<RankedTensorType>(op.getInit().getType());
  MLIRContext *ctx = op.getContext();
  const unsigned rank = unsigned(type.getRank());
  AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, ctx);
  auto statAt = [&](int64_t k) {
    SmallVector<AffineExpr> results(identity.getResults().drop_back());
    results.push_back(getAffineConstantExpr(k, ctx));
    return AffineMap::get(rank, 0, results, ctx);
  };
  OpBuilder b(op);
  SmallVector<utils::IteratorType> parallel(rank, utils::IteratorType::parallel);
  auto generic = b.create<linalg::GenericOp>(
      op.getLoc(), TypeRange{type}, ValueRange{in[0], stats, stats}, ValueRange{op.getInit()},
      SmallVector<AffineMap>{identity, statAt(0), statAt(1), identity}, parallel,
      [](OpBuilder &nb, Location l, ValueRange args) {
        Value centered = nb.create<arith::SubFOp>(l, args[0], args[1]);
        nb.create<linalg::YieldOp>(l, ValueRange{nb.create<arith::MulFOp>(l, centered, args[2])});
      });
  return generic->getResult(0);
}

struct NovaShareRowStatistics : mlir::nova::impl::NovaShareRowStatisticsBase<NovaShareRowStatistics> {
  void runOnOperation() override {
    auto enabled = getOperation()->getAttrOfType<BoolAttr>(mlir::nova::kRowStatsAttr);
    if (enabled && !enabled.getValue())
      return; // NOVA_ROW_STATS=0
    // In program order: each rows' first forward is their writer (made so
    // when a reader comes), every later kernel of them a reader.
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<CrossEntropyKernelOp, LayerNormKernelOp>(op))
        ops.push_back(op);
    });
    llvm::DenseMap<RowsKey, Operation *> writers;
    for (Operation *op : ops) {
      std::optional<RowKernel> kernel = rowKernel(op);
      if (!kernel)
        continue;
      auto found = writers.find(kernel->key);
      if (found == writers.end()) {
        if (kernel->writer)
          writers[kernel->key] = op;
        continue;
      }
      if (!kernel->reader)
        continue;
      Value stats = writeStats(found->second);
      if (auto norm = dyn_cast<LayerNormKernelOp>(op))
        if (Value xhat = normalizedInput(norm, stats)) {
          op->getResult(0).replaceAllUsesWith(xhat);
          op->erase();
          continue;
        }
      auto dps = cast<DestinationStyleOpInterface>(op);
      SmallVector<Value> inputs(dps.getDpsInputs());
      inputs.push_back(stats);
      remake(op, inputs, SmallVector<Value>(dps.getDpsInits()));
    }
  }
};

} // namespace
