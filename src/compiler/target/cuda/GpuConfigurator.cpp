//===- GpuConfigurator.cpp - lowering decisions for GPU matmuls --*- C++ -*-===//
//
// The instruction follows from the operand type and the target's features:
// 16-bit operands and tf32 run on the tensor cores (wgmma on sm_90a when the
// layout allows it: tf32 needs both operands K-major; mma.sync otherwise:
// m16n8k16 for f16/bf16, m16n8k8 for tf32), f32 without tf32 and f64 on the
// CUDA cores (simt). How each operand reaches the warps follows from its
// layout and width (notes/ptx-semantics.md §4): ldmatrix for K-contiguous
// tiles, ldmatrix.trans for M/N-contiguous 16-bit tiles, scalar shared loads
// for M/N-contiguous 32-bit tiles (there is no b32 transposing ldmatrix);
// wgmma reads shared memory through descriptors. f32 operands may also run
// as tf32x3 (GpuConfigurator.h), at a third of the tf32 rate: by wgmma in
// any layout where the target has it (each slab converted in shared
// memory, which the model counts as shared-memory traffic), else by
// mma.sync; where the problem allows it, f32 FMAs and tf32x3 are both
// configured and the faster taken.
//
// The K slab makes a K-contiguous shared-memory row 128 bytes when K allows
// (64 bf16, 32 tf32): the full XOR-swizzle span, so every ldmatrix phase is
// conflict-free (ptx-semantics.md §8), the row TMA's 128-byte swizzle and
// wgmma's descriptors expect, and half the barriers per flop of 64 bytes.
//
// Block tile, warp layout, depth and split-K are chosen among a fixed set of
// candidates by an analytic model of the device, every term from a
// TargetDesc field or a named constant below:
//   resources  registers per thread (accumulators + double-buffered
//              fragments + kRegisterOverhead for addresses and loop state;
//              a 64 x 64 f16 warp tile measured 236 with ptxas, the model
//              says 232), shared memory (stages x slab bytes), threads:
//              blocks per SM = the tightest of registers, shared memory,
//              threads and the block limit; a candidate needing more
//              registers than a thread has, or a 2-stage pipeline more
//              shared memory than a block may opt in to, is out.
//   depth      slabs in flight cover kLoadLatencyCycles: stages = 1 +
//              ceil(latency / cycles one slab's multiplies take on the SM),
//              at least 2, at most 8 and what shared memory holds; then up
//              to kFreeStages while a stage more costs no block per SM.
//   time       per wave, each SM runs `resident` blocks' slabs: the larger of
//              the tensor cores' time (flops / the SM's rate x the
//              instruction's efficiency: mma.sync on Hopper reaches about
//              2/3 of the rate wgmma does; x the share of the SM's 4
//              sub-partitions its resident warps keep busy: the simt
//              kernel's need kSimtWarpsPerQuarter warps each; x
//              kMmaSyncLoneBlock for mma.sync at one block an SM where
//              the tiles would give it two), shared memory's (bytes the
//              warps read / kSmemBytesPerClock; the simt kernel's 16-byte
//              reads count every thread's bytes) and, for tf32x3, the
//              integer pipes' splitting its operands into halves, plus
//              filling the pipeline once (a persistent wgmma kernel: once
//              a block, its producer loading the next tile during the
//              epilogue); waves = ceil(tiles / (SMs x blocks per SM)), so a
//              partial last wave costs a whole one (wave quantization). The
//              memory side: the fewest DRAM bytes at the DRAM bandwidth, and
//              every tile's slabs at kL2OverDram times it. Split-K adds its
//              partial sums' traffic and a second launch.
//   choice     the least modelled time; within 1 %, fewer splits, then the
//              least compute time (candidates tied by memory), then the
//              larger block tile, then fewer stages.
//
//===----------------------------------------------------------------------===//

#include "compiler/target/cuda/GpuConfigurator.h"
#include "compiler/dialect/NovaDialect.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <map>

using namespace mlir;
using namespace mlir::nova;

