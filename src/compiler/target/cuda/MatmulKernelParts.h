//===- MatmulKernelParts.h - what the tensor-core matmul kernels share -*- C++ -*-===//
//
// The mma.sync kernel (MmaMatmulKernel.cpp) and the wgmma kernel
// (WgmmaMatmulKernel.cpp) are written lane by lane with the same index
// arithmetic, read the same operand types, and end the same way: each
// thread holds pairs of adjacent result columns in f32 registers, which
// the fused epilogue transforms and stores (guarded at the matrix's edges).
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_MATMULKERNELPARTS_H
#define NOVA_COMPILER_TARGET_CUDA_MATMULKERNELPARTS_H

#include "compiler/target/cuda/GpuConfigurator.h"
#include "compiler/target/cuda/GpuMatmulEpilogue.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace mlir::nova {

/// What the kernel does to each result before storing it, on the
/// accumulators in registers:
///   C = activation(scale x (A B) + bias[n]) + residual[m][n].
/// The bias (memref<N x f32>) and the residual (f32, C's shape) are kernel
/// arguments after C, in that order, when present.
/// Or, with `body` set (no batch): a step's elementwise op on the product
/// (GpuMatmulEpilogue.h), `inputs` saying how it reads each of its inputs,
/// the non-product ones kernel arguments after C, in order.
struct MmaEpilogue {
  enum class Activation { none, relu, gelu_tanh };
  double scale = 1.0;
  bool bias = false;
  Activation activation = Activation::none;
  bool residual = false;
  Block *body = nullptr;
  SmallVector<EpilogueInput> inputs;
  /// The element `body` yields and C holds: f32 (null), or a narrower
  /// float (a bf16 copy of the product, GpuBf16Operands.cpp).
  Type result;

  bool any() const { return scale != 1.0 || bias || residual || activation != Activation::none || body; }
};

/// The epilogue that writes the product rounded to bf16, as a step's bf16
/// copy of a product fused into its matmul kernel does
/// (GpuBf16Operands.cpp): one body argument, the product, yielded as
/// `arith.truncf` to bf16; C is then bf16. Its block is built in
/// `storage`, which must outlive the kernel's building. (nova-gpu-kernels'
/// `:bf16out`: the device check's product written as cuBLAS writes it.)
MmaEpilogue bf16ResultEpilogue(MLIRContext *ctx, Region &storage);

/// Index arithmetic on `index` values, folding the trivial cases.
class IndexMath {
public:
  explicit IndexMath(ImplicitLocOpBuilder &b) : b(b) {}
  ImplicitLocOpBuilder &b;

  Value c(int64_t v);
  Value add(Value x, int64_t v);
  Value add(Value x, Value y);
  Value mul(Value x, int64_t v);
  Value mul(Value x, Value y);
  Value div(Value x, int64_t v);
  Value rem(Value x, int64_t v);
  Value shr(Value x, int64_t v);
  Value shl(Value x, int64_t v);
  Value andi(Value x, int64_t v);
  Value xori(Value x, Value y);
  Value ult(Value x, int64_t v);
};

/// On a kernel each of whose vector loads and stores is aligned to its
/// size (vector<2xf32>: 8 bytes, vector<4xf32>: 16): PtxEmitter tells LLVM
/// so (one ld/st.v2 or .v4 instead of scalar accesses), and the emulator
/// holds the kernel to it.
inline constexpr const char kAlignedVectorsAttr[] = "nova.aligned_vectors";

/// On a kernel launched in clusters: its CTAs a cluster along x, y, z
/// (array<i32>). MLIR 19 does not lower nvvm.cluster_dim to .reqnctapercluster,
/// so the launcher gives the cluster (cuLaunchKernelEx's cluster
/// attribute; the emulator's EmulatorLaunch::cluster) from this.
inline constexpr const char kClusterDimsAttr[] = "nova.cluster_dims";

/// One thread's arrive on the mbarrier at shared address $0 (this CTA's
/// offset, u32) of the cluster's CTA of rank $1 (this one's own included):
/// mapa maps the offset into that CTA's window of the cluster's shared
/// memory. MLIR 19 has no op for either (notes/mlir19-gpu.md); the kernels
/// emit it as inline asm and the emulator knows it by this text.
inline constexpr const char kRemoteArriveAsm[] =
    "{\n\t.reg .b32 remote;\n\tmapa.shared::cluster.u32 remote, $0, $1;\n\t"
    "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n\t}";

