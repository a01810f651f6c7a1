//===- GpuConfigurator.h - lowering decisions for GPU matmuls ----*- C++ -*-===//
//
// A pure function from (matmul shape, operand type, layout, GPU) to the
// kernel's configuration: block tile, warp layout, K tile, pipeline depth,
// tensor-core instruction, shared-memory swizzle, split-K. No timing, no
// search over measurements: the candidates are scored by an analytic model
// of the device (GpuConfigurator.cpp says how), so the same input always
// gives the same decision, and `why` says what decided it (NOVA_EXPLAIN).
// It needs no MLIR; toLoweringConfig writes the decision on a kernel.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUCONFIGURATOR_H
#define NOVA_COMPILER_TARGET_CUDA_GPUCONFIGURATOR_H

#include "nova/target.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace mlir {
class MLIRContext;
} // namespace mlir

namespace mlir::nova {

class LoweringConfigAttr;

/// What the multiplies consume (accumulation is f32, f64 for f64).
/// tf32x3 ("3xtf32"; mma.sync splits in registers, wgmma in shared memory:
/// MmaMatmulKernel.cpp, WgmmaMatmulKernel.cpp): f32 operands on the tf32 tensor cores at about f32's
/// accuracy: each element x is split into big = x rounded to tf32 and
/// small = x - big (exact in f32; the MMA drops or rounds its low bits),
/// and a x b is taken as a.small b.big + a.big b.small + a.big b.big, three
/// tf32 MMAs (what is dropped, a.small b.small and the small halves' low
/// bits, is below 5 x 2^-22 of |a b|).
/// Unlike float32, an infinite element gives NaN (its small half is
/// inf - inf; a cross term inf x 0), and finite ones within 2^-11 of
/// float32's largest round to infinity: products that overflow anyway.
enum class GpuOperand { f16, bf16, tf32, f32, f64, tf32x3 };

/// How the block's multiplies run: warp MMAs (mma.sync), warpgroup MMAs
/// (wgmma, sm_90a), or FMAs on the CUDA cores (f32 without tf32, f64).
/// The simt kernel's shared buffers of each operand's K slab (a double
/// buffer: GpuSimtMatmul.h); its configurations have this many stages.
inline constexpr int64_t kSimtBuffers = 2;

enum class GpuMmaKind { mma_sync, wgmma, simt };

/// How a warp reads an operand's fragment from shared memory.
enum class FragmentLoad { ldmatrix, ldmatrix_trans, scalar, descriptor };

struct GpuMatmulProblem {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  GpuOperand operand = GpuOperand::bf16;
  /// The lhs is stored K x M (M contiguous) instead of M x K.
  bool lhsTransposed = false;
  /// The rhs is stored N x K (K contiguous, "NT") instead of K x N.
  bool rhsTransposed = false;
  /// Which kernels the code generator can emit (the configurator never picks
  /// one it cannot).
  bool allowWgmma = true;
  bool allowSplitK = true;
  /// f32 operands may run as tf32x3 on the tensor cores where the model
  /// finds that faster than f32 FMAs (the config's operand says which).
  bool allowTf32x3 = false;
  /// A wgmma kernel of more tiles than the device holds at once may be
  /// persistent (GpuMatmulConfig::persistentBlocks); false: a block a tile
  /// (the device check's `:flat` variants, measured beside it).
  bool allowPersistent = true;
  /// wgmma: only ping-pong configurations (GpuMatmulConfig::pingPong), the
  /// device check's `:pingpong` variants; the model does not pick them
  /// itself (it has no term for the epilogue they overlap).
  bool pingPong = false;
  /// mma.sync: the refill's copies spread over the slab's k steps
  /// (GpuMatmulConfig::interleaveCopies), the device check's `:interleave`
  /// variants; the model does not pick it itself (unmeasured).
  bool interleaveCopies = false;
  /// wgmma: the producer's registers may go to the consumers by setmaxnreg
  /// (GpuMatmulConfig::consumerRegisters); false: every thread the block's
  /// even share (the device check's `:evenregs` variants).
  bool allowRegisterRebalancing = true;
  /// wgmma: only configurations whose blocks pair up in clusters of this
  /// many CTAs along M (GpuMatmulConfig::clusterM), the device check's
  /// `:cluster` variants; 1: none. The model does not pick them itself (it
  /// has no term for the L2 traffic a shared tile saves).
  int64_t clusterM = 1;
  /// Only this block tile and warp tile (0: any), the model choosing the
  /// rest: the device check's variants of a kernel, measured beside the
  /// configurator's choice (nova-gpu-kernels' CASE@BMxBN/WMxWN).
  int64_t onlyBlockM = 0, onlyBlockN = 0, onlyWarpM = 0, onlyWarpN = 0;
};

struct GpuMatmulConfig {
  GpuMmaKind kind = GpuMmaKind::mma_sync;
  /// What the multiplies consume: the problem's operand, or tf32x3 for an
  /// f32 problem that allows it.
  GpuOperand operand = GpuOperand::bf16;
  /// The PTX instruction, e.g. "mma.sync.m16n8k16.bf16", "wgmma.m64n128k16.bf16", "fma.f32".
  std::string instruction;
  int64_t mmaM = 0, mmaN = 0, mmaK = 0;
  /// Block tile (rows x columns of the result, K slab) and its warps.
  int64_t blockM = 0, blockN = 0, blockK = 0;
  int64_t warpsM = 0, warpsN = 0;
  /// Each warp's (wgmma: each warpgroup's) share of the block tile; for simt,
  /// each thread's.
  int64_t warpM = 0, warpN = 0;
  /// Slabs in flight (cp.async or TMA pipeline depth).
  int64_t stages = 0;
  int64_t splitK = 1;
  /// wgmma: the blocks launched when fewer than the tiles (0: a block a
  /// tile). Each block then runs tiles persistentBlocks apart, its
  /// producer loading the next tile's slabs while the consumers finish the
  /// present one (the epilogue) instead of a new block filling its pipeline
  /// from nothing: CUTLASS's persistent warp-specialized Hopper kernels.
  int64_t persistentBlocks = 0;
  /// wgmma, persistent: the two consumer warpgroups take the block's tiles
  /// (blockM = 64 rows each) in turn, each its own, so one's epilogue runs
  /// while the other's wgmmas do (CUTLASS's ping-pong kernels); warpsM is
  /// then the consumer warpgroups (2), not blockM / 64.
  bool pingPong = false;
  /// mma.sync: each slab's refill (the copies of slab kt + stages - 1)
  /// issued a share at each k step, after its fragment loads, as CUTLASS's
  /// multistage mainloop spreads them, instead of all at once before the
  /// slab's first fragment load (ptxas cannot move an ldmatrix above a
  /// cp.async into shared memory it may alias, so the first MMA waits for
  /// every copy to issue).
  bool interleaveCopies = false;
  /// wgmma, tf32: an operand stored M/N-contiguous, which wgmma cannot read
  /// as tf32, is converted (transposed) in shared memory into K-major tiles
  /// first, as tf32x3's operands are (whose kernel converts both, always).
  bool convertA = false, convertB = false;
  /// wgmma: the registers a consumer thread takes by setmaxnreg.inc once
  /// the producer warpgroup, which needs few, has given all but
  /// kWgmmaProducerRegisters back by setmaxnreg.dec (0: no setmaxnreg,
  /// every thread the block's even share). Taken where a block is alone on
  /// its SM anyway: two consumer warpgroups get 232 registers instead of
  /// 168 (CUTLASS's warp-specialized kernels: 40 and 232).
  int64_t consumerRegisters = 0;
  /// wgmma, persistent: CTAs a cluster along M (1: no cluster). A
  /// cluster's CTAs take row tiles next to each other with the same
  /// columns, each loading its own A and 1/clusterM of the B tile they
  /// share, multicast by TMA into every CTA of the cluster: B crosses from
  /// L2 once a cluster instead of once a CTA. persistentBlocks is then a
  /// multiple of it (the clusters' CTAs).
  int64_t clusterM = 1;
  /// The blocks a launch starts: persistentBlocks, or a block a tile.
  int64_t launchedBlocks() const { return persistentBlocks > 0 ? persistentBlocks : tiles; }
  /// Shared-memory rows and their XOR swizzle, in bytes (0: none), and how
  /// warps read each operand.
  int64_t rowBytesA = 0, rowBytesB = 0, swizzleA = 0, swizzleB = 0;
  FragmentLoad loadA = FragmentLoad::ldmatrix, loadB = FragmentLoad::ldmatrix;
  /// Bytes one thread copies global -> shared at a time (16, 8 or 4).
  int64_t copyBytesA = 16, copyBytesB = 16;
  // Resources and the model's view of the result.
  int64_t threads = 0, smemBytes = 0, registersPerThread = 0, blocksPerSM = 0;
  int64_t tiles = 0, waves = 0;
  double waveEfficiency = 0;  ///< tiles / (waves x resident slots)
  double estimatedSeconds = 0; ///< the model's time for the whole matmul
  double roofSeconds = 0;      ///< max(flops / peak, minimal bytes / DRAM bandwidth)
  bool computeBound = true;
  /// Inputs, the bound and the reasons, one line each (NOVA_EXPLAIN).
  std::vector<std::string> why;