namespace {

/// Global-load latency the pipeline must hide, in SM cycles (an L2 miss on
/// A100/H100 is 400-600 cycles in microbenchmarks, e.g. Jia et al.,
/// "Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking", and
/// its Ampere/Hopper follow-ups; the upper end, so deeper pipelines win ties).
constexpr double kLoadLatencyCycles = 600;
/// Shared-memory bandwidth per SM: 32 banks x 4 bytes a clock.
constexpr double kSmemBytesPerClock = 128;
/// L2 bandwidth as a multiple of DRAM's (A100: ~5 TB/s L2 against 2 TB/s).
constexpr double kL2OverDram = 2.5;
/// Registers beyond accumulators and fragments: addresses, loop counters,
/// pipeline indices.
constexpr int64_t kRegisterOverhead = 40;
/// A wgmma kernel's registers for converting an operand's slabs in shared
/// memory (its chunks in flight, their addresses): ptxas 13.0 (sm_90a) gave
/// the tf32 kernel that transposes B 124 registers at 64 accumulators and
/// 168 at 96 (the block's even share at 384 threads), and spilled with both
/// A and B transposed at 96, and with B at 128. With setmaxnreg's 232 a
/// consumer (consumerRegisters) neither spills: tf32 TN at 4096, both
/// transposed at 128 accumulators (232 by this estimate), and NN, B at 128
/// (200), assemble with no spills.
constexpr int64_t kConvertRegisters = 32;
/// The second launch split-K needs, to sum its partial results.
constexpr double kLaunchSeconds = 3e-6;
/// Warp schedulers (each with its own tensor core) per SM since Volta.
constexpr double kSubPartitions = 4;
/// Warps a sub-partition needs before the simt kernel keeps its FMA pipes
/// busy: one warp's FMAs wait on its shared reads and each slab's barrier.
/// Fitted to the H200 (bench/README.md, 2026-12-04): the kernel's 8x8
/// thread tiles ran a 2048x512x2048 product at one 128-thread block an SM
/// (a warp a quarter) at 22.6 TFLOP/s, 37% of the f32 peak, and, in 4x4
/// tiles of 256-thread blocks (about four warps a quarter), at 19.3 and
/// 26.6 (two kernels of that shape): slower, which the shared term below
/// explains (by the model, not a measurement, shared-bound at half the
/// FMA rate).
constexpr double kSimtWarpsPerQuarter = 2;
/// Stages taken beyond the latency's need when they cost no occupancy.
constexpr int64_t kFreeStages = 4;
/// The mma.sync kernel's share of its rate with one block an SM (where the
/// tiles would give it more): the
/// block's slab barriers leave the SM idle where a second resident block
/// would fill them. On the H200 (bench/README.md, 2026-12-04) 128x128
/// blocks of four 64x64 warps, two an SM, ran tf32 NN 4096 in 0.657 ms
/// and bf16 in 0.369 against 0.704 and 0.394 for 256x128 blocks of eight,
/// one an SM (the model without this share: 19% the other way).
constexpr double kMmaSyncLoneBlock = 0.8;
/// mma.sync's share of the tensor cores' rate on Hopper (wgmma's is 1).
constexpr double kMmaSyncOnHopper = 2.0 / 3.0;
/// tf32x3's split of an f32 into big and small tf32 halves
/// (MatmulKernelParts.h's splitTf32): two integer instructions (big's add
/// and and) and an f32 subtraction an element, the integer ones on
/// a sub-partition's 16 INT32 lanes (A100, H100: a warp's instruction
/// takes two clocks there), which bound it. The mma.sync kernel splits
/// each fragment element it loads, the wgmma kernel's consumers each slab
/// element once.
constexpr double kSplitIntOpsPerElement = 2;
constexpr double kIntLanesPerSubPartition = 16;

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t roundUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }

} // namespace

int64_t mlir::nova::operandBytes(GpuOperand op) {
  switch (op) {
  case GpuOperand::f16:
  case GpuOperand::bf16:
    return 2;
  case GpuOperand::tf32:
  case GpuOperand::f32:
  case GpuOperand::tf32x3:
    return 4;
  case GpuOperand::f64:
    return 8;
  }
  return 4;
}

FragmentLoad mlir::nova::lhsFragmentLoad(GpuOperand op, bool lhsTransposed) {
  bool sixteen = op == GpuOperand::f16 || op == GpuOperand::bf16;
  return !lhsTransposed ? FragmentLoad::ldmatrix : sixteen ? FragmentLoad::ldmatrix_trans : FragmentLoad::scalar;
}

FragmentLoad mlir::nova::rhsFragmentLoad(GpuOperand op, bool rhsTransposed) {
  bool sixteen = op == GpuOperand::f16 || op == GpuOperand::bf16;
  return rhsTransposed ? FragmentLoad::ldmatrix : sixteen ? FragmentLoad::ldmatrix_trans : FragmentLoad::scalar;
}

namespace {

/// Flops per SM clock for this operand's multiplies on `t` (peak rate).
double flopsPerClock(GpuOperand op, const ::nova::TargetDesc &t) {
  double smClock = double(std::max(1, t.multiprocessors)) * std::max(1, t.clock_mhz) * 1e6;
  switch (op) {
  case GpuOperand::f16:
  case GpuOperand::bf16:
    return double(t.peak_gflops_bf16) * 1e9 / smClock;
  case GpuOperand::tf32:
    return double(t.peak_gflops_tf32) * 1e9 / smClock;
  case GpuOperand::tf32x3:
    // Three tf32 MMAs a product.
    return double(t.peak_gflops_tf32) * 1e9 / smClock / 3;
  case GpuOperand::f32:
    return double(t.peak_gflops_f32) * 1e9 / smClock;
  case GpuOperand::f64:
    // Data-center parts run f64 at half the f32 rate, the others at 1/64.
    return double(t.peak_gflops_f32) * 1e9 / smClock /
           (t.compute_capability == 80 || t.compute_capability >= 90 ? 2 : 64);
  }
  return 1;
}

/// The widest copy (16, 8 or 4 bytes) that divides both the global row and
/// the shared-memory row; the element size when none does.
int64_t copyBytes(int64_t globalRowBytes, int64_t smemRowBytes, int64_t elementBytes) {
  for (int64_t b : {16, 8, 4})
    if (globalRowBytes % b == 0 && smemRowBytes % b == 0)
      return b;
  return elementBytes;
}

struct Scored {
  GpuMatmulConfig config;
  double seconds = 0;
  /// The compute side alone (seconds is the larger of it and memory's).
  double compute = 0;
};

std::string fmtSeconds(double s) {
  if (s < 1e-3)
    return llvm::formatv("{0:f2} us", s * 1e6).str();
  return llvm::formatv("{0:f3} ms", s * 1e3).str();
}

} // namespace

