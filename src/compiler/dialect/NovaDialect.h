//===- NovaDialect.h - the nova dialect and its ops -------------*- C++ -*-===//
//
// The one header that declares the `nova` dialect and its ops. Heavy: include
// it only from compiler files that build or rewrite nova IR.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_DIALECT_NOVADIALECT_H
#define NOVA_COMPILER_DIALECT_NOVADIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "mlir/IR/SymbolTable.h"

#include "compiler/dialect/NovaOpsDialect.h.inc"
#include "compiler/dialect/NovaInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "compiler/dialect/NovaAttrs.h.inc"

#define GET_OP_CLASSES
#include "compiler/dialect/NovaOps.h.inc"

namespace mlir::nova {

/// A unit attribute on an scf.for with bounds [0, N), step 1, inside a
/// kernel's loop nest: its iterations touch disjoint elements and their
/// order matters to nothing, so the target may split it over workgroups
/// (each runs the nest with the loop narrowed to its chunk). The scatter-add
/// lowering marks the column loop of its row updates.
inline constexpr llvm::StringLiteral kSplitLoopAttr = "nova.split_loop";

/// A string attribute on the traced step's module, "tf32" or "bf16" when
/// the user asked for tf32 or bfloat16 matmuls (nova/precision.hpp); absent
/// means fp32. The CPU configurator gives bf16 matmuls the AMX kernel when
/// the target has it; a GPU's tensor cores read f32 operands as tf32, or
/// bf16 copies of them (nova-gpu-bf16-operands).
inline constexpr llvm::StringLiteral kMatmulPrecisionAttr = "nova.matmul_precision";

/// A string attribute on the traced step's module, "bf16" when the user
/// asked for products' outputs kept for the backward in bfloat16
/// (nova/precision.hpp ActivationPrecision; nova-bf16-saved-activations);
/// absent means fp32.
inline constexpr llvm::StringLiteral kActivationPrecisionAttr = "nova.activation_precision";
/// A unit attribute nova-autodiff puts, where the module asks for bf16
/// activations, on each forward product (nova.matmul, then its linalg
/// generic) the loss depends on; nova-bf16-saved-activations reads it and
/// takes it off.
inline constexpr llvm::StringLiteral kForwardProductAttr = "nova.forward_product";

/// An integer attribute on the traced step's module: how much
/// nova-rematerialize recomputes. 0 (NOVA_REMAT=0): nothing; 1 (absent):
/// cheap values, and fused attention outputs where the target recomputes
/// them (Target::recomputesAttention); 2 (set by the compiler when a
/// memory budget needs it): whole forward computations, matmuls and
/// attention included.
inline constexpr llvm::StringLiteral kRematAttr = "nova.remat";
/// A bool attribute on the traced step's module overriding the target's
/// choice at level 1: false with NOVA_REMAT=cheap (no attention
/// recomputed), true with NOVA_REMAT=1.
inline constexpr llvm::StringLiteral kRematAttentionAttr = "nova.remat_attention";
/// A unit attribute on an op nova-rematerialize cloned: for readers of the
/// IR; it changes nothing the op computes (nova-dedup-kernels drops it).
inline constexpr llvm::StringLiteral kRematerializedAttr = "nova.rematerialized";
/// At level 2, the fewest ops a value must be kept across for a costly
/// recomputation (products, attention: the budget search sets it;
/// CompileDriver.cpp); the cheap ones keep nova-rematerialize's min-gap.
inline constexpr llvm::StringLiteral kRematMinGapAttr = "nova.remat_min_gap";
/// At level 2, the most product flops a recomputation may run per byte it
/// no longer keeps (the budget search sets it; absent: no bound).
inline constexpr llvm::StringLiteral kRematMaxCostAttr = "nova.remat_max_cost";
/// nova-rematerialize's default min-gap (its option in Passes.td).
inline constexpr int64_t kDefaultRematMinGap = 16;
/// The module's record of what nova-rematerialize recomputed: one line each.
inline constexpr llvm::StringLiteral kRematDecisionsAttr = "nova.remat_decisions";

/// An integer attribute on the traced step's module: the memory budget in
/// bytes (nova/memory.hpp), when one is set.
inline constexpr llvm::StringLiteral kMemoryBudgetAttr = "nova.memory_budget";

/// Bool attributes on the traced step's module, false when their switch is
/// off (to measure what each saves, and to bisect): `nova.in_place`
/// (NOVA_IN_PLACE=0: updated parameters and optimizer state are computed
/// into fresh buffers and copied into their arguments, instead of into the
/// arguments themselves) and `nova.arena_reuse` (NOVA_ARENA_REUSE=0: every
/// arena buffer gets bytes of its own, none shared between lifetimes) and
/// `nova.row_stats` (NOVA_ROW_STATS=0: row kernels recompute their rows'
/// statistics instead of reading those their first forward wrote,
/// nova-share-row-statistics).
inline constexpr llvm::StringLiteral kInPlaceAttr = "nova.in_place";
inline constexpr llvm::StringLiteral kRowStatsAttr = "nova.row_stats";

/// A unit attribute on the allocation that stands in a kernel for a matmul
/// result no launch passes any more (nova-drop-unstored-results): the
/// register kernel must leave it unused, and erases it.
inline constexpr llvm::StringLiteral kUnstoredAttr = "nova.unstored";
inline constexpr llvm::StringLiteral kArenaReuseAttr = "nova.arena_reuse";

/// An integer attribute on the traced step's module: the bytes of one
/// gradient bucket of data-parallel training (nova-bucket-all-reduce;
/// NOVA_DIST_BUCKET_MB), when not the default.
inline constexpr llvm::StringLiteral kBucketBytesAttr = "nova.bucket_bytes";

} // namespace mlir::nova

#endif // NOVA_COMPILER_DIALECT_NOVADIALECT_H
