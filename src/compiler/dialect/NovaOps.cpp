//===- NovaOps.cpp - shape rules and verifiers of nova ops -------*- C++ -*-===//
//
// Each op's result type is inferred here (InferTypeOpInterface), so the rule
// that the front end uses to build an op and the rule the verifier checks are
// the same code. Diagnostics name the op and every shape involved, because
// the front end forwards them to the user as they are.
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::nova;

namespace {

/// "4x3xf32": the shape as MLIR prints it, without the tensor<> wrapper.
std::string shapeStr(Type type) {
  auto t = cast<ShapedType>(type);
  std::string s;
  llvm::raw_string_ostream os(s);
  for (int64_t d : t.getShape())
    os << d << "x";
  os << t.getElementType();
  return s;
}

std::string shapeStr(Value v) { return shapeStr(v.getType()); }

/// A defaulted flag read from an adaptor: while an op is parsed or built
/// generically its defaults are not populated yet, so a missing attribute
/// means the default.
bool flag(BoolAttr attr, bool defaultValue) {
  return attr ? attr.getValue() : defaultValue;
}

LogicalResult inferSameAsInput(Value input,
                               SmallVectorImpl<Type> &inferred) {
  inferred.push_back(input.getType());
  return success();
}

LogicalResult inferElementwiseBinary(StringRef opName,
                                     std::optional<Location> loc, Value lhs,
                                     Value rhs,
                                     SmallVectorImpl<Type> &inferred) {
  if (lhs.getType() != rhs.getType())
    return emitOptionalError(loc, "'", opName,
                             "' op operands must have the same shape and "
                             "element type (broadcast explicitly), got ",
                             shapeStr(lhs), " and ", shapeStr(rhs));
  inferred.push_back(lhs.getType());
  return success();
}

/// Axes must be sorted, unique and within [0, rank).
LogicalResult checkAxes(StringRef opName, std::optional<Location> loc,
                        ArrayRef<int64_t> axes, int64_t rank) {
  for (auto [i, a] : llvm::enumerate(axes)) {
    if (a < 0 || a >= rank)
      return emitOptionalError(loc, "'", opName, "' op axis ", a,
                               " is out of range for rank ", rank);
    if (i > 0 && axes[i - 1] >= a)
      return emitOptionalError(loc, "'", opName,
                               "' op axes must be sorted and unique");
  }
  return success();
}

LogicalResult inferReduce(StringRef opName, std::optional<Location> loc,
                          Value input, ArrayRef<int64_t> axes, bool keepDims,
                          SmallVectorImpl<Type> &inferred) {
  auto type = cast<RankedTensorType>(input.getType());
  if (failed(checkAxes(opName, loc, axes, type.getRank())))
    return failure();
  SmallVector<int64_t> shape;
  for (auto [i, d] : llvm::enumerate(type.getShape())) {
    bool reduced = llvm::is_contained(axes, static_cast<int64_t>(i));
    if (!reduced)
      shape.push_back(d);
    else if (keepDims)
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

} // namespace

/// Text input may give an attribute another type than the op declares
/// (axes = [1] for array<i64: 1>) or none: the adaptor's own check runs
/// before inference reads any (its accessors cast unchecked).
template <typename AdaptorT>
LogicalResult declaredAttributes(AdaptorT &adaptor, std::optional<Location> loc, MLIRContext *ctx) {
  return adaptor.verify(loc ? *loc : UnknownLoc::get(ctx));
}

#define NOVA_INFER_SAME_AS_INPUT(OP)                                           \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location>,  \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferSameAsInput(adaptor.getInput(), inferred);                     \
  }
NOVA_INFER_SAME_AS_INPUT(NegOp)
NOVA_INFER_SAME_AS_INPUT(ExpOp)
NOVA_INFER_SAME_AS_INPUT(LogOp)
NOVA_INFER_SAME_AS_INPUT(TanhOp)
NOVA_INFER_SAME_AS_INPUT(SqrtOp)
NOVA_INFER_SAME_AS_INPUT(RsqrtOp)
NOVA_INFER_SAME_AS_INPUT(ReluOp)
NOVA_INFER_SAME_AS_INPUT(GeluOp)
NOVA_INFER_SAME_AS_INPUT(ErfOp)
#undef NOVA_INFER_SAME_AS_INPUT

#define NOVA_INFER_BINARY(OP)                                                  \
  LogicalResult OP::inferReturnTypes(MLIRContext *,                            \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferElementwiseBinary(OP::getOperationName(), loc,                 \
                                  adaptor.getLhs(), adaptor.getRhs(),          \
                                  inferred);                                   \
  }
NOVA_INFER_BINARY(AddOp)
NOVA_INFER_BINARY(SubOp)
NOVA_INFER_BINARY(MulOp)
NOVA_INFER_BINARY(DivOp)
NOVA_INFER_BINARY(MaxOp)
NOVA_INFER_BINARY(GreaterOp)
#undef NOVA_INFER_BINARY

#define NOVA_INFER_REDUCE(OP)                                                  \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx,                         \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    if (failed(declaredAttributes(adaptor, loc, ctx)))                         \
      return failure();                                                        \
    return inferReduce(OP::getOperationName(), loc, adaptor.getInput(),        \
                       adaptor.getAxes(), flag(adaptor.getKeepDimsAttr(), false),  \
                       inferred);    \
  }
