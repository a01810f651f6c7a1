// test_gpu_codegen.cpp - the mma.sync matmul kernel for the configurator's
// own decisions: built, lowered to PTX through the library path
// (PtxEmitter.cpp, what the CUDA target runs) for sm_80, sm_86 and sm_90a,
// and assembled by ptxas when the CUDA toolkit is installed (it is in CI).
// What the kernel computes is the emulator's to check; here: that every
// decision becomes PTX ptxas accepts, with the instructions it must hold.
#include <doctest/doctest.h>

#include "compiler/target/cuda/GpuConfigurator.h"
#include "compiler/target/cuda/MmaMatmulKernel.h"
#include "compiler/target/cuda/ParallelPtx.h"
#include "compiler/target/cuda/WgmmaMatmulKernel.h"
#include "compiler/target/cuda/PtxAssembler.h"
#include "compiler/target/cuda/PtxEmitter.h"
#include "nova/target.hpp"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <regex>
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

/// A context with PTX emission's dialects, and a module holding the
/// gpu.module the kernel builders add to.
struct KernelsModule {
  static DialectRegistry registry() {
    DialectRegistry r;
    registerGpuCodegenDialects(r);
    return r;
  }
  MLIRContext ctx{registry()};
  OwningOpRef<ModuleOp> module = [this] {
    ctx.loadAllAvailableDialects();
    return OwningOpRef<ModuleOp>(ModuleOp::create(UnknownLoc::get(&ctx)));
  }();
  gpu::GPUModuleOp kernels = addKernelsModule(*module);
};

