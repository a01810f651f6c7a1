//===- Kernels.cpp - what every kernel pass needs to know --------*- C++ -*-===//

#include "compiler/transforms/Kernels.h"

#include "compiler/transforms/MatmulKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

bool mlir::nova::isTaggedMatmul(Operation *op) {
  auto tag = op->getAttrOfType<StringAttr>("nova.kernel");
  return tag && tag.getValue() == "matmul";
}

Value mlir::nova::bufferRoot(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    // memref.transpose is a view too, without ViewLikeOpInterface in MLIR 19
    // (nova-fold-transposes makes them).
    if (auto transpose = dyn_cast<memref::TransposeOp>(def)) {
      v = transpose.getIn();
      continue;
    }
    auto view = dyn_cast<ViewLikeOpInterface>(def);
    if (!view)
      break;
    v = view.getViewSource();
  }
  return v;
}

void mlir::nova::forEachWrittenRoot(Operation *op, llvm::function_ref<void(Value)> f) {
  op->walk([&](Operation *inner) {
    auto iface = dyn_cast<MemoryEffectOpInterface>(inner);
    if (!iface)
      return;
    SmallVector<MemoryEffects::EffectInstance> effects;
    iface.getEffects(effects);
    for (auto &e : effects)
      if (isa<MemoryEffects::Write>(e.getEffect()) && e.getValue())
        f(bufferRoot(e.getValue()));
  });
}

scf::ForOp mlir::nova::buildFor(OpBuilder &b, Location loc, Value lb, Value ub, Value step,
                                ValueRange init,
                                function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  return b.create<scf::ForOp>(loc, lb, ub, step, init,
                              [&](OpBuilder &inner, Location, Value iv, ValueRange carried) {
                                OpBuilder::InsertionGuard guard(b);
                                b.setInsertionPoint(inner.getInsertionBlock(),
                                                    inner.getInsertionPoint());
                                SmallVector<Value> results = body(iv, carried);
                                b.create<scf::YieldOp>(loc, results);
                              });
}

Value mlir::nova::contiguousCopy(OpBuilder &b, Location loc, Value m, bool copyIn,
                                 SmallVectorImpl<Value> &temps) {
  auto type = cast<MemRefType>(m.getType());
  Value copy =
      b.create<memref::AllocOp>(loc, MemRefType::get(type.getShape(), type.getElementType()));
  if (copyIn)
    b.create<linalg::CopyOp>(loc, ValueRange{m}, ValueRange{copy});
  temps.push_back(copy);
  return copy;
}

scf::ForOp mlir::nova::splitLoopOf(Operation *root) {
  scf::ForOp found;
  root->walk([&](scf::ForOp loop) {
    if (!found && loop->hasAttr(kSplitLoopAttr))
      found = loop;
  });
  if (!found || getConstantIntValue(found.getLowerBound()) != 0 ||
      getConstantIntValue(found.getStep()) != 1 || !getConstantIntValue(found.getUpperBound()))
    return {};
  return found;
}

FailureOr<mlir::nova::LoweringConfigAttr>
mlir::nova::configForKernelOp(Operation *op, Value init, StringRef pass, StringRef kind) {
  if (!isa<MemRefType>(init.getType())) {
    op->emitError(pass) << ": expects the bufferized op";
    return failure();
  }
  auto func = op->getParentOfType<func::FuncOp>();
  LoweringConfigAttr config = func ? loweringConfig(func) : nullptr;
  if (config && config.getKind() != kind) {
    op->emitError(pass) << ": the kernel is configured " << config.getKind() << ", not " << kind;
    return failure();
  }
  return config;
}

bool mlir::nova::hasUnitInnerStride(MemRefType type) {
  if (type.getRank() == 0)
    return true;
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(getStridesAndOffset(type, strides, offset)) && strides.back() == 1;
}

ModuleOp mlir::nova::kernelsModule(ModuleOp top) {
  for (auto m : top.getOps<ModuleOp>())
    if (m.getSymName() == kKernelsModuleName)
      return m;
  return {};
}

