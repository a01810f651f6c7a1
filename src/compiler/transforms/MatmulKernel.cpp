//===- MatmulKernel.cpp - recognising a vectorizable matmul ------*- C++ -*-===//

#include "compiler/transforms/MatmulKernel.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

int64_t mlir::nova::MatmulOperands::batch() const {
  int64_t b = 1;
  for (int64_t d = 0; d < batchRank; ++d)
    b *= outType.getDimSize(d);
  return b;
}

/// A fused matmul's body (FuseMatmulPrologue.cpp): arith and math ops on
/// the prologue inputs giving the lhs value, then out + lhs * rhs.
static bool prologueBodyMatches(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  unsigned n = body.getNumArguments();
  BlockArgument rhs = body.getArgument(n - 2), out = body.getArgument(n - 1);
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getNumOperands() == 1 ? yield.getOperand(0).getDefiningOp<arith::AddFOp>() : nullptr;
  if (!add)
    return false;
  Value product = add.getLhs() == out ? add.getRhs() : add.getRhs() == out ? add.getLhs() : Value();
  auto mul = product ? product.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul || (mul.getLhs() != rhs && mul.getRhs() != rhs) || mul.getLhs() == mul.getRhs())
    return false;
  if (!mul->hasOneUse() || !add->hasOneUse() || add->getNextNode() != yield || mul->getNextNode() != add)
    return false;
  for (Operation &o : body.without_terminator()) {
    if (&o == mul.getOperation() || &o == add.getOperation())
      continue;
    if (o.getNumRegions() != 0 || o.getNumResults() != 1 ||
        !isa<arith::ArithDialect, math::MathDialect>(o.getDialect()))
      return false;
    for (Value v : o.getOperands())
      if (v == rhs || v == out)
        return false;
  }
  return rhs.hasOneUse() && out.hasOneUse();
}

std::optional<mlir::nova::MatmulOperands> mlir::nova::matchMatmul(linalg::GenericOp op) {
  if (!isTaggedMatmul(op) || !op.hasPureBufferSemantics() ||
      op.getNumDpsInputs() < 2 || op.getNumDpsInits() != 1)
    return std::nullopt;
  MatmulOperands m;
  m.op = op;
  unsigned inputs = op.getNumDpsInputs();
  m.lhs = op.getDpsInputs()[0];
  m.rhs = op.getDpsInputs()[inputs - 1];
  m.out = op.getDpsInits()[0];
  // Anything but out + lhs * rhs in the body is a fused lhs producer (one
  // input or more: FuseMatmulPrologue.cpp).
  Block &body = op.getRegion().front();
  // out + lhs * rhs, or out + ext(lhs) * ext(rhs) of narrower operands
  // (bf16 copies: nova-gpu-bf16-operands).
  auto widened = [&] {
    if (body.getOperations().size() != 5)
      return false;
    auto first = dyn_cast<arith::ExtFOp>(body.front()), second = dyn_cast<arith::ExtFOp>(*++body.begin());
    return first && second && first.getIn() == body.getArgument(0) && second.getIn() == body.getArgument(1);
  };
  bool plain = inputs == 2 && (body.getOperations().size() == 3 || widened());
  if (!plain) {
    if (!prologueBodyMatches(op))
      return std::nullopt;
    AffineMap lhsMap = op.getIndexingMapsArray()[0];
    // The producer's inputs are read as the lhs is (each in its own float
    // type: a bf16 activation the body widens, nova-bf16-saved-activations).
    auto sameLayout = [&](Value v) {
      auto t = dyn_cast<MemRefType>(v.getType()), lhs = dyn_cast<MemRefType>(m.lhs.getType());
      return t && lhs && MemRefType::Builder(t).setElementType(lhs.getElementType()) == lhs;
    };
    for (unsigned i = 0; i + 1 < inputs; ++i) {
      Value v = op.getDpsInputs()[i];
      if (!sameLayout(v) || op.getIndexingMapsArray()[i] != lhsMap)
        return std::nullopt;
      m.prologueInputs.push_back(v);
    }
  }
  auto lhsType = dyn_cast<MemRefType>(m.lhs.getType());
  auto rhsType = dyn_cast<MemRefType>(m.rhs.getType());
  m.outType = dyn_cast<MemRefType>(m.out.getType());
  if (!lhsType || !rhsType || !m.outType || !lhsType.hasStaticShape() ||
      !rhsType.hasStaticShape() || !m.outType.hasStaticShape() ||
      !m.outType.getLayout().isIdentity())
    return std::nullopt;
  // The rhs is packed by rows of vectors (its last dim unit-stride) or, a
  // transposed view (nova-fold-transposes), by columns (its k dim
  // unit-stride).
  auto unitStride = [](MemRefType t, int64_t fromEnd) {
    int64_t offset;
    SmallVector<int64_t> strides;
    return succeeded(getStridesAndOffset(t, strides, offset)) &&
           static_cast<int64_t>(strides.size()) >= fromEnd && strides[strides.size() - fromEnd] == 1;
  };
  auto unitLastStride = [&](MemRefType t) { return unitStride(t, 1); };
  if (!unitLastStride(rhsType)) {
    if (!unitStride(rhsType, 2))
      return std::nullopt;
    m.rhsColumns = true;
  }
  Type elem = m.outType.getElementType();
  if (!elem.isF32() && !elem.isF64())
    return std::nullopt;
  int64_t rank = m.outType.getRank();
  m.batchRank = rank - 2;
  m.M = m.outType.getDimSize(rank - 2);
  m.N = m.outType.getDimSize(rank - 1);
  m.K = rhsType.getDimSize(rank - 2);
  // lhs is [.., m, k] or [.., k, m]: the map's last result tells which.
  AffineMap lhsMap = op.getIndexingMapsArray()[0];
  auto last = dyn_cast<AffineDimExpr>(lhsMap.getResult(rank - 1));
  if (!last)
    return std::nullopt;
  m.transposeA = last.getPosition() == static_cast<unsigned>(m.batchRank);
  // A transposed lhs is packed with vector loads along m: unit stride there.
  if (m.transposeA && !unitLastStride(lhsType))
    return std::nullopt;
  // A prologue runs where the lhs is packed: on vectors along m (transposed)
  // or along k (row-major), unit-stride either way.
  if (!m.prologueInputs.empty() && !m.transposeA && !unitLastStride(lhsType))
    return std::nullopt;
  return m;
}

