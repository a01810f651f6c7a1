//===- PtxAssembler.h - PTX -> cubin with the CUDA toolkit's ptxas -*- C++ -*-===//
//
// The CUDA tail's optional last step. PTX alone runs everywhere the driver
// can JIT it, but the driver then compiles every kernel at each process's
// load (seconds for a GPT step's wgmma kernels) and refuses PTX of a newer
// ISA than it knows. Where the compiling machine has ptxas, the step also
// carries the cubin for its exact chip; the runtime loads that first and
// falls back to the PTX (cuda_executable.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_TARGET_CUDA_PTXASSEMBLER_H
#define NOVA_COMPILER_TARGET_CUDA_PTXASSEMBLER_H

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::nova {

/// The ptxas to use: NOVA_PTXAS (a path; "off" or "0": none), else `ptxas`
/// on PATH, else $CUDA_HOME/bin/ptxas, else /usr/local/cuda/bin/ptxas.
/// nullopt when there is none.
std::optional<std::string> findPtxas();

/// What ptxas -v says of one kernel.
struct PtxasKernelInfo {
  std::string name;
  int registers = 0;
  int spillStoreBytes = 0, spillLoadBytes = 0;
};

struct Cubin {
  std::vector<uint8_t> bytes;
  std::vector<PtxasKernelInfo> kernels;
  /// ptxas's "Potential Performance Loss" notes (C75xx: wgmmas serialized,
  /// setmaxnreg ignored), as it printed them.
  std::vector<std::string> performanceNotes;
};

/// `ptx` assembled by `ptxas` for `chip` (sm_80, sm_90a, ...), optimized
/// (-O3), with each kernel's registers and spills. On failure `error` holds
/// ptxas's errors (at most 20 lines) or why it could not run.
FailureOr<Cubin> assemblePtx(llvm::StringRef ptxas, llvm::StringRef ptx, llvm::StringRef chip,
                             std::string &error);

} // namespace mlir::nova

#endif // NOVA_COMPILER_TARGET_CUDA_PTXASSEMBLER_H
