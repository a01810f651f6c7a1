// nova-run - loads a compiled step (an executable file) and runs it, with
// nothing but the runtime: no MLIR, no LLVM, no compiler.
//
//   nova-run STEP.nexe --info
//   nova-run STEP.nexe --inputs IN.safetensors [--outputs OUT.safetensors]
//            [--expect WANT.safetensors [--tolerance 1e-6]] [--repeat N]
//
// Inputs are the tensors named in0, in1, ... of IN (one per step input, with
// the step's dtypes and shapes); outputs are written as out0, out1, ...
// --expect compares every output with WANT's out<i> (max |got - want| /
// max |want|) and exits 1 above the tolerance. --repeat times N more runs.
// Exit codes: 0 ok, 1 a mismatch, 2 bad usage or input (the message says which).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "nova/aot.hpp"
#include "nova/io/safetensors.hpp"

namespace {

int usage() {
  std::cerr << "usage: nova-run STEP.nexe --info\n"
               "       nova-run STEP.nexe --inputs IN.safetensors [--outputs OUT.safetensors]\n"
               "                [--expect WANT.safetensors [--tolerance T]] [--repeat N]\n";
  return 2;
}

void print_info(const std::string& path, const nova::ExecutableDesc& d) {
  std::printf("%s: %s\n  compiled for %s\n", path.c_str(), d.compiler_version.c_str(),
              d.target.describe().c_str());
  for (std::size_t i = 0; i < d.inputs.size(); ++i)
    std::printf("  in%zu  %s\n", i, nova::to_string(d.inputs[i]).c_str());
  for (std::size_t i = 0; i < d.outputs.size(); ++i)
    std::printf("  out%zu %s%s\n", i, nova::to_string(d.outputs[i]).c_str(),
                d.aliases[i] >= 0 ? (" (updates in" + std::to_string(d.aliases[i]) + " in place)").c_str() : "");
  std::printf("  %zu launches of %zu kernels, arena %.1f MiB, %.1f KiB of %s\n", d.launches.size(),
              d.kernels.size(), double(d.arena_bytes) / (1 << 20), double(d.object.size()) / 1024,
              d.object_format.c_str());
  for (const auto& k : d.kernels)
    std::printf("    %-12s %s%s\n", k.symbol.c_str(), k.summary.c_str(),
                k.cluster > 1 ? (" (in clusters of " + std::to_string(k.cluster) + ")").c_str() : "");
}

std::map<std::string, nova::Tensor> by_name(const nova::SafetensorsFile& f) {
  std::map<std::string, nova::Tensor> m;
  for (const auto& [name, t] : f.tensors) m[name] = t;
  return m;
}

} // namespace

int main(int argc, char** argv) try {
  if (argc < 2) return usage();
  std::string exe_path = argv[1], inputs_path, outputs_path, expect_path;
  bool info = false;
  double tolerance = 1e-6;
  int repeat = 0;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--info") info = true;
    else if (a == "--inputs") inputs_path = value();
    else if (a == "--outputs") outputs_path = value();
    else if (a == "--expect") expect_path = value();
    else if (a == "--tolerance") tolerance = std::stod(value());
    else if (a == "--repeat") repeat = std::stoi(value());
    else if (a == "-h" || a == "--help") return usage(), 0;
    else return usage();
  }
  nova::ExecutableDesc desc = nova::read_executable_file(exe_path);
  if (info) {
    print_info(exe_path, desc);
    if (inputs_path.empty()) return 0;
  }
  if (inputs_path.empty()) return usage();
  std::shared_ptr<nova::Executable> exe = nova::load_executable(desc);

  std::map<std::string, nova::Tensor> given = by_name(nova::load_safetensors(inputs_path));
  std::vector<nova::Tensor> inputs;
  for (std::size_t i = 0; i < desc.inputs.size(); ++i) {
    auto it = given.find("in" + std::to_string(i));
    if (it == given.end()) {
      std::cerr << "nova-run: " << inputs_path << " has no tensor in" << i << " (the step takes "
                << nova::to_string(desc.inputs[i]) << ")\n";
      return 2;
    }
    inputs.push_back(it->second.clone()); // in-place outputs update their input
  }
  std::vector<nova::Tensor> outputs = (*exe)(inputs);
  if (repeat > 0) {
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < repeat; ++r) (*exe)(inputs);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("nova-run: %.3f ms per run over %d runs\n", ms / repeat, repeat);
  }
  if (!outputs_path.empty()) {
    std::vector<std::pair<std::string, nova::Tensor>> named;
    for (std::size_t i = 0; i < outputs.size(); ++i) named.emplace_back("out" + std::to_string(i), outputs[i]);
    nova::save_safetensors(outputs_path, named, {{"produced_by", "nova-run " + exe_path}});
  }
  if (!expect_path.empty()) {
    std::map<std::string, nova::Tensor> want = by_name(nova::load_safetensors(expect_path));
    double worst = 0;
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      auto it = want.find("out" + std::to_string(i));
      if (it == want.end() || it->second.spec() != outputs[i].spec()) {
        std::cerr << "nova-run: " << expect_path << " has no out" << i << " of type "
                  << nova::to_string(outputs[i].spec()) << "\n";
        return 2;
      }
      std::vector<double> got = outputs[i].to_vector(), ref = it->second.to_vector();
      double err = 0, scale = 0;
      for (std::size_t k = 0; k < got.size(); ++k) {
        err = std::max(err, std::abs(got[k] - ref[k]));
        scale = std::max(scale, std::abs(ref[k]));
      }
      double rel = scale > 0 ? err / scale : err;
      std::printf("nova-run: out%zu %s: max |got - want| / max |want| = %.3g\n", i,
                  nova::to_string(outputs[i].spec()).c_str(), rel);
      worst = std::max(worst, rel);
    }
    if (!(worst <= tolerance)) {
      std::printf("nova-run: MISMATCH (worst %.3g > tolerance %.3g)\n", worst, tolerance);
      return 1;
    }
    std::printf("nova-run: OK (worst %.3g <= %.3g)\n", worst, tolerance);
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << e.what() << "\n";
  return 2;
}
