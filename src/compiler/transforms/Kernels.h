//===- Kernels.h - what every kernel pass needs to know ----------*- C++ -*-===//
//
// After nova-outline-kernels a module holds the step (the launch plan) and a
// nested `module @kernels` of func.func kernels, each
// `(index %workgroup, memref...)` with one compute op (the root) before
// its return, and, once configured, a `nova.lowering_config`.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TRANSFORMS_KERNELS_H
#define NOVA_COMPILER_TRANSFORMS_KERNELS_H

#include "compiler/dialect/NovaDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

namespace mlir::nova {

inline constexpr llvm::StringLiteral kKernelsModuleName = "kernels";

/// Whether `op` is a contraction nova-lower-to-linalg tagged
/// `nova.kernel = "matmul"`.
bool isTaggedMatmul(Operation *op);

/// The allocation or argument a buffer value views (through every
/// view-like op).
Value bufferRoot(Value v);

/// The ops of `kernel`'s body that compute: write memory (or may), in
/// order. Not allocations, views, constants or reads of buffers nothing in
/// the kernel writes (a scatter-add's one index, loaded where a loop of
/// one trip was folded away), which go with the ops that use them.
SmallVector<Operation *> kernelComputeOps(func::FuncOp kernel);

/// The one op of `kernel`'s body that computes (kernelComputeOps), or
/// null where there are none or several.
Operation *soleComputeOp(func::FuncOp kernel);

/// Every launch in `top` of kernel `kernel` (of the kernels module), in order.
SmallVector<LaunchOp> launchesOf(ModuleOp top, StringRef kernel);

/// Calls `f` with the root buffer (bufferRoot) of every write `op` or an op
/// nested in it declares.
void forEachWrittenRoot(Operation *op, llvm::function_ref<void(Value)> f);

/// The nested `module @kernels`, or null.
ModuleOp kernelsModule(ModuleOp top);

/// The kernel's compute op: its matmul if it has one (a matmul kernel may
/// also hold the fill that initializes the result and an elementwise
/// epilogue), else the last op before its return (null if none).
Operation *kernelRoot(func::FuncOp kernel);

/// The structured op a kernel computes: its root, or after
/// nova-distribute-workgroups the linalg op inside the root's tile loops.
Operation *kernelComputeOp(func::FuncOp kernel);

/// Restricts the structured op `op` (in a kernel whose first argument is
/// the workgroup number) to the one tile of `tile` (per loop; 0 = not
/// split) that the workgroup selects, row-major over the split loops' tile
/// counts: tiled with linalg's tiling, each tile loop narrowed to one
/// iteration. Only parallel loops may be split. `expectedWorkgroups` (> 0)
/// is checked against the product of the tile counts.
LogicalResult restrictToWorkgroupTile(linalg::LinalgOp op, ArrayRef<int64_t> tile,
                                      int64_t expectedWorkgroups);

/// Lanes per vector along a dim of `extent` elements: the widest power of
/// two up to a register's lanes that divides it (hd = 64 in f32 takes whole
/// AVX-512 registers; an odd extent runs one lane at a time). The CPU
/// configurator and the attention and row kernels agree through it.
inline int64_t vectorLanesDividing(int64_t extent, int64_t elemBits, int64_t vectorBits) {
  int64_t width = std::max<int64_t>(1, vectorBits / elemBits);
  while (width > 1 && extent % width != 0)
    width /= 2;
  return width;
}

/// The rows and the row width of a row kernel (nova.layer_norm_kernel,
/// nova.cross_entropy_kernel: its first input is [..., width]); {0, 0} for
/// any other op.
std::pair<int64_t, int64_t> rowKernelShape(Operation *op);

/// Whether a row kernel's CPU rows (nova-vectorize-rows) take whole vector
/// registers and a masked last vector: a cross-entropy's (lanes past the
/// row load -inf, which its max and sum of exponentials ignore; a
/// vocabulary of 50257 would otherwise run a lane at a time). A
/// LayerNorm's take vectors that divide the row.
inline bool rowsTakePartialVectors(Operation *rowKernel) { return isa<CrossEntropyKernelOp>(rowKernel); }

/// The lanes of a row kernel's CPU vectors (rowsTakePartialVectors): the
/// CPU configurator and nova-vectorize-rows agree through it.
inline int64_t rowVectorLanes(Operation *rowKernel, int64_t vectorBits) {
  auto [rows, width] = rowKernelShape(rowKernel);
  int64_t elemBits = cast<ShapedType>(rowKernel->getOperand(0).getType()).getElementTypeBitWidth();
  return rowsTakePartialVectors(rowKernel) ? std::max<int64_t>(1, vectorBits / elemBits)
                                           : vectorLanesDividing(width, elemBits, vectorBits);
}

/// scf.for from lb to ub by step carrying `init`: `body` builds the loop's
/// body with `b` itself (its insertion point moved into the body, restored
/// after) and returns the values to yield. For the kernels written op by op
/// (attention, rows), so every helper can keep using one builder.
scf::ForOp buildFor(OpBuilder &b, Location loc, Value lb, Value ub, Value step, ValueRange init,
                    function_ref<SmallVector<Value>(Value iv, ValueRange carried)> body);

/// A contiguous (identity-layout) buffer of `m`'s shape, allocated at b's
/// insertion point and filled from `m` (linalg.copy, lowered with the
/// kernel's loops) when `copyIn`; appended to `temps` for the caller to
/// free. For kernels written op by op that need what a view may not give
/// (rows to collapse, a unit innermost stride for vector loads).
Value contiguousCopy(OpBuilder &b, Location loc, Value m, bool copyIn, SmallVectorImpl<Value> &temps);

/// The W x W transpose of `rows` (W vectors of W lanes, W a power of two)
/// in registers: for each bit of a lane index, rows i and i + h (h = 2^bit,
/// bit clear in i) trade the elements whose row and column bits differ, one
/// two-source shuffle per new row: W log2 W shuffles in all (64 for 16 lanes).
SmallVector<Value> transposeInRegisters(OpBuilder &b, Location loc, SmallVector<Value> rows);

/// Whether nova-vectorize-attention takes an f32 attention kernel's
/// products as AVX512-BF16 dot products (bf16 matmuls asked for, the
/// target has them): 16 lanes of f32 a vector and heads a multiple of
/// 32 columns (k's pairs along the head in 16-column halves).
inline bool attentionDotsBf16(int64_t headDim, int64_t vectorBits) {
  return vectorLanesDividing(headDim, 32, vectorBits) == 16 && headDim % 32 == 0;
}

/// The sum of the lanes of `v` (a float vector), added in any order
/// (`reassoc`): LLVM then adds halves, log2 W vector adds, where the
/// strict order is a chain of W scalar adds, each lane extracted first
/// (16 vaddss a row of a softmax, LayerNorm or attention block). The
/// lanes are partial sums in an order of the kernel's choosing anyway.
Value sumLanes(OpBuilder &b, Location loc, Value v);

/// The largest lane of `v` and the larger of `x`, `y` lane by lane, for a
/// softmax's maximum: NaN-propagating as arith.maximumf, but either zero
/// may stand for the other (`nsz`: the maximum is only subtracted, and x -
/// (+0) and x - (-0) have the same exponential). x86 orders the zeros
/// with two masked moves an op on top of vmaxps and the NaN check (llc 19,
/// znver4: 3 instructions instead of 5 a vector, 21 instead of 48 a
/// 16-lane reduction).
Value maxLanes(OpBuilder &b, Location loc, Value v);
Value softmaxMax(OpBuilder &b, Location loc, Value x, Value y);

/// `v` (a vector of f32) rounded to bf16 lane by lane.
Value roundToBf16(OpBuilder &b, Location loc, Value v);

/// Rows 2p and 2p + 1 of a matrix (`even`, `odd`: W lanes of f32 each)
/// rounded to bf16 and interleaved into W pairs (vector<2W x bf16>): the
/// layout of dotBf16's non-broadcast operand, a pair per lane along k.
Value interleaveBf16Rows(OpBuilder &b, Location loc, Value even, Value odd);

/// For W lines (W = lo.size(), a power of two) whose 2W consecutive f32
/// elements are lo[t] then hi[t], rounded to bf16: W vectors<2W x bf16>,
/// the p-th holding pair p (elements 2p, 2p + 1) of every line, line t in
/// lane t. Packs a matrix unit-stride along k into dotBf16's pair layout:
/// each line's pairs read as 32-bit words, transposed in registers.
SmallVector<Value> transposeBf16Pairs(OpBuilder &b, Location loc, ArrayRef<Value> lo, ArrayRef<Value> hi);

/// The bf16 pair at `idx` and the element after it (along the last dim) of
/// `mem`, as one 32-bit word in each of `lanes` lanes: a vector<2 lanes x
/// bf16>, the broadcast operand of dotBf16.
Value broadcastBf16Pair(OpBuilder &b, Location loc, Value mem, ValueRange idx, int64_t lanes);

/// `acc` (vector<16xf32>) plus, per lane, the two products of the lane's
/// bf16 pairs in `x` and `y` (vector<32xbf16>): one AVX512-BF16 vdpbf16ps
/// (an llvm.call_intrinsic: MLIR 19's x86vector has no bf16 dot product).
Value dotBf16(OpBuilder &b, Location loc, Value acc, Value x, Value y);

/// Whether the buffer type's innermost dim has unit stride (what
/// vector.load and vector.store require).
bool hasUnitInnerStride(MemRefType type);

/// The loop of `root`'s nest marked kSplitLoopAttr, if it runs [0, N) with
/// step 1 (N constant), else null. The configurator sizes its chunks and
/// nova-distribute-workgroups narrows it: both find it here.
scf::ForOp splitLoopOf(Operation *root);

/// For a pass that expands a kernel op (attention, rows): the configuration
/// of the kernel holding `op` (null outside a configured kernel) once `op`
/// is checked to be bufferized (`init` a buffer) and the configuration to
/// be of `kind`; otherwise the error, naming `pass`, is emitted.
FailureOr<LoweringConfigAttr> configForKernelOp(Operation *op, Value init, StringRef pass,
                                                StringRef kind);

/// The kernel's configuration, or null before nova-configure-kernels.
LoweringConfigAttr loweringConfig(func::FuncOp kernel);

/// An attention backward's kernel split in two (the CUDA target's
/// GpuAttentionBackward.h): "queries" (dq, and the rows' softmax
/// statistics into its last argument) or "keys" (dk and dv, reading them).
/// Its description names the part and counts the op's products it adds.
inline constexpr const char kAttentionPartAttr[] = "nova.attention_part";
/// On a "queries" kernel that reads the forward's log-sum-exp and result
/// (a UnitAttr; GpuAttentionForwardStats.h): its description says so.
inline constexpr const char kAttentionForwardStatsAttr[] = "nova.attention_forward_stats";

/// What a kernel computes, for humans and rooflines: "matmul 2048x768x256
/// f32", "loops linalg.generic 16x128x256 f32"; per launch, the arithmetic
/// operations of its compute op (loop points x arith/math ops per point, a
/// math op counting one) and the bytes of the buffers it takes (each moved
/// once: the fewest it must move).
struct KernelDescription {
  std::string summary;
  uint64_t flops = 0, bytes = 0;
};
KernelDescription describeKernel(func::FuncOp kernel);

/// The description nova-configure-kernels recorded on the kernel (it is
/// taken before nova-distribute-workgroups tiles the op), or computed now.
KernelDescription describedKernel(func::FuncOp kernel);
void recordDescription(func::FuncOp kernel);
/// Records `d` as the kernel's description (a kernel made of others).
void recordDescription(func::FuncOp kernel, const KernelDescription &d);
/// Drops a recorded description (the kernel's op was rewritten): it is
/// described from its op again when asked.
void forgetDescription(func::FuncOp kernel);

/// Appends an argument of `type` to `kernel` (its function type and
/// description follow).
BlockArgument addKernelArgument(func::FuncOp kernel, Type type);

/// The nova::named_scope path an op was traced under ("block0/attention"):
/// the first name in its location, else in its body's; "" if none.
std::string scopeOf(Operation *root);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TRANSFORMS_KERNELS_H
