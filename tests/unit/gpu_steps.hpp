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
#include <map>
#include <string>

namespace nova_test {

/// Restores the default matmul precision when a test ends, however it ends.
struct Fp32AtExit {
  ~Fp32AtExit() { nova::set_matmul_precision(nova::MatmulPrecision::fp32); }
};

inline const std::filesystem::path kPtxas = "/usr/local/cuda/bin/ptxas";

/// ptxas -v's output for `ptx` on `chip` (and its exit status).
inline std::pair<int, std::string> run_ptxas(const std::string& ptx, const std::string& chip, bool verbose,
                                             std::string& cmd) {
  auto dir = std::filesystem::temp_directory_path() / ("nova-ptx-" + std::to_string(unique_number()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "step.ptx") << ptx;
  }
  cmd = kPtxas.string() + " -arch=" + chip + " " + (dir / "step.ptx").string() + " -o " +
        (dir / "step.cubin").string() + (verbose ? " -v" : "") + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe)) out += buf;
  int status = ::pclose(pipe);
  std::filesystem::remove_all(dir);
  return {status, out};
}

/// What ptxas says when it does not assemble `ptx` for `chip` (its command
/// and output); empty when it does.
inline std::string ptxas_errors(const std::string& ptx, const std::string& chip) {
  std::string cmd;
  auto [status, out] = run_ptxas(ptx, chip, false, cmd);
  return status == 0 ? std::string() : cmd + "\n" + out;
}

/// Bytes of spill stores ptxas -v reports for each kernel of `ptx` on
/// `chip` (its lines: "Function properties for NAME", then "N bytes stack
/// frame, S bytes spill stores, L bytes spill loads").
inline std::map<std::string, int> ptxas_spill_stores(const std::string& ptx, const std::string& chip) {
  std::string cmd;
  auto [status, out] = run_ptxas(ptx, chip, true, cmd);
  INFO(cmd, "\n", out);
  REQUIRE(status == 0);
  std::map<std::string, int> spills;
  const std::string properties = "Function properties for ", stores = " bytes spill stores";
  for (std::size_t at = out.find(properties); at != std::string::npos; at = out.find(properties, at + 1)) {
    std::size_t name = at + properties.size(), end = out.find('\n', name);
    std::size_t count = out.find(stores, end);
    REQUIRE(count != std::string::npos);
    std::size_t begin = out.find_last_not_of("0123456789", count - 1) + 1;
    spills[out.substr(name, end - name)] = std::stoi(out.substr(begin, count - begin));
  }
  return spills;
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
