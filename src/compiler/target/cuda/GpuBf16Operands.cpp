//===- GpuBf16Operands.cpp - bf16 copies of a GPU product's operands -----===//
//
// nova-gpu-bf16-operands: with bf16 matmuls asked for
// (nova::set_matmul_precision, the module's nova.matmul_precision = "bf16")
// and a GPU whose tensor cores take bf16, each product of f32 operands that
// a tensor-core kernel could run reads bf16 copies of them instead: before
// it (and before the fill of its result), each operand is rounded into a
// new bf16 buffer of its logical shape, row-major, by an elementwise
// linalg.generic (arith.truncf: round to nearest even), and the product's
// body widens them back (arith.extf) for its f32 sums. That is what the
// precision promises ("rounds both matmul operands to bfloat16"), at twice
// tf32's tensor-core rate, and a bf16 operand reaches wgmma in any layout
// (tf32 only K-major) and mma.sync through ldmatrix(.trans). The copies are
// kernels of their own after outlining (a product's two run side by side),
// and their buffers live from the copy to the product.
//
// Left as they are: products with a fused lhs prologue, an operand
// broadcast over the batch, non-f32 operands or results (the tensor-core
// kernels take none of them), and every product on a GPU without bf16
// tensor cores.
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"
#include "compiler/target/cuda/CudaTarget.h"
#include "compiler/transforms/Kernels.h"
#include "compiler/transforms/MatmulKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;
using namespace mlir::nova;

namespace {

/// Whether the product `m` is one a tensor-core kernel could run from bf16
/// copies of its operands.
bool convertible(const MatmulOperands &m) {
  if (!m.prologueInputs.empty() || !m.outType.getElementType().isF32())
    return false;
  for (Value operand : {m.lhs, m.rhs}) {
    auto type = cast<MemRefType>(operand.getType());
    if (!type.getElementType().isF32() || type.getRank() != m.outType.getRank())
      return false;
  }
  return true;
}

/// A new row-major bf16 buffer holding `source` rounded, made before `at`.
Value roundedCopy(OpBuilder &b, Location loc, Value source) {
  auto type = cast<MemRefType>(source.getType());
  auto bf16Type = MemRefType::get(type.getShape(), b.getBF16Type());
  Value copy = b.create<memref::AllocOp>(loc, bf16Type, b.getI64IntegerAttr(64));
  const unsigned rank = unsigned(type.getRank());
  AffineMap identity = b.getMultiDimIdentityMap(rank);
  b.create<linalg::GenericOp>(loc, ValueRange{source}, ValueRange{copy}, ArrayRef<AffineMap>{identity, identity},
                              SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
                              [&](OpBuilder &nb, Location l, ValueRange args) {
                                Value rounded = nb.create<arith::TruncFOp>(l, nb.getBF16Type(), args[0]);
                                nb.create<linalg::YieldOp>(l, rounded);
                              });
  return copy;
}

struct GpuBf16Operands : PassWrapper<GpuBf16Operands, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GpuBf16Operands)
  GpuBf16Operands() = default;
  GpuBf16Operands(const GpuBf16Operands &other) : PassWrapper(other) {}
  explicit GpuBf16Operands(const ::nova::TargetDesc &t) : fixed(t), hasFixed(true) {}
  Option<std::string> targetName{*this, "target", llvm::cl::desc("a built-in GPU target (sm_80, ..., h200)"),
                                 llvm::cl::init("sm_90a")};
  ::nova::TargetDesc fixed;
  bool hasFixed = false;
  StringRef getArgument() const final { return "nova-gpu-bf16-operands"; }
  StringRef getDescription() const final {
    return "With bf16 matmuls asked for, GPU products read bf16 copies of their f32 operands";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<arith::ArithDialect, linalg::LinalgDialect, memref::MemRefDialect>();
  }

  void runOnOperation() override {
    ModuleOp top = getOperation();
    auto precision = top->getAttrOfType<StringAttr>(kMatmulPrecisionAttr);
    const ::nova::TargetDesc target = hasFixed ? fixed : ::nova::builtin_gpu_target(targetName);
    if (!precision || precision.getValue() != "bf16" || !target.has("mma.sync.bf16"))
      return;
    SmallVector<linalg::GenericOp> products;
    for (auto step : top.getOps<func::FuncOp>())
      step.walk([&](linalg::GenericOp op) {
        if (isTaggedMatmul(op))
          products.push_back(op);
      });
    for (linalg::GenericOp op : products) {
      std::optional<MatmulOperands> m = matchMatmul(op);
      if (!m || !convertible(*m))
        continue;
      // Before the product's result fill, which stays its neighbour.
      Operation *at = op;
      if (auto fill = dyn_cast_or_null<linalg::FillOp>(op->getPrevNode());
          fill && fill.hasPureBufferSemantics() && fill.getDpsInits()[0] == m->out)
        at = fill;
      OpBuilder b(at);
      Value lhs = roundedCopy(b, op.getLoc(), m->lhs);
      Value rhs = m->rhs == m->lhs ? lhs : roundedCopy(b, op.getLoc(), m->rhs);
      op->setOperand(0, lhs);
      op->setOperand(1, rhs);
      Block &body = op.getRegion().front();
      OpBuilder bb = OpBuilder::atBlockBegin(&body);
      for (unsigned i = 0; i < 2; ++i) {
        BlockArgument arg = body.getArgument(i);
        arg.setType(bb.getBF16Type());
        auto widened = bb.create<arith::ExtFOp>(op.getLoc(), bb.getF32Type(), arg);
        arg.replaceAllUsesExcept(widened, widened);
      }
    }
  }
};

} // namespace

std::unique_ptr<Pass> mlir::nova::createGpuBf16Operands(const ::nova::TargetDesc &target) {
  return std::make_unique<GpuBf16Operands>(target);
}

void mlir::nova::registerGpuBf16Operands() { PassRegistration<GpuBf16Operands>(); }
