// test_gpu_attention_steps.cpp - causal attention in whole steps compiled
// for CUDA targets, run under the lane-level emulator (NOVA_GPU=emulate)
// against the float64 interpreter: the kernels of a few lanes a row, the
// tensor-core kernels with each matmul precision's operands, and the
// backward reading the forward's statistics. (Its own file, so that ctest
// runs it beside the other GPU steps' tests.)
#include "gpu_steps.hpp"
#include "testing.hpp"
#include "scoped_env.hpp"

#include <nova/executable_desc.hpp>

#include "compiler/target/cuda/PtxAssembler.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

using nova::DType;
using nova::Tensor;
using namespace nova_test;

TEST_CASE("causal attention on an emulated A100, a few lanes a row or on the tensor cores: forward and gradient match the interpreter, past one block of rows") {
  // T = 270: the forward's rows over three blocks of 128, its keys over
  // 5 shared tiles of 64 rows (the last partly past the sequence), the
  // backward in two kernels (query rows, then key rows; the statistics
  // between them in a workspace), each 5 blocks of 64 rows (a thread
  // each); T = 13 with 3 heads (one tile of 16 rows); T = 33 with heads of
  // 24 columns (2 lanes a row of 12 columns in f32, 4 of 6 in f64); T = 70
  // with a head of 64 columns (4 lanes a row in f32, 8 in f64, their dot
  // products summed by shuffles; tiles of 64 rows in f32, 32 in f64); heads
  // of 128 columns (8 lanes a row in f32, 16 in f64) and of 72 (8 lanes of
  // 9 columns); a head of 136 columns (wider than a thread's registers
  // take) keeps the kernel of a thread per (batch, head), the backward in
  // one; f32 and f64.
  struct Shape { std::int64_t B, T, d, heads; };
  Env env;
  env.set("NOVA_TARGET", "sm_80");
  env.set("NOVA_GPU", "emulate");
  auto fused = [](auto qkv, std::int64_t h) { return nova::causal_attention(qkv, h, 0.7); };
  auto fused_grad = [](auto w, auto qkv, std::int64_t h) {
    return nova::gradients(nova::sum(nova::causal_attention(qkv, h, 0.7) * w), {qkv})[0];
  };
  constexpr auto interp = nova::ExecMode::interpreted;
  for (Shape s : {Shape{1, 270, 4, 1}, Shape{2, 13, 12, 3}, Shape{2, 33, 48, 2}, Shape{1, 70, 64, 1},
                  Shape{1, 70, 128, 1}, Shape{1, 40, 72, 1}, Shape{1, 6, 136, 1}})
    for (DType dt : {DType::f32, DType::f64}) {
      Gen g;
      INFO("seed = ", g.seed, ", B ", s.B, " T ", s.T, " d ", s.d, " heads ", s.heads, ", ", nova::name_of(dt));
      Tensor qkv = g.randn({s.B, s.T, 3 * s.d}, dt), w = g.randn({s.B, s.T, s.d}, dt);
      auto heads = nova::static_arg(s.heads);
      const double tol = dt == DType::f32 ? 1e-5 : 1e-12;
      CHECK(rel_error(nova::jit(fused)(qkv, heads), nova::jit(fused, interp)(qkv, heads)) <= tol);
      CHECK(rel_error(nova::jit(fused_grad)(w, qkv, heads), nova::jit(fused_grad, interp)(w, qkv, heads)) <= tol);
      const bool rows = s.d / s.heads <= 128;
      CHECK(launches_ending_in(nova::jit(fused_grad).executable(w, qkv, heads)->description(), "_keys") == int(rows));
    }
}

