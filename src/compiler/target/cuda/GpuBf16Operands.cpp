//===- GpuBf16Operands.cpp - bf16 copies of a GPU product's operands -----===//
//
// nova-gpu-bf16-operands: with bf16 matmuls asked for
// (nova::set_matmul_precision, the module's nova.matmul_precision = "bf16")
// and a GPU whose tensor cores take bf16, each product of f32 operands reads
// bf16 copies of them instead: each f32 value a product reads is rounded
// once (an elementwise linalg.generic of arith.truncf, round to nearest
// even, right after the value is made) into a bf16 tensor of its shape,
// which every product reading the value shares (a layer's input serves its
// forward product and its weight gradient; a weight its forward product
// and its input gradient), and the product's body widens its operands back
// (arith.extf) for its f32 sums. That is what the precision promises
// ("rounds both matmul operands to bfloat16"), at twice tf32's peak rate
// (by the data sheets), and a bf16 operand reaches wgmma in any layout
// (tf32 only K-major).
//
// It runs on tensors, before elementwise fusion: a value that only products
// read is then made in bf16 by its producer (the rounding fused into it),
// and never exists in f32; one that other ops read too keeps both.
//
// Left as they are: products whose operands or result are not f32, an
// operand broadcast over the batch (the tensor-core kernels take neither),
// and every product on a GPU without bf16 tensor cores.
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"
#include "compiler/target/cuda/CudaTarget.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

using namespace mlir;
using namespace mlir::nova;

namespace {

/// A product of two f32 tensors of its result's rank into an f32 tensor:
/// out + lhs * rhs.
bool convertible(linalg::GenericOp op) {
  if (!isTaggedMatmul(op) || !op.hasPureTensorSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1)
    return false;
  Block &body = op.getRegion().front();
  auto mul = dyn_cast<arith::MulFOp>(body.front());
  if (body.getOperations().size() != 3 || !mul || mul.getLhs() != body.getArgument(0) ||
      mul.getRhs() != body.getArgument(1))
    return false;
  auto out = dyn_cast<RankedTensorType>(op.getDpsInits()[0].getType());
  if (!out || !out.getElementType().isF32() || !out.hasStaticShape())
    return false;
  for (Value operand : op.getDpsInputs()) {
    auto type = dyn_cast<RankedTensorType>(operand.getType());
    if (!type || !type.getElementType().isF32() || !type.hasStaticShape() || type.getRank() != out.getRank())
      return false;
  }
  return true;
}

/// `source` rounded to a bf16 tensor of its shape, made right after it.
Value roundedCopy(Value source) {
  auto type = cast<RankedTensorType>(source.getType());
  OpBuilder b(source.getContext());
  if (Operation *def = source.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(cast<BlockArgument>(source).getOwner());
  Location loc = source.getLoc();
  Value empty = b.create<tensor::EmptyOp>(loc, type.getShape(), b.getBF16Type());
  const unsigned rank = unsigned(type.getRank());
  AffineMap identity = b.getMultiDimIdentityMap(rank);
  auto copy = b.create<linalg::GenericOp>(
      loc, TypeRange{empty.getType()}, ValueRange{source}, ValueRange{empty}, ArrayRef<AffineMap>{identity, identity},
      SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        nb.create<linalg::YieldOp>(l, ValueRange{nb.create<arith::TruncFOp>(l, nb.getBF16Type(), args[0])});
      });
  return copy.getResult(0);
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
    registry.insert<arith::ArithDialect, linalg::LinalgDialect, tensor::TensorDialect>();
  }

  void runOnOperation() override {
    ModuleOp top = getOperation();
    auto precision = top->getAttrOfType<StringAttr>(kMatmulPrecisionAttr);
    const ::nova::TargetDesc target = hasFixed ? fixed : ::nova::builtin_gpu_target(targetName);
    if (!precision || precision.getValue() != "bf16" || !target.has("mma.sync.bf16"))
      return;
    for (auto step : top.getOps<func::FuncOp>()) {
      SmallVector<linalg::GenericOp> products;
      step.walk([&](linalg::GenericOp op) {
        if (convertible(op))
          products.push_back(op);
      });
      // One copy a value, shared by every product reading it.
      llvm::DenseMap<Value, Value> copies;
      for (linalg::GenericOp op : products) {
        for (unsigned i = 0; i < 2; ++i) {
          Value source = op.getDpsInputs()[i];
          auto [it, inserted] = copies.try_emplace(source, Value());
          if (inserted)
            it->second = roundedCopy(source);
          op->setOperand(i, it->second);
        }
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
  }
};

} // namespace

std::unique_ptr<Pass> mlir::nova::createGpuBf16Operands(const ::nova::TargetDesc &target) {
  return std::make_unique<GpuBf16Operands>(target);
}

void mlir::nova::registerGpuBf16Operands() { PassRegistration<GpuBf16Operands>(); }