  /// Whether it fits the device: threads, registers, shared memory.
  bool fits(const ::nova::TargetDesc &target, std::string *whyNot = nullptr) const;
  std::string describe() const;
};

/// Threads of a wgmma kernel's block: its consumer warpgroups and the
/// producer warpgroup that issues the TMA loads.
inline int64_t wgmmaBlockThreads(int64_t consumerWarpgroups) { return 128 * (consumerWarpgroups + 1); }

/// The registers a thread of a block of `threads` is launched with where
/// ptxas takes all it may (as it does in a kernel with setmaxnreg: ptxas
/// 13.0 reports 168 at 384 threads where the same kernel without used
/// 154): the block's share in whole multiples of 8 (registers go to a warp
/// 256 at a time), at most a thread's 255 as allocated (256).
inline int64_t launchedRegistersPerThread(int64_t threads, int64_t registersPerBlock = 65536,
                                          int64_t registersPerThread = 255) {
  return std::min(registersPerBlock / threads / 8 * 8, (registersPerThread + 7) / 8 * 8);
}
/// What the producer warpgroup of a kernel with setmaxnreg keeps (it only
/// issues the TMA loads: ptxas fits its loop in 40 without spills).
constexpr int64_t kWgmmaProducerRegisters = 40;
/// The registers each consumer thread of a wgmma block of
/// `consumerWarpgroups` can take by setmaxnreg.inc once the producer has
/// given all but kWgmmaProducerRegisters back (the launch's pool shared
/// out, whole multiples of 8, at most a thread's), or 0 where that is no
/// more than the launch gives them (one consumer warpgroup: 255 already).
inline int64_t wgmmaRebalancedRegisters(int64_t consumerWarpgroups, int64_t registersPerBlock = 65536,
                                        int64_t registersPerThread = 255) {
  const int64_t threads = wgmmaBlockThreads(consumerWarpgroups);
  const int64_t launched = launchedRegistersPerThread(threads, registersPerBlock, registersPerThread);
  const int64_t pool = launched * threads - kWgmmaProducerRegisters * 128;
  const int64_t consumers = std::min(pool / (128 * consumerWarpgroups), registersPerThread) / 8 * 8;
  return consumers > launched ? consumers : 0;
}

/// Whether a wgmma operand tile of `rows` rows (M or N), K-major or not,
/// of elements of `elementBytes`, comes as `parts` whole TMA boxes (a
/// cluster's CTAs each loading one part): K-major, whole 8-row swizzle
/// atoms a part; M/N-major, whole boxes of 128-byte columns a part.
inline bool wgmmaTileSplits(bool kMajor, int64_t rows, int64_t elementBytes, int64_t parts) {
  if (kMajor)
    return rows % (8 * parts) == 0;
  const int64_t boxColumns = 128 / elementBytes;
  return rows % boxColumns == 0 && (rows / boxColumns) % parts == 0;
}

/// Which operands (A, B) a wgmma kernel of `problem` converts in shared
/// memory before wgmma reads them: both of tf32x3's (into big and small
/// halves), a tf32 operand stored M/N-contiguous (transposed: wgmma reads
/// tf32 only K-major), none of 16-bit ones.
std::pair<bool, bool> wgmmaConvertedOperands(const GpuMatmulProblem &problem);

/// The decision for `problem` on the GPU `target` (target.is_gpu()).
GpuMatmulConfig configureGpuMatmul(const GpuMatmulProblem &problem, const ::nova::TargetDesc &target);

/// Bytes of one operand element (tf32 is stored as f32).
int64_t operandBytes(GpuOperand operand);

/// How mma.sync warps read each operand (notes/ptx-semantics.md §4): a
/// K-contiguous tile by ldmatrix; an M/N-contiguous one by ldmatrix.trans
/// for 16-bit elements, by scalar loads for tf32 (no b32 .trans exists).
FragmentLoad lhsFragmentLoad(GpuOperand operand, bool lhsTransposed);
FragmentLoad rhsFragmentLoad(GpuOperand operand, bool rhsTransposed);

/// Shared-memory bytes the kernel of `config` allocates for `operand`
/// (the dynamic shared memory its launch asks for).
int64_t gpuMatmulSmemBytes(const GpuMatmulConfig &config, GpuOperand operand);

/// The XOR swizzle span for shared-memory rows of `rowBytes` (the widest of
/// 128, 64, 32 bytes that the row is a multiple of; 0 for shorter rows).
int64_t swizzleBytesForRow(int64_t rowBytes);

/// The decision as the kernel's #nova.lowering_config: kind mma_sync_matmul
/// / wgmma_matmul / simt_matmul, tile = [batch..., blockM, blockN] (batch
/// tile 1 when `batched`), cache_tile = [blockK, stages, splitK],
/// register_tile = [warpM, warpN]; workgroups = tiles.
LoweringConfigAttr toLoweringConfig(const GpuMatmulConfig &config, bool batched, MLIRContext *context);

const char *nameOf(GpuOperand operand);
const char *nameOf(GpuMmaKind kind);
const char *nameOf(FragmentLoad load);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUCONFIGURATOR_H