Operation *mlir::nova::kernelRoot(func::FuncOp kernel) {
  if (kernel.isExternal())
    return nullptr;
  for (Operation &op : kernel.front())
    if (isTaggedMatmul(&op))
      return &op;
  Operation *term = kernel.front().getTerminator();
  return term->getPrevNode();
}

LogicalResult mlir::nova::restrictToWorkgroupTile(linalg::LinalgOp op, ArrayRef<int64_t> tile,
                                                  int64_t expectedWorkgroups) {
  auto kernel = op->getParentOfType<func::FuncOp>();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (tile.size() != ranges.size())
    return op.emitError("nova: workgroup tile has ") << tile.size() << " entries for " << ranges.size()
                                                     << " loops";
  SmallVector<int64_t> counts, splitDims;
  int64_t product = 1;
  for (auto [d, t] : llvm::enumerate(tile)) {
    if (t == 0)
      continue;
    if (iterators[d] != utils::IteratorType::parallel || ShapedType::isDynamic(ranges[d]))
      return op.emitError("nova: loop ") << d << " is not a static parallel loop and cannot be split";
    counts.push_back((ranges[d] + t - 1) / t);
    splitDims.push_back(static_cast<int64_t>(d));
    product *= counts.back();
  }
  if (expectedWorkgroups > 0 && product != expectedWorkgroups)
    return kernel.emitError("nova-distribute-workgroups: tile gives ")
           << product << " workgroups, the config says " << expectedWorkgroups;
  if (splitDims.empty())
    return success();

  IRRewriter rewriter(op.getContext());
  rewriter.setInsertionPoint(op);
  linalg::LinalgTilingOptions options;
  options.setTileSizes(tile);
  options.setLoopType(linalg::LinalgTilingLoopType::Loops);
  FailureOr<linalg::TiledLinalgOp> tiled = linalg::tileLinalgOp(rewriter, op, options);
  if (failed(tiled) || tiled->loops.size() != splitDims.size())
    return op.emitError("nova: tiling the op over workgroups failed");
  rewriter.eraseOp(op);

  // Workgroup coordinates, at the top of the kernel.
  Location loc = kernel.getLoc();
  OpBuilder b = OpBuilder::atBlockBegin(&kernel.front());
  Value rest = kernel.getArgument(0);
  SmallVector<Value> coords(counts.size());
  for (size_t i = counts.size(); i-- > 0;) {
    Value n = b.create<arith::ConstantIndexOp>(loc, counts[i]);
    coords[i] = i == 0 ? rest : b.create<arith::RemUIOp>(loc, rest, n).getResult();
    if (i > 0)
      rest = b.create<arith::DivUIOp>(loc, rest, n);
  }
  for (auto [i, loopOp] : llvm::enumerate(tiled->loops)) {
    auto loop = cast<scf::ForOp>(loopOp);
    int64_t d = splitDims[i];
    Value t = b.create<arith::ConstantIndexOp>(loc, tile[d]);
    Value extent = b.create<arith::ConstantIndexOp>(loc, ranges[d]);
    Value lb = b.create<arith::MulIOp>(loc, coords[i], t);
    Value ub = b.create<arith::MinUIOp>(loc, b.create<arith::AddIOp>(loc, lb, t), extent);
    loop.setLowerBound(lb);
    loop.setUpperBound(ub);
  }
  return success();
}

Operation *mlir::nova::kernelComputeOp(func::FuncOp kernel) {
  Operation *root = kernelRoot(kernel);
  if (!root || isa<linalg::LinalgOp>(root))
    return root;
  Operation *inner = nullptr;
  root->walk([&](linalg::LinalgOp op) {
    if (!inner)
      inner = op;
  });
  return inner ? inner : root;
}

mlir::nova::LoweringConfigAttr mlir::nova::loweringConfig(func::FuncOp kernel) {
  return kernel->getAttrOfType<LoweringConfigAttr>(LoweringConfigAttr::name);
}

