//===- StepMmaMatmul.cpp - a step's matmul kernel as the mma.sync kernel ===//

#include "compiler/target/cuda/StepMmaMatmul.h"
#include "compiler/target/cuda/CudaTarget.h"
#include "compiler/target/cuda/MmaMatmulKernel.h"
#include "compiler/target/cuda/WgmmaMatmulKernel.h"
#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/MatmulKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/IndexingUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::nova;

namespace {

/// The kernel argument (number, after the workgroup number) whose whole
/// buffer `view` is: contiguous storage of its last two dims as they are
/// or (`swapped`) exchanged, at offset 0, as many elements as its root.
FailureOr<unsigned> wholeBufferArgument(func::FuncOp kernel, Value view, bool swapped) {
  auto type = cast<MemRefType>(view.getType());
  SmallVector<int64_t> strides;
  int64_t offset = 0;
  if (type.getRank() < 2 || failed(getStridesAndOffset(type, strides, offset)) || offset != 0)
    return failure();
  SmallVector<int64_t> storage(type.getShape());
  if (swapped)
    std::swap(storage[storage.size() - 1], storage[storage.size() - 2]);
  SmallVector<int64_t> expected = computeSuffixProduct(storage);
  if (swapped)
    std::swap(expected[expected.size() - 1], expected[expected.size() - 2]);
  for (auto [dim, got, want] : llvm::zip(type.getShape(), strides, expected))
    if (dim != 1 && got != want)
      return failure();
  auto root = dyn_cast<BlockArgument>(bufferRoot(view));
  if (!root || root.getOwner() != &kernel.getBody().front() || root.getArgNumber() == 0)
    return failure();
  auto rootType = cast<MemRefType>(root.getType());
  if (!rootType.getLayout().isIdentity() || rootType.getNumElements() != type.getNumElements())
    return failure();
  return root.getArgNumber() - 1;
}

struct Operands {
  unsigned lhs, rhs, out;
};

FailureOr<Operands> operandArguments(func::FuncOp kernel, const MatmulOperands &m) {
  FailureOr<unsigned> lhs = wholeBufferArgument(kernel, m.lhs, /*swapped=*/false);
  FailureOr<unsigned> rhs = wholeBufferArgument(kernel, m.rhs, /*swapped=*/m.rhsColumns);
  FailureOr<unsigned> out = wholeBufferArgument(kernel, m.out, /*swapped=*/false);
  if (failed(lhs) || failed(rhs) || failed(out))
    return failure();
  return Operands{*lhs, *rhs, *out};
}

linalg::GenericOp matmulOf(func::FuncOp kernel) {
  linalg::GenericOp found;
  kernel.walk([&](linalg::GenericOp g) {
    if (isTaggedMatmul(g))
      found = g;
  });
  return found;
}

} // namespace

