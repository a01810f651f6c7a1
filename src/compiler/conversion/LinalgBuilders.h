//===- LinalgBuilders.h - small builders the nova lowerings share -*- C++ -*-===//
//
// Scalar constants, filled tensors and all-parallel linalg.generic ops: the
// scaffolding every nova → linalg pattern needs, written once.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_CONVERSION_LINALGBUILDERS_H
#define NOVA_COMPILER_CONVERSION_LINALGBUILDERS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace mlir::nova {

/// A scalar arith.constant of `elem` (float or integer) equal to `v`.
Value scalarConstant(OpBuilder &b, Location loc, Type elem, double v);

/// tensor.empty of `type`.
Value emptyOf(OpBuilder &b, Location loc, RankedTensorType type);

/// tensor.empty of `type` filled with `value`.
Value filled(OpBuilder &b, Location loc, RankedTensorType type, double value);

/// The computation of one element: scalar inputs in, the element out.
using ElementFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// An all-parallel linalg.generic producing a new tensor of type `out`
/// (identity output map); input i is read through `inputMaps[i]`.
Value parallelGeneric(OpBuilder &b, Location loc, RankedTensorType out, ValueRange inputs,
                      ArrayRef<AffineMap> inputMaps, ElementFn element);

/// The same with every input read through the identity map (elementwise).
Value elementwiseGeneric(OpBuilder &b, Location loc, RankedTensorType out, ValueRange inputs,
                         ElementFn element);

/// linalg.transpose of `value` into a new tensor: result dim i is input dim
/// perm[i].
Value transposed(OpBuilder &b, Location loc, Value value, ArrayRef<int64_t> perm);

/// (d0, ..., d{rank-1}) -> (d0, ..., d{rank-2}): an index tensor read once
/// per row of a [..., C] result (one_hot, gather).
AffineMap dropLastDimMap(int64_t rank, MLIRContext *ctx);

} // namespace mlir::nova

#endif // NOVA_COMPILER_CONVERSION_LINALGBUILDERS_H
