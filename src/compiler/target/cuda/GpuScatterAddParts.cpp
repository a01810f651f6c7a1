//===- GpuScatterAddParts.cpp - a scatter-add over many indices on a GPU -===//

#include "compiler/target/cuda/GpuScatterAddParts.h"
#include "compiler/target/cuda/CudaTarget.h"
#include "compiler/target/cuda/GpuColumnReduction.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace mlir::nova;

namespace {

/// Each part adds at least this many indices.
constexpr int64_t kMinIndicesPerPart = 64;
/// The parts' tables hold at most this many times the rows of the updates.
constexpr int64_t kMaxTableRowsPerIndex = 4;

/// A scatter-add kernel's parts: its loop over the indices, the table it
/// adds into (a whole kernel argument) and how many parts.
struct ScatterAdd {
  scf::ForOp indices;
  unsigned tableArgument = 0;
  MemRefType table;
  int64_t count = 0, parts = 1;
};

std::optional<ScatterAdd> scatterAddOf(func::FuncOp kernel) {
  Block &entry = kernel.getBody().front();
  auto loop = dyn_cast_or_null<scf::ForOp>(soleComputeOp(kernel));
  if (!loop || !loop.getInitArgs().empty())
    return std::nullopt;
  std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound()), ub = getConstantIntValue(loop.getUpperBound()),
                         step = getConstantIntValue(loop.getStep());
  if (!lb || !ub || !step || *lb != 0 || *step != 1)
    return std::nullopt;
  bool split = false;
  Value table;
  bool oneTable = true;
  loop->walk([&](Operation *op) {
    if (op->hasAttr(kSplitLoopAttr))
      split = true;
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      if (table && store.getMemRef() != table)
        oneTable = false;
      table = store.getMemRef();
    }
  });
  auto arg = dyn_cast_or_null<BlockArgument>(table);
  if (!split || !oneTable || !arg || arg.getOwner() != &entry || arg.getArgNumber() == 0)
    return std::nullopt;
  // The table is the loop's alone, read and written element by element.
  if (llvm::any_of(arg.getUses(), [&](OpOperand &use) {
        Operation *user = use.getOwner();
        const bool access = (isa<memref::LoadOp>(user) && use.getOperandNumber() == 0) ||
                            (isa<memref::StoreOp>(user) && use.getOperandNumber() == 1);
        return !access || !loop->isAncestor(user);
      }))
    return std::nullopt;
  auto type = dyn_cast<MemRefType>(arg.getType());
  if (!type || type.getRank() != 2 || !type.hasStaticShape() || !type.getLayout().isIdentity() ||
      !isa<FloatType>(type.getElementType()))
    return std::nullopt;
  ScatterAdd s{loop, arg.getArgNumber() - 1, type, *ub, 1};
  const int64_t rows = type.getDimSize(0);
  while (s.count % (s.parts * 2) == 0 && s.parts * 2 * kMinIndicesPerPart <= s.count &&
         s.parts * 2 * rows <= kMaxTableRowsPerIndex * s.count)
    s.parts *= 2;
  if (s.parts < 2)
    return std::nullopt;
  return s;
}

} // namespace

LogicalResult mlir::nova::splitScatterAdds(ModuleOp top, ModuleOp kernels) {
  MLIRContext *ctx = top.getContext();
  SmallVector<std::pair<func::FuncOp, ScatterAdd>> found;
  for (auto kernel : kernels.getOps<func::FuncOp>())
    if (std::optional<ScatterAdd> s = scatterAddOf(kernel))
      found.emplace_back(kernel, *s);
  for (auto &[kernel, s] : found) {
    Location l = s.indices.getLoc();
    const int64_t rows = s.table.getDimSize(0), width = s.table.getDimSize(1), each = s.count / s.parts;
    auto workspaceType = MemRefType::get({s.parts, rows, width}, s.table.getElementType());
    Block &entry = kernel.getBody().front();
    BlockArgument workspace = entry.addArgument(workspaceType, l);
    BlockArgument table = entry.getArgument(s.tableArgument + 1);
    // for part p: the indices [p * each, (p + 1) * each) into table p.
    OpBuilder b(s.indices);
    auto c = [&](int64_t v) -> Value { return b.create<arith::ConstantIndexOp>(l, v); };
    auto parts = b.create<scf::ForOp>(l, c(0), c(s.parts), c(1));
    parts->setAttr(kGpuPartLoopAttr, b.getUnitAttr());
    b.setInsertionPointToStart(parts.getBody());
    Value p = parts.getInductionVar();
    Value first = b.create<arith::MulIOp>(l, p, c(each));
    Value last = b.create<arith::AddIOp>(l, first, c(each));
    auto part = cast<scf::ForOp>(b.clone(*s.indices));
    part.getLowerBoundMutable().assign(first);
    part.getUpperBoundMutable().assign(last);
    // Its table's loads and stores: table p of the workspace (p its first
    // index; a view at p would have a dynamic offset).
    SmallVector<Operation *> accesses;
    part->walk([&](Operation *op) {
      if (isa<memref::LoadOp, memref::StoreOp>(op) && llvm::is_contained(op->getOperands(), Value(table)))
        accesses.push_back(op);
    });
    for (Operation *op : accesses) {
      OpBuilder ab(op);
      if (auto load = dyn_cast<memref::LoadOp>(op)) {
        SmallVector<Value> at{p};
        llvm::append_range(at, load.getIndices());
        load.replaceAllUsesWith(ab.create<memref::LoadOp>(load.getLoc(), workspace, at).getResult());
      } else {
        auto store = cast<memref::StoreOp>(op);
        if (store.getValueToStore() == table)
          return kernel.emitError("nova-gpu-threads: a scatter-add storing its table");
        SmallVector<Value> at{p};
        llvm::append_range(at, store.getIndices());
        ab.create<memref::StoreOp>(store.getLoc(), store.getValueToStore(), workspace, at);
      }
      op->erase();
    }
    s.indices.erase();
    if (!table.use_empty())
      return kernel.emitError("nova-gpu-threads: a split scatter-add's table has other uses");
    entry.eraseArgument(s.tableArgument + 1);
    kernel.setFunctionType(FunctionType::get(ctx, entry.getArgumentTypes(), {}));
    kernel->setAttr(kGpuScatterPartsAttr, IntegerAttr::get(IntegerType::get(ctx, 64), s.parts));
    forgetDescription(kernel);

    // `<k>_zero` zeroes the parts' tables; `<k>_total` adds them into the
    // result, part by part in order.
    auto add = [](OpBuilder &nb, Location nl, Value v, Value p) {
      return nb.create<arith::AddFOp>(nl, v, p).getResult();
    };
    func::FuncOp total = buildPartsTotal(kernel, workspaceType, s.table, add);
    OpBuilder kb(kernel);
    kb.setInsertionPointAfter(kernel); // k, k_zero, k_total
    auto zero = kb.create<func::FuncOp>(l, (kernel.getSymName() + "_zero").str(),
                                        kb.getFunctionType({kb.getIndexType(), workspaceType}, {}));
    OpBuilder zb = OpBuilder::atBlockBegin(zero.addEntryBlock());
    Value zeroValue = zb.create<arith::ConstantOp>(l, zb.getFloatAttr(s.table.getElementType(), 0.0));
    zb.create<linalg::FillOp>(l, zeroValue, zero.getArgument(1));
    zb.create<func::ReturnOp>(l);
    launchInParts(top, kernel, s.tableArgument, workspaceType, total, zero);
  }
  return success();
}
