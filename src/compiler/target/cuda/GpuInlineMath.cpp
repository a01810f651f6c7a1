//===- GpuInlineMath.cpp - GPU math without libdevice ------------------===//
//
// --nova-gpu-inline-math: MLIR's polynomial approximations of f32 tanh,
// exp, erf, log... (as nova-approximate-math does for the CPU), Nova's own
// f64 exp, log, tanh and erf (F64Math below), then
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

#include <cmath>

using namespace mlir;

namespace {

/// f64 transcendentals written out in arith ops (no libdevice, no
/// intrinsics: the emulator runs them as the GPU will), each within a few
/// ulp of the correctly rounded result:
///   exp   x = k ln2 + r, |r| <= ln2 / 2 (Cody-Waite, ln2 in two parts),
///         e^r by its Taylor series to r^13 (the next term < 2^-53 e^r),
///         times 2^k built from bits in two halves (subnormal results);
///   log   x = m 2^e, m in [sqrt(1/2), sqrt(2)) (subnormals scaled first),
///         log m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172: the odd
///         series to s^21;
///   tanh  expm1(2|x|) / (expm1(2|x|) + 2), expm1 by the same series (no
///         1 to cancel) below ln2 / 2, the sign put back; 1 from |x| = 22;
///   erf   below 2 the Taylor series (to x^91; its terms peak at 3, so the
///         sum keeps about 15.5 digits), above it 1 - erfc with erfc by its
///         continued fraction from its 64th term (2e-16 relative at 2); 1
///         from 6.
/// Special values: exp(NaN) and log(NaN) NaN, exp overflow inf and deep
/// underflow 0, log(0) -inf, log(x < 0) NaN, log(inf) inf.
class F64Math {
public:
  explicit F64Math(ImplicitLocOpBuilder &b) : b(b), f64(b.getF64Type()), i64(b.getI64Type()) {}

  Value exp(Value x) {
    Value big = lt(c(709.782712893384), x), tiny = lt(x, c(-745.1332191019412));
    Value clamped = b.create<arith::MinimumFOp>(b.create<arith::MaximumFOp>(x, c(-746.0)), c(710.0));
    Value y = mul(clamped, c(1.4426950408889634));
    // Round to nearest (half away from zero): r stays within ln2 / 2 + ulps.
    Value k = b.create<arith::FPToSIOp>(i64, add(y, b.create<arith::SelectOp>(lt(y, c(0.0)), c(-0.5), c(0.5))));
    Value kf = b.create<arith::SIToFPOp>(f64, k);
    Value r = fma(neg(kf), c(6.93147180369123816490e-01), clamped);
    r = fma(neg(kf), c(1.90821492927058770002e-10), r);
    Value e = scale(taylorExp(r, /*withOne=*/true), k);
    e = b.create<arith::SelectOp>(big, c(INFINITY), e);
    e = b.create<arith::SelectOp>(tiny, c(0.0), e);
    return b.create<arith::SelectOp>(isNan(x), x, e);
  }

  Value log(Value x) {
    // Subnormals times 2^54 first.
    Value sub = lt(x, c(0x1p-1022));
    Value xs = b.create<arith::SelectOp>(sub, mul(x, c(0x1p54)), x);
    Value bits = b.create<arith::BitcastOp>(i64, xs);
    Value e = b.create<arith::SubIOp>(b.create<arith::AndIOp>(b.create<arith::ShRUIOp>(bits, i(52)), i(0x7ff)), i(1023));
    e = b.create<arith::SubIOp>(e, b.create<arith::SelectOp>(sub, i(54), i(0)));
    Value m = b.create<arith::BitcastOp>(
        f64, b.create<arith::OrIOp>(b.create<arith::AndIOp>(bits, i((int64_t(1) << 52) - 1)), i(int64_t(1023) << 52)));
    Value high = lt(c(1.4142135623730951), m);
    m = b.create<arith::SelectOp>(high, mul(m, c(0.5)), m);
    e = b.create<arith::AddIOp>(e, b.create<arith::SelectOp>(high, i(1), i(0)));
    Value s = div(sub_(m, c(1.0)), add(m, c(1.0)));
    Value z = mul(s, s);
    Value p = c(1.0 / 21);
    for (int n = 9; n >= 0; --n)
      p = fma(p, z, c(1.0 / (2 * n + 1)));
    Value logm = mul(mul(c(2.0), s), p);
    Value ef = b.create<arith::SIToFPOp>(f64, e);
    Value result = fma(ef, c(6.93147180369123816490e-01), fma(ef, c(1.90821492927058770002e-10), logm));
    result = b.create<arith::SelectOp>(eq(x, c(INFINITY)), x, result);
    result = b.create<arith::SelectOp>(eq(x, c(0.0)), c(-INFINITY), result);
    result = b.create<arith::SelectOp>(lt(x, c(0.0)), c(NAN), result);
    return b.create<arith::SelectOp>(isNan(x), x, result);
  }

  Value tanh(Value x) {
    Value a = b.create<arith::MaximumFOp>(x, neg(x)); // |x|, NaN stays NaN
    Value y = mul(c(2.0), b.create<arith::MinimumFOp>(a, c(22.0)));
    // expm1(y): the series without its 1 below ln2 / 2, else exp(y) - 1.
    Value small = lt(y, c(0.34657359027997264));
    Value em1 = b.create<arith::SelectOp>(small, taylorExp(y, /*withOne=*/false), sub_(exp(y), c(1.0)));
    Value t = div(em1, add(em1, c(2.0)));
    t = b.create<arith::SelectOp>(lt(a, c(22.0)), t, c(1.0));
    Value signed_ = b.create<arith::SelectOp>(lt(x, c(0.0)), neg(t), t);
    return b.create<arith::SelectOp>(isNan(x), x, signed_);
  }

