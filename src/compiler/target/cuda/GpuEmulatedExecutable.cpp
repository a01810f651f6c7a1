//===- GpuEmulatedExecutable.cpp - a GPU step run by the emulator --------===//

#include "compiler/target/cuda/GpuEmulatedExecutable.h"
#include "compiler/Context.h"
#include "compiler/target/cuda/GpuEmulator.h"
#include "nova/distributed.hpp"
#include "nova/error.hpp"
#include "runtime/host_collectives.hpp"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

using namespace mlir;

namespace {

class EmulatedGpuExecutable final : public ::nova::Executable {
public:
  EmulatedGpuExecutable(::nova::ExecutableDesc desc, OwningOpRef<ModuleOp> kernels)
      : Executable(desc.inputs, desc.outputs, desc.aliases), desc_(std::move(desc)), kernels_(std::move(kernels)) {
    kernels_->walk([&](gpu::GPUFuncOp f) { funcs_[f.getName().str()] = f; });
    for (const auto &k : desc_.kernels)
      if (!funcs_.count(k.symbol))
        throw ::nova::Error("nova: the GPU emulator has no kernel " + k.symbol);
  }

  std::string kind() const override { return "gpu-emulator"; }
  const ::nova::ExecutableDesc *description() const override { return &desc_; }
  bool shareable() const override { return false; }

  void run(std::span<const ::nova::Tensor> inputs, std::span<::nova::Tensor> outputs) const override {
    std::unique_lock<std::recursive_mutex> lock(mlir::nova::compilerMutex());
    std::shared_ptr<::nova::dist::Communicator> comm;
    if (!desc_.collectives.empty())
      comm = ::nova::dist::required_communicator(desc_.collectives.size());
    // Bytes no launch wrote read as NaN.
    std::vector<uint8_t> arena(desc_.arena_bytes, 0xff);
    auto address = [&](const ::nova::BufferRef &b) {
      return b.kind == ::nova::BufferRef::Kind::input    ? static_cast<uint8_t *>(inputs[b.index].raw_data())
             : b.kind == ::nova::BufferRef::Kind::output ? static_cast<uint8_t *>(outputs[b.index].raw_data())
                                                         : arena.data() + b.offset;
    };
    // A data-parallel step's sums, on the host buffers, started and waited
    // for where the plan says, as the CPU runtime does; the compiler's lock
    // is let go while waiting, so that another rank's thread can run its
    // launches up to its own start of the same sum.
    std::optional<::nova::detail::HostCollectives> sums;
    if (comm)
      sums.emplace(desc_, schedule_, *comm, address, /*timeline=*/nullptr, [&](bool waiting) {
        if (waiting)
          lock.unlock();
        else
          lock.lock();
      });
    // Every launch's requests, summed (NOVA_EMULATOR_COST).
    mlir::nova::AccessCost stepShared, stepGlobal;
    for (size_t i = 0; i < desc_.launches.size(); ++i) {
      if (sums)
        sums->at(i);
      const ::nova::LaunchDesc &l = desc_.launches[i];
      const ::nova::KernelDesc &k = desc_.kernels[l.kernel];
      mlir::nova::EmulatorLaunch launch;
      launch.grid = {int64_t(l.workgroups), 1, 1};
      launch.block = {int64_t(k.threads), 1, 1};
      launch.cluster = {int64_t(k.cluster), 1, 1};
      // A cluster's first CTA ahead of its peers whenever it can: the order
      // that finds a step of a CTA that does not wait for its peers.
      launch.peersLag = k.cluster > 1;
      launch.dynamicSharedBytes = k.shared_bytes;
      for (const ::nova::BufferRef &b : l.args)
        launch.memory.emplace_back(address(b), size_t(b.bytes));
      // What the runtime would encode with cuTensorMapEncodeTiled.
      for (const ::nova::TensorMapDesc &m : k.tensor_maps) {
        launch.tensorMaps[int(m.arg)] = mlir::nova::EmulatorTensorMap{m, launch.memory[m.arg]};
      }
      mlir::nova::EmulatorReport report = mlir::nova::emulateKernel(funcs_.at(k.symbol), launch);
      if (!report.ok)
        throw ::nova::Error("nova: launch " + std::to_string(i) + " of " + std::to_string(desc_.launches.size()) +
                            " (" + k.symbol + ", " + k.summary + ") failed under the GPU emulator: " + report.error);
      reportCost(k, report);
      stepShared.merge(report.sharedTotal());
      stepGlobal.merge(report.globalTotal());
    }
    if (costWanted())
      std::fprintf(stderr,
                   "nova: emulator cost: the step's %zu launches: shared %lld wavefronts for %lld (%.3fx), global %lld "
                   "sectors for %lld (%.3fx)\n",
                   desc_.launches.size(), (long long)stepShared.taken, (long long)stepShared.ideal,
                   double(stepShared.taken) / double(std::max<int64_t>(1, stepShared.ideal)),
                   (long long)stepGlobal.taken, (long long)stepGlobal.ideal,
                   double(stepGlobal.taken) / double(std::max<int64_t>(1, stepGlobal.ideal)));
    if (sums)
      sums->at(desc_.launches.size());
  }

private:
  /// NOVA_EMULATOR_COST=1: each kernel's shared-memory wavefronts and
  /// global sectors against the fewest possible (GpuRequestCost.h), on
  /// stderr at its first launch in the process (=all: at every launch),
  /// with the ops that take more; and after each run, the step's sums.
  /// 1 or 2 (=all) where NOVA_EMULATOR_COST asks for the report, else 0.
  static int costWanted() {
    static const int wanted = [] {
      const char *v = std::getenv("NOVA_EMULATOR_COST");
      return !v ? 0 : std::strcmp(v, "1") == 0 ? 1 : std::strcmp(v, "all") == 0 ? 2 : 0;
    }();
    return wanted;
  }