NOVA_INFER_REDUCE(ReduceSumOp)
NOVA_INFER_REDUCE(ReduceMeanOp)
NOVA_INFER_REDUCE(ReduceMaxOp)
#undef NOVA_INFER_REDUCE

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *ctx,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  if (failed(declaredAttributes(adaptor, loc, ctx)))
    return failure();
  auto lhs = cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = cast<RankedTensorType>(adaptor.getRhs().getType());
  auto fail = [&](const Twine &why) {
    return emitOptionalError(loc, "'nova.matmul' op ", why, " (lhs ",
                             shapeStr(lhs), ", rhs ", shapeStr(rhs), ")");
  };
  if (lhs.getElementType() != rhs.getElementType())
    return fail("element types differ");
  int64_t rank = lhs.getRank();
  if (rank < 2 || rhs.getRank() != rank)
    return fail("operands must have the same rank >= 2");
  ArrayRef<int64_t> a = lhs.getShape(), b = rhs.getShape();
  if (a.drop_back(2) != b.drop_back(2))
    return fail("batch dims differ");
  bool ta = flag(adaptor.getTransposeAAttr(), false);
  bool tb = flag(adaptor.getTransposeBAttr(), false);
  int64_t m = ta ? a[rank - 1] : a[rank - 2];
  int64_t ka = ta ? a[rank - 2] : a[rank - 1];
  int64_t kb = tb ? b[rank - 1] : b[rank - 2];
  int64_t n = tb ? b[rank - 2] : b[rank - 1];
  if (ka != kb)
    return fail(Twine("contraction dimension mismatch: ") + Twine(ka) +
                " vs " + Twine(kb));
  SmallVector<int64_t> shape(a.drop_back(2));
  shape.append({m, n});
  inferred.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *ctx,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  if (failed(declaredAttributes(adaptor, loc, ctx)))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  int64_t rank = type.getRank();
  SmallVector<bool> seen(rank, false);
  bool valid = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t p : perm) {
    if (!valid || p < 0 || p >= rank || seen[p]) {
      valid = false;
      break;
    }
    seen[p] = true;
  }
  if (!valid)
    return emitOptionalError(loc, "'nova.transpose' op permutation is not a "
                                  "permutation of the ",
                             rank, " dims of ", shapeStr(type));
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(type.getDimSize(p));
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

