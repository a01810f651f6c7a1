//===- CompileDriver.cpp - a traced step → a runnable executable -*- C++ -*-===//
//
// See CompileDriver.h. A miss in the process's cache lands here with the
// traced module; the disk cache is asked first (under the key's
// cross-process lock, so racing processes compile a key once), and only
// then is the step compiled. Anything the disk returns that fails to load
// is reported and compiled again.
//
//===----------------------------------------------------------------------===//

#include "compiler/CompileDriver.h"
#include "compiler/CompileProcess.h"
#include "compiler/CompileReport.h"
#include "compiler/Context.h"
#include "compiler/Diagnostics.h"
#include "compiler/LaunchPlan.h"
#include "compiler/interpreter/Interpreter.h"
#include "compiler/target/cuda/CudaTarget.h"
#include "compiler/target/cuda/GpuEmulatedExecutable.h"
#include "compiler/transforms/Kernels.h"
#include "runtime/disk_cache.hpp"

#include "nova/cache.hpp"

#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <dlfcn.h>
#include <map>
#include <fstream>
#include <iterator>
#include <xxhash.h>

using namespace mlir;

namespace {

/// Hashes what is written to it, without keeping the text.
class HashStream final : public llvm::raw_ostream {
public:
  HashStream() {
    state = XXH3_createState();
    XXH3_128bits_reset(state);
    SetUnbuffered();
  }
  ~HashStream() override { XXH3_freeState(state); }
  std::array<uint64_t, 2> digest() {
    flush();
    XXH128_hash_t h = XXH3_128bits_digest(state);
    return {h.high64, h.low64};
  }

private:
  void write_impl(const char *ptr, size_t size) override {
    XXH3_128bits_update(state, ptr, size);
    pos += size;
  }
  uint64_t current_pos() const override { return pos; }
  XXH3_state_t *state;
  uint64_t pos = 0;
};


/// NOVA_EXPLAIN's per-kernel lines: what each kernel is, its configuration
/// and its roofline on this target, costliest first (launches x bound).
/// The compute roof is exact for the target (cores x FMA pipes x lanes x 2
/// flops per cycle); the memory roof is an estimate (kStreamBytesPerCycle
/// per core streaming from L3/DRAM: one core of the 2-core AVX-512 Xeon
/// measured ~29 GB/s, ~8 bytes per cycle), so times are in cycles. An
/// amx_matmul kernel's compute roof is the tile unit's: one 16 x 16 x 32
/// bf16 product (16,384 flops) per 16 cycles per core.
void explainKernels(ModuleOp kernels, const ::nova::ExecutableDesc &desc,
                    const ::nova::TargetDesc &target, mlir::nova::CompileReport &report) {
  constexpr double kStreamBytesPerCycle = 8.0;
  double lanes = std::max(1, target.vector_bits / 32);
  double flopsPerCycle = double(std::max(1, target.cores)) * target.fma_units * lanes * 2.0;
  double bytesPerCycle = double(std::max(1, target.cores)) * kStreamBytesPerCycle;
  std::vector<uint64_t> launches(desc.kernels.size(), 0);
  for (const auto &l : desc.launches)
    if (l.kernel < launches.size())
      ++launches[l.kernel];
  struct Line {
    double cycles;
    std::string text;
  };
  std::vector<Line> lines;
  SymbolTable symbols(kernels);
  for (size_t k = 0; k < desc.kernels.size(); ++k) {
    const ::nova::KernelDesc &kd = desc.kernels[k];
    std::string config;
    double kernelFlopsPerCycle = flopsPerCycle;
    StringRef name = kd.symbol;
    name.consume_front("nova_"); // LaunchPlan.cpp: the entry of kernel kN is nova_kN
    if (auto f = symbols.lookup<func::FuncOp>(name))
      if (mlir::nova::LoweringConfigAttr c = mlir::nova::loweringConfig(f)) {
        llvm::raw_string_ostream os(config);
        os << c;
        if (c.isAmxMatmul())
          kernelFlopsPerCycle = double(std::max(1, target.cores)) * 1024.0;
        else if (c.isBf16Matmul()) // a dot product: two products a lane
          kernelFlopsPerCycle = 2.0 * flopsPerCycle;
      }
    double compute = double(kd.flops) / kernelFlopsPerCycle, memory = double(kd.bytes) / bytesPerCycle;
    double intensity = kd.bytes ? double(kd.flops) / double(kd.bytes) : 0.0;
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "  %-9s x%-4llu %-7s bound  %8.2f flop/B (balance %.1f)  roof %9.0f cycles/launch  %s\n"
                  "                      %s\n",
                  kd.symbol.c_str(), static_cast<unsigned long long>(launches[k]),
                  compute >= memory ? "compute" : "memory", intensity, kernelFlopsPerCycle / bytesPerCycle,
                  std::max(compute, memory), kd.summary.c_str(), config.c_str());
    lines.push_back({std::max(compute, memory) * double(launches[k]), buf});
  }
  std::stable_sort(lines.begin(), lines.end(), [](const Line &a, const Line &b) { return a.cycles > b.cycles; });
  std::string out = "  kernels, costliest roof first (x launches per run; roof = max(flops / " +
                    std::to_string(int(flopsPerCycle)) + " per cycle, bytes / " +
                    std::to_string(int(bytesPerCycle)) + " per cycle est.)):\n"
                    "  matmul configs (CpuConfigurator.cpp): register tile = most FMAs per load with "
                    "latency x pipes accumulators in the registers; cache_tile kc = MR x kc in a quarter "
                    "of L1 (all of K where it fits half); block columns = packed kc x columns slab in a "
                    "quarter of L2 (half with a transposed lhs); one workgroup per core, cores evenly "
                    "loaded. amx_matmul / bf16_matmul (bf16 precision, AMX / AVX512-BF16): blocks "
                    "as few as fill the cores, split the way that packs least, kc <= 512\n";
  size_t shown = std::min<size_t>(lines.size(), 40);
  for (size_t i = 0; i < shown; ++i)
    out += lines[i].text;
  if (shown < lines.size())
    out += "  ... " + std::to_string(lines.size() - shown) + " more\n";
  report.kernelLines = out;
}