/// Programmatic dependent launch (sm_90): a step's kernel may be launched
/// before the one before it in the stream has finished (the runtime's
/// graph launches it so), so every step kernel on sm_90 starts with the
/// wait for the grids it depends on (their memory then visible), before
/// any other op, and then lets the kernel after it launch (its blocks wait
/// in turn). MLIR 19 and LLVM 19 have no op or intrinsic for either: inline
/// asm, which the emulator knows by these texts (and holds the wait to
/// being a kernel's first op) and the runtime finds in the PTX.
inline constexpr const char kGridDependencyWaitAsm[] = "griddepcontrol.wait;";
inline constexpr const char kLaunchDependentsAsm[] = "griddepcontrol.launch_dependents;";

/// The XOR swizzle of a shared tile's 16-byte chunks:
/// chunk' = chunk ^ (((row >> rs) & rm) << cs), at every write and read.
struct Swizzle {
  int64_t rs = 0, rm = 0, cs = 0;
};
Value swizzleChunk(IndexMath &k, Value row, Value chunk, Swizzle s);

/// For rows of `chunks` 16-byte chunks (a power of two) read by ldmatrix:
/// MLIR's nvgpu-optimize-shared-memory formula (ptx-semantics.md §8), V
/// chunks a row, P = max(1, 8 / V) rows a 128-byte line: rs = log2 P, rm =
/// V - 1, cs = 0; every 8-lane ldmatrix phase then hits 8 distinct 16-byte
/// bank groups.
Swizzle ldmatrixSwizzle(int64_t chunks);

/// d = a x b + acc by mma.sync m16n8k16 on bf16 operands: a the A fragment
/// (vector<4x2xbf16>), b the B fragment (vector<2x2xbf16>), acc and d
/// vector<2x2xf32>. MLIR 19's nvgpu.mma.sync cannot type bf16 operands, so
/// it is the LLVM intrinsic on i32 registers (notes/mlir19-gpu.md §3).
Value mmaSyncBf16(ImplicitLocOpBuilder &b, Value a, Value bFragment, Value acc);

/// f32 `lo` and `hi` rounded to bf16 (to nearest even) as vector<2xbf16>
/// [lo, hi], by one cvt.rn.bf16x2.f32 (sm_80 and later), where LLVM 19
/// makes a cvt.rn.bf16.f32 of each arith.truncf and a mov to pack two.
/// (Not for the halves of a vector just loaded: LLVM then splits the
/// load, 16-byte loads became two 8-byte ones in the attention staging.)
Value packBf16x2(ImplicitLocOpBuilder &b, Value lo, Value hi);

/// The element type a multiply reads (tf32 is stored as f32).
Type operandElementType(GpuOperand operand, MLIRContext *ctx);

/// tf32x3's halves of an f32 `x` (GpuConfigurator.h): big = x rounded to
/// tf32 to nearest, ties away (add half of the 13 dropped bits' unit to
/// the bits, clear them: an exact tf32 value, which the MMA takes as is),
/// small = x - big, exact in f32 (|small| <= 2^-11 |x|), its low 13 bits
/// left to the MMA: wgmma drops them (the ISA), mma.sync drops or rounds
/// them (unconfirmed which; either loses at most 2^-10 |small|, 2^-21
/// |x|). 3 instructions an element (add, and, sub); rounding small too
/// took 5. With `truncate`, big is truncated (the bits cleared, nothing
/// added: 2 instructions): |small| < 2^-10 |x|, its low bits' loss under
/// 2^-20 |x|, the dropped small x small term of the same order.
std::pair<Value, Value> splitTf32(OpBuilder &b, Location loc, Value x, bool truncate = false);

/// splitTf32 of each element of `fragment` (vector<N x 1 x f32>, an
/// mma.sync tf32 fragment): {big, small}.
std::pair<Value, Value> splitTf32Fragment(ImplicitLocOpBuilder &b, Value fragment, bool truncate = false);