static LogicalResult inferAlongAxis(StringRef opName, std::optional<Location> loc,
                                    Value input, IntegerAttr axisAttr,
                                    SmallVectorImpl<Type> &inferred) {
  auto type = cast<RankedTensorType>(input.getType());
  int64_t axis = axisAttr ? axisAttr.getInt() : -1;
  if (axis < 0 || axis >= type.getRank())
    return emitOptionalError(loc, "'", opName, "' op axis ", axis,
                             " is out of range for ", shapeStr(type));
  inferred.push_back(type);
  return success();
}

LogicalResult SoftmaxOp::inferReturnTypes(MLIRContext *ctx,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  if (failed(declaredAttributes(adaptor, loc, ctx)))
    return failure();
  return inferAlongAxis(getOperationName(), loc, adaptor.getInput(),
                        adaptor.getAxisAttr(), inferred);
}

LogicalResult LogSoftmaxOp::inferReturnTypes(MLIRContext *ctx,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  if (failed(declaredAttributes(adaptor, loc, ctx)))
    return failure();
  return inferAlongAxis(getOperationName(), loc, adaptor.getInput(),
                        adaptor.getAxisAttr(), inferred);
}

LogicalResult GradientOp::inferReturnTypes(MLIRContext *ctx,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &inferred) {
  if (failed(declaredAttributes(adaptor, loc, ctx)))
    return failure();
  auto loss = cast<RankedTensorType>(adaptor.getLoss().getType());
  if (loss.getRank() != 0)
    return emitOptionalError(loc, "'nova.gradient' op the loss must be a scalar "
                                  "(rank-0) tensor, got ",
                             shapeStr(loss));
  for (Value v : adaptor.getWrt()) {
    auto t = cast<RankedTensorType>(v.getType());
    if (!isa<FloatType>(t.getElementType()))
      return emitOptionalError(loc, "'nova.gradient' op cannot differentiate "
                                    "with respect to the integer tensor ",
                               shapeStr(t));
    inferred.push_back(t);
  }
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                        Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  if (failed(declaredAttributes(adaptor, loc, ctx)))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> offsets = adaptor.getOffsets(), sizes = adaptor.getSizes();
  bool ok = static_cast<int64_t>(offsets.size()) == type.getRank() &&
            static_cast<int64_t>(sizes.size()) == type.getRank();
  for (int64_t i = 0; ok && i < type.getRank(); ++i)
    ok = offsets[i] >= 0 && sizes[i] >= 0 && offsets[i] + sizes[i] <= type.getDimSize(i);
  if (!ok)
    return emitOptionalError(loc, "'nova.slice' op the box (offsets, sizes) does not fit in ",
                             shapeStr(type));
  inferred.push_back(RankedTensorType::get(sizes, type.getElementType()));
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                      Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  if (failed(declaredAttributes(adaptor, loc, ctx)))
    return failure();
  auto type = cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh();
  if (static_cast<int64_t>(low.size()) != type.getRank() ||
      static_cast<int64_t>(high.size()) != type.getRank() ||
      llvm::any_of(low, [](int64_t v) { return v < 0; }) ||
      llvm::any_of(high, [](int64_t v) { return v < 0; }))
    return emitOptionalError(loc, "'nova.pad' op needs one non-negative low and high "
                                  "amount per dim of ",
                             shapeStr(type));
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < type.getRank(); ++i)
    shape.push_back(type.getDimSize(i) + low[i] + high[i]);
  inferred.push_back(RankedTensorType::get(shape, type.getElementType()));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                         Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  if (failed(declaredAttributes(adaptor, loc, ctx)))
    return failure();
  auto table = cast<RankedTensorType>(adaptor.getTable().getType());
  auto indices = cast<RankedTensorType>(adaptor.getIndices().getType());
  if (table.getRank() != 2)
    return emitOptionalError(loc, "'nova.gather' op the table must be [rows, width], got ",
                             shapeStr(table));
  SmallVector<int64_t> shape(indices.getShape());
  shape.push_back(table.getDimSize(1));
  inferred.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

