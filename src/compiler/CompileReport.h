//===- CompileReport.h - where a compile's time went -------------*- C++ -*-===//
//
// The driver and the target fill one report per compile: wall time per
// phase, how many launches and distinct kernels the step became, the object
// size, the arena, the slowest kernels to generate. NOVA_EXPLAIN=1 prints it
// (stderr) after each compile; bench/compile_time reads the same numbers.
//
//===----------------------------------------------------------------------===//

#ifndef NOVA_COMPILER_COMPILEREPORT_H
#define NOVA_COMPILER_COMPILEREPORT_H

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mlir::nova {

struct CompileReport {
  std::string step, target;
  std::vector<std::pair<std::string, double>> phases; // name, seconds
  size_t launches = 0, kernels = 0, codegenThreads = 0, objectBytes = 0;
  uint64_t arenaBytes = 0;
  std::vector<std::pair<std::string, double>> slowestKernels; // entry, seconds
  std::string kernelLines; // NOVA_EXPLAIN: each kernel's configuration and roofline
  std::string memoryLines; // NOVA_EXPLAIN: the arena plan, its peak and largest buffers

  void add(std::string phase, double seconds) { phases.emplace_back(std::move(phase), seconds); }
  double total() const;
  std::string format() const;
};

/// Seconds since construction or the last lap().
class Stopwatch {
public:
  double lap() {
    auto now = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(now - last).count();
    last = now;
    return s;
  }

private:
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
};

/// NOVA_EXPLAIN=1 (or any non-empty value but 0).
bool explainEnabled();

} // namespace mlir::nova

#endif // NOVA_COMPILER_COMPILEREPORT_H