TEST_CASE("causal attention and its gradient run on the tensor cores with the matmuls' operands (bf16 m16n8k16, tf32 m16n8k8, f32 as 3xtf32) on an emulated A100, H100 and RTX 3060, within each precision's bound of the interpreter") {
  // Q K^T and P V, backward dO V^T, dS K, dS^T Q and P^T dO, as products
  // with f32 sums (GpuAttentionMma.h): 64 rows a block, tiles of 64
  // visited rows. T = 270: 5 row blocks and 5 tiles, the last partly past
  // the sequence; T = 13: one tile, mostly past it; 3 heads of 16 columns;
  // heads of 32 and 64; a head of 128 over T = 100 (2 row blocks, the
  // backward's tiles in halves of 32 rows, the last cut by the sequence's
  // end; bf16 rows in tiles of their own, f32 ones in one buffer of tiles
  // on the A100; on the RTX 3060's 99 KiB, bf16 rows in registers, one
  // buffer); one of 72 (not a power of two) a row at a time both ways. Scores at a softmax's usual scale (1 / sqrt(head)) and 4 times
  // it. With f32 matmuls the products are 3xtf32: within f32's bound, and
  // tf32 ones (one MMA, operands truncated to 10 bits) are not. (Every
  // shape and scale with bf16; 3xtf32 at 4 times the scale and tf32 on
  // fewer, and the H100, whose kernels are the A100's, at the usual scale
  // alone: the emulator's time. Under the sanitizers the usual scale
  // alone: 4 times it builds the same kernels with another constant; nor
  // the H100 and tf32 there: the A100's kernels, and 3xtf32's generators
  // with one MMA a fragment.)
  struct Shape { std::int64_t B, T, d, heads; };
  Fp32AtExit restore;
  constexpr auto interp = nova::ExecMode::interpreted;
  auto ptx_has = [](const nova::ExecutableDesc* desc, const char* text) {
    std::string ptx(desc->object.begin(), desc->object.end());
    return ptx.find(text) != std::string::npos;
  };
  // f32 exponentials by the SFU (ex2.approx), on the tensor cores or not.
  auto has_ex2 = [&](const nova::ExecutableDesc* desc) { return ptx_has(desc, "ex2.approx.ftz.f32"); };
  for (const char* chip : {"sm_80", "sm_86", "sm_90a"})
    for (Shape s : {Shape{1, 270, 64, 1}, Shape{2, 13, 48, 3}, Shape{2, 70, 64, 2}, Shape{1, 100, 128, 1},
                    Shape{1, 40, 72, 1}})
      for (double boost : {1.0, 4.0}) {
        if (std::string(chip) == "sm_90a" && s.T != 270) continue;
        if (std::string(chip) == "sm_86" && s.d != 128) continue;
        EmulatedGpu gpu(chip);
        Gen g;
        const std::int64_t hd = s.d / s.heads;
        const double scale = boost / std::sqrt(double(hd));
        INFO("seed = ", g.seed, ", ", chip, ", B ", s.B, " T ", s.T, " d ", s.d, " heads ", s.heads, ", scale ", scale);
        auto attention = [](auto qkv, std::int64_t h, double c) { return nova::causal_attention(qkv, h, c); };
        auto gradient = [](auto w, auto qkv, std::int64_t h, double c) {
          return nova::gradients(nova::sum(nova::causal_attention(qkv, h, c) * w), {qkv})[0];
        };
        Tensor qkv = g.randn({s.B, s.T, 3 * s.d}), w = g.randn({s.B, s.T, s.d});
        auto heads = nova::static_arg(s.heads);
        auto c = nova::static_arg(scale);
        const bool forward_mma = hd == 16 || hd == 32 || hd == 64 || hd == 128, backward_mma = forward_mma;
        for (auto precision : {nova::MatmulPrecision::bf16, nova::MatmulPrecision::tf32, nova::MatmulPrecision::fp32}) {
          const bool bf16 = precision == nova::MatmulPrecision::bf16, tf32 = precision == nova::MatmulPrecision::tf32;
          const bool h100 = std::string(chip) == "sm_90a", fp32 = !bf16 && !tf32;
          const bool rtx3060 = std::string(chip) == "sm_86";
          if ((rtx3060 && (boost > 1 || !bf16)) || (nova_test::kSanitized && (boost > 1 || h100 || tf32)) ||
              (h100 && boost > 1) || (fp32 && boost > 1 && s.T != 270) ||
              (tf32 && !(s.T == 270 || (s.T == 13 && boost == 1))))
            continue;
          const char* name = bf16 ? "bf16" : tf32 ? "tf32" : "fp32";
          CAPTURE(name);
          nova::set_matmul_precision(precision);
          const double forward = rel_error(nova::jit(attention)(qkv, heads, c), nova::jit(attention, interp)(qkv, heads, c));
          const double backward =
              rel_error(nova::jit(gradient)(w, qkv, heads, c), nova::jit(gradient, interp)(w, qkv, heads, c));
          MESSAGE(std::string(chip), " ", std::string(name), " T ", s.T, " head ", hd, " scale x", boost, ": forward ", forward, ", gradient ",
                  backward);
          // bf16: a score's error grows with it (its operands' rounding,
          // 2^-9 each): at the usual scale errors of 1.8e-3 to 4.3e-3 on
          // six seeds, at 4 times it up to 1.15e-2 (forward) and 1.25e-2.
          // tf32 (2^-11 each, truncated by the emulator's MMA as the ISA
          // says wgmma does: 2^-10): half of bf16's bounds (errors of 7.5e-4
          // to 2.0e-3 at either scale on one seed); 3xtf32: 3.7e-7 to 1.9e-6.
          const double bound = bf16 ? (boost > 1 ? 2e-2 : 1e-2) : tf32 ? (boost > 1 ? 1e-2 : 5e-3) : 1e-5;
          CHECK(forward <= bound);
          CHECK(backward <= bound);
          const nova::ExecutableDesc* f = nova::jit(attention).executable(qkv, heads, c)->description();
          const nova::ExecutableDesc* b = nova::jit(gradient).executable(w, qkv, heads, c)->description();
          const char* mma = bf16 ? "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
                                 : "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32";
          CHECK(ptx_has(f, mma) == forward_mma);
          CHECK(ptx_has(b, mma) == backward_mma);
          CHECK(has_ex2(f));
          CHECK(has_ex2(b));
          // Rounded operands: not f32's result.
          if (!(precision == nova::MatmulPrecision::fp32) && forward_mma) CHECK(forward > 1e-5);
          if (!(precision == nova::MatmulPrecision::fp32) && backward_mma) CHECK(backward > 1e-5);
          CHECK(launches_ending_in(b, "_keys") == 1);
          if (assembles_ptx() && boost == 1.0) // (4 times the scale: the same kernels, another constant)
            for (const nova::ExecutableDesc* d : {f, b})
              CHECK(ptxas_errors(std::string(d->object.begin(), d->object.end()), chip) == "");
        }
      }
}

