// test_gpu_attention.cpp - the tensor-core attention forward
// (target/cuda/GpuAttentionMma.cpp) built on its own and run by the
// lane-exact emulator against float64: with bf16 operands against float64
// of the same bf16-rounded q, k and v (the kernel rounds P to bf16 too,
// and takes 2^x by ex2.approx: errors relative to the largest |v| near
// 2^-9), as 3xtf32 against float64 of the f32 inputs (f32's bound) and as
// tf32 (not within it), over sequences that end inside a block and inside
// a tile, and deliberately broken: no barrier after the tiles are staged,
// none before the next tiles overwrite them, no wait for the cp.async
// copies (each a hazard the emulator names), reads without the swizzle the
// tiles were written with, B's rows in the wrong k order (wrong results).
// The steps' tests (tests/unit/test_gpu_attention_steps.cpp) run it and
// its backward inside whole steps.
// Inputs come from a printed seed (NOVA_TEST_SEED overrides it).
#include <doctest/doctest.h>

#include "compiler/dialect/NovaDialect.h"
#include "compiler/target/cuda/GpuAttentionMma.h"
#include "compiler/target/cuda/GpuEmulator.h"
#include "compiler/target/cuda/GpuPasses.h"
#include "compiler/target/cuda/MatmulKernelParts.h"
#include "compiler/target/cuda/MmaMatmulKernel.h"
#include "compiler/target/cuda/PtxEmitter.h"
#include "nova/target.hpp"
#include "unit/test_seed.hpp"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>

using namespace mlir;
using namespace mlir::nova;

namespace {

MLIRContext &attentionContext() {
  static MLIRContext *ctx = [] {
    DialectRegistry registry;
    registerGpuCodegenDialects(registry);
    registry.insert<NovaDialect>();
    auto *c = new MLIRContext(registry);
    c->loadAllAvailableDialects();
    return c;
  }();
  return *ctx;
}

struct AttentionRun {
  EmulatorReport report;
  /// Largest |got - want| over the largest |v| of the head.
  double worst = 0;
  std::vector<float> out;
};

/// The forward over qkv [1, T, 3 heads hd] (f32, or bf16 where `bf16Qkv`),
/// result f32, with `faults`, with `tileStages` buffers of tiles (0: the
/// plan's choice for the A100).
AttentionRun runAttention(int64_t T, int64_t heads, int64_t hd, const AttentionMmaFaults &faults = {},
                          AttentionMmaOperands operands = AttentionMmaOperands::bf16, int64_t tileStages = 0,
                          bool bf16Qkv = false) {
  MLIRContext &ctx = attentionContext();
  Location loc = UnknownLoc::get(&ctx);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  gpu::GPUModuleOp kernels = addKernelsModule(*module);
  OpBuilder b(kernels.getBodyRegion());
  b.setInsertionPoint(kernels.getBody()->getTerminator());
  const int64_t d = heads * hd;
  const double scale = 1.0 / std::sqrt(double(hd));
  Type f32 = b.getF32Type();
  auto qkvType = MemRefType::get({1, T, 3 * d}, bf16Qkv ? b.getBF16Type() : f32);
  auto outType = MemRefType::get({1, T, d}, f32);
  auto func = b.create<gpu::GPUFuncOp>(loc, "attention", b.getFunctionType({qkvType, outType}, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  Block &entry = func.getBody().front();
  OpBuilder fb = OpBuilder::atBlockBegin(&entry);
  auto op = fb.create<AttentionKernelOp>(loc, TypeRange{}, ValueRange{entry.getArgument(0)}, entry.getArgument(1),
                                         fb.getI64IntegerAttr(heads), fb.getF64FloatAttr(scale), UnitAttr());
  fb.create<gpu::ReturnOp>(loc);
  std::string why;
  std::optional<AttentionMmaPlan> plan = planAttentionMma(op, ::nova::builtin_gpu_target("sm_80"), operands, why);
  REQUIRE_MESSAGE(plan.has_value(), why);
  if (tileStages)
    plan = attentionMmaShape(op, operands, tileStages);
  fb.setInsertionPoint(op);
  Value thread = fb.create<gpu::ThreadIdOp>(loc, gpu::Dimension::x);
  Value block = fb.create<gpu::BlockIdOp>(loc, gpu::Dimension::x);
  buildAttentionMma(fb, op, *plan, thread, block, {}, faults);
  op->erase();
  func->setAttr(kAlignedVectorsAttr, fb.getUnitAttr());
  REQUIRE(succeeded(verify(*module)));

  const uint64_t seed = nova_test::test_seed() ^ (uint64_t(T * 131 + heads * 17 + hd) << 23);
  INFO("seed = ", seed);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> qkv(size_t(T * 3 * d)), out(size_t(T * d), 0.0f);
  for (float &x : qkv)
    x = dist(rng);
  std::vector<uint8_t> Q(qkv.size() * (bf16Qkv ? 2 : 4)), O(out.size() * 4);
  if (bf16Qkv) {
    for (size_t i = 0; i < qkv.size(); ++i) {
      const uint16_t bits = toBFloat16Bits(qkv[i]);
      std::memcpy(Q.data() + 2 * i, &bits, 2);
    }
  } else {
    std::memcpy(Q.data(), qkv.data(), Q.size());
  }
  std::memcpy(O.data(), out.data(), O.size());
  EmulatorLaunch launch;
  launch.grid = {plan->blocks, 1, 1};
  launch.block = {AttentionMmaPlan::kThreads, 1, 1};
  launch.dynamicSharedBytes = plan->sharedBytes;
  launch.args = {&Q, &O};
  AttentionRun run;
  run.report = emulateKernel(func, launch);
  if (!run.report.ok)
    return run;
  std::memcpy(out.data(), O.data(), O.size());
  run.out = out;
  // float64 of the inputs (bf16: rounded).
  auto at = [&](int64_t t, int64_t part, int64_t h, int64_t c) {
    const float x = qkv[size_t(t * 3 * d + part * d + h * hd + c)];
    return operands == AttentionMmaOperands::bf16 ? double(fromBFloat16Bits(toBFloat16Bits(x))) : double(x);
  };
  for (int64_t h = 0; h < heads; ++h) {
    double vMax = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < hd; ++c)
        vMax = std::max(vMax, std::abs(at(t, 2, h, c)));
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> s(size_t(i + 1));
      double max = -INFINITY, sum = 0;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < hd; ++c)
          dot += at(i, 0, h, c) * at(j, 1, h, c);
        s[size_t(j)] = scale * dot;
        max = std::max(max, s[size_t(j)]);
      }
      for (double &x : s)
        sum += (x = std::exp(x - max));
      for (int64_t c = 0; c < hd; ++c) {
        double want = 0;
        for (int64_t j = 0; j <= i; ++j)
          want += s[size_t(j)] * at(j, 2, h, c);
        want /= sum;
        run.worst = std::max(run.worst, std::abs(double(out[size_t(i * d + h * hd + c)]) - want) / vMax);
      }
    }
  }
  return run;
}