std::string mib(uint64_t bytes) { return llvm::formatv("{0:f1} MiB", double(bytes) / (1 << 20)).str(); }

/// One recomputation nova-rematerialize recorded (kRematDecisionsAttr).
struct RematDecision {
  uint64_t bytes, flops;
  std::string what;
};
std::vector<RematDecision> readRematDecisions(ArrayAttr decisions) {
  std::vector<RematDecision> out;
  for (Attribute a : decisions ? decisions.getValue() : ArrayRef<Attribute>())
    if (auto d = dyn_cast<DictionaryAttr>(a)) {
      auto bytes = d.getAs<IntegerAttr>("bytes");
      auto flops = d.getAs<IntegerAttr>("flops");
      auto what = d.getAs<StringAttr>("what");
      if (bytes && flops && what)
        out.push_back({static_cast<uint64_t>(bytes.getInt()), static_cast<uint64_t>(flops.getInt()),
                       what.getValue().str()});
    }
  return out;
}

/// The distinct costs (product flops per byte no longer kept) of the
/// recomputations nova-rematerialize recorded, lowest first.
std::vector<int64_t> rematCosts(ArrayAttr decisions) {
  std::vector<int64_t> costs;
  for (const RematDecision &d : readRematDecisions(decisions))
    if (d.bytes > 0)
      costs.push_back(static_cast<int64_t>(d.flops / d.bytes));
  llvm::sort(costs);
  costs.erase(std::unique(costs.begin(), costs.end()), costs.end());
  return costs;
}