TEST_CASE("where a step has attention's forward and backward on the tensor cores, the backward's query rows read the forward's log-sum-exp and result (one pass over the keys), within each precision's bound of the interpreter") {
  // As in a GPT: O multiplied by a weight, whose gradient reads O, so O
  // stays whole (no op writes over it) until the query rows read it
  // (GpuAttentionForwardStats.h). T = 270 (5 row blocks, the last tile cut
  // by the sequence's end), 3 heads of 16 columns over 13 rows; bf16 and
  // fp32 (3xtf32) products. (Where an elementwise op on O is its last use
  // it writes over O, and the query rows compute the statistics
  // themselves, as the other tests' steps do.)
  struct Shape { std::int64_t B, T, d, heads; };
  Fp32AtExit restore;
  constexpr auto interp = nova::ExecMode::interpreted;
  auto both = [](auto w, auto qkv, auto proj, std::int64_t h, double c) {
    return nova::gradients(nova::sum(nova::matmul(nova::causal_attention(qkv, h, c), proj) * w), {qkv, proj});
  };
  for (const char* chip : {"sm_80"})
    for (Shape s : {Shape{1, 270, 64, 1}, Shape{2, 13, 48, 3}}) {
      EmulatedGpu gpu(chip);
      Gen g;
      const double scale = 1.0 / std::sqrt(double(s.d / s.heads));
      INFO("seed = ", g.seed, ", ", chip, ", B ", s.B, " T ", s.T, " d ", s.d, " heads ", s.heads);
      Tensor qkv = g.randn({s.B, s.T, 3 * s.d}), w = g.randn({s.B, s.T, s.d}), proj = g.randn({s.B, s.d, s.d});
      auto heads = nova::static_arg(s.heads);
      auto c = nova::static_arg(scale);
      for (auto precision : {nova::MatmulPrecision::bf16, nova::MatmulPrecision::fp32}) {
        const bool bf16 = precision == nova::MatmulPrecision::bf16;
        CAPTURE(bf16);
        nova::set_matmul_precision(precision);
        std::vector<Tensor> got = nova::jit(both)(w, qkv, proj, heads, c);
        std::vector<Tensor> want = nova::jit(both, interp)(w, qkv, proj, heads, c);
        REQUIRE(got.size() == 2);
        const double error = rel_error(got[0], want[0]), weight = rel_error(got[1], want[1]);
        MESSAGE(std::string(chip), bf16 ? " bf16" : " fp32", " T ", s.T, " head ", s.d / s.heads, ": d(qkv) ", error,
                ", d(proj) ", weight);
        // bf16: two products in a row (attention's, then the weight's), D
        // from O as stored (bf16, the weight's operand, as FlashAttention-2
        // reads it under autocast): d(qkv) 2.15e-3 to 6.76e-3 over seven
        // seeds and three shapes (with D from P and dP, on three of the
        // seeds, up to 4.68e-3 where these gave 6.05e-3), d(proj) 2.36e-3
        // to 5.28e-3; fp32 2.46e-7 to 2.13e-6.
        CHECK(error <= (bf16 ? 1.5e-2 : 1e-5));
        CHECK(weight <= (bf16 ? 1.5e-2 : 1e-5));
        const nova::ExecutableDesc* desc = nova::jit(both).executable(w, qkv, proj, heads, c)->description();
        std::string all;
        for (const auto& k : desc->kernels) all += k.summary + "\n";
        INFO(all);
        CHECK(all.find("(query rows: dq; the forward's statistics)") != std::string::npos);
        CHECK(launches_ending_in(desc, "_keys") == 1);
      }
    }
}

