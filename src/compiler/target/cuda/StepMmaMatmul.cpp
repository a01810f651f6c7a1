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
#include "mlir/IR/Matchers.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::nova;

namespace {

/// The kernel argument (number, after the workgroup number) whose whole
/// buffer `view` is: contiguous storage of its dims as they are or
/// (`swapped`, two dims or more) with the last two exchanged, at offset 0,
/// as many elements as its root.
FailureOr<unsigned> wholeBufferArgument(func::FuncOp kernel, Value view, bool swapped) {
  auto type = cast<MemRefType>(view.getType());
  SmallVector<int64_t> strides;
  int64_t offset = 0;
  if ((swapped && type.getRank() < 2) || failed(getStridesAndOffset(type, strides, offset)) || offset != 0)
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
  /// `out`: kNoArgument where the product is never stored (a fused
  /// epilogue's kernel whose product buffer went, dropUnstoredProducts).
  unsigned lhs, rhs, out;
};

/// The product's buffer taken out of the kernel (kUnstoredAttr).
bool isUnstored(Value out) {
  auto alloc = bufferRoot(out).getDefiningOp<memref::AllocOp>();
  return alloc && alloc->hasAttr(kUnstoredAttr);
}

FailureOr<Operands> operandArguments(func::FuncOp kernel, const MatmulOperands &m) {
  FailureOr<unsigned> lhs = wholeBufferArgument(kernel, m.lhs, /*swapped=*/false);
  FailureOr<unsigned> rhs = wholeBufferArgument(kernel, m.rhs, /*swapped=*/m.rhsColumns);
  FailureOr<unsigned> out = isUnstored(m.out) ? FailureOr<unsigned>(StepMmaPlan::kNoArgument)
                                              : wholeBufferArgument(kernel, m.out, /*swapped=*/false);
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
  else if (lhs.isF32()) {
    // At f32's accuracy: f32 FMAs (the simt kernel) or 3xtf32, as the
    // configurator finds faster.
    p.operand = GpuOperand::f32;
    p.allowTf32x3 = true;
  } else {
    why = "its operands are neither f16, bf16 nor f32";
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
  auto splitGiven = kernel->getAttrOfType<IntegerAttr>(kGpuSplitKAttr);
  p.allowSplitK = splitGiven || (tryBuilding && p.batch == 1 && args->out != StepMmaPlan::kNoArgument &&
                                 cast<MemRefType>(kernel.getArgument(args->out + 1).getType()).getShape() ==
                                     ArrayRef<int64_t>{p.m, p.n});
  plan.batched = m->batchRank > 0;
  plan.lhsArgument = args->lhs;
  plan.rhsArgument = args->rhs;
  plan.outArgument = args->out;
  // The mma.sync kernels' refill spread over the k steps where the target
  // asks for it (NOVA_GPU_INTERLEAVE; the wgmma kernels have no refill).
  p.interleaveCopies = target.matmul_interleave != 0;
  plan.config = configureGpuMatmul(p, target);
  // Clusters where the target asks for them (NOVA_GPU_CLUSTER) and the
  // product runs as a wgmma kernel without split-K (the cluster kernel has
  // none) that a cluster kernel fits.
  if (target.matmul_cluster > 1 && plan.config.kind == GpuMmaKind::wgmma && plan.config.splitK == 1) {
    GpuMatmulProblem paired = p;
    paired.clusterM = target.matmul_cluster;
    GpuMatmulConfig cluster = configureGpuMatmul(paired, target);
    if (cluster.kind == GpuMmaKind::wgmma && cluster.threads > 0) {
      p.clusterM = paired.clusterM;
      plan.config = std::move(cluster);
    }
  }
  p.operand = plan.config.operand;
  if (splitGiven && plan.config.splitK != splitGiven.getInt()) {
    why = llvm::formatv("configured split across K into {0} parts, now {1}", splitGiven.getInt(),
                        plan.config.splitK)
              .str();
    return failure();
  }
  if (plan.config.kind != GpuMmaKind::mma_sync && plan.config.kind != GpuMmaKind::wgmma) {
    why = "the configurator chose " + plan.config.instruction;
    // An f32 problem: why not 3xtf32 (the configurator's comparison).
    for (const std::string &line : plan.config.why)
      if (StringRef(line).starts_with("f32 operands: "))
        why += ": " + line.substr(14);
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
    p.clusterM = 1;
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

Value mlir::nova::reinterpretWhole(OpBuilder &b, Location loc, Value buffer, MemRefType want) {
  return b.create<memref::ReinterpretCastOp>(loc, want, buffer, /*offset=*/0, want.getShape(),
                                             computeSuffixProduct(want.getShape()));
}

SmallVector<int64_t> StepEpilogue::arguments() const {
  SmallVector<int64_t> args{out};
  for (const EpilogueInput &input : inputs)
    if (input.kind != EpilogueInput::Kind::product)
      args.push_back(input.argument);
  return args;
}

FailureOr<StepEpilogue> mlir::nova::matchGpuEpilogue(func::FuncOp kernel, linalg::GenericOp matmul,
                                                     linalg::GenericOp epilogue) {
  std::optional<MatmulOperands> m = matchMatmul(matmul);
  // Elementwise over the product's elements (its own dims, or its rows
  // split), reading inputs through dims and constants (isRegisterEpilogue).
  if (!m || m->outType.getRank() != 2 || !isRegisterEpilogue(matmul, epilogue))
    return failure();
  Block *body = epilogue.getBody();
  const unsigned inputs = epilogue.getNumDpsInputs();
  // From above its body it takes constants only (applyGpuEpilogue makes
  // them where the kernel runs the body).
  for (Operation &op : body->without_terminator())
    for (Value operand : op.getOperands())
      if (operand.getParentBlock() != body && !matchPattern(operand, m_Constant()))
        return failure();
  const int64_t rows = m->M, columns = m->N;
  const unsigned last = epilogue.getNumLoops() - 1;
  Value productRoot = bufferRoot(m->out);
  StepEpilogue e;
  e.op = epilogue;
  for (OpOperand *operand : epilogue.getDpsInputOperands()) {
    Value v = operand->get();
    if (readsMatmulResult(v, m->out)) {
      e.inputs.push_back({EpilogueInput::Kind::product, 0, Type()});
      continue;
    }
    if (bufferRoot(v) == productRoot)
      return failure(); // the product read otherwise: it is never written
    auto type = cast<MemRefType>(v.getType());
    AffineMap map = epilogue.getMatchingIndexingMap(operand);
    // Read at the loops it names, in order, its other indices zeros: none
    // (one value), the last (a column's), all but the last (a row's: the
    // product's rows may be split over several), or all (the element's).
    SmallVector<unsigned> dims;
    for (AffineExpr expr : map.getResults()) {
      if (auto dim = dyn_cast<AffineDimExpr>(expr))
        dims.push_back(dim.getPosition());
      else if (auto constant = dyn_cast<AffineConstantExpr>(expr); !constant || constant.getValue() != 0)
        return failure();
    }
    EpilogueInput input{EpilogueInput::Kind::element, 0, type.getElementType()};
    int64_t elements = rows * columns;
    auto firstDims = [&](unsigned count) {
      return dims.size() == count && llvm::all_of(llvm::enumerate(dims), [](auto d) { return d.value() == d.index(); });
    };
    if (dims.empty()) {
      input.kind = EpilogueInput::Kind::scalar;
      elements = 1;
    } else if (dims.size() == 1 && dims[0] == last) {
      input.kind = EpilogueInput::Kind::column;
      elements = columns;
    } else if (firstDims(last)) {
      input.kind = EpilogueInput::Kind::row;
      elements = rows;
    } else if (!firstDims(last + 1)) {
      return failure();
    }
    FailureOr<unsigned> arg = wholeBufferArgument(kernel, v, /*swapped=*/false);
    if (failed(arg) || type.getNumElements() != elements)
      return failure();
    input.argument = *arg;
    e.inputs.push_back(input);
  }
  // The result: a whole m x n f32 buffer, not an operand of the product
  // (other blocks still read those while this one writes), nor an input
  // read other than at its own element.
  Value out = epilogue.getDpsInits()[0];
  Value outRoot = bufferRoot(out);
  FailureOr<unsigned> outArg = wholeBufferArgument(kernel, out, /*swapped=*/false);
  if (failed(outArg) || cast<MemRefType>(out.getType()).getNumElements() != rows * columns ||
      outRoot == bufferRoot(m->lhs) || outRoot == bufferRoot(m->rhs))
    return failure();
  for (auto [operand, input] : llvm::zip_first(epilogue.getDpsInputOperands(), e.inputs))
    if (input.kind != EpilogueInput::Kind::element && input.kind != EpilogueInput::Kind::product &&
        bufferRoot(operand->get()) == outRoot)
      return failure();
  e.out = *outArg;
  // A body that reads what its result held (an op computed in place, into
  // a dying input: ReuseDyingInputs) reads it as one more input, at the
  // element it then writes.
  if (!body->getArgument(inputs).use_empty())
    e.inputs.push_back({EpilogueInput::Kind::element, *outArg, cast<MemRefType>(out.getType()).getElementType()});
  return e;
}

FailureOr<std::optional<StepEpilogue>> mlir::nova::fusedEpilogue(func::FuncOp kernel, std::string &error) {
  auto attr = kernel->getAttrOfType<DenseI64ArrayAttr>(kGpuEpilogueAttr);
  if (!attr)
    return std::optional<StepEpilogue>();
  linalg::GenericOp matmul = matmulOf(kernel), epilogue;
  for (Operation *op = matmul ? matmul->getNextNode() : nullptr; op && !epilogue; op = op->getNextNode())
    epilogue = dyn_cast<linalg::GenericOp>(op);
  FailureOr<StepEpilogue> e = epilogue ? matchGpuEpilogue(kernel, matmul, epilogue) : FailureOr<StepEpilogue>(failure());
  if (failed(e) || ArrayRef<int64_t>(e->arguments()) != attr.asArrayRef()) {
    error = "kernel " + kernel.getSymName().str() + " is no longer the matmul and elementwise op it was configured as";
    return failure();
  }
  return std::optional<StepEpilogue>(*e);
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
  // A fused elementwise epilogue: the tile kernel's C is the op's result,
  // and the op's other inputs follow C.
  MmaEpilogue epilogue;
  FailureOr<std::optional<StepEpilogue>> fused = fusedEpilogue(kernel, error);
  if (failed(fused))
    return failure();
  if (*fused) {
    epilogue.body = (*fused)->op.getBody();
    epilogue.inputs = (*fused)->inputs;
    epilogue.result = cast<MemRefType>((*fused)->op.getDpsInits()[0].getType()).getElementType();
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
  const unsigned out = plan.config.splitK > 1 ? unsigned(types.size() - 1) : *fused ? (*fused)->out : args->out;
  SmallVector<unsigned> which{args->lhs, args->rhs, out};
  if (*fused) {
    SmallVector<int64_t> inputs = (*fused)->arguments();
    for (int64_t arg : llvm::drop_begin(inputs))
      which.push_back(unsigned(arg));
  }
  for (unsigned i = 0; i < which.size(); ++i) {
    if (wgmma && i < 2) {
      map.map(tile->getArgument(i), func.getArgument(which[i]));
      continue;
    }
    map.map(tile->getArgument(i), reinterpretWhole(fb, loc, func.getArgument(which[i]),
                                                   cast<MemRefType>(tile->getArgument(i).getType())));
  }
  for (Operation &op : tile->getBody().front())
    fb.clone(op, map);
  tile->erase();
  return func;
}

// The attribute: one i64 array a map, [argument, element (MapElement's
// number), swizzle, rank, dims..., strides (rank - 1)..., box...].
ArrayAttr mlir::nova::tensorMapsAttr(const StepMmaPlan &plan, MLIRContext *ctx) {
  SmallVector<Attribute> arrays;
  for (const ::nova::TensorMapDesc &map : plan.maps) {
    SmallVector<int64_t> a{map.arg == 0 ? plan.lhsArgument : plan.rhsArgument, int64_t(map.element),
                           int64_t(map.swizzle_bytes), int64_t(map.dims.size())};
    for (const std::vector<uint64_t> *v : {&map.dims, &map.strides, &map.box})
      a.append(v->begin(), v->end());
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
    // Steps' operands: f32 (read as tf32), or bf16 / f16 copies.
    using ::nova::MapElement;
    if (rank < 1 || v.size() != 4 + 3 * rank - 1 ||
        !llvm::is_contained({int64_t(MapElement::f32), int64_t(MapElement::bf16), int64_t(MapElement::f16)}, v[1]))
      return failure();
    ::nova::TensorMapDesc m;
    m.arg = static_cast<uint32_t>(v[0]);
    m.element = static_cast<MapElement>(v[1]);
    m.swizzle_bytes = static_cast<uint32_t>(v[2]);
    m.dims.assign(v.begin() + 4, v.begin() + 4 + rank);
    m.strides.assign(v.begin() + 4 + rank, v.begin() + 4 + 2 * rank - 1);
    m.box.assign(v.begin() + 4 + 2 * rank - 1, v.end());
    maps.push_back(std::move(m));
  }
  return maps;
}
