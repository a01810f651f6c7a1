//===- GpuMatmulEpilogue.cpp - a step's elementwise op run on a GPU matmul's results ===//

#include "compiler/target/cuda/GpuMatmulEpilogue.h"
#include "compiler/target/cuda/GpuBlockReduction.h"
#include "compiler/target/cuda/MatmulKernelParts.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::nova;

MemRefType mlir::nova::epilogueArgumentType(const EpilogueInput &input, int64_t m, int64_t n) {
  switch (input.kind) {
  case EpilogueInput::Kind::column:
    return MemRefType::get({n}, input.element);
  case EpilogueInput::Kind::row:
    return MemRefType::get({m}, input.element);
  case EpilogueInput::Kind::element:
    return MemRefType::get({m, n}, input.element);
  case EpilogueInput::Kind::scalar:
  case EpilogueInput::Kind::product:
    break;
  }
  return MemRefType::get({}, input.element);
}

/// Input `input`'s value at (row, col): `lanes` of its columns from col (a
/// vector where lanes > 1).
static Value loadAt(ImplicitLocOpBuilder &b, const EpilogueInput &input, Value arg, Value row, Value col,
                    int64_t lanes) {
  SmallVector<Value, 2> at;
  if (input.kind == EpilogueInput::Kind::element)
    at.push_back(row);
  at.push_back(col);
  return lanes > 1 ? b.create<vector::LoadOp>(VectorType::get({lanes}, input.element), arg, at).getResult()
                   : b.create<memref::LoadOp>(arg, at).getResult();
}

SmallVector<Value> mlir::nova::loadGpuEpilogueColumns(ImplicitLocOpBuilder &b, ArrayRef<EpilogueInput> inputs,
                                                      ValueRange args, Value col, int64_t lanes) {
  SmallVector<Value> columns(inputs.size());
  unsigned next = 0;
  for (auto [i, input] : llvm::enumerate(inputs)) {
    if (input.kind == EpilogueInput::Kind::product)
      continue;
    Value arg = args[next++];
    if (input.kind == EpilogueInput::Kind::column)
      columns[i] = loadAt(b, input, arg, Value(), col, lanes);
  }
  return columns;
}

Value mlir::nova::applyGpuEpilogue(ImplicitLocOpBuilder &b, Block &body, ArrayRef<EpilogueInput> inputs,
                                   ValueRange args, Value v, Value row, Value col, ArrayRef<Value> columns) {
  auto pairType = dyn_cast<VectorType>(v.getType());
  const int64_t lanes = pairType ? pairType.getNumElements() : 1;
  // Each input's value in each lane.
  SmallVector<SmallVector<Value, 2>> values;
  unsigned next = 0;
  for (auto [i, input] : llvm::enumerate(inputs)) {
    SmallVector<Value, 2> &lane = values.emplace_back();
    Value loaded;
    switch (input.kind) {
    case EpilogueInput::Kind::product:
      loaded = v;
      break;
    case EpilogueInput::Kind::column:
      if (i < columns.size() && columns[i]) {
        loaded = columns[i];
        ++next;
        break;
      }
      [[fallthrough]];
    case EpilogueInput::Kind::element: {
      loaded = loadAt(b, input, args[next++], row, col, pairType ? lanes : 1);
      break;
    }
    case EpilogueInput::Kind::row:
      loaded = b.create<memref::LoadOp>(args[next++], ValueRange{row});
      break;
    case EpilogueInput::Kind::scalar:
      loaded = b.create<memref::LoadOp>(args[next++], ValueRange{});
      break;
    }
    for (int64_t l = 0; l < lanes; ++l)
      lane.push_back(isa<VectorType>(loaded.getType()) ? b.create<vector::ExtractOp>(loaded, l).getResult() : loaded);
  }
  // Constants the body takes from above it (canonicalization hoists them
  // out of linalg bodies) are made here: the kernel may be another
  // function than the op's.
  IRMapping outside;
  for (Operation &op : body.without_terminator())
    for (Value operand : op.getOperands())
      if (operand.getParentBlock() != &body && !outside.contains(operand))
        if (Operation *def = operand.getDefiningOp(); def && def->hasTrait<OpTrait::ConstantLike>())
          outside.map(operand, b.clone(*def)->getResult(0));
  SmallVector<Value, 2> results;
  for (int64_t l = 0; l < lanes; ++l) {
    IRMapping map = outside;
    for (auto [i, lane] : llvm::enumerate(values))
      map.map(body.getArgument(unsigned(i)), lane[size_t(l)]);
    results.push_back(cloneBodyAt(b, body, map, /*loops=*/{})[0]); // arith and math only (isRegisterEpilogue)
  }
  if (!pairType)
    return results[0];
  // A pair the body rounds from f32 to bf16 (a bf16 copy of the product):
  // one cvt.rn.bf16x2.f32 for both.
  auto rounded = [](Value v) {
    auto trunc = v.getDefiningOp<arith::TruncFOp>();
    return trunc && trunc.getType().isBF16() && trunc.getIn().getType().isF32() && v.use_empty() ? trunc
                                                                                                 : arith::TruncFOp();
  };
  if (arith::TruncFOp lo = rounded(results[0]), hi = lanes == 2 ? rounded(results[1]) : arith::TruncFOp(); lo && hi) {
    Value pair = packBf16x2(b, lo.getIn(), hi.getIn());
    lo.erase();
    hi.erase();
    return pair;
  }
  return vectorOf(b, b.getLoc(), results);
}
