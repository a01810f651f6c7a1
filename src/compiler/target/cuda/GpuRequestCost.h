//===- GpuRequestCost.h - what a warp's memory request costs -*- C++ -*-===//
//
// The two speed properties of a kernel that a run on the CPU can see
// exactly, by which the emulator (GpuEmulator.h) counts every warp's
// memory requests against the fewest their bytes allow:
//   - shared memory, in the bank model of docs/notes.md ("Shared-memory
//     banks"): loads, stores, ldmatrix rows and cp.async writes, in
//     wavefronts. A correct kernel whose swizzle or layout leaves bank
//     conflicts runs slower on the GPU, not wrong;
//   - global memory, in 32-byte sectors (the unit L1 and L2 move): loads,
//     stores and cp.async reads. A warp whose lanes read along a column, or
//     a row a lane, moves up to 8 times the bytes it uses.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_GPUREQUESTCOST_H
#define NOVA_COMPILER_TARGET_CUDA_GPUREQUESTCOST_H

#include <cstdint>
#include <span>

namespace mlir::nova {

/// One warp's memory request: what it takes (shared: wavefronts; global:
/// sectors), the fewest its bytes allow, and (shared) the most distinct
/// words one bank held in one phase (1: no conflict).
struct RequestCost {
  int64_t taken = 0, ideal = 0, worstDegree = 0;
};

/// A warp's shared-memory request in which the active lanes (`lanes[i]`:
/// lane i's byte address, -1 where it takes no part) access `bytes` bytes
/// each: up to 4 bytes a lane, the warp is one phase; 8 bytes, half-warps;
/// 16 bytes (ldmatrix rows, 16-byte vectors and cp.async), quarter-warps;
/// wider accesses are 16-byte requests one after another, odd widths 4-byte
/// ones. A phase takes as many wavefronts as the most distinct 4-byte
/// words one of the 32 banks holds among its lanes' bytes (the same word
/// for many lanes is a broadcast); the fewest is one a phase with a lane.
RequestCost sharedRequestCost(std::span<const int64_t> lanes, int64_t bytes);

/// A warp's global request of `bytes` bytes a lane (`lanes` as above, byte
/// offsets into one buffer, whose start is 32-byte aligned): the distinct
/// 32-byte sectors its lanes touch, against the fewest that hold the
/// distinct bytes they touch.
RequestCost globalRequestCost(std::span<const int64_t> lanes, int64_t bytes);

/// What one op's requests cost over a run.
struct AccessCost {
  int64_t requests = 0, taken = 0, ideal = 0, worstDegree = 0;
  void add(const RequestCost &c);
  /// Another op's (or run's) requests with these.
  void merge(const AccessCost &other);
};

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_GPUREQUESTCOST_H