Value mlir::nova::rhsColumnsView(OpBuilder &b, Location loc, const MatmulOperands &m) {
  SmallVector<int64_t> swapLast;
  for (int64_t d = 0; d < m.batchRank; ++d)
    swapLast.push_back(d);
  swapLast.append({m.batchRank + 1, m.batchRank});
  return b.create<memref::TransposeOp>(loc, m.rhs,
                                       AffineMapAttr::get(AffineMap::getPermutationMap(swapLast, b.getContext())));
}

bool mlir::nova::readsMatmulResult(Value v, Value out) {
  if (v == out)
    return true;
  auto expand = v.getDefiningOp<memref::ExpandShapeOp>();
  if (!expand || expand.getSrc() != out || expand.getSrcType().getRank() != 2 ||
      !expand.getResultType().hasStaticShape())
    return false;
  // [[0, .., r - 2], [r - 1]]: the rows split, the columns as they are.
  SmallVector<ReassociationIndices> groups = expand.getReassociationIndices();
  return groups.size() == 2 && groups[1].size() == 1;
}

std::pair<linalg::FillOp, linalg::GenericOp> mlir::nova::matmulNeighbours(const MatmulOperands &m) {
  auto fill = dyn_cast_or_null<linalg::FillOp>(m.op->getPrevNode());
  if (fill && (!fill.hasPureBufferSemantics() || fill.getDpsInits()[0] != m.out))
    fill = nullptr;
  auto epilogue = dyn_cast_or_null<linalg::GenericOp>(m.op->getNextNode());
  if (epilogue && !isRegisterEpilogue(m.op, epilogue))
    epilogue = nullptr;
  return {fill, epilogue};
}

bool mlir::nova::resultNeverStored(const MatmulOperands &m, int64_t nr, int64_t kc, linalg::FillOp fill,
                                   linalg::GenericOp epilogue) {
  if (!epilogue || m.M <= 0 || m.K <= 0 || m.N <= 0 || nr <= 0 || m.N % nr != 0 || m.K > kc)
    return false;
  for (int64_t d = 0; d < m.batchRank; ++d)
    if (m.outType.getDimSize(d) <= 0)
      return false;
  return !fill || matchPattern(fill.getDpsInputs()[0], m_AnyZeroFloat());
}