FailureOr<StepMmaPlan> mlir::nova::planStepMmaMatmul(func::FuncOp kernel, const ::nova::TargetDesc &target,
                                                     bool lowPrecision, std::string &why, bool tryBuilding) {
  linalg::GenericOp generic = matmulOf(kernel);
  std::optional<MatmulOperands> m = generic ? matchMatmul(generic) : std::nullopt;
  if (!m) {
    why = "not a plain matmul";
    return failure();
  }
  if (!m->prologueInputs.empty()) {
    why = "its fused lhs prologue has no tensor-core form yet";
    return failure();
  }
  Type lhs = cast<MemRefType>(m->lhs.getType()).getElementType();
  Type rhs = cast<MemRefType>(m->rhs.getType()).getElementType();
  const int64_t rank = m->outType.getRank();
  if (cast<MemRefType>(m->lhs.getType()).getRank() != rank || cast<MemRefType>(m->rhs.getType()).getRank() != rank) {
    why = "an operand broadcast over the batch";
    return failure();
  }
  StepMmaPlan plan;
  GpuMatmulProblem &p = plan.problem;
  if (!m->outType.getElementType().isF32() || lhs != rhs) {
    why = "its result is not f32, or its operands differ in type";
    return failure();
  }
  if (lhs.isF16())
    p.operand = GpuOperand::f16;
  else if (lhs.isBF16())
    p.operand = GpuOperand::bf16;
  else if (lhs.isF32() && lowPrecision)
    p.operand = GpuOperand::tf32;
  else {
    why = "f32 operands multiply in f32 unless the step allows a lower matmul precision";
    return failure();
  }
  FailureOr<Operands> args = operandArguments(kernel, *m);
  if (failed(args)) {
    why = "an operand is not the whole of a kernel buffer, stored row-major or transposed";
    return failure();
  }
  p.batch = m->batch();
  p.m = m->M;
  p.n = m->N;
  p.k = m->K;
  p.lhsTransposed = m->transposeA;
  p.rhsTransposed = m->rhsColumns;
  // wgmma reads the operands through two tensor maps, one per argument.
  p.allowWgmma = args->lhs != args->rhs;
  // Split-K: a workspace for the partial products and a kernel summing
  // them into the result, which must be its whole m x n buffer.
  auto outType = cast<MemRefType>(kernel.getArgument(args->out + 1).getType());
  auto splitGiven = kernel->getAttrOfType<IntegerAttr>(kGpuSplitKAttr);
  p.allowSplitK = splitGiven || (tryBuilding && p.batch == 1 && outType.getShape() == ArrayRef<int64_t>{p.m, p.n});
  plan.batched = m->batchRank > 0;
  plan.lhsArgument = args->lhs;
  plan.rhsArgument = args->rhs;
  plan.outArgument = args->out;
  plan.config = configureGpuMatmul(p, target);
  if (splitGiven && plan.config.splitK != splitGiven.getInt()) {
    why = llvm::formatv("configured split across K into {0} parts, now {1}", splitGiven.getInt(),
                        plan.config.splitK)
              .str();
    return failure();
  }
  if (plan.config.kind != GpuMmaKind::mma_sync && plan.config.kind != GpuMmaKind::wgmma) {
    why = "the configurator chose " + plan.config.instruction;
    return failure();
  }
  // The generator's own refusals (16-byte chunks, tiles), tried on a scratch
  // module; a wgmma kernel also gives its tensor maps.
  if (!tryBuilding && plan.config.kind == GpuMmaKind::mma_sync)
    return plan;
  OwningOpRef<ModuleOp> scratch = ModuleOp::create(kernel.getLoc());
  gpu::GPUModuleOp module = addKernelsModule(*scratch);
  std::string error;
  if (plan.config.kind == GpuMmaKind::wgmma) {
    FailureOr<WgmmaMatmulKernel> trial =
        buildWgmmaMatmulKernel(module, "trial", p, plan.config, error, {}, {}, /*linearGrid=*/true);
    if (succeeded(trial)) {
      plan.maps = trial->maps;
      return plan;
    }
    // The mma.sync kernel, then.
    p.allowWgmma = false;
    plan.config = configureGpuMatmul(p, target);
    if (plan.config.kind != GpuMmaKind::mma_sync) {
      why = error;
      return failure();
    }
  }
  if (failed(buildMmaSyncMatmulKernel(module, "trial", p, plan.config, error, {}, {}, /*linearGrid=*/true))) {
    why = error;
    return failure();
  }
  return plan;
}

