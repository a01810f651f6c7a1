//===- GpuInlineMath.cpp - f32 math without libdevice ------------------===//
//
// --nova-gpu-inline-math: MLIR's polynomial approximations of f32 tanh,
// exp, erf, log... (as nova-approximate-math does for the CPU), then
// math.absf as a cleared sign bit, so GPU kernels call no libdevice function
// (MLIR's GPU-to-NVVM lowering turns both into __nv_* calls, which resolve
// only where the CUDA toolkit's libdevice is found at compile time);
// floor, ceil, sqrt and rsqrt as LLVM intrinsics for the same reason.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cuda/GpuPasses.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace {

struct GpuInlineMath : PassWrapper<GpuInlineMath, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GpuInlineMath)
  StringRef getArgument() const final { return "nova-gpu-inline-math"; }
  StringRef getDescription() const final {
    return "f32 transcendentals as polynomials and absf as a sign-bit mask: no libdevice calls";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<arith::ArithDialect, math::MathDialect, vector::VectorDialect, LLVM::LLVMDialect>();
  }
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    getOperation().walk([](math::AbsFOp abs) {
      Type type = abs.getType();
      Type element = getElementTypeOrSelf(type);
      if (!element.isF32())
        return;
      ImplicitLocOpBuilder b(abs.getLoc(), abs);
      Type i32 = b.getI32Type();
      Type intType = i32;
      Attribute mask = b.getI32IntegerAttr(0x7fffffff);
      if (auto vt = dyn_cast<VectorType>(type)) {
        intType = vt.clone(i32);
        mask = DenseElementsAttr::get(cast<ShapedType>(intType), b.getI32IntegerAttr(0x7fffffff));
      }
      Value bits = b.create<arith::BitcastOp>(intType, abs.getOperand());
      Value cleared = b.create<arith::AndIOp>(bits, b.create<arith::ConstantOp>(intType, cast<TypedAttr>(mask)));
      abs.replaceAllUsesWith(b.create<arith::BitcastOp>(type, cleared).getResult());
      abs.erase();
    });
    // floor, ceil and sqrt (which the approximations use too) as LLVM's
    // intrinsics, which NVPTX selects (cvt.rmi, cvt.rpi, sqrt.rn); the
    // GPU-to-NVVM lowering would make them libdevice calls.
    getOperation().walk([](Operation *op) {
      if (!isa<math::FloorOp, math::CeilOp, math::SqrtOp, math::RsqrtOp>(op))
        return;
      Type type = op->getResult(0).getType();
      if (!type.isF32() && !type.isF64())
        return;
      ImplicitLocOpBuilder b(op->getLoc(), op);
      StringRef name = isa<math::FloorOp>(op) ? "llvm.floor" : isa<math::CeilOp>(op) ? "llvm.ceil" : "llvm.sqrt";
      std::string intrinsic = (name + (type.isF32() ? ".f32" : ".f64")).str();
      Value result = b.create<LLVM::CallIntrinsicOp>(TypeRange{type}, b.getStringAttr(intrinsic),
                                                     op->getOperands())
                         .getResult(0);
      if (isa<math::RsqrtOp>(op))
        result = b.create<arith::DivFOp>(b.create<arith::ConstantOp>(b.getFloatAttr(type, 1.0)), result);
      op->getResult(0).replaceAllUsesWith(result);
      op->erase();
    });
  }
};

} // namespace

std::unique_ptr<Pass> mlir::nova::createGpuInlineMath() { return std::make_unique<GpuInlineMath>(); }

void mlir::nova::registerGpuInlineMath() { PassRegistration<GpuInlineMath>(); }
