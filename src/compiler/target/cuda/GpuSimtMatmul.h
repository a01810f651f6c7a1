//===- GpuSimtMatmul.h - a matmul on the CUDA cores, tiled in shared memory -*- C++ -*-===//
//
// The kernel a step's matmul gets on the GPU when no tensor-core kernel
// takes it (f32 at full precision, f64, operands that are views): the
// classic shared-memory tiled matmul on FMAs, in the configurator's simt
// shape (GpuConfigurator.h: block tile blockM x blockN, K slab blockK, each
// thread a warpM x warpN tile of accumulators in registers).
//
// Written over the matmul generic itself, so any operand the generic reads
// through loop dims and constants works as it is: strided and transposed
// views, a batch, an operand broadcast over the batch. Per block (one
// blockM x blockN tile of one batch entry, blocks numbered along x: tile
// column fastest, then row, then batch), with two shared buffers of each
// operand's slab:
//   slab 0: the block's threads copy the lhs slab (blockM x blockK) and
//     the rhs slab (blockK x blockN) to buffer 0, consecutive threads along
//     the operand's innermost dimension (to coalesce), zeros past the
//     edges; barrier;
//   for each K slab s: each thread loads its share of slab s + 1 from
//     global memory into registers, then folds slab s (buffer s % 2) into
//     its accumulators with the generic's own body (its casts, its
//     multiply and add, in K order, as the reference), then stores slab
//     s + 1 to the other buffer; barrier (so the global loads' latency
//     hides behind a slab's arithmetic, and one barrier a slab suffices);
//     a thread reads its rows and columns of the slab in runs of up to 16
//     bytes, one vector read each (ld.shared.v4.f32 / .v2.f64: a quarter
//     of the shared-memory instructions of scalar reads), the tiles' rows
//     padded to keep the runs aligned (kAlignedVectorsAttr);
//   then each thread stores its in-range results.
// Thread (ty, tx) owns rows ty + i * (blockM / warpM) and columns tx + j *
// (blockN / warpN): a warp's shared reads are broadcasts or consecutive
// words, its global stores consecutive. Shared rows are padded by one
// element, so that by the bank arithmetic the column-wise copies of a
// transposed operand do not conflict. None of this is measured on a GPU.
// The accumulators start from the result's values, or from the constant a
// dropped fill would have written (kGpuOutputInitAttr). A product with too
// few tiles for the GPU and a long K (a weight gradient over a batch's
// tokens: 256x256 over 2048) is split across K: its blocks x parts, each
// part's partial products into a workspace, their total into the result.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUSIMTMATMUL_H
#define NOVA_COMPILER_TARGET_CUDA_GPUSIMTMATMUL_H

#include "compiler/target/cuda/GpuConfigurator.h"
#include "compiler/target/cuda/GpuMatmulEpilogue.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>
#include <string>

namespace mlir::nova {


/// A matmul generic as the tiled kernel sees it: which loops are which.
struct SimtMatmul {
  SmallVector<unsigned> batchDims; ///< the result's leading loops, in order
  unsigned m = 0, n = 0, k = 0;
  GpuMatmulProblem problem;
  bool batched = false;
};

/// Whether `op` (a tagged matmul: two inputs, one output, one reduction
/// loop) can be the tiled kernel, and its problem for the configurator
/// (operand f64 for an f64 result, else f32); else why not.
std::optional<SimtMatmul> matchSimtMatmul(linalg::GenericOp op, std::string &why);

/// The dynamic shared memory the kernel of `config` needs for `op`.
int64_t simtMatmulSharedBytes(linalg::GenericOp op, const GpuMatmulConfig &config);

/// Deliberate faults, for tests that the emulator catches what they break.
struct SimtMatmulFaults {
  /// No barrier between the first slab's copy and its reads.
  bool noBarrierAfterCopy = false;
  /// No barrier after each slab (between its reads and the copy two slabs
  /// on into its buffer, and between the next slab's copy and its reads).
  bool noBarrierAfterSlab = false;
  /// Vector reads of the shared tiles one element past their runs' starts
  /// (not aligned to their size, as the kernel promises).
  bool misalignedVectorReads = false;
  /// Every global load of a slab one element (no 16-byte loads).
  bool scalarGlobalLoads = false;
  /// Every result stored alone (no vector stores of a thread's runs).
  bool scalarGlobalStores = false;
};

/// An elementwise op run on each result before it is stored, to `out`
/// (memref<m x n x f32>) instead of the product's buffer (an m x n
/// product, no batch; kGpuEpilogueAttr): `body` reads its inputs as
/// `inputs` say, the non-product ones from `args` (GpuMatmulEpilogue.h).
struct SimtEpilogue {
  Block *body = nullptr;
  SmallVector<EpilogueInput> inputs;
  SmallVector<Value> args;
  Value out;
};

/// Replaces `op` by the tiled kernel of `config` (a simt config for
/// `match`'s problem); `init`: the accumulators' start (null: the result's).
/// Split across K (config.splitK > 1: no batch, no epilogue), each part's
/// blocks fold their share of K from zero into `parts` [splitK, m, n]
/// instead of the result (a kernel after it adds them: GpuThreads.cpp).
LogicalResult buildSimtMatmul(linalg::GenericOp op, const SimtMatmul &match, const GpuMatmulConfig &config,
                              FloatAttr init, const SimtMatmulFaults &faults = {},
                              std::optional<SimtEpilogue> epilogue = std::nullopt, Value parts = {});

/// What the builder needs of the configuration nova-gpu-threads recorded
/// on the kernel (kind simt_matmul): blockM, blockN, blockK, warpM, warpN
/// and the threads.
GpuMatmulConfig simtConfigFromLowering(LoweringConfigAttr config, int64_t threads);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUSIMTMATMUL_H
