//===- CompileReport.cpp - where a compile's time went -----------*- C++ -*-===//

#include "compiler/CompileReport.h"

#include "nova/explain.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

double mlir::nova::CompileReport::total() const {
  double t = 0;
  for (const auto &[name, s] : phases)
    t += s;
  return t;
}

std::string mlir::nova::CompileReport::format() const {
  char buf[256];
  std::string out;
  // The names are unbounded (a GPU target's description is long): not through buf.
  out += "nova: compiled " + step + " for " + target;
  std::snprintf(buf, sizeof buf, " in %.3f s: %zu launches of %zu kernels", total(), launches, kernels);
  out += buf;
  std::snprintf(buf, sizeof buf, ", %.1f KiB of code, %.1f MiB arena\n", objectBytes / 1024.0,
                arenaBytes / (1024.0 * 1024.0));
  out += buf;
  for (const auto &[name, s] : phases) {
    std::snprintf(buf, sizeof buf, "  %-28s %8.1f ms\n", name.c_str(), s * 1e3);
    out += buf;
  }
  if (!slowestKernels.empty()) {
    std::snprintf(buf, sizeof buf, "  slowest kernels to generate (of %zu, on %zu threads):", kernels,
                  codegenThreads);
    out += buf;
    for (const auto &[name, s] : slowestKernels) {
      std::snprintf(buf, sizeof buf, " %s %.1f ms", name.c_str(), s * 1e3);
      out += buf;
    }
    out += "\n";
  }
  out += memoryLines;
  out += kernelLines;
  return out;
}

bool mlir::nova::explainEnabled() { return ::nova::explain_enabled(); }