LogicalResult ScatterAddOp::verify() {
  auto indices = getIndices().getType();
  auto updates = getUpdates().getType();
  auto out = getResult().getType();
  if (out.getRank() != 2 || updates.getRank() != indices.getRank() + 1 ||
      updates.getShape().drop_back() != indices.getShape() ||
      updates.getShape().back() != out.getDimSize(1) ||
      updates.getElementType() != out.getElementType())
    return emitOpError() << "updates " << shapeStr(updates) << " must be the indices' shape "
                         << shapeStr(indices) << " plus the width of the result "
                         << shapeStr(out);
  return success();
}

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                          Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  if (failed(declaredAttributes(adaptor, loc, ctx)))
    return failure();
  auto seed = cast<TensorType>(adaptor.getSeed().getType());
  FloatAttr rate = adaptor.getRateAttr();
  if (!seed.hasRank() || seed.getRank() != 0)
    return emitOptionalError(loc, "'nova.dropout' op the seed must be a rank-0 i64 tensor");
  if (!rate || rate.getValueAsDouble() < 0.0 || rate.getValueAsDouble() >= 1.0)
    return emitOptionalError(loc, "'nova.dropout' op rate must be in [0, 1)");
  inferred.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult CausalMaskOp::verify() {
  if (getResult().getType().getRank() != 2)
    return emitOpError() << "must be [T, S], got " << shapeStr(getResult().getType());
  return success();
}

LogicalResult OneHotOp::verify() {
  auto labels = getLabels().getType();
  auto out = getResult().getType();
  if (out.getRank() != labels.getRank() + 1 ||
      out.getShape().drop_back() != labels.getShape())
    return emitOpError() << "result " << shapeStr(out)
                         << " must be the labels' shape " << shapeStr(labels)
                         << " plus a class dim";
  return success();
}

LogicalResult BroadcastOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  auto fail = [&]() {
    return emitOpError() << "cannot broadcast " << shapeStr(in) << " to "
                         << shapeStr(out);
  };
  if (in.getElementType() != out.getElementType() ||
      in.getRank() > out.getRank())
    return fail();
  int64_t offset = out.getRank() - in.getRank();
  for (int64_t i = 0; i < in.getRank(); ++i) {
    int64_t d = in.getDimSize(i);
    if (d != 1 && d != out.getDimSize(i + offset))
      return fail();
  }
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType() ||
      in.getNumElements() != out.getNumElements())
    return emitOpError() << "cannot reshape " << shapeStr(in) << " ("
                         << in.getNumElements() << " elements) to "
                         << shapeStr(out) << " (" << out.getNumElements()
                         << " elements)";
  return success();
}

#define GET_OP_CLASSES
#include "compiler/dialect/NovaOps.cpp.inc"

//===----------------------------------------------------------------------===//
// nova.launch
//===----------------------------------------------------------------------===//

