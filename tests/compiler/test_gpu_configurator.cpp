// test_gpu_configurator.cpp - the GPU matmul configurator as a pure
// function. For every built-in GPU, operand type, layout and many shapes:
// the configuration fits the device (threads, registers, shared memory,
// blocks per SM), its warps tile its block, its tiles cover the result, the
// instruction is one the device and layout allow, and the model never
// claims to beat the roofline. A few decisions are pinned (changing them is
// a deliberate, reviewed change) and the explanation names its inputs.
#include <doctest/doctest.h>

#include "compiler/Context.h"
#include "compiler/dialect/NovaDialect.h"
#include "compiler/target/cuda/GpuConfigurator.h"
#include "nova/target.hpp"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

using namespace mlir::nova;

namespace {


GpuMatmulProblem problem(int64_t batch, int64_t m, int64_t n, int64_t k, GpuOperand op, bool ta = false,
                         bool tb = false) {
  GpuMatmulProblem p;
  p.batch = batch;
  p.m = m;
  p.n = n;
  p.k = k;
  p.operand = op;
  p.lhsTransposed = ta;
  p.rhsTransposed = tb;
  return p;
}

bool contains(const std::vector<std::string> &lines, const std::string &text) {
  for (const auto &l : lines)
    if (l.find(text) != std::string::npos)
      return true;
  return false;
}

} // namespace

TEST_CASE("GPU configurator: every decision fits its device and is one the device can run") {
  const char *gpus[] = {"sm_80", "sm_86", "sm_89", "sm_90a", "h200"};
  const GpuOperand operands[] = {GpuOperand::f16, GpuOperand::bf16, GpuOperand::tf32, GpuOperand::f32,
                                 GpuOperand::f64};
  struct Shape {
    int64_t batch, m, n, k;
  };
  // Squares, GPT layers (tokens x features), attention heads, skinny and odd.
  const Shape shapes[] = {{1, 128, 128, 128},  {1, 1024, 1024, 1024}, {1, 4096, 4096, 4096},
                          {1, 8192, 8192, 8192}, {1, 8192, 3072, 768},  {1, 8192, 768, 3072},
                          {1, 768, 3072, 8192},  {48, 256, 256, 64},   {48, 256, 64, 256},
                          {1, 64, 4096, 4096},   {1, 4096, 64, 4096},  {1, 100, 200, 37},
                          {1, 1, 1024, 1024},    {4, 1000, 1000, 1000}};
  int checked = 0;
  for (const char *gpu : gpus) {
    ::nova::TargetDesc t = ::nova::named_target(gpu);
    for (GpuOperand op : operands)
      for (const Shape &s : shapes)
        for (int layout = 0; layout < 3; ++layout) {
          bool ta = layout == 2, tb = layout == 1;
          GpuMatmulProblem p = problem(s.batch, s.m, s.n, s.k, op, ta, tb);
          GpuMatmulConfig c = configureGpuMatmul(p, t);
          CAPTURE(gpu);
          CAPTURE(nameOf(op));
          CAPTURE(s.m);
          CAPTURE(s.n);
          CAPTURE(s.k);
          CAPTURE(layout);
          CAPTURE(c.describe());
          std::string whyNot;
          REQUIRE(c.fits(t, &whyNot));
          CHECK(whyNot.empty());
          CHECK(c.threads % 32 == 0);
          CHECK(c.smemBytes == gpuMatmulSmemBytes(c, op));
          CHECK(c.smemBytes <= t.smem_per_block_optin);
          CHECK(c.registersPerThread <= t.registers_per_thread);
          CHECK(c.stages >= 2);
          CHECK(c.splitK >= 1);
          CHECK(c.blockK * operandBytes(op) <= 128);
          // The tiles cover the result (and the split K).
          CHECK(c.tiles == s.batch * ((s.m + c.blockM - 1) / c.blockM) * ((s.n + c.blockN - 1) / c.blockN) *
                               c.splitK);
          CHECK(c.waves >= 1);
          CHECK(c.waveEfficiency > 0);
          CHECK(c.waveEfficiency <= 1.0);
          // The model's time is never below the roofline.
          CHECK(c.estimatedSeconds >= c.roofSeconds * 0.999);
          const bool sixteen = op == GpuOperand::f16 || op == GpuOperand::bf16;
          if (op == GpuOperand::f32 || op == GpuOperand::f64) {
            CHECK(c.kind == GpuMmaKind::simt);
            CHECK(c.threads == (c.blockM / c.warpM) * (c.blockN / c.warpN));
          } else if (c.kind == GpuMmaKind::wgmma) {
            CHECK(t.compute_capability == 90);
            // tf32 wgmma reads K-major operands only: an M/N-contiguous one
            // is converted (transposed) in shared memory first.
            CHECK(c.convertA == (op == GpuOperand::tf32 && ta));
            CHECK(c.convertB == (op == GpuOperand::tf32 && !tb));
            CHECK(c.blockM % 64 == 0);
            CHECK(c.threads == 128 * (c.blockM / 64 + 1)); // and the producer warpgroup
            CHECK(c.mmaN == c.blockN);
            CHECK(c.blockN % 8 == 0);
            CHECK(c.blockN <= 256);
            // Persistent exactly where the tiles outnumber the blocks the
            // device holds at once: one block per resident slot.
            CHECK(c.persistentBlocks == (c.waves > 1 ? t.multiprocessors * c.blocksPerSM : 0));
          } else {
            CHECK(c.persistentBlocks == 0);
            CHECK(!c.convertA);
            CHECK(!c.convertB);
            CHECK(c.kind == GpuMmaKind::mma_sync);
            CHECK(c.blockM == c.warpsM * c.warpM);
            CHECK(c.blockN == c.warpsN * c.warpN);
            CHECK(c.warpM % 16 == 0);
            CHECK(c.warpN % 8 == 0);
            CHECK(c.blockK % c.mmaK == 0);
            CHECK(c.mmaK == (sixteen ? 16 : 8));
            // Fragment routing (notes/ptx-semantics.md §4).
            CHECK(c.loadA == (!ta ? FragmentLoad::ldmatrix
                                  : sixteen ? FragmentLoad::ldmatrix_trans : FragmentLoad::scalar));
            CHECK(c.loadB == (tb ? FragmentLoad::ldmatrix
                                 : sixteen ? FragmentLoad::ldmatrix_trans : FragmentLoad::scalar));
          }
          ++checked;
        }
  }
  MESSAGE(checked << " configurations checked");
}

