//===- nova-gpu-kernels.cpp - PTX of GPU matmul kernels, for the device check -===//
//
//   nova-gpu-kernels TARGET OUT_DIR CASE...
//     CASE = type:layout:MxNxK[:mma|:flat|:pingpong|:evenregs|:cluster|:pingpong+cluster][@BMxBN/WMxWN], e.g.
//     bf16:NN:4096x4096x4096 (type f16, bf16, tf32 or 3xtf32 (f32 operands
//     at about f32's accuracy, the configurator's 3xtf32 kernel even where
//     it would take f32 FMAs); layout NN, NT, TN or
//     TT: whether A, B are stored transposed; :mma keeps the mma.sync kernel
//     where wgmma would do, :flat a block a tile where the wgmma kernel
//     would be persistent, :pingpong the persistent wgmma kernel whose two
//     consumer warpgroups take 64-row tiles in turn, :evenregs no
//     setmaxnreg (every thread the block's even share of the registers,
//     as before 2026-12-05), :cluster the persistent wgmma kernel in
//     clusters of 2 CTAs along M sharing B's tile by TMA multicast,
//     :pingpong+cluster both; :probeshared and :probemma the mma.sync
//     kernel with its global loads left out (the prologue's slabs read
//     over and over) or its loads altogether (the MMAs on one k step's
//     fragments): probes, whose products are not A x B, that time what is
//     left (MmaSyncProbe); :interleave the mma.sync kernel with each slab's
//     refill spread over its k steps (GpuMatmulConfig::interleaveCopies);
//     :bf16out the configurator's kernel writing C in bf16 (rounded in its
//     epilogue, bf16ResultEpilogue), as cuBLAS writes a bf16 product;
//     :wgmmaprobe the wgmma kernel, a block a tile, loading only each
//     block's first `stages` slabs (WgmmaMatmulFaults::probeShared), named
//     _wgmma_probeshared: a probe as :probeshared is for mma.sync;
//     @128x128/64x64 only that block and warp tile,
//     the model choosing depth and split: a variant measured beside the
//     configurator's choice, named with its tile)
//
// With NOVA_EXPLAIN=1 each decision's reasons follow its line on stderr.
// For each case: the configurator's decision for TARGET (on sm_90a the TMA
// + wgmma kernel where it applies, else mma.sync), the kernel, its PTX
// (OUT_DIR/<name>.ptx), and a line of OUT_DIR/manifest.tsv saying how to
// launch it:
//   name ptx type layout m n k grid_x grid_y grid_z block_x shared_bytes config tma parts cluster_x out
// (the grid: tiles along N, M and the parts of K, or a persistent
// kernel's blocks along x)
// where tma is "-" (the kernel takes A, B, C) or the two tensor maps the
// launcher encodes and passes in place of A and B, "|"-separated, each
// "operand;dims;strides;box;swizzle" with comma-separated lists (dims and
// box in elements, fastest first; strides in bytes), and parts is how many
// parts the configurator split K into: C is then parts x m x n,
// the parts' partial products, for the launcher to sum, and cluster_x the
// CTAs a cluster along x (1: none; else launched with cuLaunchKernelEx's
// cluster attribute, which MLIR 19 cannot put in the PTX), and out C's
// element type (f32, or bf16 for :bf16out).
// bench/device/matmul_check.py loads the PTX through the CUDA driver on a
// machine without LLVM or MLIR and compares the kernel with cuBLAS.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cuda/GpuConfigurator.h"
#include "compiler/target/cuda/MmaMatmulKernel.h"
#include "compiler/target/cuda/PtxEmitter.h"
#include "compiler/target/cuda/WgmmaMatmulKernel.h"
#include "nova/target.hpp"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace mlir;
using namespace mlir::nova;

