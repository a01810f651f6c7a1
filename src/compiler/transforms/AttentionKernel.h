//===- AttentionKernel.h - the shape of an attention kernel -----*- C++ -*-===//
//
// The fact the CPU configurator and nova-vectorize-attention must agree on:
// the vector width along a head's columns.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TRANSFORMS_ATTENTIONKERNEL_H
#define NOVA_COMPILER_TRANSFORMS_ATTENTIONKERNEL_H

#include <algorithm>
#include <cstdint>

namespace mlir::nova {

/// Lanes per vector along the head dim hd: the widest power of two up to a
/// register's lanes that divides hd (hd = 64 in f32 takes whole AVX-512
/// registers; an odd hd runs one lane at a time).
inline int64_t attentionVectorWidth(int64_t hd, int64_t elemBits, int64_t vectorBits) {
  int64_t width = std::max<int64_t>(1, vectorBits / elemBits);
  while (width > 1 && hd % width != 0)
    width /= 2;
  return width;
}

} // namespace mlir::nova

#endif // NOVA_COMPILER_TRANSFORMS_ATTENTIONKERNEL_H