/// The forward with `operands` over T = 64 (one block, one tile), 100 (two
/// blocks, the second tile cut by the sequence's end), 200 with 2 heads of
/// 64, 13 with heads of 16 and 70 with a head of 128, each within `bound`
/// of float64; qkv bf16 where `bf16Qkv`.
void checkShapes(AttentionMmaOperands operands, double bound, bool bf16Qkv = false) {
  struct Shape { int64_t T, heads, hd; };
  for (Shape s : {Shape{64, 1, 64}, Shape{100, 1, 32}, Shape{200, 2, 64}, Shape{13, 3, 16}, Shape{70, 1, 128}}) {
    CAPTURE(s.T);
    CAPTURE(s.heads);
    CAPTURE(s.hd);
    AttentionRun run = runAttention(s.T, s.heads, s.hd, {}, operands, 0, bf16Qkv);
    INFO(run.report.error);
    REQUIRE(run.report.ok);
    CAPTURE(run.worst);
    CHECK(run.worst <= bound);
    MESSAGE((std::string(attentionMmaOperandsName(operands)) + (bf16Qkv ? " (bf16 qkv)" : "")) << ", T " << s.T << ", " << s.heads << " heads of " << s.hd
                                               << ": error / max |v| " << run.worst);
    CHECK(run.report.mmas > 0);
    CHECK(run.report.ldmatrices > 0);
    // Shared memory without bank conflicts (GpuRequestCost.h).
    for (const std::string &line : describeCostlyRequests(run.report, /*shared=*/true))
      FAIL_CHECK("bank conflict: " << line);
  }
}

} // namespace

