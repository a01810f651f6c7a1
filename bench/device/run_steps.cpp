// run_steps.cpp - on the GPU machine, with the runtime only (no MLIR, no
// LLVM): each training step make_steps compiled (DIR/<name>.nexe with its
// <name>.step), its inputs rebuilt, one step checked against the CPU's loss
// and updated parameters, then N more timed.
//
//   run_steps DIR [N [NAME]]     (NAME: only DIR/NAME.nexe)
//
// Prints per step: the loss and parameters' relative differences from the
// CPU's, ms a step, tokens/s, the plan's arena (a data-parallel dp1_* step
// with a communicator of one rank); and "RESULT nova <name>
// tokens_per_s=..." lines for check.sh. With NOVA_PROFILE the timed steps'
// kernels are timed one by one (nova/profile.hpp; the report at exit).
// The timed steps keep the parameters and optimizer state on the device
// (the runtime's default); then the same step loaded again with
// NOVA_GPU_RESIDENT=0, which copies them in and out every call, is timed
// too ("copying them every call"), so the copies' cost is measured beside
// it (not with NOVA_PROFILE, whose report would mix the two); and again
// with NOVA_GPU_PDL=0, each kernel launched only once the one before it
// has ended ("without programmatic dependent launches"), its first loss
// against the step's.
// Exit 1 when a step differs by more
// than its bound (f32 2e-4, bf16 (operands rounded to bf16) 2e-2, relative), 2 on bad input.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "nova/aot.hpp"
#include "nova/distributed.hpp"
#include "nova/profile.hpp"
#include "steps.hpp"

int main(int argc, char** argv) try {
  if (argc < 2) {
    std::fprintf(stderr, "usage: run_steps DIR [N [NAME]]\n");
    return 2;
  }
  const int n = argc > 2 ? std::atoi(argv[2]) : 20;
  int failures = 0, found = 0;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(argv[1]))
    if (e.path().extension() == ".nexe" && (argc < 4 || e.path().stem() == argv[3])) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    ++found;
    const std::string name = path.stem().string();
    steps::StepFile f = steps::read(path.parent_path() / (name + ".step"));
    auto loading = std::chrono::steady_clock::now();
    std::shared_ptr<nova::Executable> exe = nova::aot::load(path.string());
    const double load_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - loading).count();
    // A data-parallel step (dp1_*): a group of one rank, its sums through
    // the data-parallel path (NCCL on a GPU).
    auto group = nova::dist::loopback_group(1);
    nova::dist::set_communicator(exe->description() && !exe->description()->collectives.empty() ? group[0] : nullptr);
    std::vector<nova::Tensor> in = steps::inputs(f, exe->input_specs());
    std::vector<nova::Tensor> out = (*exe)(in);
    double loss = out[0].at({}), sumsq = steps::params_sumsq(in, f);
    double dloss = std::abs(loss - f.loss) / std::abs(f.loss), dparams = std::abs(sumsq - f.params_sumsq) / f.params_sumsq;
    const double bound = name.find("bf16") != std::string::npos ? 2e-2 : 2e-4;
    const bool ok = dloss <= bound && dparams <= bound && std::isfinite(loss);
    failures += !ok;
    nova::reset_profile(); // NOVA_PROFILE: the timed steps only
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) out = (*exe)(in);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / n;
    double tokens = double(steps::samples_per_step(f)) / (ms / 1e3);
    // The same step loaded again with `variable` set to 0 (the runtime
    // reads it at load): ms a step over n steps after a first, whose loss
    // goes to `first_loss` if given.
    auto variant = [&](const char* variable, double* first_loss = nullptr) {
      const char* before = std::getenv(variable);
      const std::string saved = before ? before : "";
      setenv(variable, "0", 1);
      std::shared_ptr<nova::Executable> other = nova::aot::load(path.string());
      if (before) setenv(variable, saved.c_str(), 1); else unsetenv(variable);
      std::vector<nova::Tensor> again = steps::inputs(f, other->input_specs());
      out = (*other)(again);
      if (first_loss) *first_loss = out[0].at({});
      auto c0 = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i) out = (*other)(again);
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count() / n;
    };
    // Copying its in-place inputs in and out every call; and launching
    // without programmatic dependent launches (each kernel only once the
    // one before it has ended), whose first loss should be the same.
    double copying_ms = 0, serial_ms = 0, serial_loss = 0;
    if (!nova::profiling_enabled()) {
      copying_ms = variant("NOVA_GPU_RESIDENT");
      serial_ms = variant("NOVA_GPU_PDL", &serial_loss);
    }
    std::printf("%-18s loss %.6f (CPU %.6f, rel %.1e), params rel %.1e %s; %.3f ms a step, %.0f tokens/s, arena %.1f MiB, "
                "%zu launches, loaded in %.0f ms\n",
                name.c_str(), loss, f.loss, dloss, dparams, ok ? "ok" : "MISMATCH", ms, tokens,
                double(exe->description()->arena_bytes) / (1 << 20), exe->description()->launches.size(), load_ms);
    // Device memory the step holds: its arena and one buffer per input
    // and per output not written into its input.
    const nova::ExecutableDesc& d = *exe->description();
    const double device_bytes = double(d.arena_bytes) + double(nova::io_bytes(d.inputs, d.outputs, d.aliases));
    std::printf("%-18s device memory %.1f MiB (arena %.1f MiB, inputs and outputs %.1f MiB)\n", name.c_str(),
                device_bytes / (1 << 20), double(d.arena_bytes) / (1 << 20),
                (device_bytes - double(d.arena_bytes)) / (1 << 20));
    if (copying_ms > 0)
      std::printf("%-18s copying parameters and optimizer state every call: %.3f ms a step (%.3fx the time)\n",
                  name.c_str(), copying_ms, copying_ms / ms);
    if (serial_ms > 0)
      std::printf("%-18s without programmatic dependent launches: %.3f ms a step (%.3fx the time), first loss "
                  "rel %.1e from the step's\n",
                  name.c_str(), serial_ms, serial_ms / ms, std::abs(serial_loss - loss) / std::abs(loss));
    std::printf("RESULT nova %s tokens_per_s=%.1f ok=%d device_mib=%.1f\n", name.c_str(), tokens, int(ok),
                device_bytes / (1 << 20));
  }
  if (!found) {
    std::fprintf(stderr, "run_steps: no .nexe in %s\n", argv[1]);
    return 2;
  }
  return failures ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "run_steps: %s\n", e.what());
  return 2;
}
