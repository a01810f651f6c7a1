//===- MatmulKernel.h - recognising a vectorizable matmul --------*- C++ -*-===//
//
// The contraction generics nova-lower-to-linalg tags `nova.kernel = "matmul"`
// have loops (batch..., m, k, n), lhs [.., m, k] or [.., k, m], rhs
// [.., k, n], out [.., m, n]. After bufferization, the ones with static
// shapes, an identity-layout out, a unit-stride last dim of rhs (and of a
// transposed lhs), and f32/f64 elements can take the register kernel. The configurator and nova-vectorize-matmul ask the same question
// here, so a kernel configured `matmul` is always one the rewrite accepts.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TRANSFORMS_MATMULKERNEL_H
#define NOVA_COMPILER_TRANSFORMS_MATMULKERNEL_H

#include "compiler/dialect/NovaDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <numeric>
#include <optional>

namespace mlir::nova {

struct MatmulOperands {
  Value lhs, rhs, out;
  /// A fused lhs producer (FuseMatmulPrologue.cpp): the transposed lhs is
  /// computed from these inputs (each typed and laid out as `lhs`, which is
  /// the first) by the body's ops before its multiply. Empty: `lhs` is it.
  SmallVector<Value> prologueInputs;
  linalg::GenericOp op;
  bool transposeA = false;
  /// The rhs view [.., k, n] has its k dim unit-stride (a transposed rhs read
  /// in place, nova-fold-transposes): packed column by column.
  bool rhsColumns = false;
  MemRefType outType;
  int64_t batchRank = 0, M = 0, N = 0, K = 0;
  /// Product of the batch extents.
  int64_t batch() const;
  /// Whether the register kernel packs the lhs (a transposed one, or one it
  /// computes from a fused producer) into MR-row slots per slab.
  bool packsLhs() const { return transposeA || !prologueInputs.empty(); }
};

std::optional<MatmulOperands> matchMatmul(linalg::GenericOp op);

/// For a transposed rhs read in place (`rhsColumns`), its view with the last
/// two dims swapped, [.., n, k]: each column's k contiguous, for vector loads.
Value rhsColumnsView(OpBuilder &b, Location loc, const MatmulOperands &m);

/// The rows a transposed lhs is packed in at a time at the least: whole
/// vectors of `lanes` that are also whole register tiles of `tileRows`
/// (lcm; 48 for 6 rows on 16 lanes). The configurator's cache_tile[1] is a
/// multiple of it, and nova-vectorize-matmul reads a row's run so.
inline int64_t transposedLhsGroupRows(int64_t tileRows, int64_t lanes) { return std::lcm(tileRows, lanes); }

/// Whether `epilogue`, an op after the matmul `matmul`, can be applied to its
/// register tiles before they are stored (VectorizeMatmul): an elementwise
/// generic over the result's iteration space (batch..., m, n) that reads the
/// result through the identity map, writes a static identity-layout buffer
/// through the identity map, reads every other input through dims or
/// constants with n, if used, only as the last (unit-stride) index, and
/// whose body is elementwise-mappable arith/math ops. The outliner groups
/// only such epilogues (and only when nothing else reads the result), so the
/// lowering never has to fall back.
///
/// The epilogue may also read the result through a memref.expand_shape that
/// splits a 2-D result's rows into leading dims ([B*T, N] read as [B, T, N],
/// where the graph reshaped the matmul's result): its loops are then those
/// dims, and a register tile's row r is the element (r / T, r % T, ...).
///
/// Its result is of the product's element or a narrower float (the kernels
/// store what the body yields): a bf16 copy of the product
/// (GpuBf16Operands.cpp, Bf16AttentionQkv.cpp).
bool isRegisterEpilogue(linalg::GenericOp matmul, linalg::GenericOp epilogue);

/// The ops a matmul kernel runs with its matmul `m.op`: the fill that
/// initializes the result, if it comes right before, and the register
/// epilogue, if it comes right after (either null).
std::pair<linalg::FillOp, linalg::GenericOp> matmulNeighbours(const MatmulOperands &m);

/// Whether `v` is the matmul result `out` as an epilogue may read it: `out`
/// itself, or a row-splitting expand_shape of it (see above).
bool readsMatmulResult(Value v, Value out);

/// Whether the register kernel (VectorizeMatmul.cpp) never touches the
/// result buffer of `m`: every register tile goes through `epilogue`
/// (not null) in one slab (K <= kc), no rows or columns are left to the
/// generic (N a multiple of the register tile's `nr` columns, and no empty
/// dims), and the fill, if any, is a zero that the accumulators start from.
/// Such a result needs no buffer at all (nova-drop-unstored-results).
bool resultNeverStored(const MatmulOperands &m, int64_t nr, int64_t kc, linalg::FillOp fill,
                       linalg::GenericOp epilogue);

/// The argument of `kernel` that is the result of `m` where nothing but
/// `fill` (may be null), the matmul and `epilogue`'s inputs (directly or
/// through the one view it reads) touch it; else null.
BlockArgument resultArgumentOnlyEpilogueReads(func::FuncOp kernel, const MatmulOperands &m, linalg::FillOp fill,
                                             linalg::GenericOp epilogue);

/// Takes `arg`, a result the kernel never stores, out of `kernel` and of
/// each of `launches` (all of the kernel's), where each passes an
/// allocation nothing else in the step uses: the kernel gets a
/// placeholder allocation of its type in its place (kUnstoredAttr, which
/// its codegen erases once nothing uses it), each launch loses the
/// operand, and the step's allocations go. False, changing nothing,
/// otherwise.
bool dropUnstoredResult(func::FuncOp kernel, BlockArgument arg, ArrayRef<LaunchOp> launches);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TRANSFORMS_MATMULKERNEL_H