LogicalResult LaunchOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  Operation *kernel = symbolTable.lookupNearestSymbolFrom(*this, getKernelAttr());
  if (!kernel) {
    // After the CUDA target's codegen, kernel kN is the gpu.func nova_kN of
    // a gpu.module inside the kernels module.
    Operation *kernels =
        symbolTable.lookupNearestSymbolFrom(*this, FlatSymbolRefAttr::get(getKernelAttr().getRootReference()));
    std::string gpuName = ("nova_" + getKernelAttr().getLeafReference().getValue()).str();
    bool found = false;
    if (kernels && kernels->hasAttr("gpu.container_module"))
      kernels->walk([&](Operation *op) {
        auto name = op->getAttrOfType<StringAttr>(SymbolTable::getSymbolAttrName());
        found |= name && name.getValue() == gpuName && op->getParentOp() != kernels;
      });
    if (!found)
      return emitOpError("names kernel ") << getKernelAttr() << ", which does not exist";
    return success();
  }
  // Before codegen the kernel is a func.func(index, memref...); after it,
  // an LLVM function whose signature no longer shows the memrefs.
  auto func = dyn_cast<func::FuncOp>(kernel);
  if (!func)
    return success();
  ArrayRef<Type> inputs = func.getFunctionType().getInputs();
  if (inputs.empty() || !inputs.front().isIndex())
    return emitOpError("kernel ") << getKernelAttr()
                                  << " must take the workgroup number (index) first";
  if (inputs.drop_front() != TypeRange(getBuffers().getTypes()))
    return emitOpError("buffers do not match the parameters of kernel ") << getKernelAttr();
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// qkv must be [B, T, 3d] with d a multiple of `heads`.
static LogicalResult checkQkv(StringRef opName, std::optional<Location> loc, Type qkvType,
                              int64_t heads) {
  auto qkv = cast<ShapedType>(qkvType);
  if (qkv.getRank() != 3 || !qkv.hasStaticShape() || qkv.getDimSize(2) % 3 != 0)
    return emitOptionalError(loc, "'", opName, "' op qkv must be [B, T, 3d], got ",
                             shapeStr(qkvType));
  int64_t d = qkv.getDimSize(2) / 3;
  if (heads <= 0 || d % heads != 0)
    return emitOptionalError(loc, "'", opName, "' op d = ", d, " (qkv ", shapeStr(qkvType),
                             ") is not a multiple of ", heads, " heads");
  return success();
}

/// [B, T, 3d] -> [B, T, d].
static RankedTensorType attentionOutType(Type qkvType) {
  auto qkv = cast<RankedTensorType>(qkvType);
  return RankedTensorType::get({qkv.getDimSize(0), qkv.getDimSize(1), qkv.getDimSize(2) / 3},
                               qkv.getElementType());
}

LogicalResult CausalAttentionOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                                  Adaptor adaptor,
                                                  SmallVectorImpl<Type> &inferred) {
  if (failed(declaredAttributes(adaptor, loc, ctx)))
    return failure();
  if (failed(checkQkv(getOperationName(), loc, adaptor.getQkv().getType(),
                      adaptor.getHeadsAttr() ? adaptor.getHeads() : 0)))
    return failure();
  inferred.push_back(attentionOutType(adaptor.getQkv().getType()));
  return success();
}

LogicalResult CausalAttentionGradOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                                      Adaptor adaptor,
                                                      SmallVectorImpl<Type> &inferred) {
  if (failed(declaredAttributes(adaptor, loc, ctx)))
    return failure();
  if (failed(checkQkv(getOperationName(), loc, adaptor.getQkv().getType(),
                      adaptor.getHeadsAttr() ? adaptor.getHeads() : 0)))
    return failure();
  inferred.push_back(adaptor.getQkv().getType());
  return success();
}

LogicalResult CausalAttentionGradOp::verify() {
  if (getGrad().getType() != attentionOutType(getQkv().getType()))
    return emitOpError() << "grad " << shapeStr(getGrad()) << " must be the attention's result "
                         << shapeStr(attentionOutType(getQkv().getType())) << " for qkv "
                         << shapeStr(getQkv());
  return success();
}

LogicalResult AttentionKernelOp::verify() {
  size_t expected = getBackward() ? 2 : 1;
  if (getInputs().size() != expected)
    return emitOpError() << "takes " << expected << " inputs " << (getBackward() ? "(qkv, grad)" : "(qkv)")
                         << ", got " << getInputs().size();
  Type qkv = getInputs()[0].getType();
  if (failed(checkQkv(getOperationName(), getLoc(), qkv, getHeads())))
    return failure();
  auto shape = [](Type t) { return cast<ShapedType>(t).getShape(); };
  auto out = attentionOutType(RankedTensorType::get(shape(qkv), cast<ShapedType>(qkv).getElementType()));
  ArrayRef<int64_t> want = getBackward() ? shape(qkv) : out.getShape();
  if (shape(getInit().getType()) != want)
    return emitOpError() << "init " << shapeStr(getInit()) << " must have the shape of "
                         << (getBackward() ? "qkv" : "the attention's result [B, T, d]");
  if (getBackward() && shape(getInputs()[1].getType()) != out.getShape())
    return emitOpError() << "grad " << shapeStr(getInputs()[1]) << " must be [B, T, d]";
  bool tensors = isa<RankedTensorType>(getInit().getType());
  if (tensors != (getNumResults() == 1))
    return emitOpError() << "returns its result on tensors and nothing on buffers";
  return success();
}

