//===- Bf16Copies.h - bf16 copies of f32 tensors a kernel reads --*- C++ -*-===//
//
// With bf16 matmuls asked for, a value that kernels only read rounded to
// bf16 can be made in bf16 where it is made, once: a linalg.generic of
// arith.truncf right after it, fused into its producer, which then writes
// half the bytes (and the backward keeps half). Both targets take
// attention's qkv that way (copyAttentionQkv) where their attention
// kernels round q, k and v as they read them (the CPU's AVX512-BF16 dot
// products, the GPU's bf16 tensor cores): the same values reach the
// products. The GPU's nova-gpu-bf16-operands also copies every product's
// operands with these helpers.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TRANSFORMS_BF16COPIES_H
#define NOVA_COMPILER_TRANSFORMS_BF16COPIES_H

#include "compiler/dialect/NovaDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::nova {

/// Whether `op` only rearranges its first operand's elements: a reshape
/// (tensor.collapse_shape, expand_shape) or a transpose (which
/// nova-fold-transposes makes a view of a product's operand).
bool rearranges(Operation *op);

/// The value `v` rearranges (rearranges()), and the rearranging ops from
/// it to `v`, first to last.
Value rearrangedRoot(Value v, SmallVectorImpl<Operation *> &chain);

/// `source` rounded to a bf16 tensor of its shape (round to nearest even),
/// made right before `before` if given, else right after `source`.
Value roundedCopy(Value source, Operation *before);

/// `copy` (a bf16 copy of a chain's root) rearranged as `chain`
/// rearranges the root, right after the copy.
Value rearrangedLike(Value copy, ArrayRef<Operation *> chain);

/// Erases `op`, unused, and the tensor.empty it alone used (a
/// transpose's init).
void eraseRearrangement(Operation *op);

/// `operand`, an input of a linalg.generic, set to `bf16` (a bf16 tensor
/// of what it read): its block argument becomes bf16 and the body reads it
/// widened (arith.extf, after the widenings already at the body's start,
/// so that they stay in the order they were made).
void readWidened(OpOperand &operand, Value bf16);

/// A bf16 copy of a value, by (value, reader): the reader only for a copy
/// made right before one reader (a step argument's), else null.
using Bf16CopyMap = llvm::DenseMap<std::pair<Value, Operation *>, Value>;

/// Attention's qkv: a value (not a step argument) whose every reader, also
/// through reshapes, is the qkv of an attention kernel that `roundsQkv`
/// (its kernel rounds q, k and v to bf16 as it reads them) is read as a
/// bf16 copy instead: the same rounding, once, where the value is made.
/// Each copy goes to `copies` under (value, null).
void copyAttentionQkv(func::FuncOp step, function_ref<bool(AttentionKernelOp)> roundsQkv, Bf16CopyMap &copies);

} // namespace mlir::nova

#endif