TEST_CASE("attention with heads of 128 assembles for the A100 and the H100 with its accumulators in registers (at most a few bytes spilled), with bf16 and with 3xtf32 operands") {
  // As in a GPT (the product after attention: the backward's query rows
  // read the forward's statistics). The backward's tiles in halves and
  // bf16 own rows in shared tiles keep ptxas 13.0's spills of the
  // attention kernels (252 to 255 registers each) to none or 4 bytes
  // (whole tiles: 192 to 344 bytes a lane in the backward; bf16 fragments
  // in registers: 104 bytes in the H100's forward). (The query rows that
  // compute the statistics themselves, a gradient of attention alone, do
  // two passes over the keys and spill more at some shapes: with tf32 and
  // 3xtf32 operands none or 12 bytes at T = 256, 128 to 304 at T = 128.)
  // Compiled only, not run (the emulated runs are the A100's, above); tf32
  // operands take the 3xtf32 kernels' structure with a third of the MMAs.
  // Not under the sanitizers: ptxas's registers are the same there.
  if (!assembles_ptx()) return;
  Fp32AtExit restore;
  auto both = [](auto w, auto qkv, auto proj, std::int64_t h, double c) {
    return nova::gradients(nova::sum(nova::matmul(nova::causal_attention(qkv, h, c), proj) * w), {qkv, proj});
  };
  Tensor qkv = Tensor::zeros({2, 128, 384}), w = Tensor::zeros({2, 128, 128}), proj = Tensor::zeros({2, 128, 128});
  auto heads = nova::static_arg(1);
  auto scale = nova::static_arg(0.088);
  for (const char* chip : {"sm_80", "sm_90a"})
    for (auto precision : {nova::MatmulPrecision::bf16, nova::MatmulPrecision::fp32}) {
      EmulatedGpu gpu(chip);
      nova::set_matmul_precision(precision);
      const nova::ExecutableDesc* desc = nova::jit(both).executable(w, qkv, proj, heads, scale)->description();
      CAPTURE(chip);
      CAPTURE(nova::name_of(precision));
      CHECK(launches_ending_in(desc, "_keys") == 1);
      // ptxas -v's registers and spills a kernel, as the CUDA target reads them.
      std::string error;
      mlir::FailureOr<mlir::nova::Cubin> cubin = mlir::nova::assemblePtx(
          kPtxas.string(), std::string(desc->object.begin(), desc->object.end()), chip, error);
      INFO(error);
      REQUIRE(mlir::succeeded(cubin));
      std::map<std::string, int> spills;
      for (const mlir::nova::PtxasKernelInfo& k : cubin->kernels) spills[k.name] = k.spillStoreBytes;
      int attention = 0;
      for (const auto& k : desc->kernels) {
        if (k.summary.find("nova.attention_kernel") == std::string::npos) continue;
        ++attention;
        CAPTURE(k.symbol);
        REQUIRE(spills.count(k.symbol) == 1);
        CHECK(spills[k.symbol] <= 16);
      }
      CHECK(attention == 3);
    }
}