const char *mlir::nova::nameOf(GpuOperand operand) {
  switch (operand) {
  case GpuOperand::f16:
    return "f16";
  case GpuOperand::bf16:
    return "bf16";
  case GpuOperand::tf32:
    return "tf32";
  case GpuOperand::tf32x3:
    return "3xtf32";
  case GpuOperand::f32:
    return "f32";
  case GpuOperand::f64:
    return "f64";
  }
  return "?";
}

const char *mlir::nova::nameOf(GpuMmaKind kind) {
  switch (kind) {
  case GpuMmaKind::mma_sync:
    return "mma_sync_matmul";
  case GpuMmaKind::wgmma:
    return "wgmma_matmul";
  case GpuMmaKind::simt:
    return "simt_matmul";
  }
  return "?";
}

const char *mlir::nova::nameOf(FragmentLoad load) {
  switch (load) {
  case FragmentLoad::ldmatrix:
    return "ldmatrix";
  case FragmentLoad::ldmatrix_trans:
    return "ldmatrix.trans";
  case FragmentLoad::scalar:
    return "scalar";
  case FragmentLoad::descriptor:
    return "descriptor";
  }
  return "?";
}

int64_t mlir::nova::swizzleBytesForRow(int64_t rowBytes) {
  for (int64_t s : {128, 64, 32})
    if (rowBytes % s == 0)
      return s;
  return 0;
}

int64_t mlir::nova::gpuMatmulSmemBytes(const GpuMatmulConfig &c, GpuOperand operand) {
  int64_t stage = (c.blockM + c.blockN) * c.blockK * operandBytes(operand);
  // wgmma/TMA: two 8-byte mbarriers per stage (full, empty), aligned tiles
  // (1024 bytes).
  // (In a cluster the `empty` ones lie among the tiles: the spare 8 a stage
  // holds them.)
  int64_t extra = c.kind == GpuMmaKind::wgmma ? 1024 + 16 * c.stages : 0;
  // tf32x3 on wgmma: two sets of converted tiles (big and small halves);
  // tf32: two sets of the converted operands' tiles.
  if (c.kind == GpuMmaKind::wgmma && operand == GpuOperand::tf32x3)
    extra += 4 * stage;
  else if (c.kind == GpuMmaKind::wgmma && operand == GpuOperand::tf32)
    extra += 2 * ((c.convertA ? c.blockM : 0) + (c.convertB ? c.blockN : 0)) * c.blockK * 4;
  return c.stages * stage + extra;
}

bool GpuMatmulConfig::fits(const ::nova::TargetDesc &t, std::string *whyNot) const {
  auto no = [&](std::string s) {
    if (whyNot)
      *whyNot = std::move(s);
    return false;
  };
  if (threads < 1 || threads > t.max_threads_per_block)
    return no(llvm::formatv("{0} threads (a block may have {1})", threads, t.max_threads_per_block).str());
  if (registersPerThread > t.registers_per_thread)
    return no(llvm::formatv("{0} registers a thread (at most {1})", registersPerThread,
                            t.registers_per_thread).str());
  if (consumerRegisters > 0) {
    if (registersPerThread > consumerRegisters)
      return no(llvm::formatv("{0} registers a consumer thread (at most {1} by setmaxnreg)", registersPerThread,
                              consumerRegisters)
                    .str());
  } else if (roundUp(registersPerThread, 8) * threads > t.registers_per_block)
    return no(llvm::formatv("{0} registers a block (at most {1})", roundUp(registersPerThread, 8) * threads,
                            t.registers_per_block).str());
  if (smemBytes > t.smem_per_block_optin)
    return no(llvm::formatv("{0} bytes of shared memory (at most {1} a block)", smemBytes,
                            t.smem_per_block_optin).str());
  if (blocksPerSM < 1 || blocksPerSM > t.max_blocks_per_sm)
    return no(llvm::formatv("{0} blocks an SM", blocksPerSM).str());
  if (blockM % std::max<int64_t>(1, (pingPong ? 1 : warpsM) * warpM) != 0 && kind != GpuMmaKind::simt)
    return no("the warps do not tile the block");
  return true;
}

std::string GpuMatmulConfig::describe() const {
  return llvm::formatv("{0} {1}: block {2}x{3}x{4}, {5}x{6} {7} of {8}x{9}, {10} stages, split-K {11}, "
                       "{12} threads, smem {13} B, ~{14} regs, {15} blocks/SM, {16} tiles in {17} waves "
                       "({18:f0}% full), A {19} (swizzle {20} B), B {21} (swizzle {22} B)",
                       nameOf(kind), instruction, blockM, blockN, blockK, warpsM, warpsN,
                       kind == GpuMmaKind::wgmma ? "warpgroups" : kind == GpuMmaKind::simt ? "thread tiles"
                                                                                          : "warps",
                       warpM, warpN, stages, splitK, threads, smemBytes, registersPerThread, blocksPerSM,
                       tiles, waves, waveEfficiency * 100, nameOf(loadA), swizzleA, nameOf(loadB), swizzleB)
             .str() +
         (convertA || convertB
              ? std::string(", converted in shared memory: ") + (convertA && convertB ? "A and B" : convertA ? "A" : "B")
              : "") +
         (persistentBlocks > 0 ? llvm::formatv(", persistent on {0} blocks", persistentBlocks).str() : "") +
         (pingPong ? ", ping-pong" : "") + (interleaveCopies ? ", copies interleaved with the k steps" : "") +
         (clusterM > 1 ? llvm::formatv(", clusters of {0} along M (B multicast)", clusterM).str() : "") +
         (consumerRegisters > 0 ? llvm::formatv(", setmaxnreg: producer {0}, consumers {1} registers",
                                                kWgmmaProducerRegisters, consumerRegisters)
                                      .str()
                                : "");
}