size_t count(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

/// The square mma.sync product the device check's bf16 NN and tf32 NT
/// rows at 4096 are (tf32 NT: both fragments by ldmatrix).
GpuMatmulProblem deviceCheckSquare(GpuOperand op) {
  GpuMatmulProblem p;
  p.m = p.n = p.k = 4096;
  p.operand = op;
  p.rhsTransposed = op == GpuOperand::tf32;
  p.allowWgmma = false;
  return p;
}

/// The mma.sync kernel's PTX for `target`, assembled by `ptxas` when there
/// is one (its registers then), spilling nothing.
std::string mmaSyncPtx(const GpuMatmulProblem &p, const GpuMatmulConfig &config, const ::nova::TargetDesc &target,
                       const std::string &ptxas, const MmaMatmulFaults &faults = {}, int64_t *registers = nullptr) {
  KernelsModule k;
  std::string error;
  REQUIRE_MESSAGE(succeeded(buildMmaSyncMatmulKernel(k.kernels, "matmul", p, config, error, faults)), error);
  FailureOr<std::string> text = emitPtx(*k.module, target, error);
  REQUIRE_MESSAGE(succeeded(text), error);
  if (!ptxas.empty()) {
    FailureOr<Cubin> cubin = assemblePtx(ptxas, *text, target.cpu, error);
    REQUIRE_MESSAGE(succeeded(cubin), error);
    CHECK(cubin->kernels[0].spillStoreBytes == 0);
    if (registers)
      *registers = cubin->kernels[0].registers;
  }
  return *text;
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
    KernelsModule k;
    OwningOpRef<ModuleOp> &module = k.module;
    gpu::GPUModuleOp kernels = k.kernels;
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
    // One wait and one barrier a slab: slab kt has landed when S - 2 groups
    // are pending, and the barrier also ends the reads of the stage refilled
    // after it.
    CHECK(count(*ptx, "cp.async.wait_group " + std::to_string(config.stages - 2) + ";") == 1);
    CHECK(count(*ptx, "bar.sync") == 1);
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

TEST_CASE("CUDA codegen: the configurator's 3xtf32 mma.sync decisions fit their registers: ptxas spills nothing") {
  // Each fragment held three times (as loaded, its big and its small half):
  // the configurator's register estimate keeps out the 64 x 64 warp tiles
  // that ptxas (13.0) gave 255 registers and 12 to 48 bytes of spills.
  const std::string ptxas = ptxasPath();
  if (ptxas.empty()) {
    MESSAGE("no ptxas: nothing to check");
    return;
  }
  struct Case {
    const char *target;
    int64_t m, n, k;
    bool lhsTransposed, rhsTransposed;
  };
  for (Case c : {Case{"sm_80", 4096, 4096, 4096, false, false}, Case{"sm_80", 768, 3072, 8192, true, false},
                 Case{"sm_80", 8192, 3072, 768, false, false}, Case{"sm_86", 2048, 2048, 512, false, true},
                 Case{"sm_90a", 4096, 4096, 4096, false, false}, Case{"sm_90a", 2048, 2048, 512, false, false}}) {
    ::nova::TargetDesc target = ::nova::named_target(c.target);
    GpuMatmulProblem p;
    p.m = c.m;
    p.n = c.n;
    p.k = c.k;
    p.operand = GpuOperand::tf32x3;
    p.lhsTransposed = c.lhsTransposed;
    p.rhsTransposed = c.rhsTransposed;
    p.allowWgmma = false;
    GpuMatmulConfig config = configureGpuMatmul(p, target);
    CAPTURE(c.target);
    CAPTURE(config.describe());
    REQUIRE(config.kind == GpuMmaKind::mma_sync);
    KernelsModule k;
    std::string error;
    REQUIRE_MESSAGE(succeeded(buildMmaSyncMatmulKernel(k.kernels, "matmul", p, config, error)), error);
    FailureOr<std::string> ptx = emitPtx(*k.module, target, error);
    REQUIRE_MESSAGE(succeeded(ptx), error);
    FailureOr<Cubin> cubin = assemblePtx(ptxas, *ptx, target.cpu, error);
    REQUIRE_MESSAGE(succeeded(cubin), error);
    REQUIRE(cubin->kernels.size() == 1);
    const PtxasKernelInfo &info = cubin->kernels[0];
    MESSAGE(std::string(c.target), " 3xtf32 ", c.m, "x", c.n, "x", c.k, ": ", info.registers, " registers (estimate ",
            config.registersPerThread, "), spills ", info.spillStoreBytes, " / ", info.spillLoadBytes, " bytes");
    CHECK(info.spillStoreBytes == 0);
    CHECK(info.spillLoadBytes == 0);
  }
}

TEST_CASE("CUDA codegen: the mma.sync timing probes keep the kernel's MMAs and leave out its loads, in PTX ptxas "
          "accepts") {
  // bench/device/prepare.sh's :probeshared and :probemma rows (sm_90a,
  // bf16 NN and tf32 NT at 4096): what the device times of them must be
  // what is left in the PTX.
  const std::string ptxas = ptxasPath();
  ::nova::TargetDesc target = ::nova::named_target("sm_90a");
  for (GpuOperand op : {GpuOperand::bf16, GpuOperand::tf32}) {
    const GpuMatmulProblem p = deviceCheckSquare(op);
    const GpuMatmulConfig config = configureGpuMatmul(p, target);
    CAPTURE(config.describe());
    REQUIRE(config.kind == GpuMmaKind::mma_sync);
    std::map<MmaSyncProbe, std::string> ptx;
    for (MmaSyncProbe probe : {MmaSyncProbe::none, MmaSyncProbe::sharedOnly, MmaSyncProbe::mmaOnly}) {
      MmaMatmulFaults faults;
      faults.probe = probe;
      int64_t registers = 0;
      ptx[probe] = mmaSyncPtx(p, config, target, ptxas, faults, &registers);
      MESSAGE(std::string(nameOf(op)), " probe ", int(probe), ": ", registers, " registers");
    }
    const std::string &whole = ptx[MmaSyncProbe::none], &shared = ptx[MmaSyncProbe::sharedOnly],
                      &mmas = ptx[MmaSyncProbe::mmaOnly];
    const int64_t S = config.stages, steps = config.blockK / config.mmaK;
    // One slab's MMAs in the loop, in each.
    const size_t slabMmas = size_t(steps * (config.warpM / 16) * (config.warpN / 8));
    for (const std::string *text : {&whole, &shared, &mmas})
      CHECK(count(*text, "mma.sync.aligned") == slabMmas);
    // Copies: the kernel's prologue (S - 1 slabs) and a refill a slab; the
    // probes' the prologue's alone.
    CHECK(count(whole, "cp.async.cg.shared.global") * size_t(S - 1) ==
          count(shared, "cp.async.cg.shared.global") * size_t(S));
    CHECK(count(mmas, "cp.async.cg.shared.global") == count(shared, "cp.async.cg.shared.global"));
    // Fragment loads: every k step's in the kernel and sharedOnly, one's in mmaOnly.
    CHECK(count(whole, "ldmatrix") > 0);
    CHECK(count(shared, "ldmatrix") == count(whole, "ldmatrix"));
    CHECK(count(mmas, "ldmatrix") * size_t(steps) == count(whole, "ldmatrix"));
    // A barrier a slab in the loop, and in mmaOnly the one before it.
    CHECK(count(shared, "bar.sync") == count(whole, "bar.sync"));
    CHECK(count(mmas, "bar.sync") == 1);
  }
}

TEST_CASE("CUDA codegen: the interleaved mma.sync refill issues each k step's copies after its fragment loads") {
  // GpuMatmulConfig::interleaveCopies (the device check's :interleave):
  // in the loop, after the slab's barrier, the kernel issues every copy of
  // the refill before its first ldmatrix; interleaved, each k step's
  // ldmatrix come first, then its share of the copies, then its MMAs.
  const std::string ptxas = ptxasPath();
  for (const char *name : {"sm_80", "sm_90a"}) {
    ::nova::TargetDesc target = ::nova::named_target(name);
    for (GpuOperand op : {GpuOperand::bf16, GpuOperand::tf32}) {
      GpuMatmulProblem p = deviceCheckSquare(op);
      std::string loops[2];
      for (bool interleave : {false, true}) {
        p.interleaveCopies = interleave;
        const GpuMatmulConfig config = configureGpuMatmul(p, target);
        CAPTURE(config.describe());
        REQUIRE(config.interleaveCopies == interleave);
        const std::string ptx = mmaSyncPtx(p, config, target, ptxas);
        // The loop: from its barrier to its branch back (whole tiles: the
        // one branch).
        const size_t bar = ptx.find("bar.sync"), back = ptx.find(" bra", bar);
        REQUIRE(bar != std::string::npos);
        REQUIRE(back != std::string::npos);
        loops[interleave] = ptx.substr(bar, back - bar);
      }
      for (bool interleave : {false, true}) {
        const std::string &loop = loops[interleave];
        CAPTURE(interleave);
        const size_t firstCopy = loop.find("cp.async.cg.shared.global"), firstLoad = loop.find("ldmatrix"),
                     firstMma = loop.find("mma.sync");
        REQUIRE(firstCopy != std::string::npos);
        REQUIRE(firstLoad != std::string::npos);
        REQUIRE(firstMma != std::string::npos);
        if (interleave) {
          CHECK(firstLoad < firstCopy);
          CHECK(firstCopy < firstMma);
          // Copies after the first MMA too: the later k steps' shares.
          CHECK(loop.find("cp.async.cg.shared.global", firstMma) != std::string::npos);
        } else {
          CHECK(firstCopy < firstLoad);
          CHECK(loop.find("cp.async.cg.shared.global", firstMma) == std::string::npos);
        }
      }
      CHECK(count(loops[0], "cp.async.cg.shared.global") == count(loops[1], "cp.async.cg.shared.global"));
      CHECK(count(loops[0], "mma.sync") == count(loops[1], "mma.sync"));
    }
  }
}

TEST_CASE("CUDA codegen: C written in bf16 (bf16ResultEpilogue): a cvt.rn.bf16x2.f32 and a 4-byte store a pair") {
  // nova-gpu-kernels' :bf16out (the device check's rows timed against
  // cuBLAS's bf16 product), wgmma on sm_90a and mma.sync on sm_80.
  const std::string ptxas = ptxasPath();
  for (const char *name : {"sm_90a", "sm_80"}) {
    ::nova::TargetDesc target = ::nova::named_target(name);
    GpuMatmulProblem p;
    p.m = 8192;
    p.n = 3072;
    p.k = 768;
    p.operand = GpuOperand::bf16;
    const GpuMatmulConfig config = configureGpuMatmul(p, target);
    CAPTURE(config.describe());
    KernelsModule k;
    Region storage;
    const MmaEpilogue epilogue = bf16ResultEpilogue(&k.ctx, storage);
    std::string error;
    const bool built = config.kind == GpuMmaKind::wgmma
                           ? succeeded(buildWgmmaMatmulKernel(k.kernels, "matmul", p, config, error, {}, epilogue))
                           : succeeded(buildMmaSyncMatmulKernel(k.kernels, "matmul", p, config, error, {}, epilogue));
    REQUIRE_MESSAGE(built, error);
    CHECK((config.kind == GpuMmaKind::wgmma) == (std::string(name) == "sm_90a"));
    FailureOr<std::string> ptx = emitPtx(*k.module, target, error);
    REQUIRE_MESSAGE(succeeded(ptx), error);
    CHECK(count(*ptx, "cvt.rn.bf16x2.f32") > 0);
    CHECK(count(*ptx, "st.global.b32") == count(*ptx, "cvt.rn.bf16x2.f32"));
    CHECK(count(*ptx, "st.global.v2.f32") == 0);
    if (!ptxas.empty()) {
      FailureOr<Cubin> cubin = assemblePtx(ptxas, *ptx, target.cpu, error);
      REQUIRE_MESSAGE(succeeded(cubin), error);
      CHECK(cubin->kernels[0].spillStoreBytes == 0);
    }
  }
}

TEST_CASE("CUDA codegen: wgmma kernels with setmaxnreg: ptxas honours it (all a thread may have at entry) and "
          "spills nothing where the consumers need more than the block's even share") {
  // Two consumer warpgroups take 232 registers a thread by setmaxnreg where
  // the block is alone on its SM. ptxas 13.0 ignored setmaxnreg (info
  // C7508, "unable to determine register count at entry") in a split-K
  // kernel launched by .maxntid alone, and without setmaxnreg the tf32
  // ping-pong kernel of 64 x 192 spilled 116 bytes; the tf32 NN product now
  // takes 128 x 256 blocks (200 registers a consumer by the estimate).
  // And in clusters of 2 along M (B multicast, remote releases).
  const std::string ptxas = ptxasPath();
  if (ptxas.empty()) {
    MESSAGE("no ptxas: nothing to check");
    return;
  }
  struct Case {
    GpuOperand operand;
    int64_t m, n, k;
    bool lhsTransposed, rhsTransposed, pingPong;
    int64_t clusterM = 1;
  };
  const ::nova::TargetDesc target = ::nova::named_target("sm_90a");
  for (Case c : {Case{GpuOperand::tf32, 4096, 4096, 4096, false, false, false},
                 Case{GpuOperand::tf32, 4096, 4096, 4096, false, false, true},
                 Case{GpuOperand::bf16, 4096, 4096, 4096, false, false, false},
                 Case{GpuOperand::tf32x3, 768, 3072, 8192, true, false, false},
                 Case{GpuOperand::tf32x3, 8192, 3072, 768, false, false, false},
                 Case{GpuOperand::bf16, 4096, 4096, 4096, false, false, false, 2},
                 Case{GpuOperand::tf32x3, 8192, 3072, 768, false, false, false, 2},
                 Case{GpuOperand::bf16, 8192, 3072, 768, false, false, true, 2}}) {
    GpuMatmulProblem p;
    p.m = c.m;
    p.n = c.n;
    p.k = c.k;
    p.operand = c.operand;
    p.lhsTransposed = c.lhsTransposed;
    p.rhsTransposed = c.rhsTransposed;
    p.pingPong = c.pingPong;
    p.clusterM = c.clusterM;
    GpuMatmulConfig config = configureGpuMatmul(p, target);
    CAPTURE(config.describe());
    REQUIRE(config.kind == GpuMmaKind::wgmma);
    REQUIRE(config.warpsM == 2);
    REQUIRE(config.consumerRegisters == 232);
    KernelsModule k;
    std::string error;
    REQUIRE_MESSAGE(succeeded(buildWgmmaMatmulKernel(k.kernels, "matmul", p, config, error)), error);
    FailureOr<std::string> ptx = emitPtx(*k.module, target, error);
    REQUIRE_MESSAGE(succeeded(ptx), error);
    CHECK(count(*ptx, "setmaxnreg.dec.sync.aligned.u32 40;") == 1);
    CHECK(count(*ptx, "setmaxnreg.inc.sync.aligned.u32 232;") == 1);
    CHECK(count(*ptx, ".minnctapersm 1") == 1);
    if (c.clusterM > 1) {
      CHECK(config.clusterM == c.clusterM);
      CHECK(count(*ptx, ".multicast::cluster") >= 1);
      CHECK(count(*ptx, "mapa.shared::cluster.u32") >= 2);
      CHECK(count(*ptx, "barrier.cluster.wait.aligned;") == 2);
    }
    FailureOr<Cubin> cubin = assemblePtx(ptxas, *ptx, target.cpu, error);
    REQUIRE_MESSAGE(succeeded(cubin), error);
    REQUIRE(cubin->kernels.size() == 1);
    const PtxasKernelInfo &info = cubin->kernels[0];
    std::string notes;
    for (const std::string &note : cubin->performanceNotes)
      notes += note + "; ";
    MESSAGE(std::string(nameOf(c.operand)), std::string(c.pingPong ? " ping-pong " : c.clusterM > 1 ? " cluster " : " "),
            c.m, "x", c.n, "x", c.k, ": ", info.registers,
            " registers at entry (consumer estimate ", config.registersPerThread, "), spills ", info.spillStoreBytes,
            " / ", info.spillLoadBytes, " bytes", notes.empty() ? "" : ", ptxas: " + notes);
    CHECK(cubin->performanceNotes.empty());
    CHECK(info.registers == int(launchedRegistersPerThread(config.threads)));
    CHECK(info.spillStoreBytes == 0);
    CHECK(info.spillLoadBytes == 0);
  }
}

TEST_CASE("CUDA codegen: a multiply feeding an add or a subtract is one fma, as nvcc's default -fmad=true makes it, "
          "and a lone multiply or add stays rounded alone") {
  KernelsModule k;
  const char *source = R"mlir(
    gpu.module @nova_kernels {
      gpu.func @muladd(%a: memref<4xf32>, %b: memref<4xf32>, %c: memref<4xf32>, %d: memref<4xf32>) kernel {
        %i = gpu.thread_id x
        %x = memref.load %a[%i] : memref<4xf32>
        %y = memref.load %b[%i] : memref<4xf32>
        %z = memref.load %c[%i] : memref<4xf32>
        %p = arith.mulf %x, %y : f32
        %s = arith.addf %p, %z : f32
        %q = arith.mulf %s, %z : f32
        %t = arith.subf %q, %x : f32
        %u = arith.addf %t, %y : f32
        memref.store %u, %d[%i] : memref<4xf32>
        gpu.return
      }
    })mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &k.ctx);
  REQUIRE(module);
  std::string error;
  FailureOr<std::string> ptx = emitPtx(*module, ::nova::named_target("sm_80"), error);
  REQUIRE_MESSAGE(succeeded(ptx), error);
  CAPTURE(*ptx);
  // x y + z and s z - x fuse; the last add has no multiply to take.
  CHECK(count(*ptx, "fma.rn.f32") == 2);
  CHECK(count(*ptx, "mul.rn.f32") == 0);
  CHECK(count(*ptx, "add.rn.f32") == 1);
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

namespace {

/// Each entry's text in `ptx`, by name, with the names LLVM numbers per
/// module made one: shared variables (__mbarrier, __mbarrier_12) and branch
/// labels ($L__BB3_1: function 3's block 1; labels are the function's own).
std::map<std::string, std::string> entriesOf(const std::string &ptx) {
  std::map<std::string, std::string> entries;
  const std::regex numbered("__[A-Za-z][A-Za-z_]*?(_[0-9]+)?\\b"), label("\\$L__BB[0-9]+_");
  std::string name, body;
  int depth = 0;
  bool inside = false, opened = false;
  std::istringstream in(ptx);
  for (std::string line; std::getline(in, line);) {
    if (!inside && line.rfind(".visible .entry ", 0) == 0) {
      name = line.substr(16, line.find('(') - 16);
      inside = true;
      opened = false;
      depth = 0;
      body.clear();
    }
    if (!inside)
      continue;
    body += std::regex_replace(std::regex_replace(line, numbered, "__N"), label, "$L__BB_") + "\n";
    std::string code = line.substr(0, line.find("//"));
    for (char ch : code)
      depth += ch == '{' ? 1 : ch == '}' ? -1 : 0;
    opened = opened || depth > 0;
    if (opened && depth == 0) {
      entries[name] = body;
      inside = false;
    }
  }
  return entries;
}

} // namespace

TEST_CASE("CUDA codegen: a step's kernels emitted in shards on several threads give the one module's PTX, each entry as emitted alone, the same on any number of threads, and ptxas accepts it") {
  // Nine kernels on sm_90a: mma.sync of several shapes and TMA + wgmma
  // (whose inline asm closes braces in the first column).
  ::nova::TargetDesc target = ::nova::named_target("sm_90a");
  KernelsModule k;
  OwningOpRef<ModuleOp> &module = k.module;
  gpu::GPUModuleOp kernels = k.kernels;
  std::vector<std::string> names;
  for (int i = 0; i < 9; ++i) {
    GpuMatmulProblem p;
    p.m = 256 * (1 + i % 3);
    p.n = 128 * (1 + i % 2);
    p.k = 256;
    p.operand = i % 2 ? GpuOperand::f16 : GpuOperand::bf16;
    p.allowWgmma = i % 3 == 0;
    p.allowSplitK = false;
    GpuMatmulConfig config = configureGpuMatmul(p, target);
    std::string name = "nova_k" + std::to_string(i), error;
    CAPTURE(config.describe());
    if (config.kind == GpuMmaKind::wgmma)
      REQUIRE_MESSAGE(succeeded(buildWgmmaMatmulKernel(kernels, name, p, config, error)), error);
    else
      REQUIRE_MESSAGE(succeeded(buildMmaSyncMatmulKernel(kernels, name, p, config, error)), error);
    names.push_back(name);
  }
  REQUIRE(succeeded(verify(*module)));
  OwningOpRef<ModuleOp> alone = cast<ModuleOp>((*module)->clone());
  std::string error;
  FailureOr<std::string> serial = emitPtx(*alone, target, error);
  REQUIRE_MESSAGE(succeeded(serial), error);
  FailureOr<std::string> parallel = emitPtxInParallel(*module, target, /*threads=*/2, error, /*kernelsPerShard=*/4);
  REQUIRE_MESSAGE(succeeded(parallel), error);
  // Three shards of up to 4 kernels on two threads, merged; on three
  // threads (the module is left as it was) the same text.
  CHECK(parallel->find("merged from 3 modules") != std::string::npos);
  FailureOr<std::string> three = emitPtxInParallel(*module, target, /*threads=*/3, error, /*kernelsPerShard=*/4);
  REQUIRE_MESSAGE(succeeded(three), error);
  CHECK(*three == *parallel);
  CHECK(count(*parallel, "wgmma.mma_async") == count(*serial, "wgmma.mma_async"));
  CHECK(count(*parallel, "wgmma.mma_async") > 0);
  CHECK(count(*parallel, ".b8 __dynamic_shmem__0;") == 1);
  std::map<std::string, std::string> want = entriesOf(*serial), got = entriesOf(*parallel);
  REQUIRE(want.size() == names.size());
  for (const std::string &name : names) {
    CAPTURE(name);
    CHECK(got[name] == want[name]);
  }
  // In the module's order.
  size_t last = 0;
  for (const std::string &name : names) {
    size_t at = parallel->find(".visible .entry " + name + "(");
    REQUIRE(at != std::string::npos);
    CHECK(at > last);
    last = at;
  }
  const std::string ptxas = ptxasPath();
  if (ptxas.empty())
    return;
  std::string assembleError;
  FailureOr<Cubin> cubin = assemblePtx(ptxas, *parallel, target.cpu, assembleError);
  INFO(assembleError);
  REQUIRE(succeeded(cubin));
  CHECK(cubin->kernels.size() == names.size());
}

TEST_CASE("CUDA codegen: PTX shards with module-scope text the merge does not know, or headers that differ, are not merged") {
  const std::string header = ".version 8.0\n.target sm_90a\n.address_size 64\n\n";
  const std::string a = header + ".visible .entry nova_a()\n{\n\tret;\n}\n";
  const std::string b = header + ".visible .entry nova_b()\n{\n\tret;\n}\n";
  std::optional<std::string> merged = mergePtxShards({a, b}, {"nova_b", "nova_a"});
  REQUIRE(merged);
  CHECK(merged->find("nova_b") < merged->find("nova_a"));
  // A global each shard defines: two definitions of one symbol.
  const std::string global = ".global .align 4 .b8 __unnamed_1[4];\n";
  CHECK(!mergePtxShards({header + global + ".visible .entry nova_a()\n{\n\tret;\n}\n", b}, {"nova_a", "nova_b"}));
  // Another PTX version.
  std::string other = b;
  other.replace(other.find("8.0"), 3, "7.6");
  CHECK(!mergePtxShards({a, other}, {"nova_a", "nova_b"}));
  // An entry missing from the list, or listed and absent.
  CHECK(!mergePtxShards({a, b}, {"nova_a"}));
  CHECK(!mergePtxShards({a}, {"nova_a", "nova_b"}));
}