TEST_CASE("GPU configurator: pinned decisions") {
  ::nova::TargetDesc a100 = ::nova::named_target("sm_80"), h200 = ::nova::named_target("h200"),
                     rtx = ::nova::named_target("sm_86");
  // Hopper, large bf16: warpgroup MMAs on a wide tile, a deep TMA pipeline.
  GpuMatmulConfig big = configureGpuMatmul(problem(1, 4096, 4096, 4096, GpuOperand::bf16), h200);
  CAPTURE(big.describe());
  CHECK(big.kind == GpuMmaKind::wgmma);
  CHECK(big.instruction.rfind("wgmma.m64n", 0) == 0);
  CHECK(big.blockK == 64);
  CHECK(big.swizzleA == 128);
  CHECK(big.blockM * big.blockN >= 128 * 128);
  CHECK(big.splitK == 1);
  // The same without wgmma codegen: mma.sync, 128-byte swizzled rows.
  GpuMatmulProblem noWg = problem(1, 4096, 4096, 4096, GpuOperand::bf16);
  noWg.allowWgmma = false;
  GpuMatmulConfig sync = configureGpuMatmul(noWg, h200);
  CAPTURE(sync.describe());
  CHECK(sync.kind == GpuMmaKind::mma_sync);
  CHECK(sync.instruction == "mma.sync.m16n8k16.bf16");
  CHECK(sync.loadA == FragmentLoad::ldmatrix);
  CHECK(sync.loadB == FragmentLoad::ldmatrix_trans);
  CHECK(sync.swizzleA == 128);
  CHECK(sync.swizzleB == 128);
  CHECK(sync.blockM * sync.blockN >= 128 * 128);
  CHECK(sync.warpM * sync.warpN >= 64 * 32);
  // tf32 NN on Ampere: the rhs has no transposing ldmatrix for 32-bit words.
  GpuMatmulConfig tf = configureGpuMatmul(problem(1, 4096, 4096, 4096, GpuOperand::tf32), a100);
  CAPTURE(tf.describe());
  CHECK(tf.instruction == "mma.sync.m16n8k8.tf32");
  CHECK(tf.blockK == 32);
  CHECK(tf.loadB == FragmentLoad::scalar);
  // tf32 on Hopper: wgmma in every layout; wgmma reads tf32 only K-major,
  // so NN's rhs (N-contiguous) is transposed in shared memory first, and
  // more shared memory a stage set is the converted tiles'; NT reads both
  // as stored.
  GpuMatmulConfig nn = configureGpuMatmul(problem(1, 4096, 4096, 4096, GpuOperand::tf32), h200);
  CAPTURE(nn.describe());
  CHECK(nn.kind == GpuMmaKind::wgmma);
  CHECK(!nn.convertA);
  CHECK(nn.convertB);
  CHECK(nn.smemBytes == nn.stages * (nn.blockM + nn.blockN) * nn.blockK * 4 + 1024 + 16 * nn.stages +
                            2 * nn.blockN * nn.blockK * 4);
  CHECK(nn.describe().find("converted in shared memory: B") != std::string::npos);
  GpuMatmulConfig nt = configureGpuMatmul(problem(1, 4096, 4096, 4096, GpuOperand::tf32, false, true), h200);
  CHECK(nt.kind == GpuMmaKind::wgmma);
  CHECK(!nt.convertA);
  CHECK(!nt.convertB);
  GpuMatmulProblem noWgmma = problem(1, 4096, 4096, 4096, GpuOperand::tf32);
  noWgmma.allowWgmma = false;
  CHECK(configureGpuMatmul(noWgmma, h200).kind == GpuMmaKind::mma_sync);
  // A small square on a big GPU: tiles shrink or K splits until the SMs are
  // busy, rather than 64 tiles on 132 SMs.
  GpuMatmulConfig small = configureGpuMatmul(problem(1, 1024, 1024, 1024, GpuOperand::bf16), h200);
  CAPTURE(small.describe());
  CHECK(small.tiles >= 100);
  // A skinny K-heavy product (a weight gradient with few tokens) splits K.
  GpuMatmulConfig skinny = configureGpuMatmul(problem(1, 256, 256, 65536, GpuOperand::bf16), a100);
  CAPTURE(skinny.describe());
  CHECK(skinny.splitK > 1);
  GpuMatmulProblem noSplit = problem(1, 256, 256, 65536, GpuOperand::bf16);
  noSplit.allowSplitK = false;
  CHECK(configureGpuMatmul(noSplit, a100).splitK == 1);
  // The RTX 3060's 100 KiB per SM bounds the pipeline.
  GpuMatmulConfig card = configureGpuMatmul(problem(1, 4096, 4096, 4096, GpuOperand::bf16), rtx);
  CAPTURE(card.describe());
  CHECK(card.smemBytes <= rtx.smem_per_block_optin);
  CHECK(card.kind == GpuMmaKind::mma_sync);
  // A GPT layer's product on Hopper, many waves of tiles: persistent, a
  // block a resident slot (fewer blocks than tiles, the launch's workgroups);
  // one wave or less: a block a tile.
  GpuMatmulConfig gpt = configureGpuMatmul(problem(1, 8192, 3072, 768, GpuOperand::bf16), h200);
  CAPTURE(gpt.describe());
  CHECK(gpt.kind == GpuMmaKind::wgmma);
  CHECK(gpt.waves > 1);
  CHECK(gpt.persistentBlocks == h200.multiprocessors * gpt.blocksPerSM);
  CHECK(gpt.launchedBlocks() == gpt.persistentBlocks);
  CHECK(gpt.describe().find("persistent on") != std::string::npos);
  GpuMatmulProblem flat = problem(1, 8192, 3072, 768, GpuOperand::bf16);
  flat.allowPersistent = false;
  CHECK(configureGpuMatmul(flat, h200).persistentBlocks == 0);
  CHECK(configureGpuMatmul(flat, h200).launchedBlocks() == configureGpuMatmul(flat, h200).tiles);
  // Ping-pong only when asked (the device check's variants): two consumer
  // warpgroups taking 64-row tiles in turn, persistent.
  CHECK(!gpt.pingPong);
  GpuMatmulProblem pp = problem(1, 8192, 3072, 768, GpuOperand::bf16);
  pp.pingPong = true;
  GpuMatmulConfig pingPong = configureGpuMatmul(pp, h200);
  CAPTURE(pingPong.describe());
  CHECK(pingPong.pingPong);
  CHECK(pingPong.blockM == 64);
  CHECK(pingPong.warpsM == 2);
  CHECK(pingPong.threads == 384);
  CHECK(pingPong.persistentBlocks == h200.multiprocessors * pingPong.blocksPerSM);
  // Clusters of 2 along M only when asked: persistent on whole clusters
  // (no more than the cluster tiles), no split-K; the model's L2 traffic
  // counts the shared B tile once a cluster; a target without wgmma or a
  // B tile that does not halve into whole boxes gets none.
  CHECK(gpt.clusterM == 1);
  GpuMatmulProblem paired = problem(1, 8192, 3072, 768, GpuOperand::bf16);
  paired.clusterM = 2;
  GpuMatmulConfig cluster = configureGpuMatmul(paired, h200);
  CAPTURE(cluster.describe());
  CHECK(cluster.clusterM == 2);
  CHECK(cluster.kind == GpuMmaKind::wgmma);
  CHECK(cluster.persistentBlocks % 2 == 0);
  CHECK(cluster.persistentBlocks <= h200.multiprocessors * cluster.blocksPerSM);
  CHECK(cluster.splitK == 1);
  CHECK(cluster.describe().find("clusters of 2 along M") != std::string::npos);
  GpuMatmulProblem fewTiles = problem(1, 256, 256, 8192, GpuOperand::bf16, true, false);
  fewTiles.clusterM = 2;
  GpuMatmulConfig few = configureGpuMatmul(fewTiles, h200);
  CAPTURE(few.describe());
  CHECK(few.splitK == 1);
  CHECK(few.persistentBlocks == 2 * ((256 + 2 * few.blockM - 1) / (2 * few.blockM)) * ((256 + few.blockN - 1) / few.blockN));
  // Ping-pong in clusters: 64-row tiles, at least two cluster tiles a cluster.
  paired.pingPong = true;
  GpuMatmulConfig both = configureGpuMatmul(paired, h200);
  CAPTURE(both.describe());
  CHECK(both.pingPong);
  CHECK(both.clusterM == 2);
  CHECK(both.blockM == 64);
  CHECK(both.persistentBlocks == 2 * std::min<int64_t>(h200.multiprocessors * both.blocksPerSM / 2,
                                                       (8192 / 128 * (3072 / both.blockN) + 1) / 2));
  GpuMatmulProblem onAmpere = problem(1, 4096, 4096, 4096, GpuOperand::bf16);
  onAmpere.clusterM = 2;
  CHECK(configureGpuMatmul(onAmpere, a100).threads == 0);
  GpuMatmulConfig oneWave = configureGpuMatmul(problem(1, 768, 3072, 8192, GpuOperand::bf16, true, false), h200);
  CAPTURE(oneWave.describe());
  CHECK(oneWave.waves == 1);
  CHECK(oneWave.persistentBlocks == 0);
  // Deterministic.
  CHECK(configureGpuMatmul(problem(1, 4096, 4096, 4096, GpuOperand::bf16), h200).describe() == big.describe());
}