namespace {

GpuMatmulConfig configureFor(const GpuMatmulProblem &p, const ::nova::TargetDesc &t) {
  const int64_t es = operandBytes(p.operand);
  const bool sixteen = p.operand == GpuOperand::f16 || p.operand == GpuOperand::bf16;
  const bool x3 = p.operand == GpuOperand::tf32x3;
  const bool tensor = sixteen || p.operand == GpuOperand::tf32 || x3;
  const std::string opName = nameOf(p.operand);
  // wgmma reads tf32 only K-major (imm-trans exists for 16-bit types
  // only): an M/N-contiguous tf32 operand is converted into K-major tiles in
  // shared memory first (tf32x3 converts both of its operands: any layout).
  const bool wgmma = tensor && p.allowWgmma && t.has(x3 ? "wgmma.tf32" : std::string("wgmma.") + opName);
  const auto [convertA, convertB] = wgmma ? wgmmaConvertedOperands(p) : std::pair{false, false};
  const GpuMmaKind kind = !tensor ? GpuMmaKind::simt : wgmma ? GpuMmaKind::wgmma : GpuMmaKind::mma_sync;
  double rate = flopsPerClock(p.operand, t);
  if (kind == GpuMmaKind::mma_sync && t.compute_capability >= 90)
    rate *= kMmaSyncOnHopper;
  const double clock = std::max(1, t.clock_mhz) * 1e6;
  const double dram = std::max<int64_t>(1, t.dram_gb_per_s) * 1e9;
  const int64_t sms = std::max(1, t.multiprocessors);

  // K slab: 128-byte K-contiguous rows when K has two of them, else 64, else
  // the instruction's K.
  const int64_t mmaK = kind == GpuMmaKind::simt ? 1 : sixteen ? 16 : 8;
  // wgmma: always 128 (its TMA boxes: MLIR 19 verifies a swizzled box only
  // with 128-byte rows; TMA fills K past the matrix with zeros).
  int64_t blockK = 128 / es;
  while (kind != GpuMmaKind::wgmma && blockK > mmaK && p.k < 2 * blockK)
    blockK /= 2;
  if (kind == GpuMmaKind::simt)
    blockK = p.operand == GpuOperand::f64 ? 8 : 16;

  // Fragment loads by layout and width.
  FragmentLoad loadA, loadB;
  if (kind == GpuMmaKind::wgmma) {
    loadA = loadB = FragmentLoad::descriptor;
  } else if (kind == GpuMmaKind::simt) {
    loadA = loadB = FragmentLoad::scalar;
  } else {
    loadA = lhsFragmentLoad(p.operand, p.lhsTransposed);
    loadB = rhsFragmentLoad(p.operand, p.rhsTransposed);
  }

  // Candidate shapes: (blockM, blockN, warpM, warpN) and split-K.
  struct Shape {
    int64_t bm, bn, wm, wn;
  };
  std::vector<Shape> shapes;
  const int64_t mCap = std::max<int64_t>(64, roundUp(p.m, 64)), nCap = std::max<int64_t>(64, roundUp(p.n, 64));
  if (kind == GpuMmaKind::wgmma) {
    // 192 columns (m64n192): three quarters of 256, for products whose
    // 256-wide tiles leave a wave mostly empty (a GPT's 768 columns: 3
    // tiles of 256 a row, 4 of 192).
    for (int64_t wgM : {1, 2})
      for (int64_t bn : {64, 128, 192, 256})
        if (64 * wgM <= mCap * 2 && bn <= nCap * 2 && (!p.pingPong || wgM == 1))
          shapes.push_back({64 * wgM, bn, 64, bn});
  } else if (kind == GpuMmaKind::mma_sync) {
    for (int64_t bm : {32, 64, 128, 256})
      for (int64_t bn : {32, 64, 128, 256})
        for (int64_t wm : {16, 32, 64})
          for (int64_t wn : {16, 32, 64}) {
            int64_t warps = (bm / std::min(bm, wm)) * (bn / std::min(bn, wn));
            if (wm > bm || wn > bn || warps < 1 || warps > 8 || bm > mCap || bn > nCap)
              continue;
            shapes.push_back({bm, bn, wm, wn});
          }
  } else {
    for (int64_t bm : {32, 64, 128})
      for (int64_t bn : {32, 64, 128})
        for (int64_t tm : {4, 8})
          for (int64_t tn : {4, 8}) {
            int64_t threads = (bm / tm) * (bn / tn);
            if (threads < 64 || threads > 256 || bm > mCap || bn > nCap)
              continue;
            shapes.push_back({bm, bn, tm, tn});
          }
  }
  auto only = [](int64_t want, int64_t v) { return want == 0 || want == v; };
  std::erase_if(shapes, [&](const Shape &s) {
    return !only(p.onlyBlockM, s.bm) || !only(p.onlyBlockN, s.bn) || !only(p.onlyWarpM, s.wm) ||
           !only(p.onlyWarpN, s.wn);
  });
  std::vector<int64_t> splits = {1};
  if (p.allowSplitK)
    for (int64_t s : {2, 4, 8, 16})
      if (p.k / s >= 4 * blockK)
        splits.push_back(s);

  const double flops = 2.0 * double(p.batch) * p.m * p.n * p.k;
  const double minBytes = double(p.batch) * (double(p.m) * p.k + double(p.k) * p.n) * es +
                          double(p.batch) * p.m * p.n * (p.operand == GpuOperand::f64 ? 8 : 4);
  const double peak = double(p.operand == GpuOperand::f64   ? flopsPerClock(p.operand, t) * sms * clock
                             : p.operand == GpuOperand::f32 ? double(t.peak_gflops_f32) * 1e9
                             : p.operand == GpuOperand::tf32 ? double(t.peak_gflops_tf32) * 1e9
                             : x3                            ? double(t.peak_gflops_tf32) * 1e9 / 3
                                                             : double(t.peak_gflops_bf16) * 1e9);
  const double roof = std::max(flops / std::max(1.0, peak), minBytes / dram);

  std::vector<Scored> scored;
  std::map<std::string, int> rejected;
  for (const Shape &s : shapes)
    for (int64_t split : splits) {
      // ptxas (CUDA 13.0, sm_90a) serializes the wgmmas of a one-warpgroup
      // tf32x3 kernel split across K (warning C7515: non-wgmma instructions
      // define accumulator registers inside the pipeline), and of no other
      // tf32x3 or split configuration tried (bench/README.md).
      if (x3 && kind == GpuMmaKind::wgmma && split > 1 && s.bm == 64) {
        ++rejected["tf32x3 split across K with one warpgroup (ptxas serializes its wgmmas)"];
        continue;
      }
      // A cluster's CTAs each load 1/clusterM of the B tile (whole boxes of
      // it), one tile a block (no split-K).
      if (p.clusterM > 1) {
        if (kind != GpuMmaKind::wgmma || split > 1 || !wgmmaTileSplits(p.rhsTransposed, s.bn, es, p.clusterM)) {
          ++rejected[llvm::formatv("clusters of {0} along M need wgmma, no split-K, and a B tile in {0} whole parts",
                                   p.clusterM)
                         .str()];
          continue;
        }
      }
      GpuMatmulConfig c;
      c.kind = kind;
      c.operand = p.operand;
      c.blockM = s.bm;
      c.blockN = s.bn;
      c.blockK = blockK;
      c.warpM = s.wm;
      c.warpN = s.wn;
      c.splitK = split;
      c.loadA = loadA;
      c.loadB = loadB;
      c.convertA = convertA;
      c.convertB = convertB;
      int64_t accumulators = 0, fragments = 0;
      if (kind == GpuMmaKind::wgmma) {
        // (Ping-pong: two consumer warpgroups, a 64-row tile each.)
        c.pingPong = p.pingPong;
        c.warpsM = p.pingPong ? 2 : s.bm / 64;
        c.warpsN = 1;
        c.threads = wgmmaBlockThreads(c.warpsM);
        c.mmaM = 64;
        c.mmaN = s.bn;
        c.mmaK = sixteen ? 16 : 8;
        accumulators = s.bn / 2; // 64 x bn f32 over 128 threads
        c.instruction = llvm::formatv("wgmma.m64n{0}k{1}.{2}", s.bn, c.mmaK, opName).str();
      } else if (kind == GpuMmaKind::mma_sync) {
        c.interleaveCopies = p.interleaveCopies;
        c.warpsM = s.bm / s.wm;
        c.warpsN = s.bn / s.wn;
        c.threads = 32 * c.warpsM * c.warpsN;
        c.mmaM = 16;
        c.mmaN = 8;
        c.mmaK = mmaK;
        accumulators = s.wm * s.wn / 32;
        // A: 4 registers per 16-row fragment, B: 2 per 8-column one, both
        // double-buffered across the k steps; tf32x3 holds three sets (the
        // loaded fragment, its big and its small half). ptxas 13.0 gave a
        // 64 x 64 warp tile 226 registers for sm_90a before the
        // one-barrier loop (MmaMatmulKernel.cpp), whose copies it
        // interleaves with the MMAs: 244 (bf16 NN) to 252 (tf32 NN) since;
        // 3xtf32 255 with 12 to 48 bytes of spills (sm_80, sm_90a), which
        // three sets (264) keep out.
        fragments = (x3 ? 3 : 2) * ((s.wm / 16) * 4 + (s.wn / 8) * 2);
        c.instruction = llvm::formatv("mma.sync.m16n8k{0}.{1}", mmaK, opName).str();
      } else {
        c.warpsM = s.bm / s.wm;
        c.warpsN = s.bn / s.wn;
        c.threads = c.warpsM * c.warpsN;
        accumulators = s.wm * s.wn * (p.operand == GpuOperand::f64 ? 2 : 1);
        // A k step's rows and columns, and the next slab's share of the
        // block's copy waiting in registers (the kernel's double buffer).
        fragments = (s.wm + s.wn + ceilDiv((s.bm + s.bn) * blockK, c.threads)) *
                    (p.operand == GpuOperand::f64 ? 2 : 1);
        c.instruction = p.operand == GpuOperand::f64 ? "fma.f64" : "fma.f32";
      }
      c.registersPerThread = accumulators + fragments + kRegisterOverhead +
                             kConvertRegisters * (int64_t(convertA) + int64_t(convertB));
      c.rowBytesA = (p.lhsTransposed ? s.bm : blockK) * es;
      c.rowBytesB = (p.rhsTransposed ? blockK : s.bn) * es;
      if (kind != GpuMmaKind::simt) {
        c.swizzleA = swizzleBytesForRow(c.rowBytesA);
        c.swizzleB = swizzleBytesForRow(c.rowBytesB);
      }
      c.copyBytesA = copyBytes((p.lhsTransposed ? p.m : p.k) * es, c.rowBytesA, es);
      c.copyBytesB = copyBytes((p.rhsTransposed ? p.k : p.n) * es, c.rowBytesB, es);

      const int64_t tilesMN = ceilDiv(p.m, s.bm) * ceilDiv(p.n, s.bn) * p.batch;
      c.tiles = tilesMN * split;
      const int64_t kPer = roundUp(ceilDiv(p.k, split), blockK);
      const int64_t slabs = kPer / blockK;
      // Resources with `stages`; blocks per SM follow.
      auto blocksPerSM = [&](int64_t stages) {
        c.stages = stages;
        c.smemBytes = gpuMatmulSmemBytes(c, p.operand);
        // (With setmaxnreg the block is launched with all it may take.)
        const int64_t launchedRegisters =
            c.consumerRegisters > 0
                ? launchedRegistersPerThread(c.threads, t.registers_per_block, t.registers_per_thread)
                : roundUp(c.registersPerThread, 8);
        int64_t byRegs = t.registers_per_sm / std::max<int64_t>(1, launchedRegisters * c.threads);
        int64_t bySmem = t.smem_per_sm / (c.smemBytes + 1024);
        int64_t byThreads = t.max_threads_per_sm / c.threads;
        return std::min({int64_t(t.max_blocks_per_sm), byRegs, bySmem, byThreads});
      };
      c.blocksPerSM = blocksPerSM(2);
      // wgmma: the producer's registers go to the consumers (setmaxnreg)
      // where the block is alone on its SM anyway, or needs them to fit.
      if (kind == GpuMmaKind::wgmma && p.allowRegisterRebalancing) {
        const int64_t rebalanced =
            wgmmaRebalancedRegisters(c.warpsM, t.registers_per_block, t.registers_per_thread);
        if (rebalanced > 0 && (c.blocksPerSM <= 1 || !c.fits(t))) {
          c.consumerRegisters = rebalanced;
          c.blocksPerSM = blocksPerSM(2);
        }
      }
      std::string whyNot;
      if (!c.fits(t, &whyNot)) {
        ++rejected[whyNot.substr(whyNot.find(' ') + 1)];
        continue;
      }
      // Cycles of one slab on the SM with `resident` blocks sharing it.
      // (tf32x3 on wgmma: each slab also converted, read once and its two
      // halves written; tf32: its M/N-contiguous operands read and written
      // once, transposed.)
      const double smemPerSlab =
          kind == GpuMmaKind::wgmma  ? double(c.pingPong ? 1 : c.warpsM) * (64 + s.bn) * blockK * es +
                                          (x3 ? 3.0 * (s.bm + s.bn) * blockK * es
                                              : 2.0 * ((convertA ? s.bm : 0) + (convertB ? s.bn : 0)) * blockK * es)
          // The model takes a warp's 16-byte shared read as 4 wavefronts of
          // 128 bytes (a quarter-warp each) however many of its lanes read
          // the same run, so every thread's bytes count (an assumption from
          // the 4x4 tiles' measured slowness, not measured itself).
          : kind == GpuMmaKind::simt ? double(c.threads) * (s.wm + s.wn) * blockK * es
                                     : double(c.warpsM * c.warpsN) * (s.wm + s.wn) * blockK * es;
      // tf32x3's splits, in clocks of the SM's integer pipes a slab: a
      // warp's elements (mma.sync: its fragments' (wm + wn) x blockK / 32
      // a thread; wgmma: the slab's (bm + bn) x blockK over the consumers).
      double splitPerSlab = 0;
      if (x3) {
        const double warps = kind == GpuMmaKind::wgmma ? 4.0 * c.warpsM : double(c.warpsM * c.warpsN);
        const double perThread = kind == GpuMmaKind::wgmma ? double(s.bm + s.bn) * blockK / (128.0 * c.warpsM)
                                                           : double(s.wm + s.wn) * blockK / 32.0;
        splitPerSlab =
            warps * perThread * kSplitIntOpsPerElement * (32.0 / kIntLanesPerSubPartition) / kSubPartitions;
      }
      auto slabCycles = [&](int64_t resident) {
        // An SM's tensor cores (and FMA pipes) sit in kSubPartitions
        // quarters, each fed by the warps scheduled on it: fewer resident
        // warps than quarters leave some idle.
        // (wgmma: the consumer warpgroups' warps; the producer's issue loads.)
        double warps = double(resident * (kind == GpuMmaKind::wgmma ? 4 * c.warpsM : c.threads / 32));
        double busy = std::min(1.0, warps / (kSubPartitions * (kind == GpuMmaKind::simt ? kSimtWarpsPerQuarter : 1)));
        // One block an SM where the tiles would give it two or more.
        if (kind == GpuMmaKind::mma_sync && resident == 1 && c.tiles >= 2 * sms)
          busy *= kMmaSyncLoneBlock;
        double mma = 2.0 * s.bm * s.bn * blockK / (rate * busy);
        double smem = smemPerSlab / kSmemBytesPerClock;
        return std::max({mma, smem, splitPerSlab}) * double(resident);
      };
      int64_t resident = std::min(c.blocksPerSM, ceilDiv(c.tiles, sms));
      int64_t stages = 1 + int64_t(std::ceil(kLoadLatencyCycles / slabCycles(resident)));
      stages = std::clamp<int64_t>(stages, 2, std::min<int64_t>(8, std::max<int64_t>(2, slabs)));
      if (kind == GpuMmaKind::simt)
        stages = kSimtBuffers; // what the kernel has, however long the latency
      while (stages > 2 && gpuMatmulSmemBytes((c.stages = stages, c), p.operand) > t.smem_per_block_optin)
        --stages;
      c.blocksPerSM = blocksPerSM(stages);
      // Deeper pipelines that cost no occupancy are free insurance against
      // a loaded memory system's longer latency: take them, up to
      // kFreeStages.
      while (kind != GpuMmaKind::simt && stages < std::min<int64_t>(kFreeStages, std::max<int64_t>(2, slabs))) {
        int64_t before = c.blocksPerSM;
        if (gpuMatmulSmemBytes((c.stages = stages + 1, c), p.operand) > t.smem_per_block_optin ||
            blocksPerSM(stages + 1) < before) {
          c.blocksPerSM = blocksPerSM(stages);
          break;
        }
        ++stages;
        c.blocksPerSM = before;
      }
      c.blocksPerSM = blocksPerSM(stages);
      if (!c.fits(t, &whyNot)) {
        ++rejected[whyNot.substr(whyNot.find(' ') + 1)];
        continue;
      }
      resident = std::min(c.blocksPerSM, ceilDiv(c.tiles, sms));
      c.waves = ceilDiv(c.tiles, sms * c.blocksPerSM);
      c.waveEfficiency = double(c.tiles) / double(c.waves * sms * c.blocksPerSM);
      // A block a tile fills its pipeline once a tile; a persistent block
      // (wgmma, more tiles than resident blocks) once: its producer loads
      // the next tile's slabs while the consumers store the present one.
      // (Ping-pong: always, with at least two tiles a block.)
      // (Clusters: always, on whole clusters, no more than the tiles'.)
      const bool persistent =
          kind == GpuMmaKind::wgmma && (p.pingPong || p.clusterM > 1 || (p.allowPersistent && c.waves > 1));
      c.clusterM = p.clusterM;
      // (Ping-pong: at least two tiles a block; clusters: a cluster's tiles
      // are clusterM row tiles.)
      const int64_t clusterTiles = ceilDiv(p.m, p.clusterM * s.bm) * ceilDiv(p.n, s.bn) * p.batch;
      c.persistentBlocks =
          !persistent ? 0
          : p.clusterM > 1
              ? p.clusterM * std::min(sms * c.blocksPerSM / p.clusterM, p.pingPong ? ceilDiv(clusterTiles, 2)
                                                                                   : clusterTiles)
          : p.pingPong ? std::max<int64_t>(1, std::min(sms * c.blocksPerSM, ceilDiv(c.tiles, 2)))
                       : sms * c.blocksPerSM;
      double compute = persistent ? (double(c.waves * slabs) * slabCycles(resident) + kLoadLatencyCycles) / clock
                                  : double(c.waves) * (double(slabs) * slabCycles(resident) + kLoadLatencyCycles) / clock;
      // (A cluster's B tile crosses from L2 once for its clusterM CTAs.)
      double l2Bytes = double(c.tiles) * (s.bm + double(s.bn) / double(c.clusterM)) * double(kPer) * es;
      double memory = std::max(minBytes / dram, l2Bytes / (kL2OverDram * dram));
      double seconds = std::max(compute, memory);
      if (split > 1)
        seconds += double(split) * p.batch * p.m * p.n * 4 * 2 / dram + kLaunchSeconds;
      c.estimatedSeconds = seconds;
      c.computeBound = compute >= memory;
      scored.push_back({c, seconds, compute});
    }

  auto better = [](const Scored &a, const Scored &b) {
    double lo = std::min(a.seconds, b.seconds);
    if (std::abs(a.seconds - b.seconds) > 0.01 * lo)
      return a.seconds < b.seconds;
    if (a.config.splitK != b.config.splitK)
      return a.config.splitK < b.config.splitK;
    // Tied by memory: the one whose multiplies take less time (a wider
    // tile's edge columns are work too).
    if (std::abs(a.compute - b.compute) > 0.01 * std::min(a.compute, b.compute))
      return a.compute < b.compute;
    int64_t areaA = a.config.blockM * a.config.blockN, areaB = b.config.blockM * b.config.blockN;
    if (areaA != areaB)
      return areaA > areaB;
    if (a.config.stages != b.config.stages)
      return a.config.stages < b.config.stages;
    if (a.config.warpM * a.config.warpN != b.config.warpM * b.config.warpN)
      return a.config.warpM * a.config.warpN > b.config.warpM * b.config.warpN;
    return a.config.blockM > b.config.blockM;
  };
  std::stable_sort(scored.begin(), scored.end(), better);

  GpuMatmulConfig chosen;
  chosen.operand = p.operand;
  if (!scored.empty())
    chosen = scored.front().config;
  chosen.roofSeconds = roof;
  auto &why = chosen.why;
  why.push_back(llvm::formatv("inputs: {0} x {1} x {2} (batch {3}), {4} operands, {5}{6}, on {7} ({8} SMs at {9} "
                              "MHz, {10} KiB shared a block, {11:f0} flop/clock/SM)",
                              p.m, p.n, p.k, p.batch, opName, p.lhsTransposed ? "T" : "N",
                              p.rhsTransposed ? "T" : "N", t.cpu, sms, t.clock_mhz, t.smem_per_block_optin / 1024,
                              flopsPerClock(p.operand, t))
                    .str());
  why.push_back(llvm::formatv("roof: {0:f3} GFLOP at {1:f1} TFLOP/s, {2:f2} MB at {3} GB/s: {4} ({5} bound, "
                              "{6:f1} flop/B against a balance of {7:f1})",
                              flops / 1e9, peak / 1e12, minBytes / 1e6, t.dram_gb_per_s, fmtSeconds(roof),
                              flops / std::max(1.0, peak) >= minBytes / dram ? "compute" : "memory",
                              flops / minBytes, peak / dram)
                    .str());
  why.push_back(std::string("instruction: ") + chosen.instruction +
                (x3 && kind == GpuMmaKind::wgmma
                     ? " (three tf32 wgmmas a product, on big and small halves each slab is converted into: any layout)"
                 : kind == GpuMmaKind::wgmma && (chosen.convertA || chosen.convertB)
                     ? " (the target has wgmma, which reads tf32 only K-major: each slab of an M/N-contiguous "
                       "operand is transposed in shared memory first)"
                 : kind == GpuMmaKind::wgmma    ? " (the target has wgmma)"
                 : kind == GpuMmaKind::simt     ? " (no tensor-core instruction takes these operands)"
                 : x3 ? " (three tf32 MMAs a product, on the halves split in registers: the mma.sync kernel's "
                        "fragments)"
                 : t.has("wgmma.bf16") && tensor && !p.allowWgmma
                     ? " (the wgmma kernel is not allowed here; mma.sync reaches about 2/3 of the tensor rate on "
                       "Hopper)"
                     : ""));
  if (!scored.empty()) {
    why.push_back(llvm::formatv("chosen (model {0}, {1:f0}% of the roof's speed, {2} bound): {3}",
                                fmtSeconds(chosen.estimatedSeconds), 100 * roof / chosen.estimatedSeconds,
                                chosen.computeBound ? "compute" : "memory", chosen.describe())
                      .str());
    why.push_back(llvm::formatv("depth: {0} stages: the slabs in flight cover a {1:f0}-cycle load latency, "
                                "and deeper ones are taken up to {2} while they cost no block per SM",
                                chosen.stages, kLoadLatencyCycles, kFreeStages)
                      .str());
    for (size_t i = 1; i < std::min<size_t>(scored.size(), 3); ++i)
      why.push_back(llvm::formatv("runner-up (model {0}): {1}", fmtSeconds(scored[i].seconds),
                                  scored[i].config.describe())
                        .str());
  } else {
    why.push_back("no candidate fits the device");
  }
  for (auto &[reason, count] : rejected)
    why.push_back(llvm::formatv("{0} candidates out: {1}", count, reason).str());
  return chosen;
}

} // namespace

