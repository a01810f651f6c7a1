//===- nova-gpu-kernels.cpp - PTX of GPU matmul kernels, for the device check -===//
//
//   nova-gpu-kernels TARGET OUT_DIR CASE...
//     CASE = type:layout:MxNxK, e.g. bf16:NN:4096x4096x4096 (type f16, bf16
//     or tf32; layout NN, NT, TN or TT: whether A, B are stored transposed)
//
// For each case: the configurator's decision for TARGET (mma.sync: the
// kernel the generator writes), the kernel, its PTX (OUT_DIR/<name>.ptx),
// and a line of OUT_DIR/manifest.tsv saying how to launch it:
//   name ptx type layout m n k grid_x grid_y grid_z block_x shared_bytes config
// bench/device/matmul_check.py loads the PTX through the CUDA driver on a
// machine without LLVM or MLIR and compares the kernel with cuBLAS.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cuda/GpuConfigurator.h"
#include "compiler/target/cuda/MmaMatmulKernel.h"
#include "compiler/target/cuda/PtxEmitter.h"
#include "nova/target.hpp"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdio>
#include <string>

using namespace mlir;
using namespace mlir::nova;

namespace {

int usage() {
  std::fprintf(stderr, "usage: nova-gpu-kernels TARGET OUT_DIR type:layout:MxNxK...\n"
                       "  type f16, bf16 or tf32; layout NN, NT, TN or TT\n");
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
    std::string spec = argv[i];
    char type[8] = {}, layout[3] = {};
    long long m = 0, n = 0, k = 0;
    if (std::sscanf(spec.c_str(), "%7[a-z0-9]:%2[NT]:%lldx%lldx%lld", type, layout, &m, &n, &k) != 5 || m < 1 ||
        n < 1 || k < 1) {
      std::fprintf(stderr, "nova-gpu-kernels: '%s' is not type:layout:MxNxK\n", spec.c_str());
      return 2;
    }
    GpuMatmulProblem p;
    p.m = m;
    p.n = n;
    p.k = k;
    std::string t = type;
    if (t != "f16" && t != "bf16" && t != "tf32") {
      std::fprintf(stderr, "nova-gpu-kernels: type '%s' is not f16, bf16 or tf32\n", type);
      return 2;
    }
    p.operand = t == "f16" ? GpuOperand::f16 : t == "bf16" ? GpuOperand::bf16 : GpuOperand::tf32;
    p.lhsTransposed = layout[0] == 'T';
    p.rhsTransposed = layout[1] == 'T';
    p.allowWgmma = false; // the generator writes mma.sync kernels only
    p.allowSplitK = false;
    GpuMatmulConfig config = configureGpuMatmul(p, target);
    std::string name = t + "_" + layout + "_" + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&ctx));
    gpu::GPUModuleOp kernels = addKernelsModule(*module);
    std::string error;
    if (failed(buildMmaSyncMatmulKernel(kernels, name, p, config, error)) || failed(verify(*module))) {
      std::fprintf(stderr, "nova-gpu-kernels: %s\n", error.empty() ? "the kernel does not verify" : error.c_str());
      return 1;
    }
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
    int64_t threads = 32 * config.warpsM * config.warpsN;
    manifest << name << "\t" << name << ".ptx\t" << t << "\t" << layout << "\t" << m << "\t" << n << "\t" << k
             << "\t" << (n + config.blockN - 1) / config.blockN << "\t" << (m + config.blockM - 1) / config.blockM
             << "\t1\t" << threads << "\t" << gpuMatmulSmemBytes(config, p.operand) << "\t" << config.describe()
             << "\n";
    std::fprintf(stderr, "%s: %s\n", name.c_str(), config.describe().c_str());
  }
  return 0;
}
