//===- MatmulLowering.h - the parts both matmul rewrites share ----*- C++ -*-===//
//
// nova-vectorize-matmul rewrites a configured matmul for one workgroup: the
// vector-FMA kernel (VectorizeMatmul.cpp) or the bf16 ones (Bf16Matmul.cpp).
// Both split the result into the same workgroup blocks, run what their
// tiles do not reach as a copy of the original generic, and apply an
// epilogue the same way.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TRANSFORMS_MATMULLOWERING_H
#define NOVA_COMPILER_TRANSFORMS_MATMULLOWERING_H

#include "compiler/transforms/MatmulKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::nova::matmul {

inline Value index(OpBuilder &b, Location loc, int64_t v) {
  return b.create<arith::ConstantIndexOp>(loc, v);
}

/// One workgroup's block of the result, as index values.
struct WorkgroupBlock {
  SmallVector<Value> batchLo, batchHi;
  Value m0, m1, n0, n1;
};

/// Decomposes `wg` row-major over ceil(extent / tile) of (batch..., m, n).
WorkgroupBlock blockOf(OpBuilder &b, Location loc, Value wg, const MatmulOperands &m, ArrayRef<int64_t> tile);

/// The body's ops before `stop`, each on `width`-lane vectors: block
/// arguments and earlier results are looked up in `map` (which gets the new
/// values), constants and values from outside the body are broadcast. An
/// epilogue's body on the accumulators, a prologue's while the lhs is packed.
void vectorizeBody(OpBuilder &b, Location l, Block &body, IRMapping &map, Operation *stop, int64_t width);

/// A fused lhs producer (MatmulOperands::prologueInputs) on `width` lanes
/// at `at`: its inputs loaded (under `mask`, `passThrough` in the lanes it
/// turns off, where one is given), the body's ops before the multiply.
Value buildPrologue(OpBuilder &b, Location l, const MatmulOperands &m, ValueRange at, int64_t width,
                    Value mask = {}, Value passThrough = {});

/// A vector of `type` loaded at `idx`, under `mask` (zeros in the lanes it
/// turns off) where one is given: a column edge's last vector.
Value loadVector(OpBuilder &b, Location l, VectorType type, Value memref, ValueRange idx, Value mask = {});
/// `value` stored at `idx`, under `mask` where one is given.
void storeVector(OpBuilder &b, Location l, Value value, Value memref, ValueRange idx, Value mask = {});

/// A matmul's epilogue (MatmulKernel.h: isRegisterEpilogue), applied to
/// one accumulator vector (row `row`, columns [col, col + width)) instead of
/// storing it: the epilogue's body, vectorized, on the accumulator and its
/// other inputs at the same element, stored into the epilogue's output.
/// With `mask` (a vector of `width` i1), only its lanes are read and
/// stored (the lanes past a row's end at the column edge).
void storeThroughEpilogue(OpBuilder &b, Location l, linalg::GenericOp epi, Value result,
                          ValueRange batch, Value row, Value col, Value acc, int64_t width, Value mask = {});

/// The result's region batch [lo, hi) x rows [r0, r1) x columns [c0, c1).
Value resultRegion(OpBuilder &b, Location loc, const MatmulOperands &m, const WorkgroupBlock &block,
                   Value r0, Value r1, Value c0, Value c1);

/// A copy of `op` restricted to batch [lo, hi) x rows [r0, r1) x columns [c0, c1).
void buildRemainder(OpBuilder &b, linalg::GenericOp op, const MatmulOperands &m,
                    const WorkgroupBlock &block, Value r0, Value r1, Value c0, Value c1);

/// A copy of the epilogue restricted to batch [lo, hi) x rows [r0, r1) x
/// columns [c0, c1) (where the tiles did not reach).
void buildEpilogueOnRegion(OpBuilder &b, linalg::GenericOp epi, const MatmulOperands &m,
                           const WorkgroupBlock &block, Value r0, Value r1, Value c0, Value c1);

/// The bf16 rewrite of one f32 matmul for workgroup `wg`: the operands
/// packed rounded to bf16, their products summed in f32, on AMX tiles (kind
/// amx_matmul, `amx`) or by AVX512-BF16 dot products in vector registers
/// (kind bf16_matmul). `tile` the workgroup tile (batch..., mc, nc; mc, nc
/// multiples of 32), kc the slab (a multiple of 32). `fill` and `epilogue`
/// as for the vector kernel: the zero fill is folded into the first slab,
/// the epilogue applied as the sums are written back. Erases op, fill and
/// epilogue.
void rewriteBf16(linalg::GenericOp op, const MatmulOperands &m, Value wg, ArrayRef<int64_t> tile,
                 int64_t kc, linalg::FillOp fill, linalg::GenericOp epilogue, bool amx);

} // namespace mlir::nova::matmul

#endif // NOVA_COMPILER_TRANSFORMS_MATMULLOWERING_H