std::pair<bool, bool> mlir::nova::wgmmaConvertedOperands(const GpuMatmulProblem &p) {
  const bool x3 = p.operand == GpuOperand::tf32x3, tf32 = p.operand == GpuOperand::tf32;
  return {x3 || (tf32 && p.lhsTransposed), x3 || (tf32 && !p.rhsTransposed)};
}

GpuMatmulConfig mlir::nova::configureGpuMatmul(const GpuMatmulProblem &p, const ::nova::TargetDesc &t) {
  if (p.operand != GpuOperand::f32 || !p.allowTf32x3 || !t.has("mma.sync.tf32"))
    return configureFor(p, t);
  // f32 operands: FMAs on the CUDA cores, or tf32x3 on the tensor cores,
  // whichever the model finds faster (tf32x3 takes three tf32 MMAs a
  // product: it wins where the tf32 rate is well over three times f32's).
  GpuMatmulProblem x3 = p;
  x3.operand = GpuOperand::tf32x3;
  GpuMatmulConfig fma = configureFor(p, t), tensor = configureFor(x3, t);
  const bool tensorFaster =
      tensor.threads > 0 && (fma.threads < 1 || tensor.estimatedSeconds < fma.estimatedSeconds);
  GpuMatmulConfig &chosen = tensorFaster ? tensor : fma;
  const GpuMatmulConfig &other = tensorFaster ? fma : tensor;
  chosen.why.push_back(llvm::formatv("f32 operands: {0} (model {1}) rather than {2} (model {3})",
                                     tensorFaster ? "3xtf32 on the tensor cores" : "f32 FMAs",
                                     fmtSeconds(chosen.estimatedSeconds),
                                     tensorFaster ? "f32 FMAs" : "3xtf32 on the tensor cores",
                                     other.threads > 0 ? fmtSeconds(other.estimatedSeconds) : "no shape fits")
                           .str());
  return chosen;
}

LoweringConfigAttr mlir::nova::toLoweringConfig(const GpuMatmulConfig &c, bool batched, MLIRContext *context) {
  SmallVector<int64_t> tile;
  if (batched)
    tile.push_back(1);
  tile.push_back(c.blockM);
  tile.push_back(c.blockN);
  return LoweringConfigAttr::get(context, nameOf(c.kind), std::max<int64_t>(1, c.launchedBlocks()), tile,
                                 {c.blockK, c.stages, c.splitK}, {c.warpM, c.warpN});
}