namespace {

uint64_t bytesOf(MemRefType type) {
  return static_cast<uint64_t>(type.getNumElements()) *
         static_cast<uint64_t>((type.getElementTypeBitWidth() + 7) / 8);
}

std::string shapeText(ShapedType type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(type.getShape(), os, "x");
  if (type.getRank() > 0)
    os << " ";
  os << type.getElementType();
  return s;
}

constexpr llvm::StringLiteral kSummaryAttr = "nova.summary";
constexpr llvm::StringLiteral kWorkAttr = "nova.work";

} // namespace

/// The nova::named_scope path the kernel's work was traced under
/// ("block0/attention"): the first name in the root op's location, else in
/// its body's (fusion gives the fused op its consumer's location, but the
/// producer's arithmetic keeps its own).
std::string mlir::nova::scopeOf(Operation *root) {
  auto nameIn = [](Location loc) {
    std::string found;
    loc->walk([&](Location l) {
      if (auto name = dyn_cast<NameLoc>(l)) {
        found = name.getName().str();
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return found;
  };
  std::string found = nameIn(root->getLoc());
  if (found.empty())
    root->walk([&](Operation *inner) {
      found = nameIn(inner->getLoc());
      return found.empty() ? WalkResult::advance() : WalkResult::interrupt();
    });
  return found;
}

/// The kernel's class, for NOVA_PROFILE's split of a step's time: the
/// library's scopes first (an attention matmul is attention's time), then
/// the kernel's structure.
static StringRef classify(Operation *root, bool isMatmul, StringRef scope) {
  SmallVector<StringRef> parts;
  scope.split(parts, '/');
  auto in = [&](StringRef name) { return llvm::is_contained(parts, name); };
  if (in("optimizer"))
    return "optimizer";
  if (in("attention") || isa_and_nonnull<nova::AttentionKernelOp>(root))
    return "attention";
  if (isMatmul)
    return "matmul";
  if (in("embedding"))
    return "embedding";
  if (isa_and_nonnull<linalg::CopyOp, linalg::TransposeOp, linalg::FillOp>(root))
    return "data movement";
  auto linalgOp = dyn_cast_or_null<linalg::LinalgOp>(root);
  if (isa_and_nonnull<nova::LayerNormKernelOp, nova::CrossEntropyKernelOp>(root))
    return "row kernels";
  if (in("layer_norm") || in("cross_entropy") || (linalgOp && linalgOp.getNumReductionLoops() > 0))
    return "row kernels";
  if (linalgOp)
    return "elementwise";
  return "other";
}

static std::string summarizeKernel(func::FuncOp kernel) {
  using namespace mlir::nova;
  Operation *root = kernelComputeOp(kernel);
  LoweringConfigAttr config = loweringConfig(kernel);
  std::string kind = config ? config.getKind().str() : "kernel";
  std::string scope = root ? mlir::nova::scopeOf(root) : "";
  std::string s;
  llvm::raw_string_ostream os(s);
  std::optional<MatmulOperands> m;
  if (auto generic = dyn_cast_or_null<linalg::GenericOp>(root))
    m = matchMatmul(generic);
  os << classify(root, m.has_value(), scope) << ": ";
  if (m) {
    os << "matmul ";
    if (m->batchRank > 0)
      os << m->batch() << "x";
    os << m->M << "x" << m->N << "x" << m->K << " " << m->outType.getElementType()
       << (m->transposeA ? " (lhs transposed)" : "");
  } else {
    os << kind;
    if (root) {
      os << " " << root->getName().getStringRef();
      if (auto dps = dyn_cast<DestinationStyleOpInterface>(root))
        if (dps.getNumDpsInits() > 0)
          if (auto t = dyn_cast<ShapedType>(dps.getDpsInits()[0].getType()))
            os << " " << shapeText(t);
    }
  }
  if (!scope.empty())
    os << " [" << scope << "]";
  return s;
}

mlir::nova::KernelDescription mlir::nova::describeKernel(func::FuncOp kernel) {
  KernelDescription w;
  w.summary = summarizeKernel(kernel);
  for (Type t : kernel.getFunctionType().getInputs())
    if (auto m = dyn_cast<MemRefType>(t); m && m.hasStaticShape())
      w.bytes += bytesOf(m);
  if (auto attention = dyn_cast_or_null<AttentionKernelOp>(kernelRoot(kernel))) {
    // Multiply-adds (2 flops) over the causal half (j <= i) of each head's
    // T x T: the forward's q k^T and p v; the backward's q k^T (recomputed),
    // grad v^T, p^T grad, dS k and dS^T q.
    // Split in two (kAttentionPartAttr): q k^T, grad v^T and dS k are the
    // query rows' kernel's, p^T grad and dS^T q the key rows' (their
    // recomputed scores not counted again).
    uint64_t pairs = static_cast<uint64_t>(attention.seq()) * (attention.seq() + 1) / 2;
    uint64_t products = attention.getBackward() ? 5 : 2;
    if (auto part = kernel->getAttrOfType<StringAttr>(kAttentionPartAttr)) {
      const bool keys = part.getValue() == "keys";
      products = keys ? 2 : 3;
      w.summary += keys ? " (key rows: dk, dv)"
                   : kernel->hasAttr(kAttentionForwardStatsAttr) ? " (query rows: dq; the forward's statistics)"
                                                                  : " (query rows: dq)";
    }
    w.flops = 2 * products * pairs * static_cast<uint64_t>(attention.batch() * attention.model());
    return w;
  }
  if (auto norm = dyn_cast_or_null<LayerNormKernelOp>(kernelRoot(kernel))) {
    // Per element: the forward's sum, centered square, normalize, scale and
    // shift (~7); the backward's recomputed statistics, two sums and dx
    // (~12). Reading the statistics saves the sum and centered square (~4).
    int64_t perElement = (norm.getBackward() ? 12 : 7) - (norm.readsStats() ? 4 : 0);
    w.flops = static_cast<uint64_t>(norm.rows() * norm.width() * perElement);
    return w;
  }
  if (auto loss = dyn_cast_or_null<CrossEntropyKernelOp>(kernelRoot(kernel))) {
    // Per element: the max, the shifted exponential and its sum (~3); the
    // backward's exponential again, the scale and the one-hot's subtraction
    // (~6, or ~3 when it reads the forward's max and sum).
    int64_t perElement = loss.getBackward() ? (loss.readsStats() ? 3 : 6) : 3;
    w.flops = static_cast<uint64_t>(loss.rows() * loss.width() * perElement);
    return w;
  }
  auto op = dyn_cast_or_null<linalg::LinalgOp>(kernelComputeOp(kernel));
  if (!op)
    return w;
  uint64_t points = 1;
  for (int64_t r : op.getStaticLoopRanges()) {
    if (ShapedType::isDynamic(r))
      return w;
    points *= static_cast<uint64_t>(r);
  }
  uint64_t perPoint = 0;
  op->walk([&](Operation *inner) {
    StringRef dialect = inner->getName().getDialectNamespace();
    if ((dialect == "arith" || dialect == "math") && !isa<arith::ConstantOp, arith::IndexCastOp>(inner) &&
        isa<FloatType>(inner->getResult(0).getType()))
      ++perPoint;
  });
  w.flops = points * perPoint;
  // A matmul with a fused lhs producer (FuseMatmulPrologue.cpp) runs the
  // producer once per lhs element while it packs, not at every (m, k, n).
  if (auto generic = dyn_cast<linalg::GenericOp>(op.getOperation()))
    if (std::optional<MatmulOperands> m = matchMatmul(generic); m && !m->prologueInputs.empty()) {
      uint64_t lhsElements = static_cast<uint64_t>(m->batch() * m->M * m->K);
      w.flops = 2 * points + lhsElements * (perPoint - 2);
    }
  return w;
}


std::pair<int64_t, int64_t> mlir::nova::rowKernelShape(Operation *op) {
  if (auto norm = dyn_cast_or_null<LayerNormKernelOp>(op))
    return {norm.rows(), norm.width()};
  if (auto loss = dyn_cast_or_null<CrossEntropyKernelOp>(op))
    return {loss.rows(), loss.width()};
  return {0, 0};
}

void mlir::nova::recordDescription(func::FuncOp kernel) { recordDescription(kernel, describeKernel(kernel)); }

void mlir::nova::recordDescription(func::FuncOp kernel, const KernelDescription &d) {
  Builder b(kernel.getContext());
  kernel->setAttr(kSummaryAttr, b.getStringAttr(d.summary));
  kernel->setAttr(kWorkAttr, b.getDenseI64ArrayAttr({static_cast<int64_t>(d.flops),
                                                     static_cast<int64_t>(d.bytes)}));
}

SmallVector<Operation *> mlir::nova::kernelComputeOps(func::FuncOp kernel) {
  Block &body = kernel.getBody().front();
  SmallVector<Operation *> ops;
  // Reads alone (a load: all its effects reads of known buffers), with the
  // buffers they read.
  DenseMap<Operation *, SmallVector<MemoryEffects::EffectInstance>> reads;
  for (Operation &op : body) {
    if (op.hasTrait<OpTrait::IsTerminator>() || isa<memref::AllocOp, memref::DeallocOp>(op) ||
        isMemoryEffectFree(&op))
      continue;
    ops.push_back(&op);
    if (op.getNumRegions() > 0)
      continue;
    auto effects = getEffectsRecursively(&op);
    if (effects && llvm::all_of(*effects, [](const MemoryEffects::EffectInstance &e) {
          return isa<MemoryEffects::Read>(e.getEffect()) && e.getValue();
        }))
      reads[&op] = std::move(*effects);
  }
  if (reads.empty())
    return ops;
  // The buffers the kernel writes; an unknown write could be any of them.
  llvm::SmallPtrSet<Value, 8> written;
  for (Operation &op : body) {
    auto effects = getEffectsRecursively(&op);
    if (!effects)
      return ops;
    for (const MemoryEffects::EffectInstance &e : *effects)
      if (isa<MemoryEffects::Write>(e.getEffect())) {
        if (!e.getValue())
          return ops;
        written.insert(bufferRoot(e.getValue()));
      }
  }
  // A read of a buffer the kernel never writes reads the same wherever it
  // runs: it goes with the ops that use it.
  llvm::erase_if(ops, [&](Operation *op) {
    auto it = reads.find(op);
    return it != reads.end() && llvm::none_of(it->second, [&](const MemoryEffects::EffectInstance &e) {
             return written.contains(bufferRoot(e.getValue()));
           });
  });
  return ops;
}

Operation *mlir::nova::soleComputeOp(func::FuncOp kernel) {
  SmallVector<Operation *> ops = kernelComputeOps(kernel);
  return ops.size() == 1 ? ops.front() : nullptr;
}

SmallVector<mlir::nova::LaunchOp> mlir::nova::launchesOf(ModuleOp top, StringRef kernel) {
  SmallVector<LaunchOp> launches;
  top.walk([&](LaunchOp launch) {
    if (launch.getKernelAttr().getLeafReference().getValue() == kernel)
      launches.push_back(launch);
  });
  return launches;
}

void mlir::nova::forgetDescription(func::FuncOp kernel) {
  kernel->removeAttr(kSummaryAttr);
  kernel->removeAttr(kWorkAttr);
}

BlockArgument mlir::nova::addKernelArgument(func::FuncOp kernel, Type type) {
  Block &entry = kernel.getBody().front();
  BlockArgument arg = entry.addArgument(type, kernel.getLoc());
  kernel.setFunctionType(FunctionType::get(kernel.getContext(), entry.getArgumentTypes(), {}));
  forgetDescription(kernel);
  return arg;
}

mlir::nova::KernelDescription mlir::nova::describedKernel(func::FuncOp kernel) {
  auto summary = kernel->getAttrOfType<StringAttr>(kSummaryAttr);
  auto work = kernel->getAttrOfType<DenseI64ArrayAttr>(kWorkAttr);
  if (!summary || !work || work.size() != 2)
    return describeKernel(kernel);
  return {summary.str(), static_cast<uint64_t>(work[0]), static_cast<uint64_t>(work[1])};
}

SmallVector<Value> mlir::nova::transposeInRegisters(OpBuilder &b, Location loc,
                                                    SmallVector<Value> rows) {
  auto W = static_cast<int64_t>(rows.size());
  for (int64_t h = 1; h < W; h *= 2)
    for (int64_t i = 0; i < W; ++i) {
      if (i & h)
        continue;
      SmallVector<int64_t> low, high;
      for (int64_t col = 0; col < W; ++col) {
        low.push_back((col & h) ? W + (col ^ h) : col);
        high.push_back((col & h) ? W + col : (col ^ h));
      }
      Value a = rows[i], bRow = rows[i + h];
      rows[i] = b.create<vector::ShuffleOp>(loc, a, bRow, low);
      rows[i + h] = b.create<vector::ShuffleOp>(loc, a, bRow, high);
    }
  return rows;
}

Value mlir::nova::sumLanes(OpBuilder &b, Location loc, Value v) {
  return b.create<vector::ReductionOp>(loc, vector::CombiningKind::ADD, v, arith::FastMathFlags::reassoc);
}

Value mlir::nova::maxLanes(OpBuilder &b, Location loc, Value v) {
  return b.create<vector::ReductionOp>(loc, vector::CombiningKind::MAXIMUMF, v, arith::FastMathFlags::nsz);
}

Value mlir::nova::softmaxMax(OpBuilder &b, Location loc, Value x, Value y) {
  return b.create<arith::MaximumFOp>(loc, x, y, arith::FastMathFlags::nsz);
}

Value mlir::nova::roundToBf16(OpBuilder &b, Location loc, Value v) {
  auto type = cast<VectorType>(v.getType());
  return b.create<arith::TruncFOp>(loc, VectorType::get({type.getNumElements()}, b.getBF16Type()), v);
}

Value mlir::nova::interleaveBf16Rows(OpBuilder &b, Location loc, Value even, Value odd) {
  int64_t lanes = cast<VectorType>(even.getType()).getNumElements();
  SmallVector<int64_t> interleave;
  for (int64_t i = 0; i < lanes; ++i)
    interleave.append({i, lanes + i});
  return b.create<vector::ShuffleOp>(loc, roundToBf16(b, loc, even), roundToBf16(b, loc, odd), interleave);
}

SmallVector<Value> mlir::nova::transposeBf16Pairs(OpBuilder &b, Location loc, ArrayRef<Value> lo,
                                                  ArrayRef<Value> hi) {
  auto lanes = static_cast<int64_t>(lo.size());
  auto words = VectorType::get({lanes}, b.getI32Type());
  SmallVector<int64_t> concat;
  for (int64_t i = 0; i < 2 * lanes; ++i)
    concat.push_back(i);
  SmallVector<Value> rows;
  for (int64_t t = 0; t < lanes; ++t) {
    Value both = b.create<vector::ShuffleOp>(loc, roundToBf16(b, loc, lo[t]), roundToBf16(b, loc, hi[t]), concat);
    rows.push_back(b.create<vector::BitCastOp>(loc, words, both));
  }
  SmallVector<Value> pairs = transposeInRegisters(b, loc, rows);
  for (Value &p : pairs)
    p = b.create<vector::BitCastOp>(loc, VectorType::get({2 * lanes}, b.getBF16Type()), p);
  return pairs;
}

Value mlir::nova::broadcastBf16Pair(OpBuilder &b, Location loc, Value mem, ValueRange idx, int64_t lanes) {
  Value pair = b.create<vector::LoadOp>(loc, VectorType::get({2}, b.getBF16Type()), mem, idx);
  Value word = b.create<vector::ExtractOp>(
      loc, b.create<vector::BitCastOp>(loc, VectorType::get({1}, b.getI32Type()), pair), ArrayRef<int64_t>{0});
  Value words = b.create<vector::BroadcastOp>(loc, VectorType::get({lanes}, b.getI32Type()), word);
  return b.create<vector::BitCastOp>(loc, VectorType::get({2 * lanes}, b.getBF16Type()), words);
}

Value mlir::nova::dotBf16(OpBuilder &b, Location loc, Value acc, Value x, Value y) {
  return b.create<LLVM::CallIntrinsicOp>(loc, acc.getType(), "llvm.x86.avx512bf16.dpbf16ps.512", ValueRange{acc, x, y})
      .getResult(0);
}