TEST_CASE("GPU configurator: the explanation names the inputs, the roof and the choice; the attribute") {
  GpuMatmulConfig c = configureGpuMatmul(problem(1, 4096, 4096, 4096, GpuOperand::bf16), ::nova::named_target("h200"));
  CHECK(contains(c.why, "inputs: 4096 x 4096 x 4096"));
  CHECK(contains(c.why, "sm_90a"));
  CHECK(contains(c.why, "roof:"));
  CHECK(contains(c.why, "compute bound"));
  CHECK(contains(c.why, "chosen (model"));
  CHECK(contains(c.why, "stages: the slabs in flight cover"));
  mlir::MLIRContext ctx;
  ctx.loadDialect<NovaDialect>();
  LoweringConfigAttr attr = toLoweringConfig(c, /*batched=*/false, &ctx);
  REQUIRE(attr);
  CHECK(attr.isGpuMatmul());
  CHECK(attr.getKind() == "wgmma_matmul");
  CHECK(attr.getTile().size() == 2);
  CHECK(attr.getCacheTile()[0] == c.blockK);
  CHECK(attr.getCacheTile()[1] == c.stages);
  std::string text;
  llvm::raw_string_ostream os(text);
  os << attr;
  CHECK(text.find("wgmma_matmul") != std::string::npos);
  LoweringConfigAttr batched = toLoweringConfig(c, /*batched=*/true, &ctx);
  CHECK(batched.getTile().size() == 3);
}