FailureOr<StepBiasEpilogue> mlir::nova::matchBiasEpilogue(func::FuncOp kernel, linalg::GenericOp matmul,
                                                         linalg::GenericOp epilogue) {
  std::optional<MatmulOperands> m = matchMatmul(matmul);
  if (!m || !epilogue.hasPureBufferSemantics() || epilogue.getNumDpsInputs() != 2 || epilogue.getNumDpsInits() != 1 ||
      epilogue.getNumLoops() != 2 || epilogue.getNumParallelLoops() != 2 || m->outType.getRank() != 2)
    return failure();
  // The body: the two inputs added.
  Block *body = epilogue.getBody();
  auto add = dyn_cast<arith::AddFOp>(body->front());
  if (body->getOperations().size() != 2 || !add || body->getTerminator()->getOperand(0) != add.getResult() ||
      !((add.getLhs() == body->getArgument(0) && add.getRhs() == body->getArgument(1)) ||
        (add.getLhs() == body->getArgument(1) && add.getRhs() == body->getArgument(0))))
    return failure();
  SmallVector<AffineMap> maps = epilogue.getIndexingMapsArray();
  MLIRContext *ctx = epilogue.getContext();
  AffineMap column = AffineMap::get(2, 0, {getAffineDimExpr(1, ctx)}, ctx);
  // Which input is the product (read whole, as it was written) and which
  // the bias (a column's, a whole kernel buffer of n).
  for (unsigned p = 0; p < 2; ++p) {
    Value product = epilogue.getDpsInputs()[p], bias = epilogue.getDpsInputs()[1 - p];
    if (bufferRoot(product) != bufferRoot(m->out) || product.getType() != m->out.getType() || !maps[p].isIdentity() ||
        maps[1 - p] != column || !maps[2].isIdentity())
      continue;
    auto biasArg = dyn_cast<BlockArgument>(bias);
    auto biasType = cast<MemRefType>(bias.getType());
    if (!biasArg || biasArg.getOwner() != &kernel.getBody().front() || biasArg.getArgNumber() == 0 ||
        !biasType.getLayout().isIdentity() || !biasType.getElementType().isF32() || biasType.getRank() != 1 ||
        biasType.getDimSize(0) != m->outType.getDimSize(1))
      return failure();
    Value out = epilogue.getDpsInits()[0];
    FailureOr<unsigned> outArg = wholeBufferArgument(kernel, out, /*swapped=*/false);
    if (failed(outArg) || cast<MemRefType>(out.getType()).getShape() != m->outType.getShape() ||
        !cast<MemRefType>(out.getType()).getElementType().isF32())
      return failure();
    return StepBiasEpilogue{biasArg.getArgNumber() - 1, *outArg, bias, out};
  }
  return failure();
}

FailureOr<gpu::GPUFuncOp> mlir::nova::buildStepMmaMatmul(gpu::GPUModuleOp module, StringRef name,
                                                         func::FuncOp kernel, const StepMmaPlan &plan,
                                                         std::string &error) {
  linalg::GenericOp generic = matmulOf(kernel);
  std::optional<MatmulOperands> m = generic ? matchMatmul(generic) : std::nullopt;
  FailureOr<Operands> args = m ? operandArguments(kernel, *m) : FailureOr<Operands>(failure());
  if (failed(args)) {
    error = "kernel " + kernel.getSymName().str() + " is no longer the matmul it was planned as";
    return failure();
  }
  const bool wgmma = plan.config.kind == GpuMmaKind::wgmma;
  // A bias epilogue: the tile kernel's C is the epilogue's result, and its
  // bias argument follows C.
  MmaEpilogue epilogue;
  std::optional<StepBiasEpilogue> bias;
  if (auto attr = kernel->getAttrOfType<DenseI64ArrayAttr>(kGpuBiasEpilogueAttr)) {
    if (attr.size() != 2) {
      error = "kernel " + kernel.getSymName().str() + " has a malformed " + kGpuBiasEpilogueAttr;
      return failure();
    }
    bias = StepBiasEpilogue{unsigned(attr[0]), unsigned(attr[1]), Value(), Value()};
    epilogue.bias = true;
  }
  FailureOr<gpu::GPUFuncOp> tile = failure();
  if (wgmma) {
    FailureOr<WgmmaMatmulKernel> built = buildWgmmaMatmulKernel(module, (name + "_tile").str(), plan.problem,
                                                                plan.config, error, {}, epilogue, /*linearGrid=*/true);
    if (succeeded(built))
      tile = built->func;
  } else {
    tile = buildMmaSyncMatmulKernel(module, (name + "_tile").str(), plan.problem, plan.config, error, {}, epilogue,
                                    /*linearGrid=*/true);
  }
  if (failed(tile))
    return failure();
  if (!tile->getBody().hasOneBlock()) {
    error = "the tensor-core kernel has more than one block";
    return failure();
  }
  Location loc = kernel.getLoc();
  OpBuilder b(*tile);
  SmallVector<Type> types(llvm::drop_begin(kernel.getBody().front().getArgumentTypes()));
  if (wgmma) // the lhs and rhs buffers reach the kernel as their tensor maps
    types[args->lhs] = types[args->rhs] = tile->getArgument(0).getType();
  auto func = b.create<gpu::GPUFuncOp>(loc, name, b.getFunctionType(types, {}));
  for (NamedAttribute attr : (*tile)->getAttrs())
    if (attr.getName() != SymbolTable::getSymbolAttrName() && attr.getName() != func.getFunctionTypeAttrName())
      func->setAttr(attr.getName(), attr.getValue());
  OpBuilder fb = OpBuilder::atBlockBegin(&func.getBody().front());
  IRMapping map;
  // Split-K: the partial products go to the last argument (the sum kernel
  // launched after this one writes the result).
  const unsigned out = plan.config.splitK > 1 ? unsigned(types.size() - 1) : bias ? bias->out : args->out;
  unsigned which[4] = {args->lhs, args->rhs, out, bias ? bias->bias : 0};
  for (unsigned i = 0; i < (bias ? 4u : 3u); ++i) {
    if (wgmma && i < 2) {
      map.map(tile->getArgument(i), func.getArgument(which[i]));
      continue;
    }
    auto want = cast<MemRefType>(tile->getArgument(i).getType());
    Value cast = fb.create<memref::ReinterpretCastOp>(loc, want, func.getArgument(which[i]), /*offset=*/0,
                                                      want.getShape(), computeSuffixProduct(want.getShape()));
    map.map(tile->getArgument(i), cast);
  }
  for (Operation &op : tile->getBody().front())
    fb.clone(op, map);
  tile->erase();
  return func;
}