/// What a GPU step's arena may take of its device: the device's memory
/// less the step's own input and (not aliased) output buffers and a
/// reserve for what the runtime and driver hold besides (the CUDA context,
/// NCCL's buffers): max(512 MiB, 1/16 of the memory). 0: no limit (a CPU
/// step, a GPU of unknown memory).
struct DeviceBudget {
  uint64_t memory = 0, io = 0, reserve = 0;
  uint64_t arena() const { return memory > io + reserve ? memory - io - reserve : 1; }
  std::string text() const {
    return mib(arena()) + " for the arena: the GPU's " + mib(memory) + " (NOVA_GPU_MEMORY) less the step's inputs "
           "and outputs, " + mib(io) + ", and " + mib(reserve) + " kept for the driver and runtime";
  }
};

DeviceBudget deviceBudget(const ::nova::TargetDesc &target, const mlir::nova::StepSignature &signature) {
  DeviceBudget d;
  if (!target.is_gpu() || target.memory_bytes <= 0)
    return d;
  d.memory = static_cast<uint64_t>(target.memory_bytes);
  d.reserve = std::max<uint64_t>(uint64_t{512} << 20, d.memory / 16);
  d.io = ::nova::io_bytes(signature.inputs, signature.outputs, signature.aliases);
  return d;
}

/// NOVA_EXPLAIN's memory lines: the arena against the most bytes live at
/// once (what any placement needs), where that peak is, the largest buffers.
std::string explainMemory(const mlir::nova::MemoryPlan &plan, const ::nova::ExecutableDesc &desc,
                          ArrayAttr rematDecisions) {
  auto kernelName = [&](size_t k) {
    return k < desc.kernels.size() ? desc.kernels[k].symbol + " (" + desc.kernels[k].summary + ")"
                                   : std::string("?");
  };
  std::string out = "  memory: arena " + mib(plan.arenaBytes) + " for " +
                    std::to_string(plan.buffers.size()) + " buffers; at most " +
                    mib(plan.peakLiveBytes) + " live at once (launch " +
                    std::to_string(plan.peakLaunch) + " of " + std::to_string(desc.launches.size());
  if (plan.peakLaunch < desc.launches.size())
    out += ", " + kernelName(desc.launches[plan.peakLaunch].kernel);
  out += ")";
  if (plan.peakLiveBytes > 0)
    out += llvm::formatv("; arena / peak {0:f3}", double(plan.arenaBytes) / double(plan.peakLiveBytes)).str();
  // The live set at the peak, by the kernel that made each buffer: what a
  // lower peak would have to recompute or place elsewhere.
  std::map<std::string, std::pair<uint64_t, int>> atPeak;
  for (const mlir::nova::BufferLife &b : plan.buffers)
    if (b.first <= plan.peakLaunch && plan.peakLaunch <= b.last) {
      auto &[bytes, count] = atPeak[kernelName(b.kernel)];
      bytes += b.bytes;
      ++count;
    }
  std::vector<std::pair<uint64_t, std::string>> peakRows;
  for (const auto &[name, v] : atPeak)
    peakRows.push_back({v.first, mib(v.first) + "  " + std::to_string(v.second) + " x  " + name});
  std::stable_sort(peakRows.begin(), peakRows.end(), [](const auto &a, const auto &b) { return a.first > b.first; });
  out += "\n  live at the peak (bytes, buffers, made by):\n";
  for (size_t i = 0; i < std::min<size_t>(peakRows.size(), 12); ++i)
    out += "    " + peakRows[i].second + "\n";
  if (peakRows.size() > 12)
    out += "    ... " + std::to_string(peakRows.size() - 12) + " more producers\n";
  if (rematDecisions) {
    // Largest first, as the pass recorded them.
    uint64_t total = 0;
    std::vector<std::string> lines;
    for (const RematDecision &d : readRematDecisions(rematDecisions)) {
      total += d.bytes;
      lines.push_back(mib(d.bytes) + " " + d.what);
    }
    out += "  rematerialized: " + std::to_string(lines.size()) + " values (" + mib(total) +
           " in all) recomputed in the backward instead of kept from the forward (nova-rematerialize; "
           "NOVA_REMAT=0 keeps them):\n";
    for (size_t i = 0; i < std::min<size_t>(lines.size(), 12); ++i)
      out += "    " + lines[i] + "\n";
    if (lines.size() > 12)
      out += "    ... " + std::to_string(lines.size() - 12) + " more\n";
  }
  out += "  largest buffers (bytes, live over launches, made by):\n";
  for (size_t i : plan.largest) {
    const mlir::nova::BufferLife &b = plan.buffers[i];
    out += "    " + mib(b.bytes) + "  " + std::to_string(b.first) + ".." + std::to_string(b.last) + "  " +
           kernelName(b.kernel) + "\n";
  }
  return out;
}