  static void reportCost(const ::nova::KernelDesc &k, const mlir::nova::EmulatorReport &report) {
    const int wanted = costWanted();
    if (!wanted)
      return;
    static std::mutex mutex;
    static std::set<std::string> seen;
    std::lock_guard<std::mutex> lock(mutex);
    if (!seen.insert(k.symbol + "\n" + k.summary).second && wanted == 1)
      return;
    const mlir::nova::AccessCost shared = report.sharedTotal(), global = report.globalTotal();
    std::string s = "nova: emulator cost: " + k.symbol + " (" + k.summary + "): shared " +
                    std::to_string(shared.taken) + " wavefronts for " + std::to_string(shared.ideal) + ", global " +
                    std::to_string(global.taken) + " sectors for " + std::to_string(global.ideal);
    for (const std::string &line : mlir::nova::describeCostlyRequests(report, /*shared=*/true, 4))
      s += "\n  bank conflict: " + line;
    for (const std::string &line : mlir::nova::describeCostlyRequests(report, /*shared=*/false, 4))
      s += "\n  uncoalesced: " + line;
    std::fprintf(stderr, "%s\n", s.c_str());
  }

  ::nova::ExecutableDesc desc_;
  ::nova::detail::CollectiveSchedule schedule_{desc_};
  OwningOpRef<ModuleOp> kernels_;
  std::map<std::string, gpu::GPUFuncOp> funcs_;
};

} // namespace

bool mlir::nova::gpuEmulationRequested() {
  const char *v = std::getenv("NOVA_GPU");
  return v && std::strcmp(v, "emulate") == 0;
}

std::shared_ptr<::nova::Executable> mlir::nova::makeEmulatedGpuExecutable(::nova::ExecutableDesc desc,
                                                                         OwningOpRef<ModuleOp> kernels) {
  return std::make_shared<EmulatedGpuExecutable>(std::move(desc), std::move(kernels));
}
