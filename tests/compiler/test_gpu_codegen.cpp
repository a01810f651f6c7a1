// test_gpu_codegen.cpp - the mma.sync matmul kernel for the configurator's
// own decisions: built, lowered to PTX through the library path
// (PtxEmitter.cpp, what the CUDA target runs) for sm_80, sm_86 and sm_90a,
// and assembled by ptxas when the CUDA toolkit is installed (it is in CI).
// What the kernel computes is the emulator's to check; here: that every
// decision becomes PTX ptxas accepts, with the instructions it must hold.
#include <doctest/doctest.h>

#include "compiler/target/cuda/GpuConfigurator.h"
#include "compiler/target/cuda/MmaMatmulKernel.h"
#include "compiler/target/cuda/PtxAssembler.h"
#include "compiler/target/cuda/PtxEmitter.h"
#include "nova/target.hpp"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir;
using namespace mlir::nova;

namespace {

std::string ptxasPath() {
  for (const char *p : {"/usr/local/cuda/bin/ptxas"})
    if (access(p, X_OK) == 0)
      return p;
  return "";
}

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

} // namespace

TEST_CASE("CUDA codegen: the configurator's matmul decisions become PTX that ptxas accepts") {
  const std::string ptxas = ptxasPath();
  if (ptxas.empty())
    MESSAGE("no ptxas: PTX is produced but not assembled");
  struct Case {
    const char *target;
    GpuOperand operand;
    int64_t m, n, k;
  };
  int assembled = 0;
  for (Case c : {Case{"sm_80", GpuOperand::f16, 512, 512, 256}, Case{"sm_80", GpuOperand::bf16, 1024, 1024, 512},
                 Case{"sm_80", GpuOperand::tf32, 512, 1024, 256}, Case{"sm_86", GpuOperand::bf16, 512, 512, 512},
                 Case{"sm_86", GpuOperand::tf32, 256, 256, 256}, Case{"sm_90a", GpuOperand::bf16, 1024, 1024, 1024},
                 Case{"sm_90a", GpuOperand::f16, 256, 512, 128}, Case{"sm_90a", GpuOperand::tf32, 512, 512, 512}}) {
    CAPTURE(c.target);
    CAPTURE(nameOf(c.operand));
    ::nova::TargetDesc target = ::nova::named_target(c.target);
    GpuMatmulProblem p;
    p.m = c.m;
    p.n = c.n;
    p.k = c.k;
    p.operand = c.operand;
    p.allowWgmma = false; // the wgmma kernel is not generated yet
    p.allowSplitK = false;
    GpuMatmulConfig config = configureGpuMatmul(p, target);
    CAPTURE(config.describe());
    DialectRegistry registry;
    registerGpuCodegenDialects(registry);
    MLIRContext ctx(registry);
    ctx.loadAllAvailableDialects();
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&ctx));
    gpu::GPUModuleOp kernels = addKernelsModule(*module);
    std::string error;
    REQUIRE_MESSAGE(succeeded(buildMmaSyncMatmulKernel(kernels, "matmul", p, config, error)), error);
    REQUIRE(succeeded(verify(*module)));
    FailureOr<std::string> ptx = emitPtx(*module, target, error);
    REQUIRE_MESSAGE(succeeded(ptx), error);
    CHECK(ptx->find(".target " + target.cpu) != std::string::npos);
    const std::string mma = c.operand == GpuOperand::tf32 ? "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
                            : c.operand == GpuOperand::bf16 ? "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
                                                            : "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
    // One MMA per 16 x 8 tile of each warp per k step of the slab.
    CHECK(count(*ptx, mma) == size_t(config.warpM / 16 * config.warpN / 8 * config.blockK / config.mmaK));
    CHECK(count(*ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16") >= 1);
    CHECK(count(*ptx, "cp.async.cg.shared.global") >= 2);
    CHECK(count(*ptx, "cp.async.wait_group " + std::to_string(config.stages - 1) + ";") == 1);
    // N is even: each lane's column pair is one 8-byte store.
    CHECK(count(*ptx, "st.global.v2.f32") == size_t(2 * config.warpM / 16 * config.warpN / 8));
    CHECK(count(*ptx, "st.global.f32") == 0);
    if (ptxas.empty())
      continue;
    char path[] = "/tmp/nova-ptx-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    { std::ofstream(path) << *ptx; }
    std::string command = ptxas + " -arch=" + target.cpu + " " + path + " -o " + path + ".cubin 2>&1";
    FILE *pipe = popen(command.c_str(), "r");
    REQUIRE(pipe);
    std::string output;
    char buf[256];
    while (fgets(buf, sizeof buf, pipe))
      output += buf;
    int status = pclose(pipe);
    CAPTURE(output);
    CHECK(status == 0);
    std::remove(path);
    std::remove((std::string(path) + ".cubin").c_str());
    ++assembled;
  }
  MESSAGE(assembled << " kernels assembled by ptxas");
}

TEST_CASE("CUDA codegen: ptxas compiles a step's kernels on every CPU (--split-compile 0), and an older ptxas that does not know the option assembles without it") {
  const std::string ptxas = ptxasPath();
  if (ptxas.empty()) {
    MESSAGE("no ptxas: not checked");
    return;
  }
  // An empty kernel, and a ptxas that refuses the option as ptxas refuses
  // any it does not know, else runs the real one; each call logged.
  const std::string ptx = ".version 7.6\n.target sm_80\n.address_size 64\n.visible .entry nova_empty()\n{\n  ret;\n}\n";
  char dir[] = "/tmp/nova-old-ptxas-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string fake = std::string(dir) + "/ptxas", calls = std::string(dir) + "/calls";
  {
    std::ofstream script(fake);
    script << "#!/bin/sh\necho \"$*\" >> " << calls << "\n"
           << "case \" $* \" in *' --split-compile '*) echo \"ptxas fatal   : Unknown option '-split-compile'\" >&2; "
           << "exit 1;; esac\nexec " << ptxas << " \"$@\"\n";
  }
  REQUIRE(chmod(fake.c_str(), 0755) == 0);
  for (const std::string &tool : {ptxas, fake}) {
    CAPTURE(tool);
    std::string error;
    FailureOr<Cubin> cubin = assemblePtx(tool, ptx, "sm_80", error);
    INFO(error);
    REQUIRE(succeeded(cubin));
    REQUIRE(cubin->kernels.size() == 1);
    CHECK(cubin->kernels[0].name == "nova_empty");
  }
  std::ifstream log(calls);
  std::string first, second, third;
  std::getline(log, first);
  std::getline(log, second);
  CHECK(first.find("--split-compile 0") != std::string::npos);
  CHECK(second.find("--split-compile") == std::string::npos);
  CHECK(!std::getline(log, third));
  std::remove(calls.c_str());
  std::remove(fake.c_str());
  rmdir(dir);
}