[[noreturn]] void fail(const std::string &what, const std::string &diagnostics) {
  throw ::nova::CompileError("nova: " + what + (diagnostics.empty() ? "" : ":\n" + diagnostics));
}

} // namespace

/// The compiler's own build: a hash of the shared object this code is in
/// (libnova.so) and the LLVM it was built against. The version string alone
/// stays the same across rebuilds, so without this a developer's rebuilt
/// compiler would be handed executables its previous build wrote.
/// Computed once per process (the object is ~2 MB: well under a millisecond).
const std::string &mlir::nova::compilerBuild() {
  static const std::string id = [] {
    std::string out = "llvm " LLVM_VERSION_STRING;
    Dl_info info{};
    if (dladdr(reinterpret_cast<void *>(&mlir::nova::compilerBuild), &info) && info.dli_fname) {
      std::ifstream in(info.dli_fname, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!bytes.empty())
        out += " object " + llvm::utohexstr(XXH3_64bits(bytes.data(), bytes.size()));
    }
    return out;
  }();
  return id;
}

std::array<uint64_t, 2> mlir::nova::stepKey(ModuleOp traced, const ::nova::TargetDesc &target) {
  HashStream os;
  traced->print(os, OpPrintingFlags().printGenericOpForm().elideLargeElementsAttrs(0));
  os << "\ntarget " << target.hash() << "\ncompiler " << ::nova::compiler_version() << " "
     << compilerBuild();
  return os.digest();
}

namespace {

/// NOVA_EXPLAIN for a GPU target: each kernel's configuration and why
/// (the GPU configurator's matmul decision, the threads it runs as).
void explainGpuKernels(ModuleOp kernels, const ::nova::TargetDesc &target, const std::string &step) {
  std::string lines;
  llvm::raw_string_ostream os(lines);
  int total = 0;
  for (auto kernel : kernels.getOps<func::FuncOp>()) {
    ++total;
    os << "  " << kernel.getSymName() << ": " << mlir::nova::loweringConfig(kernel) << "\n";
    if (auto why = kernel->getAttrOfType<ArrayAttr>(mlir::nova::kGpuWhyAttr))
      for (Attribute line : why)
        os << "    " << cast<StringAttr>(line).getValue() << "\n";
  }
  llvm::errs() << "nova: step '" << step << "' for " << target.describe() << ": " << total << " GPU kernels:\n"
               << lines;
}

} // namespace

