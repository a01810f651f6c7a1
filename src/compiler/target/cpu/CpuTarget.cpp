//===- CpuTarget.cpp - host CPU facts ----------------------------*- C++ -*-===//

#include "compiler/target/cpu/CpuTarget.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

#include <cstdlib>

int64_t mlir::nova::hostVectorBits() {
  if (const char *v = std::getenv("NOVA_VECTOR_BITS"))
    return std::atoll(v);
  static const int64_t bits = [] {
    auto features = llvm::sys::getHostCPUFeatures();
    if (features.lookup("avx512f"))
      return int64_t{512};
    if (features.lookup("avx"))
      return int64_t{256};
    return int64_t{128};
  }();
  return bits;
}
