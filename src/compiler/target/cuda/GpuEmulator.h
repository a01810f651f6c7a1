//===- GpuEmulator.h - runs a GPU kernel's IR on the CPU, lane by lane -*- C++ -*-===//
//
// The check that what the CUDA target generates computes what it should,
// without a GPU: it interprets a gpu.func as the generator emits it (the IR
// that becomes PTX one op to one instruction) for every block of a grid,
// each block's threads in lockstep, with the semantics of
// notes/ptx-semantics.md:
//   - nvgpu.ldmatrix and nvgpu.mma.sync (and the bf16 MMA intrinsic) gather
//     and scatter their fragments with the PTX ISA's lane maps; MMAs
//     accumulate in f32 in k order, tf32 inputs truncated to 10 mantissa bits;
//   - cp.async data lands only at the nvgpu.device_async_wait that covers its
//     group (commit_group semantics: a group holds all of the thread's copies
//     not yet committed), so a missing wait reads stale bytes, and any read
//     of bytes still in flight is reported;
//   - shared memory is checked for races: accesses of different threads to
//     the same byte, one of them a write, with no gpu.barrier between them
//     (a cp.async write counts from its issue to its landing) are reported;
//   - ldmatrix rows must be 16-byte aligned, 16-byte cp.async naturally
//     aligned, global accesses in bounds, barriers reached by every thread;
//   - gpu.shuffle (shfl.sync, full mask) reads another lane of the warp;
//     every lane of the block must take part;
//   - views (subview, expand/collapse_shape, transpose, cast) address their
//     buffer through the strides and offset of their static layout;
//   - the two sides of a divergent branch that wait on mbarriers (a
//     producer and its consumers, and within them warps on paths of their
//     own) run as contexts, one at a time: a wait whose phase has not
//     completed passes the baton to the next that can run;
//   - Hopper (§7): mbarriers (init published by fence.mbarrier_init and a
//     barrier, arrive.expect_tx, phases and their parity waits), TMA loads
//     that land, swizzled, only when a thread waits on their mbarrier (a
//     read before that is reported, a wait that cannot complete too), and
//     wgmma.mma_async reading both operands through shared-memory
//     descriptors, its accumulators unreadable (chaining aside) until the
//     wgmma.wait_group that covers it, a TMA refill of bytes it still reads
//     reported, a wgmma.fence required after accumulators are written, and
//     fence.proxy.async between ordinary stores to shared memory and a
//     wgmma that reads them;
//     i64 values (descriptors) are exact; the dynamic shared memory starts
//     at shared address 1040, not 1024-aligned, as behind a static mbarrier;
//   - clusters (docs/notes.md, "PTX beyond"): a cluster's CTAs, each with
//     its own shared memory and mbarriers, run as contexts of one baton (a CTA may run ahead of its
//     peer while the peer waits); a TMA load multicast lands in every CTA
//     of its mask and completes on each one's mbarrier; a remote arrive
//     (kRemoteArriveAsm: mapa + mbarrier.arrive.release.cluster) reaches a
//     peer's mbarrier, which must have been initialized before a cluster
//     barrier both passed; the cluster barrier (barrier.cluster.arrive /
//     wait) waits for every thread of the cluster's running CTAs; a write
//     into, or an arrive on, a CTA that has exited is reported, as is an
//     mbarrier of the NVVM pointer ops (mbarrier.init / try_wait.parity on
//     a shared address) whose bytes ordinary accesses touch;
//   - programmatic dependent launch's inline asm (kGridDependencyWaitAsm,
//     kLaunchDependentsAsm): nothing to do, launches running one at a time,
//     but a wait that is not the kernel's first op is reported (the kernel
//     could read what the grid before it still writes);
//   - float arithmetic rounds to its element type (f32: each op rounded as
//     the GPU's IEEE f32 ops are; math functions from the C library);
//   - what memory requests cost is counted, not failed (GpuRequestCost.h):
//     each warp's shared loads, stores, ldmatrix and cp.async writes in
//     the wavefronts of the bank model of docs/notes.md ("Shared-memory
//     banks"), its global loads, stores and cp.async reads in 32-byte
//     sectors, each against the fewest possible (EmulatorReport::shared,
//     ::global).
// The first violation stops the run with a message naming the op, its
// location, the block and the thread.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUEMULATOR_H
#define NOVA_COMPILER_TARGET_CUDA_GPUEMULATOR_H