TEST_CASE("GPU emulator: attention on the bf16 tensor cores matches float64 of its bf16 inputs, and broken fails") {
  // P rounded to bf16 (2^-9 a term) is the error left: 4.4e-4 to 1.02e-3
  // over three seeds.
  checkShapes(AttentionMmaOperands::bf16, std::ldexp(1.0, -8));
  AttentionMmaFaults noStagedBarrier, noTileBarrier, unswizzled, noWait, earlyPrefetch;
  noStagedBarrier.noBarrierAfterStaging = true;
  noTileBarrier.noBarrierBeforeRestaging = true;
  unswizzled.unswizzledReads = true;
  noWait.noWaitAfterStaging = true;
  earlyPrefetch.prefetchBeforeConvert = true;
  // The tiles' f32 rows are copied a tile ahead into the staging buffer:
  // reading them back before their wait, or copying the next ones over
  // them before they are read back, is caught.
  AttentionRun run = runAttention(200, 1, 64, noWait);
  CHECK_FALSE(run.report.ok);
  CHECK(run.report.error.find("has not been waited for") != std::string::npos);
  const std::string unwaited = run.report.error;
  run = runAttention(200, 1, 64, earlyPrefetch);
  CHECK_FALSE(run.report.ok);
  CHECK(run.report.error.find("two asynchronous copies in flight write shared byte") != std::string::npos);
  const std::string early = run.report.error;
  run = runAttention(200, 1, 64, noStagedBarrier);
  CHECK_FALSE(run.report.ok);
  CHECK(run.report.error.find("a missing gpu.barrier") != std::string::npos);
  const std::string staged = run.report.error;
  run = runAttention(200, 1, 64, noTileBarrier);
  CHECK_FALSE(run.report.ok);
  CHECK(run.report.error.find("before the buffer is refilled") != std::string::npos);
  const std::string restaged = run.report.error;
  // One buffer of tiles (where two do not fit): a second barrier a tile,
  // after the products; without it the next rounding overwrites tiles
  // being read.
  AttentionRun single = runAttention(200, 2, 64, {}, AttentionMmaOperands::bf16, 1);
  REQUIRE(single.report.ok);
  CHECK(single.worst <= std::ldexp(1.0, -8));
  run = runAttention(200, 1, 64, noTileBarrier, AttentionMmaOperands::bf16, 1);
  CHECK_FALSE(run.report.ok);
  CHECK(run.report.error.find("before the buffer is refilled") != std::string::npos);
  run = runAttention(200, 1, 64, unswizzled);
  // Reads in the wrong places: no hazard (the bytes were written and
  // published), a wrong result.
  CHECK((!run.report.ok || run.worst > 0.1));
  MESSAGE("one buffer: error / max |v| " << single.worst << "; caught: " << unwaited << " / " << early << " / "
                                         << staged << " / " << restaged << " / unswizzled: error / max |v| "
                                         << run.worst);
}

TEST_CASE("GPU emulator: attention of a bf16 qkv copies its tiles as they are, matches float64, and broken fails") {
  // The same bound as f32 inputs rounded in the kernel: the same bf16
  // values reach the MMAs, by cp.async straight into the swizzled tiles.
  checkShapes(AttentionMmaOperands::bf16, std::ldexp(1.0, -8), /*bf16Qkv=*/true);
  // Bit for bit the result of the f32 qkv rounded in the kernel.
  for (int64_t hd : {16, 64, 128}) {
    CAPTURE(hd);
    AttentionRun rounded = runAttention(100, 2, hd), copied = runAttention(100, 2, hd, {}, AttentionMmaOperands::bf16, 0, true);
    REQUIRE(rounded.report.ok);
    REQUIRE(copied.report.ok);
    CHECK(rounded.out == copied.out);
  }
  AttentionRun single = runAttention(200, 2, 64, {}, AttentionMmaOperands::bf16, 1, true);
  REQUIRE(single.report.ok);
  CHECK(single.worst <= std::ldexp(1.0, -8));
  AttentionMmaFaults noStagedBarrier, noTileBarrier, noWait, unswizzled;
  noStagedBarrier.noBarrierAfterStaging = true;
  noTileBarrier.noBarrierBeforeRestaging = true;
  noWait.noWaitAfterStaging = true;
  unswizzled.unswizzledReads = true;
  AttentionRun run = runAttention(200, 1, 64, noWait, AttentionMmaOperands::bf16, 0, true);
  CHECK_FALSE(run.report.ok);
  CHECK(run.report.error.find("a missing nvgpu.device_async_wait") != std::string::npos);
  const std::string unwaited = run.report.error;
  run = runAttention(200, 1, 64, noStagedBarrier, AttentionMmaOperands::bf16, 0, true);
  CHECK_FALSE(run.report.ok);
  CHECK(run.report.error.find("a missing gpu.barrier") != std::string::npos);
  const std::string staged = run.report.error;
  // The next tiles copied into the buffer being read.
  run = runAttention(200, 1, 64, noTileBarrier, AttentionMmaOperands::bf16, 0, true);
  CHECK_FALSE(run.report.ok);
  const std::string overRead = run.report.error;
  run = runAttention(200, 1, 64, noTileBarrier, AttentionMmaOperands::bf16, 1, true);
  CHECK_FALSE(run.report.ok);
  const std::string overReadSingle = run.report.error;
  run = runAttention(200, 1, 64, unswizzled, AttentionMmaOperands::bf16, 0, true);
  CHECK((!run.report.ok || run.worst > 0.1));
  MESSAGE("bf16 qkv, one buffer: error / max |v| " << single.worst << "; caught: " << unwaited << " / " << staged
                                                  << " / " << overRead << " / one buffer: " << overReadSingle
                                                  << " / unswizzled: error / max |v| " << run.worst);
}