::nova::ExecutableDesc mlir::nova::compileToDescription(ModuleOp traced,
                                                        const StepSignature &signature,
                                                        const ::nova::TargetDesc &targetDesc,
                                                        const PipelineOptions &stepOptions,
                                                        OwningOpRef<ModuleOp> *gpuKernels) {
  const PipelineOptions options = pipelineOptionsForStep(stepOptions, signature.name);
  loadCompilerDialects(*traced.getContext());
  CompileReport report;
  report.step = signature.name;
  report.target = targetDesc.describe();
  Stopwatch clock;
  DiagnosticCollector diags(traced.getContext());
  if (failed(verify(traced)))
    fail("the traced step does not verify", diags.text);
  if (failed(runGraphStage(traced, options)))
    fail("differentiating the step failed", diags.text);
  report.add("graph (autodiff)", clock.lap());
  std::unique_ptr<Target> target = makeTarget(targetDesc);
  // A memory budget (nova/memory.hpp): the graph is kept, so that a plan
  // over budget can be made again with more recomputation (level 2). A
  // GPU step's arena must also fit its device (deviceBudget): the smaller
  // of the two is the budget.
  uint64_t budget = 0;
  if (auto b = traced->getAttrOfType<IntegerAttr>(kMemoryBudgetAttr))
    budget = static_cast<uint64_t>(b.getInt());
  const DeviceBudget device = deviceBudget(targetDesc, signature);
  const bool deviceBound = device.memory > 0 && (budget == 0 || device.arena() < budget);
  if (deviceBound)
    budget = device.arena();
  auto remat = traced->getAttrOfType<IntegerAttr>(kRematAttr);
  bool canRecomputeMore = budget && !(remat && remat.getInt() <= 0);
  OwningOpRef<ModuleOp> graph = canRecomputeMore ? traced.clone() : OwningOpRef<ModuleOp>();
  OwningOpRef<ModuleOp> searched; // the plan the budget search chose, kept for codegen

  ::nova::ExecutableDesc desc;
  std::string error;
  MemoryPlan memory;
  ModuleOp work = traced, kernels;
  // Kernels and the launch plan of `m` into desc and memory.
  auto plan = [&](ModuleOp m) {
    if (failed(runKernelStages(m, *target, options)))
      fail("lowering the step to kernels failed", diags.text);
    report.add("linalg, bufferize, kernels", clock.lap());
    desc = ::nova::ExecutableDesc();
    desc.compiler_version = ::nova::compiler_version();
    desc.target = targetDesc;
    desc.inputs = signature.inputs;
    desc.outputs = signature.outputs;
    desc.aliases = signature.aliases;
    auto step = m.lookupSymbol<func::FuncOp>(signature.name);
    kernels = kernelsModule(m);
    if (!step || !kernels)
      fail("the step has no launch plan after the kernel stage", diags.text);
    auto reuse = m->getAttrOfType<BoolAttr>(kArenaReuseAttr);
    if (failed(buildLaunchPlan(step, kernels, desc, error, &memory, !reuse || reuse.getValue())))
      fail("building the launch plan failed: " + error, diags.text);
    report.add("launch plan", clock.lap());
  };
  plan(work);
  if (budget && desc.arena_bytes > budget) {
    uint64_t first = desc.arena_bytes;
    std::string tried = (canRecomputeMore ? "cheap values recomputed: " : "nothing recomputed, NOVA_REMAT=0: ") + mib(first);
    if (canRecomputeMore) {
      // Level 2 (matmuls and attention recomputed too): first all of it
      // (the smallest plan). Then, so that no more is recomputed than the
      // budget needs and the cheapest first: the lowest bound on a
      // recomputation's cost (product flops per byte no longer kept; a GPT
      // block's h or qkv costs one product, its residual stream two or
      // more) whose plan still fits, by bisection over the costs the
      // smallest plan's recomputations had; at that bound the largest gap
      // (the fewest ops a value must be kept across to be recomputed) whose
      // plan fits, by bisection: the longest-kept values, the first
      // blocks' activations, go first.
      auto i64 = [&](int64_t v) { return IntegerAttr::get(IntegerType::get(traced.getContext(), 64), v); };
      auto attempt = [&](int64_t gap, int64_t maxCost) {
        OwningOpRef<ModuleOp> m = graph->clone();
        m.get()->setAttr(kRematAttr, i64(2));
        if (gap > 0)
          m.get()->setAttr(kRematMinGapAttr, i64(gap));
        if (maxCost >= 0)
          m.get()->setAttr(kRematMaxCostAttr, i64(maxCost));
        plan(*m);
        return m;
      };
      OwningOpRef<ModuleOp> best = attempt(0, -1);
      tried += "; matmuls and attention recomputed too: " + mib(desc.arena_bytes);
      if (desc.arena_bytes <= budget) {
        ::nova::ExecutableDesc bestDesc = desc;
        MemoryPlan bestMemory = memory;
        ModuleOp bestKernels = kernels;
        auto keep = [&](OwningOpRef<ModuleOp> m) {
          best = std::move(m);
          bestDesc = desc;
          bestMemory = memory;
          bestKernels = kernels;
        };
        std::vector<int64_t> costs = rematCosts(best.get()->getAttrOfType<ArrayAttr>(kRematDecisionsAttr));
        int64_t maxCost = -1; // no bound: the smallest plan
        size_t low = 0, high = costs.empty() ? 0 : costs.size() - 1; // costs[high] fits
        while (low < high) {
          size_t mid = low + (high - low) / 2;
          OwningOpRef<ModuleOp> m = attempt(0, costs[mid]);
          if (desc.arena_bytes <= budget) {
            high = mid;
            maxCost = costs[mid];
            keep(std::move(m));
          } else {
            low = mid + 1;
          }
        }
        int64_t fits = kDefaultRematMinGap, over = 1;
        if (auto step = graph->lookupSymbol<func::FuncOp>(signature.name); step && !step.getBody().empty())
          over = static_cast<int64_t>(step.front().getOperations().size()) + 1;
        for (int trial = 0; trial < 6 && over - fits > std::max<int64_t>(2, fits / 8); ++trial) {
          int64_t gap = fits + (over - fits) / 2;
          OwningOpRef<ModuleOp> m = attempt(gap, maxCost);
          if (desc.arena_bytes <= budget) {
            fits = gap;
            keep(std::move(m));
          } else {
            over = gap;
          }
        }
        desc = std::move(bestDesc);
        memory = std::move(bestMemory);
        kernels = bestKernels;
        if (explainEnabled()) {
          llvm::errs() << "nova: " << signature.name << " over its budget of " << mib(budget) << " at "
                       << mib(first) << ": recomputing values kept across at least " << fits << " ops";
          if (maxCost >= 0)
            llvm::errs() << " whose products cost at most " << maxCost << " flops a byte";
          llvm::errs() << " (matmuls and attention too) gives " << mib(desc.arena_bytes) << "\n";
        }
      }
      work = best.get();
      searched = std::move(best);
    }
    if (desc.arena_bytes > budget && deviceBound)
      throw ::nova::CompileError(
          "nova: " + signature.name + " needs more memory than " + targetDesc.name + " has: no plan fits " +
          device.text() + "; the smallest plan found needs an arena of " +
          mib(std::min(first, desc.arena_bytes)) + " (" + tried + "): a smaller batch or model, or a GPU with more "
          "memory");
    if (desc.arena_bytes > budget)
      throw ::nova::CompileError(
          "nova: " + signature.name + " needs more memory than its budget: no plan fits " +
          mib(budget) + " (" + std::to_string(budget) + " bytes, nova::set_memory_budget or "
          "NOVA_MEMORY_BUDGET); the smallest plan found needs an arena of " +
          mib(std::min(first, desc.arena_bytes)) + " (" + tried + ")");
  }
  if (explainEnabled())
    report.memoryLines = explainMemory(memory, desc, work->getAttrOfType<ArrayAttr>(kRematDecisionsAttr));
  if (explainEnabled() && device.memory > 0)
    report.memoryLines += "  GPU memory: the plan may take " + device.text() +
                          (deviceBound ? "" : " (a smaller budget binds)") + "; this plan takes " +
                          mib(desc.arena_bytes) + "\n";
  if (explainEnabled() && targetDesc.is_gpu())
    explainGpuKernels(kernels, targetDesc, signature.name);
  else if (explainEnabled())
    explainKernels(kernels, desc, targetDesc, report);
  if (failed(runCodegenStages(kernels, *target, options)))
    fail("generating code for the kernels failed", diags.text);
  report.add("kernel codegen (MLIR)", clock.lap());
  if (gpuKernels)
    *gpuKernels = OwningOpRef<ModuleOp>(kernels.clone());
  FailureOr<Artifact> artifact = target->emit(kernels, options, report, error);
  if (failed(artifact))
    fail("emitting object code failed: " + error, diags.text);
  desc.object_format = artifact->format;
  desc.object = std::move(artifact->bytes);
  desc.binary_format = artifact->binaryFormat;
  desc.binary = std::move(artifact->binary);
  desc.validate("the compiled step");
  report.launches = desc.launches.size();
  report.kernels = desc.kernels.size();
  report.arenaBytes = desc.arena_bytes;
  if (explainEnabled())
    llvm::errs() << report.format();
  return desc;
}