// The attribute: one i64 array a map, [argument, element bytes, swizzle,
// rank, dims..., strides (rank - 1)..., box...].
ArrayAttr mlir::nova::tensorMapsAttr(const StepMmaPlan &plan, MLIRContext *ctx) {
  SmallVector<Attribute> arrays;
  for (const TmaMap &map : plan.maps) {
    SmallVector<int64_t> a{map.operand == 0 ? plan.lhsArgument : plan.rhsArgument, map.elementBytes,
                           map.swizzleBytes, int64_t(map.dims.size())};
    a.append(map.dims.begin(), map.dims.end());
    a.append(map.strides.begin(), map.strides.end());
    a.append(map.box.begin(), map.box.end());
    arrays.push_back(DenseI64ArrayAttr::get(ctx, a));
  }
  return ArrayAttr::get(ctx, arrays);
}

FailureOr<std::vector<::nova::TensorMapDesc>> mlir::nova::tensorMapsOf(Operation *kernel) {
  std::vector<::nova::TensorMapDesc> maps;
  auto attr = kernel->getAttrOfType<ArrayAttr>(kGpuTensorMapsAttr);
  if (!attr)
    return maps;
  for (Attribute a : attr) {
    auto array = dyn_cast<DenseI64ArrayAttr>(a);
    ArrayRef<int64_t> v = array ? array.asArrayRef() : ArrayRef<int64_t>();
    const size_t rank = v.size() > 3 ? size_t(v[3]) : 0;
    if (rank < 1 || v.size() != 4 + 3 * rank - 1 || (v[1] != 4 && v[1] != 2))
      return failure();
    // Steps' operands: f32 (read as tf32), or bf16 / f16 copies (2 bytes).
    auto operand = kernel->getAttrOfType<StringAttr>(kGpuOperandAttr);
    ::nova::TensorMapDesc m;
    m.arg = static_cast<uint32_t>(v[0]);
    m.element = v[1] == 4                                  ? ::nova::MapElement::f32
                : operand && operand.getValue() == "f16" ? ::nova::MapElement::f16
                                                         : ::nova::MapElement::bf16;
    m.swizzle_bytes = static_cast<uint32_t>(v[2]);
    m.dims.assign(v.begin() + 4, v.begin() + 4 + rank);
    m.strides.assign(v.begin() + 4 + rank, v.begin() + 4 + 2 * rank - 1);
    m.box.assign(v.begin() + 4 + 2 * rank - 1, v.end());
    maps.push_back(std::move(m));
  }
  return maps;
}