/// A destination-style kernel op's effects: it reads its input buffers and
/// writes its init buffer; on tensors it is pure.
static void kernelOpEffects(MutableOperandRange inputs, MutableOperandRange inits,
                            SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  for (OpOperand &in : inputs)
    if (isa<MemRefType>(in.get().getType()))
      effects.emplace_back(MemoryEffects::Read::get(), &in, /*stage=*/0,
                           /*effectOnFullRegion=*/true, SideEffects::DefaultResource::get());
  for (OpOperand &init : inits)
    if (isa<MemRefType>(init.get().getType()))
      effects.emplace_back(MemoryEffects::Write::get(), &init, /*stage=*/0,
                           /*effectOnFullRegion=*/true, SideEffects::DefaultResource::get());
}

void AttentionKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  kernelOpEffects(getInputsMutable(), getInitMutable(), effects);
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

/// input [..., d] (rank >= 1), gamma and the third operand as named.
static LogicalResult checkLayerNorm(StringRef opName, std::optional<Location> loc, Type input,
                                    Type gamma, Type third, bool thirdIsGrad) {
  auto x = cast<ShapedType>(input), g = cast<ShapedType>(gamma), t = cast<ShapedType>(third);
  if (x.getRank() < 1 || !x.hasStaticShape())
    return emitOptionalError(loc, "'", opName, "' op input must be [..., d], got ", shapeStr(input));
  int64_t d = x.getShape().back();
  if (g.getRank() != 1 || g.getDimSize(0) != d || g.getElementType() != x.getElementType())
    return emitOptionalError(loc, "'", opName, "' op gamma must be [", d, "] of the input's type for input ",
                             shapeStr(input), ", got ", shapeStr(gamma));
  if (thirdIsGrad ? t != x : (t.getRank() != 1 || t.getDimSize(0) != d ||
                              t.getElementType() != x.getElementType()))
    return emitOptionalError(loc, "'", opName, "' op ", thirdIsGrad ? "grad" : "beta", " must be ",
                             thirdIsGrad ? shapeStr(input) : "[" + std::to_string(d) + "]",
                             ", got ", shapeStr(third));
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                            Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  if (failed(declaredAttributes(adaptor, loc, ctx)))
    return failure();
  if (failed(checkLayerNorm(getOperationName(), loc, adaptor.getInput().getType(),
                            adaptor.getGamma().getType(), adaptor.getBeta().getType(), false)))
    return failure();
  inferred.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult LayerNormGradOp::inferReturnTypes(MLIRContext *ctx, std::optional<Location> loc,
                                                Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  if (failed(declaredAttributes(adaptor, loc, ctx)))
    return failure();
  inferred.push_back(adaptor.getInput().getType());
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  return checkLayerNorm(getOperationName(), getLoc(), getInput().getType(), getGamma().getType(),
                        getGrad().getType(), true);
}

/// `stats` must be [..., 2] of `rowsOf`'s element type, `rowsOf` [..., d].
static LogicalResult checkRowStats(Operation *op, Value stats, Value rowsOf) {
  auto type = cast<ShapedType>(stats.getType());
  auto rows = cast<ShapedType>(rowsOf.getType());
  SmallVector<int64_t> shape(rows.getShape().drop_back());
  shape.push_back(2);
  if (type.getShape() != ArrayRef<int64_t>(shape) || type.getElementType() != rows.getElementType())
    return op->emitOpError() << "stats " << shapeStr(stats) << " must be [..., 2] of the rows' type for rows "
                             << shapeStr(rowsOf);
  return success();
}

LogicalResult LayerNormKernelOp::verify() {
  ValueRange in = getInputs(), inits = getInits();
  if (in.size() != 3 && in.size() != 4)
    return emitOpError() << "takes 3 or 4 inputs (input, gamma, " << (getBackward() ? "grad" : "beta")
                         << "[, stats]), got " << in.size();
  if (inits.size() != 1 && (inits.size() != 2 || getBackward() || in.size() == 4))
    return emitOpError() << "takes 1 init, or a forward not reading stats 2 (its result, the stats it writes), got "
                         << inits.size();
  auto shapeOf = [](Value v) { return cast<ShapedType>(v.getType()).getShape(); };
  if (shapeOf(getInit()) != shapeOf(in[0]))
    return emitOpError() << "init " << shapeStr(getInit()) << " must have the input's shape "
                         << shapeStr(in[0]);
  auto x = cast<ShapedType>(in[0].getType());
  int64_t d = x.getRank() > 0 ? x.getShape().back() : 0;
  auto isVector = [&](Value v) { return shapeOf(v).size() == 1 && shapeOf(v)[0] == d; };
  if (x.getRank() < 1 || !isVector(in[1]) ||
      (getBackward() ? shapeOf(in[2]) != x.getShape() : !isVector(in[2])))
    return emitOpError() << "expects input [..., d], gamma [d] and "
                         << (getBackward() ? "grad like the input" : "beta [d]");
  if (Value stats = getStats(); stats && failed(checkRowStats(*this, stats, in[0])))
    return failure();
  bool onTensors = isa<RankedTensorType>(getInit().getType());
  if (getNumResults() != (onTensors ? inits.size() : 0u))
    return emitOpError() << "returns one result per init on tensors and nothing on buffers";
  return success();
}

void LayerNormKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  kernelOpEffects(getInputsMutable(), getInitsMutable(), effects);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// logits [..., C] (static, C >= 1) and labels [...]; with `grad`, grad
/// [...] of the logits' element type.
static LogicalResult checkCrossEntropy(StringRef opName, std::optional<Location> loc, Type logits,
                                       Type labels, Type grad = {}) {
  auto x = cast<ShapedType>(logits), y = cast<ShapedType>(labels);
  if (x.getRank() < 1 || !x.hasStaticShape() || x.getShape().back() < 1)
    return emitOptionalError(loc, "'", opName, "' op logits must be [..., C] with C >= 1, got ",
                             shapeStr(logits));
  if (y.getShape() != x.getShape().drop_back())
    return emitOptionalError(loc, "'", opName, "' op labels ", shapeStr(labels),
                             " must have the logits' shape ", shapeStr(logits), " without the class dim");
  if (grad) {
    auto g = cast<ShapedType>(grad);
    if (g.getShape() != y.getShape() || g.getElementType() != x.getElementType())
      return emitOptionalError(loc, "'", opName, "' op grad ", shapeStr(grad),
                               " must have the labels' shape and the logits' element type (logits ",
                               shapeStr(logits), ", labels ", shapeStr(labels), ")");
  }
  return success();
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                               Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  Type logits = adaptor.getLogits().getType(), labels = adaptor.getLabels().getType();
  if (failed(checkCrossEntropy(getOperationName(), loc, logits, labels)))
    return failure();
  inferred.push_back(RankedTensorType::get(cast<ShapedType>(labels).getShape(),
                                           cast<ShapedType>(logits).getElementType()));
  return success();
}

LogicalResult CrossEntropyGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                                   Adaptor adaptor, SmallVectorImpl<Type> &inferred) {
  if (failed(checkCrossEntropy(getOperationName(), loc, adaptor.getLogits().getType(),
                               adaptor.getLabels().getType(), adaptor.getGrad().getType())))
    return failure();
  inferred.push_back(adaptor.getLogits().getType());
  return success();
}