std::shared_ptr<::nova::Executable> mlir::nova::compileStep(OwningOpRef<ModuleOp> traced,
                                                            const StepSignature &signature,
                                                            ::nova::ExecMode mode) {
  PipelineOptions options = pipelineOptionsFromEnv();
  if (mode == ::nova::ExecMode::interpreted) {
    loadCompilerDialects(*traced->getContext());
    DiagnosticCollector diags(traced->getContext());
    if (failed(verify(*traced)))
      fail("the traced step does not verify", diags.text);
    if (failed(runGraphStage(*traced, pipelineOptionsForStep(options, signature.name))))
      fail("differentiating the step failed", diags.text);
    ::nova::detail::count_compile();
    return makeInterpreterExecutable(std::move(traced), signature.name, signature.inputs,
                                     signature.outputs, signature.aliases);
  }
  ::nova::TargetDesc target = ::nova::target_from_env();
  if (target.is_gpu() && gpuEmulationRequested()) {
    // NOVA_GPU=emulate: compiled here (the emulator needs the GPU IR, which
    // no cache holds), run on the CPU launch by launch.
    ::nova::detail::count_compile();
    OwningOpRef<ModuleOp> gpuKernels;
    options.assembleGpuBinary = false; // no GPU loads it
    ::nova::ExecutableDesc desc = compileToDescription(*traced, signature, target, options, &gpuKernels);
    if (!gpuKernels)
      throw ::nova::CompileError("nova: step '" + signature.name + "': the compiler kept no GPU kernels to emulate");
    return makeEmulatedGpuExecutable(std::move(desc), std::move(gpuKernels));
  }
  std::array<uint64_t, 2> key = stepKey(*traced, target);
  ::nova::detail::DiskCache disk(::nova::detail::disk_cache_config());
  auto fromDisk = [&]() -> std::shared_ptr<::nova::Executable> {
    Stopwatch clock;
    std::optional<::nova::ExecutableDesc> desc = disk.load(key, target.hash());
    if (!desc)
      return nullptr;
    try {
      std::shared_ptr<::nova::Executable> exe = ::nova::load_or_describe(*desc);
      ::nova::detail::count_disk_hit();
      if (explainEnabled())
        llvm::errs() << "nova: loaded " << signature.name << " from " << disk.entry_path(key)
                     << " in " << llvm::format("%.1f", clock.lap() * 1e3) << " ms: "
                     << desc->launches.size() << " launches of " << desc->kernels.size()
                     << " kernels\n";
      return exe;
    } catch (const ::nova::Error &e) {
      disk.reject(key, e.what());
      return nullptr;
    }
  };
  if (auto exe = fromDisk())
    return exe;
  ::nova::detail::DiskCache::KeyLock lock = disk.lock(key);
  if (auto exe = fromDisk()) // another process compiled it while we waited
    return exe;
  ::nova::detail::count_compile();
  ::nova::ExecutableDesc desc;
  if (std::optional<std::string> tool = compilerProcessTool()) {
    Stopwatch clock;
    uint64_t peak = 0;
    desc = compileInChildProcess(*tool, *traced, signature, target, key, peak);
    if (explainEnabled())
      llvm::errs() << "nova: " << signature.name << " was compiled by a child process in "
                   << llvm::format("%.2f", clock.lap()) << " s; the compiler's peak resident size: "
                   << mib(peak) << " (NOVA_COMPILE)\n";
  } else {
    desc = compileToDescription(*traced, signature, target, options);
  }
  desc.key = key;
  disk.store(desc);
  // The step's IR is done with. glibc keeps freed heap pages resident, so
  // without the trim the compile's peak would stay the process's resident
  // size for every step that follows.
  traced = OwningOpRef<ModuleOp>();
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
  // Code for another machine (NOVA_TARGET) is kept, not run: aot::save writes it.
  return ::nova::load_or_describe(desc);
}
