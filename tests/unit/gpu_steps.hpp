// gpu_steps.hpp - what the GPU steps' tests share (test_gpu_steps.cpp,
// test_gpu_attention_steps.cpp): the emulated GPU's scope, ptxas, the
// launches of a step's description.
#pragma once

#include "testing.hpp"
#include "scoped_env.hpp"

#include <nova/executable_desc.hpp>
#include <nova/precision.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace nova_test {

/// Restores the default matmul precision when a test ends, however it ends.
struct Fp32AtExit {
  ~Fp32AtExit() { nova::set_matmul_precision(nova::MatmulPrecision::fp32); }
};

inline const std::filesystem::path kPtxas = "/usr/local/cuda/bin/ptxas";

/// Whether a test assembles the PTX it made: where ptxas is, and not under
/// the sanitizers (the compiler is the same code there and emits the same
/// PTX, which the normal build's run assembled; ptxas took about a quarter
/// of the attention steps' time).
inline bool assembles_ptx() { return !kSanitized && std::filesystem::exists(kPtxas); }

/// What ptxas says when it does not assemble `ptx` for `chip` (its command
/// and output); empty when it does.
inline std::string ptxas_errors(const std::string& ptx, const std::string& chip) {
  auto dir = std::filesystem::temp_directory_path() / ("nova-ptx-" + std::to_string(unique_number()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "step.ptx") << ptx;
  }
  std::string cmd = kPtxas.string() + " -arch=" + chip + " " + (dir / "step.ptx").string() + " -o " +
                    (dir / "step.cubin").string() + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  int status = ::pclose(pipe);
  std::filesystem::remove_all(dir);
  return status == 0 ? std::string() : cmd + "\n" + out;
}

/// The calling test's steps compiled for `chip` and run under the GPU
/// emulator, for its scope.
struct EmulatedGpu {
  explicit EmulatedGpu(const char* chip) {
    env.set("NOVA_TARGET", chip);
    env.set("NOVA_GPU", "emulate");
  }
  Env env;
};

/// Launches of kernels whose symbol ends in `suffix` ("_total": a split's
/// parts' totals; "_keys": an attention backward's key rows).
inline int launches_ending_in(const nova::ExecutableDesc* desc, const std::string& suffix) {
  int n = 0;
  for (const auto& l : desc->launches) {
    const std::string& symbol = desc->kernels[l.kernel].symbol;
    n += symbol.size() > suffix.size() && symbol.compare(symbol.size() - suffix.size(), suffix.size(), suffix) == 0;
  }
  return n;
}

} // namespace nova_test