namespace {

/// The variants a case may name after its shape, and the spec's form.
constexpr const char *kVariants[] = {"mma",         "flat",     "pingpong",   "evenregs", "cluster", "pingpong+cluster",
                                     "probeshared", "probemma", "interleave", "bf16out",  "wgmmaprobe"};
std::string caseForm() {
  std::string form = "type:layout:MxNxK[";
  for (const char *variant : kVariants)
    form += std::string(form.back() == '[' ? ":" : "|:") + variant;
  return form + "]";
}

int usage() {
  std::fprintf(stderr,
               "usage: nova-gpu-kernels TARGET OUT_DIR %s[@BMxBN/WMxWN]...\n"
               "  type f16, bf16, tf32 or 3xtf32; layout NN, NT, TN or TT; :mma keeps mma.sync on sm_90a,\n"
               "  :flat a block a tile (not persistent), :pingpong consumer warpgroups in turn,\n"
               "  :evenregs no setmaxnreg (the block's registers shared evenly),\n"
               "  :cluster clusters of 2 along M sharing B's tile (TMA multicast), :pingpong+cluster both;\n"
               "  :probeshared / :probemma mma.sync without its global loads / without any (timing probes);\n"
               "  :interleave mma.sync with each slab's refill spread over its k steps;\n"
               "  :bf16out C written in bf16 (rounded in the epilogue);\n"
               "  :wgmmaprobe the wgmma kernel (a block a tile) without its global loads (timing probe);\n"
               "  @BMxBN/WMxWN only that block and warp tile\n",
               caseForm().c_str());
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 4)
    return usage();
  std::string targetName = argv[1], out = argv[2];
  ::nova::TargetDesc target = ::nova::builtin_gpu_target(targetName);
  if (!target.is_gpu()) {
    std::fprintf(stderr, "nova-gpu-kernels: '%s' is not a built-in GPU target\n", targetName.c_str());
    return 2;
  }
  if (llvm::sys::fs::create_directories(out)) {
    std::fprintf(stderr, "nova-gpu-kernels: cannot create %s\n", out.c_str());
    return 1;
  }
  std::error_code ec;
  llvm::raw_fd_ostream manifest(out + "/manifest.tsv", ec);
  if (ec) {
    std::fprintf(stderr, "nova-gpu-kernels: cannot write %s/manifest.tsv\n", out.c_str());
    return 1;
  }
  DialectRegistry registry;
  registerGpuCodegenDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  for (int i = 3; i < argc; ++i) {
    std::string spec = argv[i], tile;
    if (size_t at = spec.find('@'); at != std::string::npos) {
      tile = spec.substr(at + 1);
      spec.resize(at);
    }
    long long bm = 0, bn = 0, wm = 0, wn = 0;
    if (!tile.empty() && (std::sscanf(tile.c_str(), "%lldx%lld/%lldx%lld", &bm, &bn, &wm, &wn) != 4 || bm < 1 ||
                          bn < 1 || wm < 1 || wn < 1)) {
      std::fprintf(stderr, "nova-gpu-kernels: '%s' is not BMxBN/WMxWN\n", tile.c_str());
      return 2;
    }
    char type[8] = {}, layout[3] = {}, kind[24] = {};
    long long m = 0, n = 0, k = 0;
    int fields = std::sscanf(spec.c_str(), "%7[a-z0-9]:%2[NT]:%lldx%lldx%lld:%23[a-z0-9+]", type, layout, &m, &n, &k, kind);
    const std::string variant = fields == 6 ? kind : "";
    if (fields < 5 || m < 1 || n < 1 || k < 1 ||
        (fields == 6 && llvm::none_of(kVariants, [&](const char *v) { return variant == v; }))) {
      std::fprintf(stderr, "nova-gpu-kernels: '%s' is not %s\n", spec.c_str(), caseForm().c_str());
      return 2;
    }
    MmaMatmulFaults mmaProbe;
    mmaProbe.probe = variant == "probeshared" ? MmaSyncProbe::sharedOnly
                     : variant == "probemma"  ? MmaSyncProbe::mmaOnly
                                              : MmaSyncProbe::none;
    const bool interleave = variant == "interleave";
    const bool bf16Out = variant == "bf16out";
    const bool mmaOnly = variant == "mma" || interleave || mmaProbe.probe != MmaSyncProbe::none;
    WgmmaMatmulFaults wgmmaProbe;
    wgmmaProbe.probeShared = variant == "wgmmaprobe";
    const bool flat = variant == "flat" || wgmmaProbe.probeShared;
    const bool pingPong = variant == "pingpong" || variant == "pingpong+cluster";
    const bool evenRegisters = variant == "evenregs";
    const bool cluster = variant == "cluster" || variant == "pingpong+cluster";
    GpuMatmulProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    std::string t = type;
    if (t != "f16" && t != "bf16" && t != "tf32" && t != "3xtf32") {
      std::fprintf(stderr, "nova-gpu-kernels: type '%s' is not f16, bf16, tf32 or 3xtf32\n", type);
      return 2;
    }
    p.operand = t == "f16"    ? GpuOperand::f16
                : t == "bf16" ? GpuOperand::bf16
                : t == "tf32" ? GpuOperand::tf32
                              : GpuOperand::tf32x3;
    p.lhsTransposed = layout[0] == 'T';
    p.rhsTransposed = layout[1] == 'T';
    p.allowWgmma = !mmaOnly;
    p.allowSplitK = !bf16Out; // the configurator's choice (split-K takes no epilogue)
    p.allowPersistent = !flat;
    p.pingPong = pingPong;
    p.interleaveCopies = interleave;
    p.allowRegisterRebalancing = !evenRegisters;
    p.clusterM = cluster ? 2 : 1;
    p.onlyBlockM = bm;
    p.onlyBlockN = bn;
    p.onlyWarpM = wm;
    p.onlyWarpN = wn;
    GpuMatmulConfig config = configureGpuMatmul(p, target);
    if (config.threads < 1) {
      std::fprintf(stderr, "nova-gpu-kernels: no configuration for %s@%s\n", spec.c_str(), tile.c_str());
      return 1;
    }
    const bool wgmma = config.kind == GpuMmaKind::wgmma;
    if (wgmmaProbe.probeShared && !wgmma) {
      std::fprintf(stderr, "nova-gpu-kernels: %s: :wgmmaprobe needs a wgmma kernel (sm_90a), not %s\n", spec.c_str(),
                   config.describe().c_str());
      return 1;
    }
    // (A PTX name starts with a letter.)
    const std::string prefix = t == "3xtf32" ? "tf32x3" : t;
    std::string name = prefix + "_" + layout + "_" + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    name += wgmma ? "_wgmma" : "_mma";
    if (!tile.empty())
      name += llvm::formatv("_{0}x{1}_w{2}x{3}", bm, bn, wm, wn).str();
    if (flat && !wgmmaProbe.probeShared)
      name += "_flat";
    if (pingPong)
      name += "_pingpong";
    if (evenRegisters)
      name += "_evenregs";
    if (cluster)
      name += "_cluster";
    if (mmaProbe.probe != MmaSyncProbe::none || interleave || bf16Out)
      name += "_" + variant;
    if (wgmmaProbe.probeShared)
      name += "_probeshared";
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&ctx));
    gpu::GPUModuleOp kernels = addKernelsModule(*module);
    std::string error, tma = "-";
    gpu::GPUFuncOp func;
    Region epilogueBody;
    const MmaEpilogue epilogue = bf16Out ? bf16ResultEpilogue(&ctx, epilogueBody) : MmaEpilogue{};
    if (wgmma) {
      FailureOr<WgmmaMatmulKernel> kernel =
          buildWgmmaMatmulKernel(kernels, name, p, config, error, wgmmaProbe, epilogue);
      if (succeeded(kernel)) {
        func = kernel->func;
        tma.clear();
        auto list = [](const std::vector<uint64_t> &v) {
          std::string s;
          for (int64_t x : v) {
            if (!s.empty())
              s += ",";
            s += std::to_string(x);
          }
          return s;
        };
        for (const ::nova::TensorMapDesc &map : kernel->maps) {
          if (!tma.empty())
            tma += "|";
          tma += std::to_string(map.arg);
          for (const std::string &field : {list(map.dims), list(map.strides), list(map.box),
                                           std::to_string(map.swizzle_bytes)})
            tma += ";" + field;
        }
      }
    } else {
      FailureOr<gpu::GPUFuncOp> kernel = buildMmaSyncMatmulKernel(kernels, name, p, config, error, mmaProbe, epilogue);
      if (succeeded(kernel))
        func = *kernel;
    }
    if (!func || failed(verify(*module))) {
      std::fprintf(stderr, "nova-gpu-kernels: %s\n", error.empty() ? "the kernel does not verify" : error.c_str());
      return 1;
    }
    // The grid the kernel was built for: tiles along N, M and the parts of
    // K, or a persistent kernel's blocks.
    std::optional<ArrayRef<int32_t>> known = func.getKnownGridSize();
    if (!known || known->size() != 3) {
      std::fprintf(stderr, "nova-gpu-kernels: %s has no known grid\n", name.c_str());
      return 1;
    }
    const SmallVector<int32_t, 3> grid(known->begin(), known->end());
    FailureOr<std::string> ptx = emitPtx(*module, target, error);
    if (failed(ptx)) {
      std::fprintf(stderr, "nova-gpu-kernels: %s\n", error.c_str());
      return 1;
    }
    llvm::raw_fd_ostream file(out + "/" + name + ".ptx", ec);
    if (ec) {
      std::fprintf(stderr, "nova-gpu-kernels: cannot write %s.ptx\n", name.c_str());
      return 1;
    }
    file << *ptx;
    int64_t threads = config.threads;
    manifest << name << "\t" << name << ".ptx\t" << t << "\t" << layout << "\t" << m << "\t" << n << "\t" << k
             << "\t" << grid[0] << "\t" << grid[1] << "\t" << grid[2] << "\t" << threads << "\t" << gpuMatmulSmemBytes(config, p.operand) << "\t"
             << config.describe() << "\t" << tma << "\t" << config.splitK << "\t" << config.clusterM << "\t"
             << (bf16Out ? "bf16" : "f32") << "\n";
    std::fprintf(stderr, "%s: %s\n", name.c_str(), config.describe().c_str());
    if (const char *explain = std::getenv("NOVA_EXPLAIN"); explain && *explain && std::string(explain) != "0")
      for (const std::string &line : config.why)
        std::fprintf(stderr, "  %s\n", line.c_str());
  }
  return 0;
}