#include "compiler/target/cuda/GpuRequestCost.h"
#include "compiler/target/cuda/TmaMap.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace mlir::nova {

/// A TMA tensor map (what cuTensorMapEncodeTiled would encode) and the
/// global bytes of the tensor it maps.
struct EmulatorTensorMap {
  ::nova::TensorMapDesc map;
  std::span<uint8_t> global;
};

struct EmulatorLaunch {
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t dynamicSharedBytes = 0;
  /// One buffer per memref argument: its elements, row-major, in the
  /// argument's element type (f16/bf16 as their 16-bit patterns).
  std::vector<std::vector<uint8_t> *> args;
  /// Or (when `args` is empty) the arguments' bytes in place, which may
  /// overlap: a step's arena.
  std::vector<std::span<uint8_t>> memory;
  /// The tensor maps of the kernel's !llvm.ptr arguments, by argument
  /// index (their `args` entries are unused and may be null).
  std::map<int, EmulatorTensorMap> tensorMaps;
  /// Which side of a divergent branch that waits on mbarriers runs first:
  /// the then-branch, or with this the else (another order a GPU may take,
  /// for tests of an ordering the kernel must enforce itself).
  bool elseFirst = false;
  /// CTAs a cluster along x, y, z (each divides the grid's): the CTAs of a
  /// cluster run together, as contexts of one baton.
  std::array<int64_t, 3> cluster{1, 1, 1};
  /// The cluster's first CTA runs whenever one of its contexts can, its
  /// peers only while it waits: the order in which a peer falls furthest
  /// behind (a GPU may take it), for tests that what a CTA does to its
  /// peers waits for them.
  bool peersLag = false;
};

struct EmulatorReport {
  bool ok = true;
  /// The first violation or unsupported op.
  std::string error;
  int64_t blocks = 0;
  /// Warp-level instructions executed (per warp), and barriers passed.
  int64_t mmas = 0, ldmatrices = 0, asyncCopies = 0, barriers = 0;
  /// Warpgroup MMAs (per block-wide issue) and TMA loads.
  int64_t wgmmas = 0, tmaLoads = 0;
  /// Clusters run, TMA loads multicast (per issue), arrivals on a peer
  /// CTA's mbarrier, cluster barriers passed (per CTA).
  int64_t clusters = 0, multicasts = 0, remoteArrivals = 0, clusterBarriers = 0;
  /// Memory requests (GpuRequestCost.h) by what made them: an op's name,
  /// the view it accesses and its location (the copies of an unrolled loop
  /// together): shared ones (loads, stores, ldmatrix, cp.async writes; TMA
  /// and wgmma reach shared memory by paths of their own, not counted) in
  /// wavefronts, global ones (loads, stores, cp.async reads; not TMA) in
  /// 32-byte sectors.
  std::map<std::string, AccessCost> shared, global;
  /// The same by op while the kernel runs (emulateKernel moves them into
  /// `shared` and `global`, which outlive the kernel's IR).
  std::map<Operation *, AccessCost> sharedByOp, globalByOp;
  /// Over every op.
  AccessCost sharedTotal() const;
  AccessCost globalTotal() const;
};

/// The ops of `report` whose shared (or global) requests take more than
/// the fewest possible, most excess first, a line each ("'vector.load' of
/// TYPE at LOC: 2048 requests, 8192 wavefronts for 2048, up to 4-way");
/// empty where none does.
std::vector<std::string> describeCostlyRequests(const EmulatorReport &report, bool shared, size_t most = 8);

EmulatorReport emulateKernel(gpu::GPUFuncOp kernel, const EmulatorLaunch &launch);

/// Element conversions the tests share: a value rounded to f16 / bf16
/// (round to nearest even) and its 16-bit pattern, and back.
uint16_t toHalfBits(float value);
uint16_t toBFloat16Bits(float value);
float fromHalfBits(uint16_t bits);
float fromBFloat16Bits(uint16_t bits);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUEMULATOR_H
