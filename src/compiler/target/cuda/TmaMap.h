//===- TmaMap.h - TMA tensor maps: boxes and the swizzle ---------*- C++ -*-===//
//
// A kernel that loads an operand with TMA describes its tensor map as the
// runtime encodes it (nova::TensorMapDesc, executable_desc.hpp: the
// argument, elements, dims, strides, box, swizzle), which is also what the
// GPU emulator reads in its place: one description from the kernel builder
// to cuTensorMapEncodeTiled. No MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_TMAMAP_H
#define NOVA_COMPILER_TARGET_CUDA_TMAMAP_H

#include "nova/executable_desc.hpp"

#include <cstdint>

namespace mlir::nova {

/// The bytes one load through `map` copies: its box.
inline int64_t tmaBoxBytes(const ::nova::TensorMapDesc &map) {
  int64_t n = int64_t(::nova::size_of(map.element));
  for (uint64_t d : map.box)
    n *= int64_t(d);
  return n;
}

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