  Value erf(Value x) {
    Value a = b.create<arith::MaximumFOp>(x, neg(x));
    // Series: erf(a) = 2/sqrt(pi) sum (-1)^n a^(2n+1) / (n! (2n+1)), in Horner form on a^2.
    Value a2 = mul(a, a);
    const int terms = 45;
    Value p = c(0.0);
    for (int n = terms; n >= 0; --n) {
      // coefficient (-1)^n / (n! (2n+1))
      double coef = 1.0;
      for (int j = 1; j <= n; ++j)
        coef /= j;
      coef /= (2 * n + 1);
      if (n % 2)
        coef = -coef;
      p = fma(p, a2, c(coef));
    }
    Value series = mul(mul(c(1.1283791670955126), a), p);
    // Continued fraction: erfc(a) = e^(-a^2) / sqrt(pi) / (a + (1/2) / (a + 1 / (a + (3/2) / (a + ...)))).
    Value ac = b.create<arith::MaximumFOp>(a, c(2.0)); // keep the fraction's branch finite
    Value frac = ac;
    for (int n = 64; n >= 1; --n)
      frac = add(ac, div(c(n / 2.0), frac));
    Value erfc = div(mul(exp(neg(mul(ac, ac))), c(0.5641895835477563)), frac);
    Value r = b.create<arith::SelectOp>(lt(a, c(2.0)), series, sub_(c(1.0), erfc));
    r = b.create<arith::SelectOp>(lt(a, c(6.0)), r, c(1.0));
    Value signed_ = b.create<arith::SelectOp>(lt(x, c(0.0)), neg(r), r);
    return b.create<arith::SelectOp>(isNan(x), x, signed_);
  }

private:
  ImplicitLocOpBuilder &b;
  Type f64, i64;

  Value c(double v) { return b.create<arith::ConstantOp>(b.getF64FloatAttr(v)); }
  Value i(int64_t v) { return b.create<arith::ConstantOp>(b.getI64IntegerAttr(v)); }
  Value add(Value x, Value y) { return b.create<arith::AddFOp>(x, y); }
  Value sub_(Value x, Value y) { return b.create<arith::SubFOp>(x, y); }
  Value mul(Value x, Value y) { return b.create<arith::MulFOp>(x, y); }
  Value div(Value x, Value y) { return b.create<arith::DivFOp>(x, y); }
  Value neg(Value x) { return b.create<arith::NegFOp>(x); }
  Value fma(Value x, Value y, Value z) { return b.create<math::FmaOp>(x, y, z); }
  Value lt(Value x, Value y) { return b.create<arith::CmpFOp>(arith::CmpFPredicate::OLT, x, y); }
  Value eq(Value x, Value y) { return b.create<arith::CmpFOp>(arith::CmpFPredicate::OEQ, x, y); }
  Value isNan(Value x) { return b.create<arith::CmpFOp>(arith::CmpFPredicate::UNO, x, x); }

  /// sum r^n / n!, n from 0 (or 1) to 13, Horner.
  Value taylorExp(Value r, bool withOne) {
    double inv[14];
    inv[0] = 1;
    for (int n = 1; n < 14; ++n)
      inv[n] = inv[n - 1] / n;
    Value p = c(inv[13]);
    for (int n = 12; n >= 1; --n)
      p = fma(p, r, c(inv[n]));
    return withOne ? fma(p, r, c(1.0)) : mul(p, r);
  }

  /// v 2^k for k in [-1080, 1025]: two factors 2^(k/2), 2^(k - k/2), each normal.
  Value scale(Value v, Value k) {
    Value k1 = b.create<arith::DivSIOp>(k, i(2));
    Value k2 = b.create<arith::SubIOp>(k, k1);
    auto pow2 = [&](Value e) {
      return b.create<arith::BitcastOp>(f64, b.create<arith::ShLIOp>(b.create<arith::AddIOp>(e, i(1023)), i(52)));
    };
    return mul(mul(v, pow2(k1)), pow2(k2));
  }
};

struct GpuInlineMath : PassWrapper<GpuInlineMath, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(GpuInlineMath)
  StringRef getArgument() const final { return "nova-gpu-inline-math"; }
  StringRef getDescription() const final {
    return "f32 and f64 transcendentals as polynomials and absf as a sign-bit mask: no libdevice calls";
  }
  void getDependentDialects(DialectRegistry &registry) const override {
    registry.insert<arith::ArithDialect, math::MathDialect, vector::VectorDialect, LLVM::LLVMDialect>();
  }
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathPolynomialApproximationPatterns(patterns);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
    getOperation().walk([](Operation *op) {
      if (!isa<math::ExpOp, math::LogOp, math::TanhOp, math::ErfOp>(op) || !op->getResult(0).getType().isF64())
        return;
      ImplicitLocOpBuilder b(op->getLoc(), op);
      F64Math f(b);
      Value x = op->getOperand(0);
      Value r = isa<math::ExpOp>(op) ? f.exp(x) : isa<math::LogOp>(op) ? f.log(x) : isa<math::TanhOp>(op) ? f.tanh(x)
                                                                                                          : f.erf(x);
      op->getResult(0).replaceAllUsesWith(r);
      op->erase();
    });
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
