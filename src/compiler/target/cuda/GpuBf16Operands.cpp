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
// (an M/N-contiguous tf32 one only transposed in shared memory first).
//
// It runs on tensors, before elementwise fusion: a value that only products
// read is then made in bf16 by its producer (the rounding fused into it),
// and never exists in f32; one that other ops read too keeps both. A
// product reading a reshape or a transpose of a value (a [B, T, d]
// activation read as [B*T, d]; a weight's transpose in its input
// gradient) reads the same rearrangement of the value's copy: the copy
// stays fusable into the producer, and a transposed weight is a view of a
// copy (nova-fold-transposes), not a transpose kernel. A step argument (a
// weight) is copied right before each product reading it, not once: one
// copy for its forward product and its input gradient would live across
// the forward's peak. A forward LayerNorm or attention kernel (not
// elementwise) whose result only products read writes its result in bf16
// itself (writesEachResultOnce, GpuScalarKernels.h).
//
// Attention's qkv: a value that only attention kernels read as their qkv
// (also through reshapes), with heads the tensor-core kernels take, is
// read as a bf16 copy too (Bf16Copies.h copyAttentionQkv, which the CPU's
// nova-bf16-attention-qkv shares): those kernels round q, k and
// v to bf16 as they stage them, so the copy gives them the same values
// (rounded once, where qkv is made: the qkv product's epilogue, whose
// kernel then writes bf16) in half the bytes, and the backward keeps half.
// Where the tensor-core plan does not fit after all, the kernel of a row
// at a time widens what it loads.
//
// Left as they are: products whose operands or result are not f32, an
// operand broadcast over the batch (the tensor-core kernels take neither),
// and every product on a GPU without bf16 tensor cores.
//
//===----------------------------------------------------------------------===//

#include "compiler/dialect/NovaDialect.h"
#include "compiler/target/cuda/CudaTarget.h"
#include "compiler/target/cuda/GpuAttentionMma.h"
#include "compiler/target/cuda/GpuScalarKernels.h"
#include "compiler/transforms/Bf16Copies.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>
#include <functional>

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

/// The kernel op making `result` (destination style, its init a
/// tensor.empty) makes `copy`, its bf16 rounding, instead.
void writeInBf16(OpResult result, Value copy) {
  auto op = cast<DestinationStyleOpInterface>(result.getOwner());
  OpOperand *init = op.getTiedOpOperand(result);
  auto type = cast<RankedTensorType>(result.getType());
  OpBuilder b(result.getOwner());
  Value empty = b.create<tensor::EmptyOp>(result.getOwner()->getLoc(), type.getShape(), b.getBF16Type());
  Value old = init->get();
  init->set(empty);
  result.setType(empty.getType());
  copy.replaceAllUsesWith(result);
  copy.getDefiningOp()->erase();
  if (Operation *def = old.getDefiningOp(); def && def->use_empty())
    def->erase();
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
      // One copy a value, shared by every product reading it, also through
      // a reshape or a transpose: the copy is of the value itself (so that
      // its producer can make it in bf16), rearranged again for the
      // product. A step argument (a weight) is copied right before each
      // product reading it instead: one copy shared by a forward product
      // and an input gradient's would live across the forward's peak (2
      // bytes a parameter; make_steps' medium GPT for sm_90a: 362.5 MiB
      // shared, 316.5 MiB a copy a product, for 58 launches more).
      using Key = std::pair<Value, Operation *>; // value, reader (args only)
      llvm::DenseMap<Key, Value> rootCopies, copies;
      llvm::SetVector<Operation *> rearranged; // f32 values, maybe dead after
      for (linalg::GenericOp op : products) {
        for (unsigned i = 0; i < 2; ++i) {
          Value source = op.getDpsInputs()[i];
          SmallVector<Operation *> chain;
          Value root = rearrangedRoot(source, chain);
          Operation *reader = isa<BlockArgument>(root) ? op.getOperation() : nullptr;
          // Before the product's fill, which fuses into the product.
          Operation *before = reader;
          if (auto fill = op.getDpsInits()[0].getDefiningOp<linalg::FillOp>(); fill && reader)
            before = fill;
          auto [it, inserted] = copies.try_emplace(Key{source, reader}, Value());
          if (inserted) {
            auto [rit, rootInserted] = rootCopies.try_emplace(Key{root, reader}, Value());
            if (rootInserted)
              rit->second = roundedCopy(root, before);
            it->second = rearrangedLike(rit->second, chain);
            rearranged.insert(chain.begin(), chain.end());
          }
          readWidened(op->getOpOperand(i), it->second);
        }
      }
      // The f32 rearrangements only products read are gone, last first.
      for (Operation *op : llvm::reverse(rearranged))
        if (op->use_empty())
          eraseRearrangement(op);
      copyAttentionQkv(step, attentionHeadsTakeMma, rootCopies);
      // A forward LayerNorm or attention kernel whose result only the
      // copy reads writes the bf16 copy itself.
      for (auto [key, copy] : rootCopies) {
        Value root = key.first;
        if (root.hasOneUse() && root.getDefiningOp() && writesEachResultOnce(root.getDefiningOp()))
          writeInBf16(cast<OpResult>(root), copy);
      }
    }
  }
};

} // namespace

std::unique_ptr<Pass> mlir::nova::createGpuBf16Operands(const ::nova::TargetDesc &target) {
  return std::make_unique<GpuBf16Operands>(target);
}

void mlir::nova::registerGpuBf16Operands() { PassRegistration<GpuBf16Operands>(); }
