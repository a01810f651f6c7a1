//===- CpuTarget.cpp - host CPU facts ----------------------------*- C++ -*-===//

#include "compiler/target/cpu/CpuTarget.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

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

int64_t mlir::nova::hostThreads() {
  if (const char *v = std::getenv("NOVA_NUM_THREADS"))
    return std::max<int64_t>(1, std::atoll(v));
  return std::max<unsigned>(1, std::thread::hardware_concurrency());
}
