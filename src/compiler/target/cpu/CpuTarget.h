//===- CpuTarget.h - facts about the CPU code is compiled for ----*- C++ -*-===//
//
// The one place that knows the host's vector width. Passes take such facts
// as options; the pipeline fills them from here.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CPU_CPUTARGET_H
#define NOVA_COMPILER_TARGET_CPU_CPUTARGET_H

#include <cstdint>

namespace mlir::nova {

/// Width of the widest vector registers of the host: 512 with AVX-512F, 256
/// with AVX, else 128. NOVA_VECTOR_BITS overrides it (for tests).
int64_t hostVectorBits();

/// Threads compiled code may use: the host's cores, or NOVA_NUM_THREADS.
int64_t hostThreads();

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CPU_CPUTARGET_H
