//===- TmaMap.h - a TMA tensor map as Nova describes it ----------*- C++ -*-===//
//
// What a launcher passes to cuTensorMapEncodeTiled for one operand of a
// kernel that loads it with TMA (and what the GPU emulator reads in its
// place): a tiled view of a global tensor. No MLIR: the runtime side and the
// device check's launcher use it as well.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_TMAMAP_H
#define NOVA_COMPILER_TARGET_CUDA_TMAMAP_H

#include <cstdint>
#include <vector>

namespace mlir::nova {

struct TmaMap {
  /// Which operand's buffer it maps: 0 the lhs (A), 1 the rhs (B).
  int operand = 0;
  int64_t elementBytes = 0;
  /// Elements per dimension, fastest first: the operand as stored
  /// (columns, rows[, batch]).
  std::vector<int64_t> dims;
  /// Bytes between consecutive indices of dims 1, 2, ... (dim 0 is contiguous).
  std::vector<int64_t> strides;
  /// The box one load copies, elements per dimension, fastest first.
  std::vector<int64_t> box;
  /// 0 (none), 32, 64 or 128: the XOR swizzle of the box's rows in shared
  /// memory (CUtensorMapSwizzle numbers these 0, 1, 2, 3 in that order).
  int64_t swizzleBytes = 0;

  int64_t boxBytes() const {
    int64_t n = elementBytes;
    for (int64_t d : box)
      n *= d;
    return n;
  }
};

/// The shared-memory byte address where TMA and wgmma put logical byte
/// address `a` under a `swizzleBytes` swizzle (ptx-semantics.md §7c): the
/// 16-byte chunk bits [4, 4 + log2(S / 16)) XORed with the bits above bit 7,
/// on the absolute address.
inline int64_t swizzledAddress(int64_t a, int64_t swizzleBytes) {
  if (swizzleBytes < 32)
    return a;
  return a ^ (((a >> 7) & (swizzleBytes / 16 - 1)) << 4);
}

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_TMAMAP_H