bool mlir::nova::isRegisterEpilogue(linalg::GenericOp matmul, linalg::GenericOp epilogue) {
  std::optional<MatmulOperands> m = matchMatmul(matmul);
  if (!m || !epilogue.hasPureBufferSemantics() || epilogue.getNumDpsInits() != 1 ||
      epilogue.getNumReductionLoops() != 0)
    return false;
  // Its loops are the result's dims, or the dims of the row-split view of
  // the result that it reads.
  int64_t rank = m->outType.getRank();
  for (Value in : epilogue.getDpsInputs())
    if (in != m->out && readsMatmulResult(in, m->out))
      rank = cast<MemRefType>(in.getType()).getRank();
  if (epilogue.getNumLoops() != static_cast<unsigned>(rank))
    return false;
  unsigned n = epilogue.getNumLoops() - 1;
  bool readsResult = false;
  for (OpOperand &operand : epilogue->getOpOperands()) {
    AffineMap map = epilogue.getMatchingIndexingMap(&operand);
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    if (!type)
      return false;
    if (bufferRoot(operand.get()) == bufferRoot(m->out) && epilogue.isDpsInit(&operand))
      return false; // written over the result it reads: not at once
    if (readsMatmulResult(operand.get(), m->out)) {
      if (!map.isIdentity() || type.getRank() != rank)
        return false;
      readsResult = true;
      continue;
    }
    if (epilogue.isDpsInit(&operand)) {
      if (!map.isIdentity() || !type.hasStaticShape() || !type.getLayout().isIdentity())
        return false;
      Type product = m->outType.getElementType(), result = type.getElementType();
      auto narrower = [&] {
        auto p = dyn_cast<FloatType>(product), r = dyn_cast<FloatType>(result);
        return p && r && r.getWidth() < p.getWidth();
      };
      if (result != product && !narrower())
        return false;
      continue;
    }
    // Inputs: dims and constants; n only as the last, unit-stride, index.
    for (auto [i, expr] : llvm::enumerate(map.getResults())) {
      if (isa<AffineConstantExpr>(expr))
        continue;
      auto dim = dyn_cast<AffineDimExpr>(expr);
      if (!dim)
        return false;
      if (dim.getPosition() == n && i + 1 != map.getNumResults())
        return false;
    }
    if (map.getNumResults() > 0 && map.getResults().back().isFunctionOfDim(n)) {
      int64_t offset;
      SmallVector<int64_t> strides;
      if (failed(getStridesAndOffset(type, strides, offset)) || strides.back() != 1)
        return false;
    }
    if (!type.getElementType().isIntOrFloat())
      return false;
  }
  if (!readsResult)
    return false;
  for (Operation &op : epilogue.getRegion().front().without_terminator()) {
    StringRef dialect = op.getName().getDialectNamespace();
    if ((dialect != "arith" && dialect != "math") || op.getNumRegions() != 0 ||
        op.getNumResults() != 1 ||
        (!op.hasTrait<OpTrait::Elementwise>() && !isa<arith::ConstantOp>(op)))
      return false;
  }
  return true;
}

BlockArgument mlir::nova::resultArgumentOnlyEpilogueReads(func::FuncOp kernel, const MatmulOperands &m,
                                                         linalg::FillOp fill, linalg::GenericOp epilogue) {
  auto arg = dyn_cast<BlockArgument>(m.out);
  if (!arg || arg.getOwner() != &kernel.front() || !epilogue)
    return {};
  for (OpOperand &use : arg.getUses()) {
    Operation *user = use.getOwner();
    if (user == m.op || (fill && user == fill.getOperation()))
      continue;
    if (user == epilogue.getOperation() && !epilogue.isDpsInit(&use))
      continue;
    if (isa<memref::ExpandShapeOp>(user) &&
        llvm::all_of(user->getUsers(), [&](Operation *u) { return u == epilogue.getOperation(); }))
      continue;
    return {};
  }
  return arg;
}

bool mlir::nova::dropUnstoredResult(func::FuncOp kernel, BlockArgument arg, ArrayRef<LaunchOp> launches) {
  const unsigned operand = arg.getArgNumber() - 1; // after the workgroup number
  if (launches.empty() || !llvm::all_of(launches, [&](LaunchOp launch) {
        Value buffer = launch.getBuffers()[operand];
        return isa_and_nonnull<memref::AllocOp>(buffer.getDefiningOp()) && buffer.hasOneUse();
      }))
    return false;
  OpBuilder b = OpBuilder::atBlockBegin(&kernel.front());
  auto placeholder = b.create<memref::AllocOp>(kernel.getLoc(), cast<MemRefType>(arg.getType()));
  placeholder->setAttr(kUnstoredAttr, b.getUnitAttr());
  arg.replaceAllUsesWith(placeholder);
  kernel.eraseArgument(arg.getArgNumber());
  for (LaunchOp launch : launches) {
    Operation *alloc = launch.getBuffers()[operand].getDefiningOp();
    launch->eraseOperand(operand);
    alloc->erase();
  }
  return true;
}