TEST_CASE("GPU emulator: attention on the tensor cores as 3xtf32 matches float64 of its f32 inputs to f32's bound, and broken fails") {
  // The shapes of the bf16 test; f32 tiles with padded rows staged by
  // cp.async, the own rows in a tile of their own, P's accumulators as A
  // fragments in a permuted k order that the B rows' scalar loads follow:
  // 2.53e-7 to 3.97e-7 on one seed.
  checkShapes(AttentionMmaOperands::tf32x3, 1e-5);
  // One MMA of tf32 operands instead of three: tf32's error, not f32's.
  AttentionRun tf32 = runAttention(200, 1, 64, {}, AttentionMmaOperands::tf32);
  REQUIRE(tf32.report.ok);
  CHECK(tf32.worst > 1e-5);
  CHECK(tf32.worst <= 5e-3);
  // One buffer (the head of 128 above has one; here a head of 64 too):
  // its tiles copied and waited for at once, a second barrier a tile.
  AttentionRun single = runAttention(200, 2, 64, {}, AttentionMmaOperands::tf32x3, 1);
  REQUIRE(single.report.ok);
  CHECK(single.worst <= 1e-5);
  AttentionMmaFaults noStagedBarrier, noWait, unpermuted, oneBuffer;
  noStagedBarrier.noBarrierAfterStaging = true;
  noWait.noWaitAfterStaging = true;
  unpermuted.unpermutedRows = true;
  oneBuffer.noBarrierBeforeRestaging = true;
  // Two buffers of tiles, the next tile's copies issued after the barrier
  // that publishes the present one: copied into the buffer being read
  // instead, they are caught.
  AttentionRun run = runAttention(200, 1, 64, oneBuffer, AttentionMmaOperands::tf32x3);
  CHECK_FALSE(run.report.ok);
  CHECK(run.report.error.find("has not been waited for") != std::string::npos);
  const std::string overRead = run.report.error;
  run = runAttention(200, 1, 64, noStagedBarrier, AttentionMmaOperands::tf32x3);
  CHECK_FALSE(run.report.ok);
  CHECK(run.report.error.find("a missing gpu.barrier") != std::string::npos);
  const std::string staged = run.report.error;
  // cp.async data lands at the wait: without it the tiles are read stale.
  run = runAttention(200, 1, 64, noWait, AttentionMmaOperands::tf32x3);
  CHECK_FALSE(run.report.ok);
  CHECK(run.report.error.find("a missing nvgpu.device_async_wait") != std::string::npos);
  const std::string unwaited = run.report.error;
  run = runAttention(200, 1, 64, unpermuted, AttentionMmaOperands::tf32x3);
  CHECK((!run.report.ok || run.worst > 0.1));
  MESSAGE("tf32: error / max |v| " << tf32.worst << "; one buffer: " << single.worst << "; caught: " << overRead
                                  << " / " << staged
                                  << " / no cp.async wait: " << unwaited
                                  << " / B rows in the natural k order: error / max |v| " << run.worst);
}
