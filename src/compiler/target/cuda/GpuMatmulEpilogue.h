//===- GpuMatmulEpilogue.h - a step's elementwise op run on a GPU matmul's results -*- C++ -*-===//
//
// A kernel of [zero fills,] matmul, elementwise op of the product stays one
// kernel on a GPU (nova-gpu-threads: matchGpuEpilogue, StepMmaMatmul.h):
// the matmul kernel (mma.sync, wgmma or simt) runs the elementwise op's own
// body on each result while it is in registers, and stores only the op's
// result. The product is never written. Such an op is the bias add, the
// residual add the graph fuses into it (out = x W + b + x), the backward of
// GELU (dy W^T scaled by GELU's derivative at the saved input), a scale.
//
// The op's inputs other than the product are read at the result's element
// (row, col), each as one of four kinds: a column's value (the bias:
// memref<n>), a row's (a softmax's sums: memref<m>), the element's own (the
// residual: a whole buffer of m x n elements, read as memref<m x n>), or
// one value for all (memref<>). Its
// result is a whole buffer of m x n elements, written as memref<m x n>: f32,
// or a narrower float the op's body rounds to (a bf16 copy of the product
// for attention's qkv, GpuBf16Operands.cpp; MmaEpilogue::result).
// The kernels take these as arguments after C, in the op's input order.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUMATMULEPILOGUE_H
#define NOVA_COMPILER_TARGET_CUDA_GPUMATMULEPILOGUE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::nova {

/// How an elementwise epilogue reads one of its inputs at result (row, col).
struct EpilogueInput {
  enum class Kind { product, column, row, element, scalar };
  Kind kind = Kind::product;
  /// Not the product: the step kernel's argument (after the workgroup
  /// number) whose whole buffer it is, and its element type.
  unsigned argument = 0;
  Type element;
};

/// The argument type a matmul kernel of an m x n product reads `input` (not
/// the product) through: memref<n x T>, memref<m x T>, memref<m x n x T> or
/// memref<T>.
MemRefType epilogueArgumentType(const EpilogueInput &input, int64_t m, int64_t n);

/// The value of the epilogue whose body is `body` (a linalg.generic's block:
/// its inputs then its out, the first inputs.size() of them read as
/// `inputs` say, an out it reads being its result's element) at result
/// (row, col) whose product is `v`: f32, or vector<2xf32> holding columns
/// col and col + 1. `args` are the kernel's arguments of the non-product
/// inputs, in order, typed as epilogueArgumentType says. The body runs once
/// a column, on scalars; a pair's inputs are loaded as pairs, but the column
/// inputs `columns` gives (loadGpuEpilogueColumns: loaded once for a lane's
/// rows that share the columns).
Value applyGpuEpilogue(ImplicitLocOpBuilder &b, Block &body, ArrayRef<EpilogueInput> inputs, ValueRange args,
                       Value v, Value row, Value col, ArrayRef<Value> columns = {});

/// The column inputs' values at columns col.. (`lanes` of them, a vector
/// where lanes > 1), by input (null for the other kinds).
SmallVector<Value> loadGpuEpilogueColumns(ImplicitLocOpBuilder &b, ArrayRef<EpilogueInput> inputs, ValueRange args,
                                          Value col, int64_t lanes);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUMATMULEPILOGUE_H
