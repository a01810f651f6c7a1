//===- MatmulKernelParts.cpp - what the tensor-core matmul kernels share -===//

#include "compiler/target/cuda/MatmulKernelParts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::nova;

Value IndexMath::c(int64_t v) { return b.create<arith::ConstantIndexOp>(v); }
Value IndexMath::add(Value x, int64_t v) { return v == 0 ? x : add(x, c(v)); }
Value IndexMath::add(Value x, Value y) { return b.create<arith::AddIOp>(x, y); }
Value IndexMath::mul(Value x, int64_t v) { return v == 1 ? x : b.create<arith::MulIOp>(x, c(v)).getResult(); }
Value IndexMath::mul(Value x, Value y) { return b.create<arith::MulIOp>(x, y); }
Value IndexMath::div(Value x, int64_t v) {
  if (v == 1)
    return x;
  if (llvm::isPowerOf2_64(v))
    return b.create<arith::ShRUIOp>(x, c(llvm::Log2_64(v)));
  return b.create<arith::DivUIOp>(x, c(v));
}
Value IndexMath::rem(Value x, int64_t v) {
  if (llvm::isPowerOf2_64(v))
    return b.create<arith::AndIOp>(x, c(v - 1));
  return b.create<arith::RemUIOp>(x, c(v));
}
Value IndexMath::shr(Value x, int64_t v) { return v == 0 ? x : b.create<arith::ShRUIOp>(x, c(v)).getResult(); }
Value IndexMath::shl(Value x, int64_t v) { return v == 0 ? x : b.create<arith::ShLIOp>(x, c(v)).getResult(); }
Value IndexMath::andi(Value x, int64_t v) { return b.create<arith::AndIOp>(x, c(v)); }
Value IndexMath::xori(Value x, Value y) { return b.create<arith::XOrIOp>(x, y); }
Value IndexMath::ult(Value x, int64_t v) { return b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, x, c(v)); }

Type mlir::nova::operandElementType(GpuOperand operand, MLIRContext *ctx) {
  switch (operand) {
  case GpuOperand::f16:
    return Float16Type::get(ctx);
  case GpuOperand::bf16:
    return BFloat16Type::get(ctx);
  case GpuOperand::f64:
    return Float64Type::get(ctx);
  default:
    return Float32Type::get(ctx);
  }
}

SmallVector<Value> MatmulResultStore::at(Value row, Value col) const {
  SmallVector<Value> idx;
  if (batch)
    idx.push_back(batch);
  idx.push_back(row);
  idx.push_back(col);
  return idx;
}

/// activation(scale x v + bias) + residual, then stored: `v` is both
/// columns (vector<2xf32>) or the first alone (f32).
void MatmulResultStore::finish(IndexMath &k, Value v, Value row, Value col) const {
  ImplicitLocOpBuilder &b = k.b;
  Type type = v.getType();
  const bool pair = isa<VectorType>(type);
  auto constant = [&](double x) -> Value {
    if (auto vt = dyn_cast<VectorType>(type))
      return b.create<arith::ConstantOp>(vt, DenseElementsAttr::get(vt, b.getF32FloatAttr(float(x))));
    return b.create<arith::ConstantOp>(b.getF32FloatAttr(float(x)));
  };
  auto load = [&](Value memref, ValueRange idx) -> Value {
    if (pair)
      return b.create<vector::LoadOp>(cast<VectorType>(type), memref, idx);
    return b.create<memref::LoadOp>(memref, idx);
  };
  if (epilogue.scale != 1.0)
    v = b.create<arith::MulFOp>(v, constant(epilogue.scale));
  if (epilogue.bias)
    v = b.create<arith::AddFOp>(v, load(bias, ValueRange{col}));
  switch (epilogue.activation) {
  case MmaEpilogue::Activation::none:
    break;
  case MmaEpilogue::Activation::relu:
    v = b.create<arith::MaximumFOp>(v, constant(0.0));
    break;
  case MmaEpilogue::Activation::gelu_tanh: {
    // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), as PyTorch's approximate="tanh".
    Value x3 = b.create<arith::MulFOp>(b.create<arith::MulFOp>(v, v), v);
    Value inner = b.create<arith::AddFOp>(v, b.create<arith::MulFOp>(x3, constant(0.044715)));
    Value th = b.create<math::TanhOp>(b.create<arith::MulFOp>(inner, constant(0.7978845608028654)));
    Value half = b.create<arith::MulFOp>(v, constant(0.5));
    v = b.create<arith::MulFOp>(half, b.create<arith::AddFOp>(th, constant(1.0)));
    break;
  }
  }
  if (epilogue.residual)
    v = b.create<arith::AddFOp>(v, load(residual, at(row, col)));
  if (pair)
    b.create<vector::StoreOp>(v, c, at(row, col));
  else
    b.create<memref::StoreOp>(v, c, at(row, col));
}

void MatmulResultStore::storePair(IndexMath &k, Value pair, Value row, Value col) const {
  if (!edges)
    return finish(k, pair, row, col);
  ImplicitLocOpBuilder &b = k.b;
  // Both columns, the first alone, or nothing.
  Value inRow = k.ult(row, m);
  Value both = b.create<arith::AndIOp>(inRow, k.ult(k.add(col, 1), n));
  auto ifBoth = b.create<scf::IfOp>(both, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifBoth.getThenRegion().front());
  finish(k, pair, row, col);
  b.setInsertionPointToStart(&ifBoth.getElseRegion().front());
  Value first = b.create<arith::AndIOp>(inRow, k.ult(col, n));
  auto ifFirst = b.create<scf::IfOp>(first, /*withElseRegion=*/false);
  b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
  finish(k, b.create<vector::ExtractOp>(pair, ArrayRef<int64_t>{0}), row, col);
}