/// Where and how the results go: C (f32, [batch,] m x n, row-major), the
/// epilogue's bias and residual arguments (null when absent) or its body's
/// input arguments, the batch index (null when not batched), and whether
/// tiles may cross the edges.
struct MatmulResultStore {
  Value c, bias, residual, batch;
  SmallVector<Value> epilogueArgs;
  int64_t m = 0, n = 0;
  bool edges = false;
  MmaEpilogue epilogue;

  /// The indices of C (and the residual) at (row, col).
  SmallVector<Value> at(Value row, Value col) const;
  /// Stores `pair` (vector<2xf32>: columns col, col + 1 of `row`) through
  /// the epilogue: both columns, at the matrix's last odd column the first
  /// alone, past the matrix nothing.
  void storePair(IndexMath &k, Value pair, Value row, Value col) const;
  /// Stores pairs[i] at (rows[i], col) as storePair does; where no edge
  /// can cut a pair (edges false), the epilogue's column inputs (a bias)
  /// loaded once for all the rows.
  void storePairs(IndexMath &k, ArrayRef<Value> pairs, ArrayRef<Value> rows, Value col) const;

private:
  /// Whether storePairs loads column inputs once for its rows.
  bool sharesColumnLoads() const;
  /// `columns`, `bias`: the column inputs (loadGpuEpilogueColumns) and the
  /// fixed epilogue's bias at col, loaded already, or empty / null.
  void finish(IndexMath &k, Value v, Value row, Value col, ArrayRef<Value> columns = {}, Value bias = {}) const;
  Value fixedEpilogue(ImplicitLocOpBuilder &b, Value v, Value row, Value col, Value biasAtCol) const;
};

/// A matmul kernel's function, its thread and its block's tile.
struct MatmulKernelFrame {
  gpu::GPUFuncOp func;
  Value thread;
  /// The block's first result row and column.
  Value row0, col0;
  /// Split-K: the block's part of K (null without), which also indexes the
  /// partial products' first dimension (out.batch).
  Value split;
  MatmulResultStore out;
  /// The result's tiles: along N, along M, and the layers (batch or parts
  /// of K); tile t is column t % tilesN, then row, then layer (a linear
  /// grid's block ids, a persistent kernel's loop).
  int64_t tilesN = 1, tilesM = 1, layers = 1;
  int64_t blockM = 0, blockN = 0, splitK = 1;
  /// This frame at tile `tile` (index): row0, col0, split and out.batch of
  /// that tile.
  MatmulKernelFrame atTile(IndexMath &k, Value tile) const;

  /// The indices of an operand as stored, [batch,] row, col (a split is no
  /// batch of the operands).
  SmallVector<Value> operandAt(Value row, Value col) const;

  /// The block's K slabs, first and count, of `slabs` in all (blockK each):
  /// all of them without split-K; with it, part s takes [s x per, (s + 1) x
  /// per), per = ceil(slabs / splitK) (the configurator's split), fewer for
  /// the last part, none for parts past K. Loop bounds for the kernel's
  /// pipeline, which counts its own uses from 0 either way.
  std::pair<Value, Value> slabRange(IndexMath &k, int64_t slabs, int64_t splitK) const;
};

/// Adds gpu.func `name` to `module` for `p`, a blockM x blockN result tile
/// a block of `threads`: arguments `aType` and `bType` (the operands, as
/// the kernel reads them), C (f32, [batch,] m x n), then the epilogue's
/// bias and residual, or its body's inputs; blocks along x (columns), y (rows), z (batch) or,
/// with `linearGrid`, along x alone (column fastest, then row, then batch).
/// With `splitK` > 1 (no batch, no epilogue) the blocks' z (or slowest)
/// index is their part of K, and C is the partial products, splitK x m x
/// n, one m x n slice a part, which the caller sums.
/// With `persistentBlocks` > 0, that many blocks along x, which loop over
/// the tiles themselves (MatmulKernelFrame::atTile; the frame's row0,
/// col0, split and out.batch are null).
/// Leaves `b` at the start of its body.
MatmulKernelFrame beginMatmulKernel(ImplicitLocOpBuilder &b, gpu::GPUModuleOp module, StringRef name,
                                    const GpuMatmulProblem &p, Type aType, Type bType, int64_t blockM,
                                    int64_t blockN, int64_t threads, const MmaEpilogue &epilogue, bool linearGrid,
                                    int64_t splitK = 1, int64_t persistentBlocks = 0);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_MATMULKERNELPARTS_H