LogicalResult CrossEntropyKernelOp::verify() {
  ValueRange in = getInputs(), inits = getInits();
  bool backward = getBackward();
  if (backward ? in.size() != 3 && in.size() != 4 : in.size() != 2)
    return emitOpError() << "takes "
                         << (backward ? "3 or 4 inputs (logits, labels, grad[, stats])" : "2 inputs (logits, labels)")
                         << ", got " << in.size();
  if (inits.size() != 1 && (backward || inits.size() != 2))
    return emitOpError() << "takes " << (backward ? "1 init (the gradient)" : "1 or 2 inits (losses[, stats])")
                         << ", got " << inits.size();
  if (failed(checkCrossEntropy(getOperationName(), getLoc(), in[0].getType(), in[1].getType(),
                               backward ? in[2].getType() : Type())))
    return failure();
  auto init = cast<ShapedType>(getInit().getType());
  ShapedType like = cast<ShapedType>((backward ? in[0] : in[1]).getType());
  if (init.getShape() != like.getShape())
    return emitOpError() << "init " << shapeStr(getInit()) << " must be shaped like the "
                         << (backward ? "logits " : "labels ") << shapeStr(like);
  if (Value stats = getStats(); stats && failed(checkRowStats(*this, stats, in[0])))
    return failure();
  bool onTensors = isa<RankedTensorType>(getInit().getType());
  if (getNumResults() != (onTensors ? inits.size() : 0u))
    return emitOpError() << "returns one result per init on tensors and nothing on buffers";
  return success();
}

void CrossEntropyKernelOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  kernelOpEffects(getInputsMutable(), getInitsMutable(), effects);
}

//===----------------------------------------------------------------------===//
// Data parallel
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::verify() {
  auto type = cast<ShapedType>(getInit().getType());
  if (!type.getElementType().isF32() && !type.getElementType().isF64())
    return emitOpError() << "sums f32 or f64 values, not " << type.getElementType();
  if (isa<MemRefType>(type) != getResults().empty())
    return emitOpError() << "returns its tensor, and nothing on a buffer";
  return success();
}

void AllReduceOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  OpOperand &init = getInitMutable();
  if (!isa<MemRefType>(init.get().getType()))
    return;
  effects.emplace_back(MemoryEffects::Read::get(), &init, /*stage=*/0,
                       /*effectOnFullRegion=*/true, SideEffects::DefaultResource::get());
  effects.emplace_back(MemoryEffects::Write::get(), &init, /*stage=*/0,
                       /*effectOnFullRegion=*/true, SideEffects::DefaultResource::get());
}

LogicalResult AllReduceStartOp::verify() {
  if (getBuffers().empty())
    return emitOpError() << "starts no buffer";
  for (Value b : getBuffers()) {
    auto type = cast<MemRefType>(b.getType());
    if (!type.hasStaticShape() || !type.getLayout().isIdentity())
      return emitOpError() << "buffer " << type << " is not a static, identity-layout memref";
    if (!type.getElementType().isF32() && !type.getElementType().isF64())
      return emitOpError() << "sums f32 or f64 buffers, not " << type;
  }
  return success();
}

// A started sum reads its buffers now and writes them at the wait; both are
// effects on the buffers, so nothing moves a launch across either.
void AllReduceStartOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  for (OpOperand &b : getBuffersMutable())
    effects.emplace_back(MemoryEffects::Read::get(), &b, /*stage=*/0,
                         /*effectOnFullRegion=*/true, SideEffects::DefaultResource::get());
}

void AllReduceWaitOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  for (OpOperand &b : getBuffersMutable())
    effects.emplace_back(MemoryEffects::Write::get(), &b, /*stage=*/0,
                         /*effectOnFullRegion=*/true, SideEffects::DefaultResource::get());
}
