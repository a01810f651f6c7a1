// test_gpu_emulator.cpp - the GPU kernels the CUDA target generates, run
// on the CPU by the lane-exact emulator (target/cuda/GpuEmulator.cpp):
//   - ldmatrix against the PTX ISA's description of its fragments;
//   - the mma.sync matmul kernel for f16, bf16 and tf32, several tiles and
//     depths and the configurator's own decisions, against a float64
//     product of the same (type-rounded) inputs, with bounds that fit the
//     precision (relative to sum |a b|: 2 k 2^-24 for f32 accumulation,
//     2^-8 more for tf32's truncated inputs);
//   - the same kernel deliberately broken (no barrier after the wait, no
//     barrier before a refill, a wait one group short, unswizzled reads):
//     each one is caught;
//   - the simt matmul kernel (f32 on FMAs) against float64, and without
//     either of its barriers: caught.
// Inputs come from a printed seed (NOVA_TEST_SEED overrides it).
#include <doctest/doctest.h>

#include "compiler/target/cuda/GpuConfigurator.h"
#include "compiler/target/cuda/GpuEmulator.h"
#include "compiler/target/cuda/GpuPasses.h"
#include "compiler/target/cuda/GpuSimtMatmul.h"
#include "compiler/target/cuda/MatmulKernelParts.h"
#include "compiler/target/cuda/MmaMatmulKernel.h"
#include "compiler/target/cuda/PtxEmitter.h"
#include "compiler/target/cuda/WgmmaMatmulKernel.h"
#include "nova/target.hpp"
#include "unit/test_seed.hpp"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <tuple>

using namespace mlir;
using namespace mlir::nova;

namespace {

MLIRContext &context() {
  static MLIRContext *ctx = [] {
    DialectRegistry registry;
    registerGpuCodegenDialects(registry);
    registry.insert<linalg::LinalgDialect>(); // the simt kernel is written over a matmul generic
    auto *c = new MLIRContext(registry);
    c->loadAllAvailableDialects();
    return c;
  }();
  return *ctx;
}

std::vector<uint8_t> halves(const std::vector<float> &values, bool bf16) {
  std::vector<uint8_t> out(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    uint16_t b = bf16 ? toBFloat16Bits(values[i]) : toHalfBits(values[i]);
    std::memcpy(out.data() + 2 * i, &b, 2);
  }
  return out;
}

/// The ops of `report` whose shared-memory requests conflict
/// (GpuRequestCost.h), one line each; empty if none. (Global sectors are
/// not checked here: rows that are not whole sectors, as most of these
/// shapes' are on purpose, take more of them whatever the kernel does.)
std::string bankConflicts(const EmulatorReport &report) {
  std::string out;
  for (const std::string &line : describeCostlyRequests(report, /*shared=*/true))
    out += "bank conflict: " + line + "\n";
  return out;
}

struct MatmulRun {
  EmulatorReport report;
  double worst = 0;  ///< largest |got - want| / sum_k |a_ik b_kj|
  double bound = 0;
  std::string config;
};

/// Builds the kernel for `p` / `c` (mma.sync, or TMA + wgmma for a wgmma
/// config), runs it on random inputs and compares with float64.
MatmulRun runMatmul(const GpuMatmulProblem &p, const GpuMatmulConfig &c, const MmaMatmulFaults &faults = {},
                    const MmaEpilogue &epilogue = {}, const WgmmaMatmulFaults &wgmmaFaults = {},
                    const std::function<void(std::vector<::nova::TensorMapDesc> &)> &editMaps = {},
                    bool elseFirst = false, bool peersLag = false) {
  MatmulRun run;
  run.config = c.describe();
  MLIRContext &ctx = context();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&ctx));
  gpu::GPUModuleOp kernels = addKernelsModule(*module);
  std::string error;
  FailureOr<gpu::GPUFuncOp> kernel = failure();
  std::vector<::nova::TensorMapDesc> maps;
  if (c.kind == GpuMmaKind::wgmma) {
    FailureOr<WgmmaMatmulKernel> built =
        buildWgmmaMatmulKernel(kernels, "matmul", p, c, error, wgmmaFaults, epilogue);
    if (succeeded(built)) {
      kernel = built->func;
      maps = built->maps;
    }
  } else {
    kernel = buildMmaSyncMatmulKernel(kernels, "matmul", p, c, error, faults, epilogue);
  }
  REQUIRE_MESSAGE(succeeded(kernel), error);
  REQUIRE(succeeded(verify(*module)));
  if (editMaps)
    editMaps(maps);

  const uint64_t seed = nova_test::test_seed() ^ (uint64_t(p.m * 131 + p.n * 17 + p.k) << 20);
  INFO("seed = ", seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const bool sixteen = p.operand == GpuOperand::f16 || p.operand == GpuOperand::bf16;
  const bool x3 = p.operand == GpuOperand::tf32x3;
  const bool bf16 = p.operand == GpuOperand::bf16;
  auto round = [&](float x) {
    return !sixteen ? x : bf16 ? fromBFloat16Bits(toBFloat16Bits(x)) : fromHalfBits(toHalfBits(x));
  };
  // Logical a[batch][m][k], b[batch][k][n]; stored transposed when asked.
  std::vector<float> a(size_t(p.batch * p.m * p.k)), bm(size_t(p.batch * p.k * p.n));
  for (float &x : a)
    x = round(dist(rng));
  for (float &x : bm)
    x = round(dist(rng));
  auto aAt = [&](int64_t z, int64_t i, int64_t k) { return a[size_t((z * p.m + i) * p.k + k)]; };
  auto bAt = [&](int64_t z, int64_t k, int64_t j) { return bm[size_t((z * p.k + k) * p.n + j)]; };
  // B by columns ([batch][n][k]): B stored transposed, and what the
  // reference below reads.
  std::vector<float> aStored(a.size()), bColumns(bm.size());
  for (int64_t z = 0; z < p.batch; ++z) {
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t k = 0; k < p.k; ++k)
        aStored[size_t(p.lhsTransposed ? (z * p.k + k) * p.m + i : (z * p.m + i) * p.k + k)] = aAt(z, i, k);
    for (int64_t k = 0; k < p.k; ++k)
      for (int64_t j = 0; j < p.n; ++j)
        bColumns[size_t((z * p.n + j) * p.k + k)] = bAt(z, k, j);
  }
  const std::vector<float> &bStored = p.rhsTransposed ? bColumns : bm;
  // Split-K: C is the parts' partial products, summed here in part order
  // in f32 (as the step's sum kernel does).
  const int64_t layers = c.splitK > 1 ? c.splitK : p.batch;
  // C in bf16 where the epilogue rounds to it (bf16ResultEpilogue).
  const bool bf16Out = epilogue.body && epilogue.result && epilogue.result.isBF16();
  const size_t cBytes = bf16Out ? 2 : 4;
  std::vector<uint8_t> A, B, C(size_t(layers * p.m * p.n) * cBytes, 0);
  if (sixteen) {
    A = halves(aStored, bf16);
    B = halves(bStored, bf16);
  } else {
    A.resize(aStored.size() * 4);
    std::memcpy(A.data(), aStored.data(), A.size());
    B.resize(bStored.size() * 4);
    std::memcpy(B.data(), bStored.data(), B.size());
  }
  EmulatorLaunch launch;
  // The grid the kernel was built for (a persistent kernel's fewer blocks).
  std::optional<ArrayRef<int32_t>> grid = kernel->getKnownGridSize();
  REQUIRE(grid);
  launch.grid = {(*grid)[0], (*grid)[1], (*grid)[2]};
  CHECK(launch.grid[0] * launch.grid[1] * launch.grid[2] ==
        (c.persistentBlocks > 0 ? c.persistentBlocks
                                : (p.n + c.blockN - 1) / c.blockN * ((p.m + c.blockM - 1) / c.blockM) * layers));
  launch.block = {c.threads, 1, 1};
  launch.dynamicSharedBytes = gpuMatmulSmemBytes(c, p.operand);
  launch.elseFirst = elseFirst;
  launch.peersLag = peersLag;
  // A kernel of clusters says how many CTAs (the launcher's cluster attribute).
  if (auto dims = kernel->getOperation()->getAttrOfType<DenseI32ArrayAttr>(kClusterDimsAttr))
    launch.cluster = {dims[0], dims[1], dims[2]};
  launch.args = {&A, &B, &C};
  if (!maps.empty()) {
    // The maps read A and B; the kernel takes them where A and B would be.
    launch.args = {nullptr, nullptr, &C};
    for (const ::nova::TensorMapDesc &map : maps)
      launch.tensorMaps[int(map.arg)] = EmulatorTensorMap{map, map.arg == 0 ? std::span<uint8_t>(A)
                                                                            : std::span<uint8_t>(B)};
  }
  std::vector<float> bias(size_t(p.n)), residual(size_t(p.batch * p.m * p.n));
  for (float &x : bias)
    x = dist(rng);
  for (float &x : residual)
    x = dist(rng);
  std::vector<uint8_t> biasBytes(bias.size() * 4), residualBytes(residual.size() * 4);
  std::memcpy(biasBytes.data(), bias.data(), biasBytes.size());
  std::memcpy(residualBytes.data(), residual.data(), residualBytes.size());
  if (epilogue.bias)
    launch.args.push_back(&biasBytes);
  if (epilogue.residual)
    launch.args.push_back(&residualBytes);
  run.report = emulateKernel(*kernel, launch);
  if (!run.report.ok)
    return run;
  // Relative to sum_k |a_ik b_kj|: f32 accumulation of k terms errs by at
  // most k 2^-24 of it (f16 and bf16 products are exact in f32); tf32
  // truncates both inputs to 10 mantissa bits, 2^-9 more. 3xtf32: 3k
  // terms accumulated, and a product's dropped parts (small x small, 2^-22
  // of it, and each small half's low bits, dropped by the MMA: 2^-21 each)
  // under 5 x 2^-22 of it.
  run.bound = x3 ? 2 * (3 * double(p.k) * std::ldexp(1.0, -24) + 5 * std::ldexp(1.0, -22))
                 : 2 * (double(p.k) * std::ldexp(1.0, -24) + (sixteen ? 0.0 : std::ldexp(1.0, -9)));
  // A bf16 C: the sum rounded once more, by at most 2^-9 of it (<= sum |a b|).
  if (bf16Out)
    run.bound += 2 * std::ldexp(1.0, -9);
  // A probe's product (MmaSyncProbe): term k of the sum reads A's column
  // and B's row `read(k)`: sharedOnly slab s reads slab s mod (stages - 1)
  // (the prologue's), mmaOnly every k step the first one's mmaK columns.
  const int64_t mmaK = sixteen ? 16 : 8;
  auto read = [&](int64_t k) {
    if (wgmmaFaults.probeShared) // the first `stages` slabs, over and over
      return (k / c.blockK) % c.stages * c.blockK + k % c.blockK;
    switch (faults.probe) {
    case MmaSyncProbe::sharedOnly:
      return (k / c.blockK) % (c.stages - 1) * c.blockK + k % c.blockK;
    case MmaSyncProbe::mmaOnly:
      return k % mmaK;
    case MmaSyncProbe::none:
      break;
    }
    return k;
  };
  // The terms' k indices once, and B by columns: this loop is the test's
  // own time (its code is at -O1 under the sanitizers).
  std::vector<int64_t> ks(size_t(p.k));
  for (int64_t k = 0; k < p.k; ++k)
    ks[size_t(k)] = read(k);
  for (int64_t z = 0; z < p.batch; ++z)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        double want = 0, scale = 0;
        const float *aRow = a.data() + size_t((z * p.m + i) * p.k);
        const float *bColumn = bColumns.data() + size_t((z * p.n + j) * p.k);
        for (int64_t k : ks) {
          double prod = double(aRow[k]) * double(bColumn[k]);
          want += prod;
          scale += std::abs(prod);
        }
        float got = 0;
        for (int64_t part = 0; part < (c.splitK > 1 ? c.splitK : 1); ++part) {
          const size_t at = size_t(((z + part) * p.m + i) * p.n + j) * cBytes;
          float partial;
          if (bf16Out) {
            uint16_t bits;
            std::memcpy(&bits, C.data() + at, 2);
            partial = fromBFloat16Bits(bits);
          } else {
            std::memcpy(&partial, C.data() + at, 4);
          }
          got += partial;
        }
        // The epilogue in float64; its f32 steps add a few ulp of the values
        // they see (counted in `scale`), and GELU's slope is at most 1.13.
        double y = epilogue.scale * want + (epilogue.bias ? double(bias[size_t(j)]) : 0.0);
        double res = epilogue.residual ? double(residual[size_t((z * p.m + i) * p.n + j)]) : 0.0;
        double act = y;
        if (epilogue.activation == MmaEpilogue::Activation::relu)
          act = std::max(y, 0.0);
        else if (epilogue.activation == MmaEpilogue::Activation::gelu_tanh)
          act = 0.5 * y * (1 + std::tanh(0.7978845608028654 * (y + 0.044715 * y * y * y)));
        want = act + res;
        if (epilogue.scale != 1.0 || epilogue.bias || epilogue.residual ||
            epilogue.activation != MmaEpilogue::Activation::none)
          scale = 1.13 * std::abs(epilogue.scale) * scale + 64 * (std::abs(y) + std::abs(res) + 1) / run.bound *
                                                                  std::ldexp(1.0, -24);
        run.worst = std::max(run.worst, std::abs(double(got) - want) / std::max(scale, 1e-30));
      }
  return run;
}

GpuMatmulProblem problem(int64_t m, int64_t n, int64_t k, GpuOperand op) {
  GpuMatmulProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.operand = op;
  p.allowWgmma = false;
  p.allowSplitK = false;
  return p;
}

GpuMatmulConfig block(GpuOperand op, int64_t bm, int64_t bn, int64_t bk, int64_t wm, int64_t wn, int64_t stages) {
  GpuMatmulConfig c;
  c.kind = GpuMmaKind::mma_sync;
  c.blockM = bm;
  c.blockN = bn;
  c.blockK = bk;
  c.warpsM = wm;
  c.warpsN = wn;
  c.warpM = bm / wm;
  c.warpN = bn / wn;
  c.stages = stages;
  c.mmaM = 16;
  c.mmaN = 8;
  c.mmaK = op == GpuOperand::tf32 || op == GpuOperand::tf32x3 ? 8 : 16;
  c.threads = 32 * wm * wn;
  return c;
}

/// Runs a 32-thread kernel parsed from `text` on an 8x8 f16 matrix m[r][c] =
/// 8r + c; returns each lane's two halves.
std::vector<std::pair<float, float>> runLdmatrix(bool transpose) {
  std::string text = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @ld(%M: memref<8x8xf16>, %out: memref<32x2xf16>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %tid = gpu.thread_id x
      %dyn = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %s = memref.view %dyn[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<8x8xf16, #gpu.address_space<workgroup>>
      %r = arith.divui %tid, %c4 : index
      %q = arith.remui %tid, %c4 : index
      %col = arith.muli %q, %c2 : index
      %col1 = arith.addi %col, %c1 : index
      %v0 = memref.load %M[%r, %col] : memref<8x8xf16>
      %v1 = memref.load %M[%r, %col1] : memref<8x8xf16>
      memref.store %v0, %s[%r, %col] : memref<8x8xf16, #gpu.address_space<workgroup>>
      memref.store %v1, %s[%r, %col1] : memref<8x8xf16, #gpu.address_space<workgroup>>
      gpu.barrier
      %row = arith.remui %tid, %c8 : index
      %f = nvgpu.ldmatrix %s[%row, %c0] {numTiles = 1 : i32, transpose = TRANSPOSE} : memref<8x8xf16, #gpu.address_space<workgroup>> -> vector<1x2xf16>
      %e = vector.extract %f[0] : vector<2xf16> from vector<1x2xf16>
      vector.store %e, %out[%tid, %c0] : memref<32x2xf16>, vector<2xf16>
      gpu.return
    }
  }
}
)mlir";
  text.replace(text.find("TRANSPOSE"), 9, transpose ? "true" : "false");
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context());
  REQUIRE(module);
  gpu::GPUFuncOp kernel;
  module->walk([&](gpu::GPUFuncOp f) { kernel = f; });
  std::vector<float> m(64);
  for (int i = 0; i < 64; ++i)
    m[size_t(i)] = float(i);
  std::vector<uint8_t> M = halves(m, false), out(32 * 2 * 2, 0);
  EmulatorLaunch launch;
  launch.block = {32, 1, 1};
  launch.dynamicSharedBytes = 128;
  launch.args = {&M, &out};
  EmulatorReport report = emulateKernel(kernel, launch);
  REQUIRE_MESSAGE(report.ok, report.error);
  std::vector<std::pair<float, float>> lanes;
  for (int l = 0; l < 32; ++l) {
    uint16_t lo, hi;
    std::memcpy(&lo, out.data() + 4 * l, 2);
    std::memcpy(&hi, out.data() + 4 * l + 2, 2);
    lanes.push_back({fromHalfBits(lo), fromHalfBits(hi)});
  }
  return lanes;
}

} // namespace

TEST_CASE("GPU emulator: ldmatrix gives each lane the fragment the PTX ISA describes") {
  // ISA, ldmatrix: "each row of 8 elements is loaded by a group of four
  // consecutive threads": lane l holds row l / 4, elements 2 (l % 4) and
  // 2 (l % 4) + 1; with .trans the matrix is read column-major, so lane l
  // holds column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1.
  auto plain = runLdmatrix(false), trans = runLdmatrix(true);
  for (int l = 0; l < 32; ++l) {
    CAPTURE(l);
    CHECK(plain[size_t(l)].first == float(8 * (l / 4) + 2 * (l % 4)));
    CHECK(plain[size_t(l)].second == float(8 * (l / 4) + 2 * (l % 4) + 1));
    CHECK(trans[size_t(l)].first == float(8 * (2 * (l % 4)) + l / 4));
    CHECK(trans[size_t(l)].second == float(8 * (2 * (l % 4) + 1) + l / 4));
  }
}

TEST_CASE("GPU emulator: the shared-memory bank model (docs/notes.md, ptx-semantics.md §8)") {
  auto lanes = [](int64_t n, auto addressOf) {
    std::vector<int64_t> v(32, -1);
    for (int64_t l = 0; l < n; ++l)
      v[size_t(l)] = addressOf(l);
    return v;
  };
  auto cost = [](const std::vector<int64_t> &v, int64_t bytes) {
    RequestCost c = sharedRequestCost(v, bytes);
    return std::vector<int64_t>{c.taken, c.ideal, c.worstDegree};
  };
  using V = std::vector<int64_t>;
  // 4 bytes a lane: consecutive words, one word for all (a broadcast),
  // two words a bank (stride 8 bytes), every lane in bank 0 (stride 128).
  CHECK(cost(lanes(32, [](int64_t l) { return 4 * l; }), 4) == V{1, 1, 1});
  CHECK(cost(lanes(32, [](int64_t) { return 256; }), 4) == V{1, 1, 1});
  CHECK(cost(lanes(32, [](int64_t l) { return 8 * l; }), 4) == V{2, 1, 2});
  CHECK(cost(lanes(32, [](int64_t l) { return 128 * l; }), 4) == V{32, 1, 32});
  // Two lanes a 4-byte word (2-byte elements): no conflict.
  CHECK(cost(lanes(32, [](int64_t l) { return 2 * l; }), 2) == V{1, 1, 1});
  // 8 bytes a lane: half-warps; 16: quarter-warps.
  CHECK(cost(lanes(32, [](int64_t l) { return 8 * l; }), 8) == V{2, 2, 1});
  CHECK(cost(lanes(32, [](int64_t l) { return 16 * l; }), 16) == V{4, 4, 1});
  CHECK(cost(lanes(32, [](int64_t l) { return 16 * l; }), 8) == V{4, 2, 2});
  // 32 bytes a lane: two 16-byte requests.
  CHECK(cost(lanes(32, [](int64_t l) { return 32 * l; }), 32) == V{16, 8, 2});
  // ldmatrix.x4 rows (lane 8j + q: row q of matrix j), §8: rows of 128
  // bytes unswizzled 8-way, of 64 bytes 4-way, swizzled (chunk c ^ row)
  // conflict-free.
  CHECK(cost(lanes(32, [](int64_t l) { return (l % 8) * 128 + (l / 8) * 16; }), 16) == V{32, 4, 8});
  CHECK(cost(lanes(32, [](int64_t l) { return (l % 8) * 64 + (l / 8) * 16; }), 16) == V{16, 4, 4});
  CHECK(cost(lanes(32, [](int64_t l) { return (l % 8) * 128 + (((l / 8) ^ (l % 8)) & 7) * 16; }), 16) ==
        V{4, 4, 1});
  // ldmatrix.x1: lanes 8 to 31 give no address; an all-idle phase costs nothing.
  CHECK(cost(lanes(8, [](int64_t l) { return l * 16; }), 16) == V{1, 1, 1});
  CHECK(cost(lanes(0, [](int64_t l) { return l; }), 4) == V{0, 0, 0});
}

TEST_CASE("GPU emulator: global requests in 32-byte sectors") {
  auto sectors = [](int64_t n, int64_t bytes, auto addressOf) {
    std::vector<int64_t> v(32, -1);
    for (int64_t l = 0; l < n; ++l)
      v[size_t(l)] = addressOf(l);
    RequestCost c = globalRequestCost(v, bytes);
    return std::vector<int64_t>{c.taken, c.ideal};
  };
  using V = std::vector<int64_t>;
  // A warp along a row: 4 sectors of f32, 16 of 16-byte vectors; the same
  // word for every lane: 1.
  CHECK(sectors(32, 4, [](int64_t l) { return 4 * l; }) == V{4, 4});
  CHECK(sectors(32, 16, [](int64_t l) { return 16 * l; }) == V{16, 16});
  CHECK(sectors(32, 4, [](int64_t) { return 64; }) == V{1, 1});
  // Down a column of 1024 floats (a row a lane): a sector a lane for 4.
  CHECK(sectors(32, 4, [](int64_t l) { return 4096 * l; }) == V{32, 4});
  // A misaligned run of 128 bytes spans 5 sectors; 8 bytes a lane at a
  // stride of 16 use half of each of 16 sectors.
  CHECK(sectors(32, 4, [](int64_t l) { return 4 * l + 8; }) == V{5, 4});
  CHECK(sectors(32, 8, [](int64_t l) { return 16 * l; }) == V{16, 8});
  CHECK(sectors(0, 4, [](int64_t l) { return l; }) == V{0, 0});
}

TEST_CASE("GPU emulator: the mma.sync matmul kernel matches float64 for f16, bf16 and tf32") {
  struct Case {
    GpuOperand op;
    int64_t m, n, k, bm, bn, bk, wm, wn, stages;
  };
  for (Case c : {Case{GpuOperand::f16, 256, 256, 256, 128, 128, 32, 2, 2, 2},
                 Case{GpuOperand::bf16, 256, 256, 256, 128, 128, 32, 2, 2, 3},
                 Case{GpuOperand::tf32, 256, 256, 256, 128, 128, 16, 2, 2, 2},
                 Case{GpuOperand::f16, 128, 384, 96, 64, 128, 32, 2, 2, 4},     // more stages than slabs
                 Case{GpuOperand::bf16, 192, 128, 128, 64, 64, 64, 2, 2, 2},    // 128-byte rows
                 Case{GpuOperand::tf32, 128, 256, 64, 128, 64, 32, 4, 1, 3},    // 128-byte rows
                 Case{GpuOperand::f16, 64, 64, 16, 64, 64, 16, 1, 2, 2},       // one slab
                 // The H200's 4096^3 decisions (bench/device/prepare.sh), on fewer tiles:
                 Case{GpuOperand::bf16, 512, 256, 512, 256, 128, 64, 4, 2, 4},
                 Case{GpuOperand::tf32, 256, 256, 256, 256, 128, 32, 4, 2, 4}}) {
    CAPTURE(std::string(nameOf(c.op)));
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    MatmulRun run = runMatmul(problem(c.m, c.n, c.k, c.op), block(c.op, c.bm, c.bn, c.bk, c.wm, c.wn, c.stages));
    CAPTURE(run.config);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    CHECK(run.report.mmas > 0);
    CHECK(run.report.asyncCopies > 0);
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
    MESSAGE(std::string(nameOf(c.op)) << " " << c.m << "x" << c.n << "x" << c.k << ": worst |error| " << run.worst
                         << " (bound " << run.bound << ")");
  }
}

/// A product (either operand stored transposed) and the mma.sync block,
/// stages and parts of K that compute it.
struct SplitCase {
  GpuOperand op;
  int64_t m, n, k, bm, bn, bk, wm, wn, stages, split;
  bool ta, tb;
  GpuMatmulProblem product() const {
    GpuMatmulProblem p = problem(m, n, k, op);
    p.lhsTransposed = ta;
    p.rhsTransposed = tb;
    return p;
  }
  GpuMatmulConfig config() const {
    GpuMatmulConfig c = block(op, bm, bn, bk, wm, wn, stages);
    c.splitK = split;
    return c;
  }
};

TEST_CASE("GPU emulator: the mma.sync kernel with each slab's refill spread over its k steps (interleaveCopies)") {
  // nova-gpu-kernels' :interleave (the device check's variant): the same
  // product, stages, split-K and edges, the copies of slab kt + stages - 1
  // issued a share at each k step after its fragment loads.
  for (SplitCase c : {SplitCase{GpuOperand::f16, 256, 256, 256, 128, 128, 32, 2, 2, 2, 1, false, false},
                 SplitCase{GpuOperand::bf16, 256, 256, 256, 128, 128, 32, 2, 2, 3, 1, false, false},
                 SplitCase{GpuOperand::tf32, 256, 256, 256, 128, 128, 16, 2, 2, 2, 1, false, false},
                 SplitCase{GpuOperand::bf16, 192, 128, 128, 64, 64, 64, 2, 2, 2, 1, false, true},
                 SplitCase{GpuOperand::tf32, 128, 256, 64, 128, 64, 32, 4, 1, 3, 1, true, false},
                 SplitCase{GpuOperand::f16, 128, 384, 96, 64, 128, 32, 2, 2, 4, 1, false, false},  // more stages than slabs
                 SplitCase{GpuOperand::f16, 96, 80, 200, 64, 64, 32, 2, 2, 4, 2, false, true},     // edges, split-K
                 SplitCase{GpuOperand::tf32, 64, 64, 160, 64, 64, 32, 2, 2, 2, 4, false, false},   // parts with no slab
                 SplitCase{GpuOperand::bf16, 512, 256, 512, 256, 128, 64, 4, 2, 4, 1, false, false}}) {
    CAPTURE(std::string(nameOf(c.op)));
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    const GpuMatmulProblem p = c.product();
    GpuMatmulConfig config = c.config();
    config.interleaveCopies = true;
    MatmulRun run = runMatmul(p, config);
    CAPTURE(run.config);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    CHECK(run.report.mmas > 0);
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
    // The same copies as the kernel issuing its refill at once.
    config.interleaveCopies = false;
    MatmulRun whole = runMatmul(p, config);
    REQUIRE_MESSAGE(whole.report.ok, whole.report.error);
    CHECK(run.report.asyncCopies == whole.report.asyncCopies);
    CHECK(run.report.barriers == whole.report.barriers);
  }
  // (A missing barrier and a short wait are still caught: the broken
  // kernels' test below, interleaved too.)
}

TEST_CASE("GPU emulator: the mma.sync kernel's timing probes do only what they keep, and compute what that gives") {
  // nova-gpu-kernels' :probeshared and :probemma, which the device check
  // times beside the kernel: their products are held to what their reads
  // give (runMatmul's `read`), and their work counted.
  struct Case {
    GpuOperand op;
    bool transposeB;
    int64_t bk, stages;
  };
  for (Case c : {Case{GpuOperand::bf16, false, 64, 3}, Case{GpuOperand::f16, true, 32, 2},
                 Case{GpuOperand::tf32, false, 32, 4}}) {
    CAPTURE(std::string(nameOf(c.op)));
    CAPTURE(c.transposeB);
    GpuMatmulProblem p = problem(128, 128, 8 * c.bk, c.op);
    p.rhsTransposed = c.transposeB;
    const GpuMatmulConfig config = block(c.op, 128, 128, c.bk, 2, 2, c.stages);
    const int64_t slabs = 8, mmaK = c.op == GpuOperand::tf32 ? 8 : 16;
    const int64_t mmasAStep = (64 / 16) * (64 / 8); // a warp's 64 x 64 tile
    MatmulRun whole = runMatmul(p, config);
    REQUIRE_MESSAGE(whole.report.ok, whole.report.error);
    CHECK(whole.worst <= whole.bound);
    for (MmaSyncProbe probe : {MmaSyncProbe::sharedOnly, MmaSyncProbe::mmaOnly}) {
      CAPTURE(int(probe));
      MmaMatmulFaults faults;
      faults.probe = probe;
      MatmulRun run = runMatmul(p, config, faults);
      REQUIRE_MESSAGE(run.report.ok, run.report.error);
      CHECK(run.worst <= run.bound);
      // Every MMA of the kernel (the emulator counts an op once a block);
      // the copies of the prologue's stages only (the kernel's: those and
      // a refill a slab).
      CHECK(run.report.mmas == whole.report.mmas);
      CHECK(run.report.mmas == slabs * (c.bk / mmaK) * mmasAStep);
      CHECK(run.report.asyncCopies * (slabs + c.stages - 1) == whole.report.asyncCopies * (c.stages - 1));
      if (probe == MmaSyncProbe::sharedOnly) {
        CHECK(run.report.ldmatrices == whole.report.ldmatrices);
        CHECK(run.report.barriers == whole.report.barriers);
      } else {
        // One k step's fragments, once; a block's one barrier before the loop.
        CHECK(run.report.ldmatrices * slabs * (c.bk / mmaK) == whole.report.ldmatrices);
        CHECK(run.report.barriers == run.report.blocks);
      }
    }
  }
  // A probe takes whole tiles only.
  MmaMatmulFaults faults;
  faults.probe = MmaSyncProbe::sharedOnly;
  std::string error;
  MLIRContext &ctx = context();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&ctx));
  GpuMatmulProblem edge = problem(100, 128, 128, GpuOperand::bf16);
  CHECK(failed(buildMmaSyncMatmulKernel(addKernelsModule(*module), "probe", edge,
                                        block(GpuOperand::bf16, 128, 128, 64, 2, 2, 2), error, faults)));
  CHECK(error.find("a probe takes") != std::string::npos);
}

TEST_CASE("GPU emulator: transposed operands (NT, TN, TT) and batches") {
  struct Case {
    GpuOperand op;
    bool ta, tb;
    int64_t batch, bk;
  };
  for (Case c : {Case{GpuOperand::f16, false, true, 1, 32}, Case{GpuOperand::f16, true, false, 1, 32},
                 Case{GpuOperand::f16, true, true, 1, 32}, Case{GpuOperand::bf16, false, true, 1, 64},
                 Case{GpuOperand::bf16, true, false, 1, 32}, Case{GpuOperand::bf16, true, true, 2, 32},
                 Case{GpuOperand::tf32, false, true, 1, 16}, Case{GpuOperand::tf32, true, false, 1, 16},
                 Case{GpuOperand::tf32, true, true, 1, 32}, Case{GpuOperand::f16, false, false, 3, 32}}) {
    CAPTURE(std::string(nameOf(c.op)));
    CAPTURE(c.ta);
    CAPTURE(c.tb);
    CAPTURE(c.batch);
    GpuMatmulProblem p = problem(128, 128, 64, c.op);
    p.lhsTransposed = c.ta;
    p.rhsTransposed = c.tb;
    p.batch = c.batch;
    MatmulRun run = runMatmul(p, block(c.op, 64, 64, c.bk, 2, 2, 2));
    CAPTURE(run.config);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
  }
}

TEST_CASE("GPU emulator: edge tiles (shapes that are not multiples of the block)") {
  struct Case {
    GpuOperand op;
    bool ta, tb;
    int64_t m, n, k;
  };
  // Each operand's contiguous extent is a multiple of 16 bytes; the rest is free.
  for (Case c : {Case{GpuOperand::f16, false, false, 100, 72, 40}, Case{GpuOperand::bf16, false, true, 33, 57, 48},
                 Case{GpuOperand::tf32, false, false, 70, 36, 20}, Case{GpuOperand::tf32, true, false, 68, 40, 30},
                 Case{GpuOperand::f16, true, true, 72, 9, 104}, Case{GpuOperand::bf16, false, false, 1, 8, 8}}) {
    CAPTURE(std::string(nameOf(c.op)));
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    GpuMatmulProblem p = problem(c.m, c.n, c.k, c.op);
    p.lhsTransposed = c.ta;
    p.rhsTransposed = c.tb;
    MatmulRun run = runMatmul(p, block(c.op, 64, 64, c.op == GpuOperand::tf32 ? 16 : 32, 2, 2, 3));
    CAPTURE(run.config);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
  }
}

TEST_CASE("GPU emulator: epilogues fused on the accumulator fragments") {
  struct Case {
    GpuOperand op;
    int64_t m, n, k;
    MmaEpilogue e;
  };
  MmaEpilogue biasRelu, geluResidual, all;
  biasRelu.bias = true;
  biasRelu.activation = MmaEpilogue::Activation::relu;
  geluResidual.activation = MmaEpilogue::Activation::gelu_tanh;
  geluResidual.residual = true;
  all.scale = 0.125;
  all.bias = true;
  all.activation = MmaEpilogue::Activation::gelu_tanh;
  all.residual = true;
  for (Case c : {Case{GpuOperand::bf16, 128, 128, 64, biasRelu}, Case{GpuOperand::f16, 128, 64, 64, geluResidual},
                 Case{GpuOperand::tf32, 96, 72, 40, all},   // edges
                 Case{GpuOperand::tf32x3, 96, 72, 40, all}, // f32 as 3xtf32, edges
                 Case{GpuOperand::bf16, 70, 57, 48, all}}) { // an odd last column
    CAPTURE(std::string(nameOf(c.op)));
    CAPTURE(c.n);
    GpuMatmulProblem p = problem(c.m, c.n, c.k, c.op);
    p.rhsTransposed = c.n % 8 != 0; // B stored N x K when N is not whole chunks
    const bool thirtyTwo = c.op == GpuOperand::tf32 || c.op == GpuOperand::tf32x3;
    MatmulRun run = runMatmul(p, block(c.op, 64, 64, thirtyTwo ? 16 : 32, 2, 2, 2), {}, c.e);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
  }
}

TEST_CASE("GPU emulator: the configurator's own decisions compute the product") {
  struct Case {
    const char *target;
    GpuOperand op;
    int64_t m, n, k;
    bool ta, tb;
  };
  for (Case c : {Case{"sm_80", GpuOperand::f16, 512, 512, 256, false, false},
                 Case{"sm_86", GpuOperand::bf16, 256, 256, 512, false, true},
                 Case{"sm_90a", GpuOperand::tf32, 256, 512, 128, false, false},
                 Case{"sm_80", GpuOperand::tf32, 256, 256, 256, true, true},
                 Case{"sm_90a", GpuOperand::bf16, 300, 200, 136, false, true}}) {
    CAPTURE(std::string(c.target));
    GpuMatmulProblem p = problem(c.m, c.n, c.k, c.op);
    p.lhsTransposed = c.ta;
    p.rhsTransposed = c.tb;
    GpuMatmulConfig config = configureGpuMatmul(p, ::nova::named_target(c.target));
    MatmulRun run = runMatmul(p, config);
    CAPTURE(run.config);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
  }
}

TEST_CASE("GPU emulator: split-K: each part of K a block, the partial products summing to the product") {
  for (SplitCase c : {SplitCase{GpuOperand::bf16, 128, 128, 512, 64, 64, 32, 2, 2, 3, 4, false, false},
                 SplitCase{GpuOperand::tf32, 128, 64, 384, 64, 64, 32, 2, 2, 2, 3, true, false}, // dW = X^T dY's layout
                 SplitCase{GpuOperand::f16, 96, 80, 200, 64, 64, 32, 2, 2, 4, 2, false, true},  // edges, a partial slab
                 SplitCase{GpuOperand::tf32, 64, 64, 160, 64, 64, 32, 2, 2, 2, 4, false, false}, // 5 slabs over 4 parts:
                                                                                            // 2, 2, 1 and none
                 SplitCase{GpuOperand::bf16, 64, 128, 1024, 64, 128, 64, 2, 2, 4, 8, true, true}}) {
    CAPTURE(std::string(nameOf(c.op)));
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    CAPTURE(c.split);
    const GpuMatmulProblem p = c.product();
    GpuMatmulConfig config = c.config();
    MatmulRun run = runMatmul(p, config);
    CAPTURE(run.config);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
    MESSAGE(std::string(nameOf(c.op)) << " " << c.m << "x" << c.n << "x" << c.k << " in " << c.split
                         << " parts: worst |error| " << run.worst << " (bound " << run.bound << ")");
  }
  // The kernel refuses what it cannot split: a batch, an epilogue.
  MLIRContext &ctx = context();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&ctx));
  gpu::GPUModuleOp kernels = addKernelsModule(*module);
  GpuMatmulConfig config = block(GpuOperand::bf16, 64, 64, 32, 2, 2, 2);
  config.splitK = 2;
  std::string error;
  GpuMatmulProblem batched = problem(64, 64, 256, GpuOperand::bf16);
  batched.batch = 2;
  CHECK(failed(buildMmaSyncMatmulKernel(kernels, "batched", batched, config, error)));
  CHECK(error.find("split-K takes one product with no epilogue") != std::string::npos);
  MmaEpilogue relu;
  relu.activation = MmaEpilogue::Activation::relu;
  CHECK(failed(buildMmaSyncMatmulKernel(kernels, "relu", problem(64, 64, 256, GpuOperand::bf16), config, error, {},
                                        relu)));
}

TEST_CASE("GPU emulator: a warp may skip a shuffle as a whole, never in part") {
  // 64 threads; each lane's value is its thread id; under `if tid < LIMIT`
  // a butterfly over 4 lanes sums them. LIMIT 32: warp 1 skips it whole
  // (allowed, its out stays 0); LIMIT 40: 8 of warp 1's lanes run a
  // full-mask shfl.sync without the others (undefined on the GPU): an error.
  auto run = [](int limit, std::vector<float> &out) {
    std::string text = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @f(%out: memref<64xf32>) kernel {
      %c1 = arith.constant 1 : i32
      %c2 = arith.constant 2 : i32
      %c32 = arith.constant 32 : i32
      %limit = arith.constant LIMIT : index
      %tid = gpu.thread_id x
      %inside = arith.cmpi ult, %tid, %limit : index
      scf.if %inside {
        %i = arith.index_cast %tid : index to i32
        %x = arith.sitofp %i : i32 to f32
        %y, %v1 = gpu.shuffle xor %x, %c1, %c32 : f32
        %s1 = arith.addf %x, %y : f32
        %z, %v2 = gpu.shuffle xor %s1, %c2, %c32 : f32
        %s2 = arith.addf %s1, %z : f32
        memref.store %s2, %out[%tid] : memref<64xf32>
      }
      gpu.return
    }
  }
}
)mlir";
    text.replace(text.find("LIMIT"), 5, std::to_string(limit));
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context());
    REQUIRE(module);
    gpu::GPUFuncOp f;
    module->walk([&](gpu::GPUFuncOp g) { f = g; });
    std::vector<uint8_t> bytes(64 * 4, 0);
    EmulatorLaunch launch;
    launch.block = {64, 1, 1};
    launch.args = {&bytes};
    EmulatorReport report = emulateKernel(f, launch);
    out.resize(64);
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return report;
  };
  std::vector<float> out;
  EmulatorReport whole = run(32, out);
  REQUIRE_MESSAGE(whole.ok, whole.error);
  for (int t = 0; t < 64; ++t) {
    CAPTURE(t);
    CHECK(out[size_t(t)] == (t < 32 ? float(4 * (t / 4 * 4) + 6) : 0.0f));
  }
  EmulatorReport part = run(40, out);
  CHECK(!part.ok);
  CHECK(part.error.find("a .sync.aligned warp instruction with inactive lanes") != std::string::npos);
}

TEST_CASE("GPU emulator: integers wrap as the GPU's do (i32 sums and products, unsigned shifts, divisions and extended products of negative-held words, truncations, i1 negation) and affine.apply evaluates its map") {
  // Philox (dropout) needs all of it; before, i32 results were kept
  // unwrapped and an i1 `true` held -1, so that xori with it negated
  // nothing.
  std::string text = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @f(%out: memref<4x10xi32>) kernel {
      %big = arith.constant 2147483647 : i32
      %m = arith.constant -766435501 : i32
      %c8 = arith.constant 8 : i32
      %c7 = arith.constant 7 : i32
      %wide = arith.constant 4886718345 : i64
      %true = arith.constant true
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %c5 = arith.constant 5 : index
      %c6 = arith.constant 6 : index
      %c7i = arith.constant 7 : index
      %c8i = arith.constant 8 : index
      %c9 = arith.constant 9 : index
      %one = arith.constant 1 : i32
      %zero = arith.constant 0 : i32
      %tid = gpu.thread_id x
      %t = arith.index_cast %tid : index to i32
      %sum = arith.addi %big, %t : i32
      %prod = arith.muli %m, %sum : i32
      %shr = arith.shrui %prod, %c8 : i32
      %div = arith.divui %prod, %c7 : i32
      %rem = arith.remui %prod, %c7 : i32
      %lo, %hi = arith.mului_extended %prod, %m : i32
      %t64 = arith.extui %t : i32 to i64
      %w = arith.addi %wide, %t64 : i64
      %trunc = arith.trunci %w : i64 to i32
      %odd = arith.cmpi eq, %t, %one : i32
      %not = arith.xori %odd, %true : i1
      %flag = arith.select %not, %one, %zero : i32
      %a = affine.apply affine_map<(d0) -> ((d0 - 2) floordiv 3 + ((d0 - 2) mod 3) * 10)>(%tid)
      %ai = arith.index_cast %a : index to i32
      memref.store %sum, %out[%tid, %c0] : memref<4x10xi32>
      memref.store %prod, %out[%tid, %c1] : memref<4x10xi32>
      memref.store %shr, %out[%tid, %c2] : memref<4x10xi32>
      memref.store %div, %out[%tid, %c3] : memref<4x10xi32>
      memref.store %rem, %out[%tid, %c4] : memref<4x10xi32>
      memref.store %lo, %out[%tid, %c5] : memref<4x10xi32>
      memref.store %hi, %out[%tid, %c6] : memref<4x10xi32>
      memref.store %trunc, %out[%tid, %c7i] : memref<4x10xi32>
      memref.store %flag, %out[%tid, %c8i] : memref<4x10xi32>
      memref.store %ai, %out[%tid, %c9] : memref<4x10xi32>
      gpu.return
    }
  }
}
)mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context());
  REQUIRE(module);
  gpu::GPUFuncOp f;
  module->walk([&](gpu::GPUFuncOp g) { f = g; });
  std::vector<uint8_t> bytes(4 * 10 * 4, 0);
  EmulatorLaunch launch;
  launch.block = {4, 1, 1};
  launch.args = {&bytes};
  EmulatorReport report = emulateKernel(f, launch);
  REQUIRE_MESSAGE(report.ok, report.error);
  std::vector<uint32_t> out(40);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  const uint32_t m = uint32_t(-766435501);
  for (uint32_t t = 0; t < 4; ++t) {
    CAPTURE(t);
    const uint32_t sum = 2147483647u + t, prod = m * sum;
    const uint64_t wide = uint64_t(prod) * m;
    const int64_t d = int64_t(t) - 2, q = d >= 0 ? d / 3 : -((-d + 2) / 3), r = d - 3 * q;
    const uint32_t want[10] = {sum, prod, prod >> 8, prod / 7, prod % 7, uint32_t(wide), uint32_t(wide >> 32),
                               uint32_t(4886718345ull + t), t != 1, uint32_t(int32_t(q + r * 10))};
    for (int i = 0; i < 10; ++i) {
      CAPTURE(i);
      CHECK(out[size_t(t * 10 + uint32_t(i))] == want[i]);
    }
  }
}

TEST_CASE("GPU emulator: 3xtf32 (big and small tf32 halves, three MMAs) keeps f32's accuracy where tf32 does not") {
  struct Case {
    int64_t m, n, k, bk, split;
    bool ta, tb;
  };
  for (Case c : {Case{128, 128, 256, 32, 1, false, false}, Case{128, 64, 128, 16, 1, true, false}, // scalar A
                 Case{64, 128, 96, 32, 1, false, true}, Case{70, 36, 20, 16, 1, false, false},    // edges
                 Case{64, 64, 512, 32, 4, false, false}}) {                                       // split-K
    CAPTURE(c.m);
    CAPTURE(c.n);
    CAPTURE(c.k);
    CAPTURE(c.split);
    CAPTURE(c.ta);
    CAPTURE(c.tb);
    MatmulRun runs[2];
    for (GpuOperand op : {GpuOperand::tf32x3, GpuOperand::tf32}) {
      GpuMatmulProblem p = problem(c.m, c.n, c.k, op);
      p.lhsTransposed = c.ta;
      p.rhsTransposed = c.tb;
      GpuMatmulConfig config = block(op, 64, 64, c.bk, 2, 2, 3);
      config.splitK = c.split;
      MatmulRun &run = runs[op == GpuOperand::tf32];
      run = runMatmul(p, config);
      CAPTURE(run.config);
      REQUIRE_MESSAGE(run.report.ok, run.report.error);
      CHECK(run.worst <= run.bound);
      CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
    }
    // The same inputs (the seed follows the shape): the split's error is a
    // small fraction of tf32's alone (measured here: 1/700 to 1/3200).
    CHECK(runs[0].worst * 64 < runs[1].worst);
    CHECK(runs[0].report.mmas == 3 * runs[1].report.mmas);
    MESSAGE(c.m << "x" << c.n << "x" << c.k << ": worst |error| 3xtf32 " << runs[0].worst << " (bound "
                << runs[0].bound << "), tf32 " << runs[1].worst);
  }
  // The configurator's choice for an f32 problem that allows it: 3xtf32 on
  // the A100 and H200 (tf32 runs at 8 times f32 there), f32 FMAs on the
  // RTX 3060 (tf32 at f32's rate); the chosen kernel computes the product.
  for (const char *target : {"sm_80", "sm_90a", "sm_86"}) {
    CAPTURE(std::string(target));
    GpuMatmulProblem p = problem(256, 256, 256, GpuOperand::f32);
    p.allowTf32x3 = true;
    GpuMatmulConfig config = configureGpuMatmul(p, ::nova::named_target(target));
    const bool tensor = std::string(target) != "sm_86";
    CHECK(config.operand == (tensor ? GpuOperand::tf32x3 : GpuOperand::f32));
    CHECK(config.kind == (tensor ? GpuMmaKind::mma_sync : GpuMmaKind::simt));
    CHECK(config.why.back().find(tensor ? "f32 operands: 3xtf32" : "f32 operands: f32 FMAs") == 0);
    if (!tensor)
      continue;
    p.operand = config.operand;
    MatmulRun run = runMatmul(p, config);
    CAPTURE(run.config);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
  }
  // Where wgmma may be generated (sm_90a), 3xtf32 takes it, in any layout
  // (here TN: both operands M/N-contiguous), converting each slab; a
  // one-warpgroup block is never split across K (ptxas serializes it).
  GpuMatmulProblem hopper = problem(256, 256, 2048, GpuOperand::f32);
  hopper.allowTf32x3 = true;
  hopper.allowWgmma = true;
  hopper.allowSplitK = true;
  hopper.lhsTransposed = true;
  GpuMatmulConfig onWgmma = configureGpuMatmul(hopper, ::nova::named_target("sm_90a"));
  CAPTURE(onWgmma.describe());
  CHECK(onWgmma.operand == GpuOperand::tf32x3);
  CHECK(onWgmma.kind == GpuMmaKind::wgmma);
  CHECK((onWgmma.splitK == 1 || onWgmma.warpsM == 2));
  hopper.operand = onWgmma.operand;
  MatmulRun run = runMatmul(hopper, onWgmma);
  REQUIRE_MESSAGE(run.report.ok, run.report.error);
  CHECK(run.worst <= run.bound);
  CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
}

TEST_CASE("GPU emulator: a deliberately broken kernel fails it") {
  GpuMatmulProblem p = problem(256, 256, 128, GpuOperand::f16);
  GpuMatmulConfig c = block(GpuOperand::f16, 128, 128, 32, 2, 2, 2);
  MmaMatmulFaults noWaitBarrier, earlyRefill, shortWait, unswizzled;
  noWaitBarrier.noBarrierAfterWait = true;
  earlyRefill.refillBeforeBarrier = true;
  shortWait.waitOneGroupShort = true;
  unswizzled.unswizzledRhsReads = true;
  MatmulRun run;
  // The same with the refill spread over the k steps (interleaveCopies,
  // which has no refill before the barrier to get wrong).
  for (bool interleave : {false, true}) {
    CAPTURE(interleave);
    c.interleaveCopies = interleave;
    run = runMatmul(p, c, noWaitBarrier);
    CHECK_FALSE(run.report.ok);
    CHECK(run.report.error.find("a missing gpu.barrier") != std::string::npos);
    run = runMatmul(p, c, shortWait);
    CHECK_FALSE(run.report.ok);
    CHECK(run.report.error.find("has not been waited for") != std::string::npos);
  }
  c.interleaveCopies = false;
  run = runMatmul(p, c, earlyRefill);
  CHECK_FALSE(run.report.ok);
  CHECK(run.report.error.find("before the buffer is refilled") != std::string::npos);
  run = runMatmul(p, c, unswizzled);
  // Reads in the wrong places: the product is wrong (no hazard: the bytes
  // were written and published).
  CHECK((!run.report.ok || run.worst > 0.1));
  MESSAGE("errors caught: no barrier after wait / refill before the barrier / short wait; unswizzled worst "
          << run.worst);
  // No swizzle at all: right, but slow. ldmatrix's 8 rows of a phase share
  // banks: 4 ways in rows of 64 bytes (f16 K slabs of 32: A's), 8 in rows
  // of 128 (B's 64 columns; bf16 K slabs of 64: A's too).
  MmaMatmulFaults noSwizzle;
  noSwizzle.noSwizzle = true;
  for (auto [op, bk, ways] : {std::tuple{GpuOperand::f16, int64_t(32), "up to 4-way"},
                              std::tuple{GpuOperand::bf16, int64_t(64), "up to 8-way"}}) {
    CAPTURE(ways);
    run = runMatmul(problem(192, 128, 128, op), block(op, 64, 64, bk, 2, 2, 2), noSwizzle);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    CHECK(run.worst <= run.bound);
    const std::string conflicts = bankConflicts(run.report);
    CHECK(conflicts.find("'nvgpu.ldmatrix'") != std::string::npos);
    CHECK(conflicts.find(ways) != std::string::npos);
    MESSAGE("without the swizzle: " << conflicts);
  }
}

namespace {

struct SimtRun {
  EmulatorReport report;
  double worst = 0; ///< largest |got - want| / (|c0| + sum_k |a_ik b_kj|)
  double bound = 0;
  std::string config;
  bool alignedVectors = false; ///< the kernel promises kAlignedVectorsAttr
  int globalVectorLoads = 0;   ///< vector.loads of the kernel's arguments (16-byte slab loads)
  int globalVectorStores = 0;  ///< vector.stores to them (a thread's runs of results)
};

/// The simt kernel (GpuSimtMatmul.h) in the configurator's shape for sm_80,
/// built over C[m][n] += A[m][k] B[k][n] in f32 (A stored k x m when
/// `lhsTransposed`), run on random inputs against float64.
SimtRun runSimtMatmul(int64_t m, int64_t n, int64_t k, bool lhsTransposed, const SimtMatmulFaults &faults = {}) {
  SimtRun run;
  MLIRContext &ctx = context();
  Location loc = UnknownLoc::get(&ctx);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  gpu::GPUModuleOp kernels = addKernelsModule(*module);
  OpBuilder b(kernels.getBodyRegion());
  b.setInsertionPoint(kernels.getBody()->getTerminator());
  Type f32 = b.getF32Type();
  auto aType = MemRefType::get(lhsTransposed ? ArrayRef<int64_t>{k, m} : ArrayRef<int64_t>{m, k}, f32);
  auto bType = MemRefType::get({k, n}, f32), cType = MemRefType::get({m, n}, f32);
  auto func = b.create<gpu::GPUFuncOp>(loc, "simt", b.getFunctionType({cType, aType, bType}, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  Block &entry = func.getBody().front();
  OpBuilder fb = OpBuilder::atBlockBegin(&entry);
  AffineExpr dm, dn, dk;
  bindDims(&ctx, dm, dn, dk);
  SmallVector<AffineMap> maps{AffineMap::get(3, 0, lhsTransposed ? ArrayRef<AffineExpr>{dk, dm} : ArrayRef<AffineExpr>{dm, dk}, &ctx),
                              AffineMap::get(3, 0, {dk, dn}, &ctx), AffineMap::get(3, 0, {dm, dn}, &ctx)};
  SmallVector<utils::IteratorType> iterators{utils::IteratorType::parallel, utils::IteratorType::parallel,
                                             utils::IteratorType::reduction};
  auto generic = fb.create<linalg::GenericOp>(
      loc, ValueRange{entry.getArgument(1), entry.getArgument(2)}, ValueRange{entry.getArgument(0)}, maps, iterators,
      [](OpBuilder &nb, Location l, ValueRange args) {
        Value product = nb.create<arith::MulFOp>(l, args[0], args[1]);
        nb.create<linalg::YieldOp>(l, ValueRange{nb.create<arith::AddFOp>(l, args[2], product)});
      });
  fb.create<gpu::ReturnOp>(loc);
  std::string why;
  std::optional<SimtMatmul> match = matchSimtMatmul(generic, why);
  REQUIRE_MESSAGE(match.has_value(), why);
  GpuMatmulConfig c = configureGpuMatmul(match->problem, ::nova::builtin_gpu_target("sm_80"));
  REQUIRE(c.kind == GpuMmaKind::simt);
  c.stages = kSimtBuffers;
  run.config = c.describe();
  const int64_t shared = simtMatmulSharedBytes(generic, c);
  REQUIRE(succeeded(buildSimtMatmul(generic, *match, c, FloatAttr(), faults)));
  REQUIRE(succeeded(verify(*module)));
  // f32 thread tiles of 4 or 8: runs of 4 read as vectors, aligned.
  run.alignedVectors = func->hasAttr(kAlignedVectorsAttr);
  auto isArgument = [&](Value v) {
    return isa<BlockArgument>(v) && cast<BlockArgument>(v).getOwner() == &func.getBody().front();
  };
  func.walk([&](vector::LoadOp load) { run.globalVectorLoads += isArgument(load.getBase()); });
  func.walk([&](vector::StoreOp store) { run.globalVectorStores += isArgument(store.getBase()); });

  const uint64_t seed = nova_test::test_seed() ^ (uint64_t(m * 131 + n * 17 + k) << 21);
  INFO("seed = ", seed);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(size_t(m * k)), bm(size_t(k * n)), c0(size_t(m * n));
  for (float &x : a)
    x = dist(rng);
  for (float &x : bm)
    x = dist(rng);
  for (float &x : c0)
    x = dist(rng);
  auto bytes = [](const std::vector<float> &v) {
    std::vector<uint8_t> out(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  };
  std::vector<uint8_t> A = bytes(a), B = bytes(bm), C = bytes(c0);
  auto aAt = [&](int64_t i, int64_t kk) { return a[size_t(lhsTransposed ? kk * m + i : i * k + kk)]; };
  EmulatorLaunch launch;
  launch.grid = {(m + c.blockM - 1) / c.blockM * ((n + c.blockN - 1) / c.blockN), 1, 1};
  launch.block = {c.threads, 1, 1};
  launch.dynamicSharedBytes = shared;
  launch.args = {&C, &A, &B};
  run.report = emulateKernel(func, launch);
  if (!run.report.ok)
    return run;
  run.bound = 2 * double(k + 1) * std::ldexp(1.0, -24);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = c0[size_t(i * n + j)], scale = std::abs(want);
      for (int64_t kk = 0; kk < k; ++kk) {
        double prod = double(aAt(i, kk)) * double(bm[size_t(kk * n + j)]);
        want += prod;
        scale += std::abs(prod);
      }
      float got;
      std::memcpy(&got, C.data() + 4 * (i * n + j), 4);
      run.worst = std::max(run.worst, std::abs(double(got) - want) / std::max(scale, 1e-30));
    }
  return run;
}

} // namespace

TEST_CASE("GPU emulator: the simt matmul kernel against float64 (partial tiles, a transposed lhs), and broken") {
  struct Shape {
    int64_t m, n, k;
    bool lhsTransposed;
  };
  // Slabs come from global memory 16 bytes a load where an operand's rows
  // are whole 4-float units (K contiguous: the lhs of 70 x 40; M or N
  // contiguous: the rhs of 128 x 128, a transposed lhs of 64 or 36 rows;
  // a unit of the partial tiles is all inside or all zero), a float a load
  // elsewhere (rows of 50, 65, 33).
  // A thread's runs of 4 result columns are one 16-byte store each where
  // the result's rows are whole runs (n = 128, 96, 44), an element at a
  // time otherwise (n = 50, 65).
  struct Case {
    Shape shape;
    bool vectorLoads, vectorStores;
  };
  for (Case c : {Case{{70, 50, 40, false}, true, false}, Case{{33, 65, 17, true}, false, false},
                 Case{{128, 128, 64, false}, true, true}, Case{{64, 96, 48, true}, true, true},
                 Case{{36, 44, 20, true}, true, true}}) {
    Shape s = c.shape;
    CAPTURE(s.m);
    CAPTURE(s.n);
    CAPTURE(s.k);
    CAPTURE(s.lhsTransposed);
    for (bool scalar : {false, true}) {
      CAPTURE(scalar);
      SimtMatmulFaults scalarAccesses;
      scalarAccesses.scalarGlobalLoads = scalarAccesses.scalarGlobalStores = scalar;
      SimtRun run = runSimtMatmul(s.m, s.n, s.k, s.lhsTransposed, scalarAccesses);
      CAPTURE(run.config);
      REQUIRE_MESSAGE(run.report.ok, run.report.error);
      CHECK(run.worst <= run.bound);
      CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
      CHECK((run.globalVectorLoads > 0) == (c.vectorLoads && !scalar));
      CHECK((run.globalVectorStores > 0) == (c.vectorStores && !scalar));
    }
  }
  // Three K slabs of 16, double-buffered: without the first barrier a
  // thread reads slab 0 before the others wrote it; without the barrier
  // after each slab, a thread reads slab 1 (buffer 1) before the others
  // wrote it (the emulator sees that first; next would be slab 2's copy
  // over buffer 0 while slab 0 is still read).
  SimtMatmulFaults noCopyBarrier, noSlabBarrier;
  noCopyBarrier.noBarrierAfterCopy = true;
  noSlabBarrier.noBarrierAfterSlab = true;
  SimtRun run = runSimtMatmul(70, 50, 40, false, noCopyBarrier);
  CHECK_FALSE(run.report.ok);
  CHECK(run.report.error.find("with no barrier between (a missing gpu.barrier)") != std::string::npos);
  // The vector reads of shared memory, f32 runs of 4: a run read one
  // element past its start is a misaligned 16-byte access.
  CHECK(run.alignedVectors);
  SimtMatmulFaults misaligned;
  misaligned.misalignedVectorReads = true;
  run = runSimtMatmul(70, 50, 40, false, misaligned);
  CHECK_FALSE(run.report.ok);
  CHECK(run.report.error.find("16-byte vector access at shared byte") != std::string::npos);
  CHECK(run.report.error.find("promises its vectors aligned to their size") != std::string::npos);
  run = runSimtMatmul(70, 50, 40, false, noSlabBarrier);
  CHECK_FALSE(run.report.ok);
  CHECK(run.report.error.find("reads shared byte") != std::string::npos);
  CHECK(run.report.error.find("with no barrier between (a missing gpu.barrier)") != std::string::npos);
}

namespace {

/// A wgmma configuration: `warpgroups` x 64 rows, `bn` columns, a `bk` slab.
GpuMatmulConfig wgmmaBlock(GpuOperand op, int64_t warpgroups, int64_t bn, int64_t bk, int64_t stages) {
  GpuMatmulConfig c;
  c.kind = GpuMmaKind::wgmma;
  c.blockM = 64 * warpgroups;
  c.blockN = bn;
  c.blockK = bk;
  c.warpsM = warpgroups;
  c.warpsN = 1;
  c.warpM = 64;
  c.warpN = bn;
  c.stages = stages;
  c.mmaM = 64;
  c.mmaN = bn;
  c.mmaK = op == GpuOperand::tf32 || op == GpuOperand::tf32x3 ? 8 : 16;
  c.threads = wgmmaBlockThreads(warpgroups);
  return c;
}

/// Every fixed epilogue at once: scale, bias, GELU (tanh), residual.
MmaEpilogue fullEpilogue() {
  MmaEpilogue e;
  e.scale = 0.5;
  e.bias = true;
  e.activation = MmaEpilogue::Activation::gelu_tanh;
  e.residual = true;
  return e;
}

GpuMatmulProblem layout(GpuMatmulProblem p, bool lhsTransposed, bool rhsTransposed, int64_t batch = 1) {
  p.lhsTransposed = lhsTransposed;
  p.rhsTransposed = rhsTransposed;
  p.batch = batch;
  return p;
}

} // namespace

TEST_CASE("GPU emulator: TMA and wgmma swizzle 16-byte chunks of 128-byte lines as the ISA's tables do") {
  // 128B: chunk c of line r (in a 1024-byte-aligned pattern) is stored at chunk c ^ r;
  // 64B: c ^ (r & 3) of c < 4; 32B: c ^ (r & 1) of c < 2; bytes inside a chunk stay.
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t c = 0; c < 8; ++c) {
      const int64_t a = 4096 + 128 * r + 16 * c + 5;
      CHECK(swizzledAddress(a, 128) == 4096 + 128 * r + 16 * (c ^ r) + 5);
      if (c < 4)
        CHECK(swizzledAddress(a, 64) == 4096 + 128 * r + 16 * (c ^ (r & 3)) + 5);
      if (c < 2)
        CHECK(swizzledAddress(a, 32) == 4096 + 128 * r + 16 * (c ^ (r & 1)) + 5);
      CHECK(swizzledAddress(a, 0) == a);
    }
}

TEST_CASE("GPU emulator: the TMA + wgmma kernel matches float64 (f16, bf16, tf32; K- and MN-major operands)") {
  struct Case {
    GpuMatmulProblem p;
    GpuMatmulConfig c;
  };
  const GpuOperand bf16 = GpuOperand::bf16, f16 = GpuOperand::f16, tf32 = GpuOperand::tf32;
  std::vector<Case> cases = {
      // NN: A K-major, B MN-major (imm-trans), 128-byte rows; two slabs, 2 stages.
      {problem(128, 128, 128, bf16), wgmmaBlock(bf16, 1, 64, 64, 2)},
      // Two warpgroups, three stages, B two 64-column boxes a slab.
      {problem(128, 256, 192, bf16), wgmmaBlock(bf16, 2, 128, 64, 3)},
      // TN (A MN-major) with a 32-element slab, NT (both K-major, the prologue fills every stage), TT.
      {layout(problem(128, 128, 128, f16), true, false), wgmmaBlock(f16, 2, 64, 64, 2)},
      {layout(problem(64, 64, 256, f16), false, true), wgmmaBlock(f16, 1, 64, 64, 4)},
      {layout(problem(128, 64, 192, bf16), true, true), wgmmaBlock(bf16, 2, 64, 64, 2)},
      // tf32 (both K-major), a narrow wgmma (n = 32).
      {layout(problem(128, 64, 128, tf32), false, true), wgmmaBlock(tf32, 2, 64, 32, 3)},
      {layout(problem(64, 32, 96, tf32), false, true), wgmmaBlock(tf32, 1, 32, 32, 2)},
      // Edges: M, N and K not multiples of the block (TMA fills zeros past
      // the tensor; the stores are guarded); a batch of 2.
      {problem(100, 72, 40, bf16), wgmmaBlock(bf16, 2, 64, 64, 2)},
      {layout(problem(96, 80, 72, f16), false, true), wgmmaBlock(f16, 1, 64, 64, 2)},
      {layout(problem(64, 64, 100, tf32), false, true), wgmmaBlock(tf32, 1, 64, 32, 2)},
      {layout(problem(64, 64, 128, bf16), false, false, 2), wgmmaBlock(bf16, 1, 64, 64, 2)},
      // 192 columns (m64n192): B three 64-column boxes a slab (NN), one
      // box of 192 rows (NT, and tf32 NT); an edge tile past N.
      {problem(128, 384, 128, bf16), wgmmaBlock(bf16, 2, 192, 64, 3)},
      {layout(problem(128, 192, 128, bf16), false, true), wgmmaBlock(bf16, 2, 192, 64, 2)},
      {layout(problem(64, 200, 64, tf32), false, true), wgmmaBlock(tf32, 1, 192, 32, 2)},
  };
  for (const Case &cs : cases) {
    GpuMatmulConfig c = cs.c;
    c.smemBytes = gpuMatmulSmemBytes(c, cs.p.operand);
    MatmulRun run = runMatmul(cs.p, c);
    INFO(nameOf(cs.p.operand), " ", cs.p.m, "x", cs.p.n, "x", cs.p.k, " batch ", cs.p.batch,
         cs.p.lhsTransposed ? " T" : " N", cs.p.rhsTransposed ? "T" : "N", ": ", run.config);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    MESSAGE(std::string(nameOf(cs.p.operand)), " ", cs.p.m, "x", cs.p.n, "x", cs.p.k, ": worst |error| ", run.worst, " (bound ",
            run.bound, "), ", run.report.wgmmas, " wgmmas, ", run.report.tmaLoads, " TMA loads");
    CHECK(run.report.wgmmas > 0);
    CHECK(run.report.tmaLoads > 0);
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
  }
  // Split-K: each part's slabs through the same TMA pipeline into its
  // layer of C (the parts summed in order, as the step's total kernel
  // does): a GPT's TN weight gradient shape, smaller; tf32 NT with 5 slabs
  // over 4 parts (2, 2, 1 and none: a part with no slab stores zeros).
  struct Split {
    GpuMatmulProblem p;
    GpuMatmulConfig c;
    int64_t parts;
  };
  for (Split sp : {Split{layout(problem(128, 192, 1024, bf16), true, false), wgmmaBlock(bf16, 2, 192, 64, 3), 4},
                   Split{layout(problem(64, 64, 160, tf32), false, true), wgmmaBlock(tf32, 1, 64, 32, 2), 4}}) {
    GpuMatmulConfig c = sp.c;
    c.splitK = sp.parts;
    c.smemBytes = gpuMatmulSmemBytes(c, sp.p.operand);
    MatmulRun run = runMatmul(sp.p, c);
    INFO(nameOf(sp.p.operand), " ", sp.p.m, "x", sp.p.n, "x", sp.p.k, " in ", sp.parts, " parts: ", run.config);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    MESSAGE(std::string(nameOf(sp.p.operand)), " ", sp.p.m, "x", sp.p.n, "x", sp.p.k, " in ", sp.parts,
            " parts: worst |error| ", run.worst, " (bound ", run.bound, "), ", run.report.wgmmas, " wgmmas");
    CHECK(run.report.wgmmas > 0);
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
  }
  // Operands converted in shared memory before wgmma reads them. tf32 in
  // the layouts wgmma cannot read as tf32: an M/N-contiguous operand
  // transposed into K-major tiles (NN: B, TN: A, TT: both), the other read
  // as TMA landed it. 3xtf32: raw f32 slabs converted into K-major big and
  // small tiles (MN-major operands transposed on the way), three wgmmas a k
  // step. Every layout, edges, two warpgroups, split-K, a batch,
  // persistent.
  const GpuOperand x3 = GpuOperand::tf32x3;
  struct Converted {
    GpuMatmulProblem p;
    GpuMatmulConfig c;
    int64_t parts, blocks;
  };
  for (Converted cs : {Converted{problem(128, 128, 128, tf32), wgmmaBlock(tf32, 1, 64, 32, 2), 1, 0},
                       Converted{layout(problem(128, 64, 96, tf32), true, false), wgmmaBlock(tf32, 2, 64, 32, 3), 1, 0},
                       Converted{layout(problem(64, 96, 64, tf32), true, true), wgmmaBlock(tf32, 1, 32, 32, 4), 1, 0},
                       Converted{problem(100, 72, 40, tf32), wgmmaBlock(tf32, 2, 64, 32, 2), 1, 0},
                       Converted{problem(64, 64, 256, tf32), wgmmaBlock(tf32, 1, 64, 32, 2), 4, 0},
                       Converted{layout(problem(64, 96, 64, tf32), false, false, 2), wgmmaBlock(tf32, 1, 32, 32, 2), 1, 0},
                       Converted{problem(192, 128, 96, tf32), wgmmaBlock(tf32, 1, 64, 32, 2), 1, 2},
                       Converted{problem(128, 128, 128, x3), wgmmaBlock(x3, 1, 64, 32, 2), 1, 0},
                       Converted{layout(problem(128, 64, 96, x3), false, true), wgmmaBlock(x3, 2, 64, 32, 3), 1, 0},
                       Converted{layout(problem(64, 128, 64, x3), true, false), wgmmaBlock(x3, 1, 128, 32, 2), 1, 0},
                       Converted{layout(problem(64, 64, 96, x3), true, true), wgmmaBlock(x3, 1, 64, 32, 4), 1, 0},
                       Converted{problem(100, 72, 40, x3), wgmmaBlock(x3, 2, 64, 32, 2), 1, 0},
                       Converted{layout(problem(64, 64, 256, x3), true, false), wgmmaBlock(x3, 1, 64, 32, 2), 4, 0},
                       Converted{layout(problem(64, 96, 64, x3), true, false, 2), wgmmaBlock(x3, 1, 64, 32, 2), 1, 0}}) {
    GpuMatmulConfig c = cs.c;
    c.splitK = cs.parts;
    c.persistentBlocks = cs.blocks;
    const bool tf32Only = cs.p.operand == tf32;
    c.convertA = tf32Only && cs.p.lhsTransposed;
    c.convertB = tf32Only && !cs.p.rhsTransposed;
    c.smemBytes = gpuMatmulSmemBytes(c, cs.p.operand);
    MatmulRun run = runMatmul(cs.p, c);
    const std::string what = std::string(nameOf(cs.p.operand)) + " " + std::to_string(cs.p.m) + "x" +
                             std::to_string(cs.p.n) + "x" + std::to_string(cs.p.k) +
                             (cs.p.lhsTransposed ? " T" : " N") + (cs.p.rhsTransposed ? "T" : "N");
    INFO(what, " in ", cs.parts, " parts: ", run.config);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    MESSAGE(what, ": worst |error| ", run.worst, " (bound ", run.bound, "), ", run.report.wgmmas, " wgmmas");
    CHECK(run.report.wgmmas > 0);
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
    if (!tf32Only)
      CHECK(run.worst < 4e-6); // tf32 alone: about 2e-4 on such inputs
  }
  // A configuration that does not say the kernel converts an operand it
  // must is refused by name.
  {
    MLIRContext &ctx = context();
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&ctx));
    std::string error;
    CHECK(failed(buildWgmmaMatmulKernel(addKernelsModule(*module), "unconverted", problem(128, 128, 128, tf32),
                                        wgmmaBlock(tf32, 1, 64, 32, 2), error)));
    CHECK(error.find("converted in shared memory (A read as stored, B converted)") != std::string::npos);
  }
  // A slab of 64-byte rows is refused by name (MLIR 19 verifies only 128-byte swizzled boxes).
  MLIRContext &ctx = context();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&ctx));
  std::string error;
  CHECK(failed(buildWgmmaMatmulKernel(addKernelsModule(*module), "narrow", problem(64, 64, 64, bf16),
                                      wgmmaBlock(bf16, 1, 64, 32, 2), error)));
  CHECK(error.find("128 bytes of K") != std::string::npos);
}

TEST_CASE("GPU emulator: a persistent wgmma kernel runs several tiles a block, its ring running on across them") {
  // Fewer blocks than tiles: each block runs tiles `blocks` apart (unevenly
  // many), its producer loading the next tile's slabs while the consumers
  // store the present one. Ring depths that divide a tile's slabs and
  // ones that do not, edges, a batch, split-K (a part with no slab),
  // 3xtf32, a fused epilogue.
  const GpuOperand bf16 = GpuOperand::bf16, f16 = GpuOperand::f16, tf32 = GpuOperand::tf32,
                   x3 = GpuOperand::tf32x3;
  struct Case {
    GpuMatmulProblem p;
    GpuMatmulConfig c;
    int64_t blocks, parts;
  };
  const MmaEpilogue none, fused = fullEpilogue();
  for (auto [cs, epilogue] : {std::pair{Case{problem(256, 256, 192, bf16), wgmmaBlock(bf16, 1, 64, 64, 2), 3, 1}, none},
                              std::pair{Case{problem(256, 128, 128, bf16), wgmmaBlock(bf16, 2, 64, 64, 3), 2, 1}, none},
                              std::pair{Case{layout(problem(160, 72, 96, f16), true, false), wgmmaBlock(f16, 1, 64, 32, 4),
                                             2, 1},
                                        none},
                              std::pair{Case{layout(problem(100, 72, 40, tf32), false, true),
                                             wgmmaBlock(tf32, 1, 64, 32, 2), 3, 1},
                                        none},
                              std::pair{Case{layout(problem(64, 64, 128, bf16), false, false, 3),
                                             wgmmaBlock(bf16, 1, 64, 64, 2), 2, 1},
                                        none},
                              std::pair{Case{layout(problem(64, 64, 160, tf32), false, true),
                                             wgmmaBlock(tf32, 1, 64, 32, 2), 3, 4},
                                        none},
                              std::pair{Case{problem(128, 128, 96, x3), wgmmaBlock(x3, 1, 64, 32, 2), 3, 1}, none},
                              std::pair{Case{layout(problem(64, 128, 160, x3), true, false), wgmmaBlock(x3, 1, 64, 32, 3),
                                             1, 1},
                                        none},
                              std::pair{Case{problem(256, 72, 64, bf16), wgmmaBlock(bf16, 2, 64, 64, 2), 2, 1}, fused}}) {
    GpuMatmulConfig c = cs.c;
    c.splitK = cs.parts;
    c.persistentBlocks = cs.blocks;
    c.smemBytes = gpuMatmulSmemBytes(c, cs.p.operand);
    // (And with the consumers before the producer: they wait for it.)
    MatmulRun consumersFirst = runMatmul(cs.p, c, {}, epilogue, {}, {}, /*elseFirst=*/true);
    REQUIRE_MESSAGE(consumersFirst.report.ok, consumersFirst.report.error);
    CHECK(consumersFirst.worst <= consumersFirst.bound);
    MatmulRun run = runMatmul(cs.p, c, {}, epilogue);
    const int64_t tiles = cs.p.batch * cs.parts * ((cs.p.m + c.blockM - 1) / c.blockM) * ((cs.p.n + c.blockN - 1) / c.blockN);
    INFO(std::string(nameOf(cs.p.operand)), " ", cs.p.m, "x", cs.p.n, "x", cs.p.k, " batch ", cs.p.batch, " in ", cs.parts,
         " parts, ", tiles, " tiles on ", cs.blocks, " blocks: ", run.config);
    REQUIRE(tiles > cs.blocks);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    MESSAGE(std::string(nameOf(cs.p.operand)), " ", cs.p.m, "x", cs.p.n, "x", cs.p.k, ", ", tiles, " tiles on ",
            cs.blocks, " blocks: worst |error| ", run.worst, " (bound ", run.bound, "), ", run.report.wgmmas,
            " wgmmas, ", run.report.tmaLoads, " TMA loads");
    CHECK(run.report.blocks == cs.blocks);
    CHECK(run.report.wgmmas > 0);
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
  }
  // Ping-pong: the two consumer warpgroups take the block's 64-row tiles in
  // turn, each slab read (and released) by one of them.
  for (auto [cs, epilogue] :
       {std::pair{Case{problem(256, 128, 192, bf16), wgmmaBlock(bf16, 1, 64, 64, 3), 3, 1}, none},
        std::pair{Case{layout(problem(200, 72, 96, f16), true, true), wgmmaBlock(f16, 1, 64, 64, 2), 2, 1}, none},
        std::pair{Case{layout(problem(128, 64, 160, tf32), false, true), wgmmaBlock(tf32, 1, 64, 32, 2), 2, 4}, none},
        std::pair{Case{problem(192, 64, 64, tf32), wgmmaBlock(tf32, 1, 64, 32, 2), 1, 1}, none},
        std::pair{Case{problem(128, 128, 96, x3), wgmmaBlock(x3, 1, 64, 32, 2), 2, 1}, none},
        std::pair{Case{layout(problem(64, 64, 128, bf16), false, false, 4), wgmmaBlock(bf16, 1, 64, 64, 2), 1, 1}, none},
        std::pair{Case{problem(256, 72, 64, bf16), wgmmaBlock(bf16, 1, 64, 64, 2), 2, 1}, fused}}) {
    GpuMatmulConfig c = cs.c;
    c.splitK = cs.parts;
    c.persistentBlocks = cs.blocks;
    c.pingPong = true;
    c.warpsM = 2;
    c.threads = wgmmaBlockThreads(2);
    c.convertA = cs.p.operand == tf32 && cs.p.lhsTransposed;
    c.convertB = cs.p.operand == tf32 && !cs.p.rhsTransposed;
    c.smemBytes = gpuMatmulSmemBytes(c, cs.p.operand);
    // Each warpgroup first, and the producer after its consumers.
    for (bool elseFirst : {false, true}) {
    MatmulRun run = runMatmul(cs.p, c, {}, epilogue, {}, {}, elseFirst);
    const int64_t tiles = cs.p.batch * cs.parts * ((cs.p.m + 63) / 64) * ((cs.p.n + c.blockN - 1) / c.blockN);
    INFO("ping-pong ", std::string(nameOf(cs.p.operand)), " ", cs.p.m, "x", cs.p.n, "x", cs.p.k, ", ", tiles, " tiles on ",
         cs.blocks, " blocks: ", run.config);
    REQUIRE(tiles >= 2 * cs.blocks);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    MESSAGE("ping-pong ", std::string(nameOf(cs.p.operand)), " ", cs.p.m, "x", cs.p.n, "x", cs.p.k, ", ", tiles,
            " tiles on ", cs.blocks, " blocks", elseFirst ? " (else-branches first)" : "", ": worst |error| ",
            run.worst, " (bound ", run.bound, ")");
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
    }
  }
  // Ping-pong with a stage released before its wgmmas finished, or none
  // released at a tile's end: caught.
  {
    GpuMatmulConfig c = wgmmaBlock(bf16, 1, 64, 64, 2);
    c.persistentBlocks = 1;
    c.pingPong = true;
    c.warpsM = 2;
    c.threads = wgmmaBlockThreads(2);
    c.smemBytes = gpuMatmulSmemBytes(c, bf16);
    WgmmaMatmulFaults early, noEnd, noOrder;
    early.releaseBeforeWgmmaWait = true;
    noEnd.noTileEndRelease = true;
    noOrder.noPingPongOrder = true;
    // The warpgroups not taking turns: the second waits on a stage's
    // `full` a phase ahead of the first, which its parity wait takes for
    // the phase before.
    // (The second warpgroup first: its first tile's first stage is the
    // first's, still in flight.)
    MatmulRun ordered = runMatmul(problem(128, 64, 192, bf16), c, {}, {}, {}, {}, /*elseFirst=*/true);
    REQUIRE_MESSAGE(ordered.report.ok, ordered.report.error);
    CHECK(ordered.worst <= ordered.bound);
    MatmulRun o = runMatmul(problem(128, 64, 192, bf16), c, {}, {}, noOrder, {}, /*elseFirst=*/true);
    CHECK(!o.report.ok);
    MESSAGE("ping-pong without turns: ", o.report.ok ? "not caught" : o.report.error);
    MatmulRun e = runMatmul(problem(128, 64, 192, bf16), c, {}, {}, early);
    CHECK(!e.report.ok);
    CHECK(e.report.error.find("that an unfinished wgmma reads") != std::string::npos);
    MatmulRun n = runMatmul(problem(128, 64, 192, bf16), c, {}, {}, noEnd);
    CHECK(!n.report.ok);
    CHECK(n.report.error.find("waits forever on an mbarrier") != std::string::npos);
    MESSAGE("ping-pong errors caught: ", e.report.error, " / ", n.report.error);
  }
  // The tile's last slab not released at its end: the producer waits
  // forever for that stage (or converted set) in the block's next tile.
  for (GpuOperand op : {bf16, x3}) {
    GpuMatmulConfig c = wgmmaBlock(op, 1, 64, op == x3 ? 32 : 64, 2);
    c.persistentBlocks = 1;
    c.smemBytes = gpuMatmulSmemBytes(c, op);
    WgmmaMatmulFaults f;
    f.noTileEndRelease = true;
    MatmulRun stuck = runMatmul(problem(64, 128, 96, op), c, {}, {}, f);
    MESSAGE(std::string(nameOf(op)), ", no release at a tile's end: ", stuck.report.error);
    CHECK(!stuck.report.ok);
    CHECK(stuck.report.error.find("waits forever on an mbarrier") != std::string::npos);
  }
}

TEST_CASE("GPU emulator: clusters of 2 along M share B's tile by TMA multicast") {
  // Persistent kernels on one cluster (2 CTAs) looping over cluster tiles
  // (2 blockM x blockN, each CTA a row tile): each CTA loads its A and half
  // of B, multicast into both; a stage's release reaches both CTAs'
  // `empty`. B K-major (half the rows a CTA) and MN-major (half the
  // 128-byte column boxes), 16-bit, tf32, 3xtf32 (both converted), an odd
  // number of row tiles (the last cluster tile's second CTA past M), a
  // shallow ring reused across tiles; each CTA first, and the peer lagging.
  const GpuOperand bf16 = GpuOperand::bf16, f16 = GpuOperand::f16, tf32 = GpuOperand::tf32,
                   x3 = GpuOperand::tf32x3;
  struct Case {
    GpuMatmulProblem p;
    GpuMatmulConfig c;
    MmaEpilogue epilogue;
  };
  const MmaEpilogue fused = fullEpilogue();
  for (const Case &cs : {Case{problem(320, 256, 192, bf16), wgmmaBlock(bf16, 2, 128, 64, 2), {}},
                         Case{layout(problem(192, 144, 128, f16), true, true), wgmmaBlock(f16, 1, 16, 64, 2), {}},
                         Case{layout(problem(128, 96, 96, tf32), false, true), wgmmaBlock(tf32, 1, 32, 32, 3), {}},
                         Case{problem(256, 128, 96, x3), wgmmaBlock(x3, 1, 64, 32, 2), {}},
                         // tf32 NN: B transposed in shared memory (its raw boxes of 32 columns, one a CTA).
                         Case{problem(128, 128, 64, tf32), wgmmaBlock(tf32, 1, 64, 32, 2), {}},
                         // A batch of 2 (each layer's cluster tiles), and a fused epilogue.
                         Case{layout(problem(96, 128, 128, bf16), false, true, 2), wgmmaBlock(bf16, 1, 64, 64, 2), {}},
                         Case{problem(256, 200, 64, bf16), wgmmaBlock(bf16, 2, 128, 64, 2), fused}}) {
    GpuMatmulConfig c = cs.c;
    c.clusterM = 2;
    c.convertB = cs.p.operand == tf32 && !cs.p.rhsTransposed;
    c.persistentBlocks = 2;
    c.smemBytes = gpuMatmulSmemBytes(c, cs.p.operand);
    const int64_t clusterTiles =
        cs.p.batch * ((cs.p.m + 2 * c.blockM - 1) / (2 * c.blockM)) * ((cs.p.n + c.blockN - 1) / c.blockN);
    REQUIRE(clusterTiles >= 2);
    for (auto [elseFirst, lag] : {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
      MatmulRun run = runMatmul(cs.p, c, {}, cs.epilogue, {}, {}, elseFirst, lag);
      INFO(std::string(nameOf(cs.p.operand)), " ", cs.p.m, "x", cs.p.n, "x", cs.p.k, ": ", run.config);
      REQUIRE_MESSAGE(run.report.ok, run.report.error);
      MESSAGE("cluster of 2, ", std::string(nameOf(cs.p.operand)), " ", cs.p.m, "x", cs.p.n, "x", cs.p.k, ", ",
              clusterTiles, " cluster tiles", std::string(elseFirst ? " (else-branches first)" : ""),
              std::string(lag ? " (the peer lagging)" : ""), ": worst |error| ", run.worst, " (bound ", run.bound, "), ",
              run.report.multicasts, " multicast loads, ", run.report.remoteArrivals, " remote arrivals");
      CHECK(run.report.clusters == 1);
      CHECK(run.report.blocks == 2);
      CHECK(run.report.multicasts > 0);
      CHECK(run.report.remoteArrivals > 0);
      CHECK(run.report.clusterBarriers == 2 * 2); // after the inits, before the exit, each CTA
      CHECK(run.worst <= run.bound);
      CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
    }
  }
  // Ping-pong in clusters: each CTA's two consumer warpgroups take its
  // 64-row tiles in turn, each releasing its slabs in both CTAs.
  for (const Case &cs : {Case{problem(384, 256, 192, bf16), wgmmaBlock(bf16, 1, 128, 64, 2), {}},
                         Case{problem(256, 128, 96, x3), wgmmaBlock(x3, 1, 64, 32, 2), fused}}) {
    GpuMatmulConfig c = cs.c;
    c.clusterM = 2;
    c.persistentBlocks = 2;
    c.pingPong = true;
    c.warpsM = 2;
    c.threads = wgmmaBlockThreads(2);
    c.smemBytes = gpuMatmulSmemBytes(c, cs.p.operand);
    for (auto [elseFirst, lag] : {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
      MatmulRun run = runMatmul(cs.p, c, {}, cs.epilogue, {}, {}, elseFirst, lag);
      INFO("ping-pong ", std::string(nameOf(cs.p.operand)), " ", cs.p.m, "x", cs.p.n, "x", cs.p.k, ": ", run.config);
      REQUIRE_MESSAGE(run.report.ok, run.report.error);
      MESSAGE("ping-pong in clusters of 2, ", std::string(nameOf(cs.p.operand)), " ", cs.p.m, "x", cs.p.n, "x",
              cs.p.k, std::string(elseFirst ? " (else-branches first)" : ""),
              std::string(lag ? " (the peer lagging)" : ""), ": worst |error| ", run.worst, " (bound ", run.bound,
              "), ", run.report.multicasts, " multicast loads, ", run.report.remoteArrivals, " remote arrivals");
      CHECK(run.report.clusters == 1);
      CHECK(run.report.remoteArrivals > 0);
      CHECK(run.worst <= run.bound);
      CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
    }
  }
  // What a cluster kernel must do for its peers, left out: caught with
  // the peer lagging (CTA 0 running ahead whenever it can).
  struct Fault {
    const char *name;
    WgmmaMatmulFaults f;
    const char *expect;
  };
  WgmmaMatmulFaults local, noInitSync, noExitSync;
  local.releaseOnlyLocally = true;
  noInitSync.noClusterSyncAfterInit = true;
  noExitSync.noClusterSyncBeforeExit = true;
  GpuMatmulConfig c = wgmmaBlock(bf16, 1, 128, 64, 2);
  c.clusterM = 2;
  c.persistentBlocks = 2;
  c.smemBytes = gpuMatmulSmemBytes(c, bf16);
  for (const Fault &fault : {Fault{"a release only in its own CTA", local, "two asynchronous copies in flight"},
                             Fault{"no cluster barrier after the inits", noInitSync, "CTA 1"},
                             Fault{"no cluster barrier before the exit", noExitSync, "which has exited"}}) {
    MatmulRun ok = runMatmul(problem(256, 128, 256, bf16), c, {}, {}, {}, {}, false, /*peersLag=*/true);
    REQUIRE_MESSAGE(ok.report.ok, ok.report.error);
    MatmulRun broken = runMatmul(problem(256, 128, 256, bf16), c, {}, {}, fault.f, {}, false, /*peersLag=*/true);
    MESSAGE(std::string(fault.name), ": ", broken.report.ok ? std::string("not caught") : broken.report.error);
    CHECK(!broken.report.ok);
    CHECK(broken.report.error.find(fault.expect) != std::string::npos);
  }
  // The launch must give the kernel's cluster.
  {
    MLIRContext &ctx = context();
    OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&ctx));
    std::string error;
    FailureOr<WgmmaMatmulKernel> built =
        buildWgmmaMatmulKernel(addKernelsModule(*module), "matmul", problem(256, 128, 256, bf16), c, error);
    REQUIRE_MESSAGE(succeeded(built), error);
    EmulatorLaunch launch;
    launch.grid = {2, 1, 1};
    launch.block = {c.threads, 1, 1};
    EmulatorReport report = emulateKernel(built->func, launch);
    CHECK(!report.ok);
    CHECK(report.error.find("launched in clusters of 1 x 1 x 1") != std::string::npos);
  }
}

TEST_CASE("GPU emulator: setmaxnreg moves the producer warpgroup's registers to the consumers") {
  // Two consumer warpgroups: the configurator gives them 232 registers a
  // thread (the producer keeps 40 of the 168 a thread of 384 is launched
  // with); the consumers' setmaxnreg.inc waits until the producer's .dec
  // has put them in the block's pool, whichever side runs first.
  const ::nova::TargetDesc h100 = ::nova::builtin_gpu_target("sm_90a");
  CHECK(launchedRegistersPerThread(384) == 168);
  CHECK(launchedRegistersPerThread(256) == 256);
  CHECK(wgmmaRebalancedRegisters(2) == 232);
  CHECK(wgmmaRebalancedRegisters(1) == 0); // 255 a thread already
  GpuMatmulProblem p = problem(256, 256, 192, GpuOperand::bf16);
  p.allowWgmma = true;
  p.onlyBlockM = 128; // two consumer warpgroups
  // Blocks of 128 x 64 (72 registers a thread) sit two an SM: no setmaxnreg,
  // which would launch each with 168 a thread and leave room for one.
  GpuMatmulConfig two = configureGpuMatmul(p, h100);
  CAPTURE(two.describe());
  CHECK(two.blocksPerSM == 2);
  CHECK(two.consumerRegisters == 0);
  // Blocks of 128 x 256 are alone on their SM anyway.
  p.onlyBlockN = 256;
  GpuMatmulConfig chosen = configureGpuMatmul(p, h100);
  INFO(chosen.describe());
  REQUIRE(chosen.kind == GpuMmaKind::wgmma);
  CHECK(chosen.warpsM == 2);
  CHECK(chosen.consumerRegisters == 232);
  CHECK(chosen.describe().find("setmaxnreg: producer 40, consumers 232 registers") != std::string::npos);
  for (bool elseFirst : {false, true}) {
    MatmulRun run = runMatmul(p, chosen, {}, {}, {}, {}, elseFirst);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
  }
  // The tile tf32 NN takes at 4096 since (128 x 256, B transposed in shared
  // memory: 200 registers a consumer by the estimate, over 168), persistent.
  GpuMatmulProblem t = problem(256, 512, 96, GpuOperand::tf32);
  t.allowWgmma = true;
  t.onlyBlockM = 128;
  t.onlyBlockN = 256;
  GpuMatmulConfig wide = configureGpuMatmul(t, h100);
  CAPTURE(wide.describe());
  REQUIRE(wide.kind == GpuMmaKind::wgmma);
  CHECK(wide.convertB);
  CHECK(wide.registersPerThread > launchedRegistersPerThread(wide.threads));
  CHECK(wide.consumerRegisters == 232);
  wide.persistentBlocks = 2;
  for (bool elseFirst : {false, true}) {
    MatmulRun run = runMatmul(t, wide, {}, {}, {}, {}, elseFirst);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    MESSAGE("tf32 NN in 128 x 256 tiles with setmaxnreg", std::string(elseFirst ? " (consumers first)" : ""),
            ": worst |error| ", run.worst, " (bound ", run.bound, ")");
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
  }
  // Ping-pong: both consumer warpgroups take theirs before the split into
  // one loop each.
  GpuMatmulConfig pp = wgmmaBlock(GpuOperand::bf16, 1, 64, 64, 3);
  pp.persistentBlocks = 2;
  pp.pingPong = true;
  pp.warpsM = 2;
  pp.threads = wgmmaBlockThreads(2);
  pp.consumerRegisters = 232;
  pp.smemBytes = gpuMatmulSmemBytes(pp, GpuOperand::bf16);
  for (bool elseFirst : {false, true}) {
    MatmulRun run = runMatmul(problem(256, 128, 128, GpuOperand::bf16), pp, {}, {}, {}, {}, elseFirst);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    CHECK(run.worst <= run.bound);
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
  }
  // A producer that keeps its registers: the consumers' inc can never be met.
  GpuMatmulConfig c = wgmmaBlock(GpuOperand::bf16, 2, 64, 64, 2);
  c.consumerRegisters = 232;
  WgmmaMatmulFaults keeps;
  keeps.producerKeepsRegisters = true;
  for (bool elseFirst : {false, true}) {
    MatmulRun stuck = runMatmul(problem(128, 64, 128, GpuOperand::bf16), c, {}, {}, keeps, {}, elseFirst);
    MESSAGE("the producer keeping its registers", std::string(elseFirst ? " (consumers first)" : ""), ": ",
            stuck.report.error);
    CHECK(!stuck.report.ok);
    CHECK(stuck.report.error.find("setmaxnreg.inc to 232 registers waits forever") != std::string::npos);
  }
  // More than the pool holds is refused when the kernel is built.
  c.consumerRegisters = 240;
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context()));
  std::string error;
  FailureOr<WgmmaMatmulKernel> refused =
      buildWgmmaMatmulKernel(addKernelsModule(*module), "matmul", problem(128, 64, 128, GpuOperand::bf16), c, error);
  CHECK(failed(refused));
  CHECK(error.find("240 registers a consumer thread by setmaxnreg") != std::string::npos);
}

TEST_CASE("GPU emulator: the wgmma kernel's fused epilogue and the configurator's sm_90a decisions") {
  MmaEpilogue epilogue;
  epilogue.scale = 0.5;
  epilogue.bias = true;
  epilogue.activation = MmaEpilogue::Activation::gelu_tanh;
  epilogue.residual = true;
  MatmulRun run = runMatmul(problem(128, 72, 64, GpuOperand::bf16), wgmmaBlock(GpuOperand::bf16, 2, 64, 64, 2), {},
                            epilogue);
  REQUIRE_MESSAGE(run.report.ok, run.report.error);
  CHECK(run.worst <= run.bound);
  CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));

  const ::nova::TargetDesc h100 = ::nova::builtin_gpu_target("sm_90a");
  for (auto [m, n, k, op, ta, tb] : {std::tuple{256, 256, 256, GpuOperand::bf16, false, false},
                                    std::tuple{192, 320, 128, GpuOperand::f16, true, false},
                                    std::tuple{128, 256, 96, GpuOperand::tf32, false, true}}) {
    GpuMatmulProblem p = layout(problem(m, n, k, op), ta, tb);
    p.allowWgmma = true;
    GpuMatmulConfig c = configureGpuMatmul(p, h100);
    INFO(c.describe());
    REQUIRE(c.kind == GpuMmaKind::wgmma);
    MatmulRun r = runMatmul(p, c);
    REQUIRE_MESSAGE(r.report.ok, r.report.error);
    CHECK(r.worst <= r.bound);
  }
}

TEST_CASE("GPU emulator: C written in bf16 by the epilogue (bf16ResultEpilogue, nova-gpu-kernels' :bf16out)") {
  // The device check's bf16out rows: the product each kernel computes,
  // rounded once to bf16 in its epilogue (a cvt.rn.bf16x2.f32 a pair).
  MLIRContext &ctx = context();
  Region storage;
  const MmaEpilogue epilogue = bf16ResultEpilogue(&ctx, storage);
  const ::nova::TargetDesc h100 = ::nova::builtin_gpu_target("sm_90a");
  for (auto [m, n, k, wgmma, ta, tb] : {std::tuple{256, 256, 256, true, false, false},
                                       std::tuple{192, 320, 128, true, false, true},
                                       std::tuple{128, 192, 128, true, true, false},
                                       std::tuple{256, 256, 256, false, false, false},
                                       std::tuple{96, 80, 200, false, false, true}}) { // edges
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    CAPTURE(wgmma);
    GpuMatmulProblem p = layout(problem(m, n, k, GpuOperand::bf16), ta, tb);
    p.allowWgmma = wgmma;
    const GpuMatmulConfig c = configureGpuMatmul(p, h100);
    CAPTURE(c.describe());
    REQUIRE((c.kind == GpuMmaKind::wgmma) == wgmma);
    MatmulRun run = runMatmul(p, c, {}, epilogue);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    CHECK(run.worst <= run.bound);
    // Rounded: off by more than f32's sums alone would be somewhere.
    CHECK(run.worst > 2 * double(k) * std::ldexp(1.0, -24));
    CHECK_MESSAGE(bankConflicts(run.report).empty(), bankConflicts(run.report));
  }
}

TEST_CASE("GPU emulator: the wgmma kernel's timing probe loads only each block's first stages and multiplies "
          "them over and over") {
  // nova-gpu-kernels' :wgmmaprobe (WgmmaMatmulFaults::probeShared), timed
  // by the device check beside the flat kernel: slab kt multiplies what
  // stage kt mod stages holds; the waits, releases and wgmmas of the kernel.
  const ::nova::TargetDesc h100 = ::nova::builtin_gpu_target("sm_90a");
  for (auto [m, n, k, op, tb] : {std::tuple{256, 256, 512, GpuOperand::bf16, false},
                                 std::tuple{128, 256, 512, GpuOperand::f16, true},
                                 std::tuple{256, 128, 320, GpuOperand::tf32, true}}) {
    CAPTURE(m);
    CAPTURE(n);
    CAPTURE(k);
    CAPTURE(std::string(nameOf(op)));
    GpuMatmulProblem p = layout(problem(m, n, k, op), false, tb);
    p.allowWgmma = true;
    p.allowPersistent = false;
    const GpuMatmulConfig c = configureGpuMatmul(p, h100);
    CAPTURE(c.describe());
    REQUIRE(c.kind == GpuMmaKind::wgmma);
    REQUIRE(k / c.blockK > c.stages);
    WgmmaMatmulFaults probe;
    probe.probeShared = true;
    MatmulRun whole = runMatmul(p, c), run = runMatmul(p, c, {}, {}, probe);
    REQUIRE_MESSAGE(whole.report.ok, whole.report.error);
    REQUIRE_MESSAGE(run.report.ok, run.report.error);
    CHECK(whole.worst <= whole.bound);
    CHECK(run.worst <= run.bound);
    CHECK(run.report.wgmmas == whole.report.wgmmas);
    // The first `stages` slabs' loads of each block only.
    CHECK(run.report.tmaLoads * (k / c.blockK) == whole.report.tmaLoads * c.stages);
  }
  // A persistent kernel's probe is refused (its blocks' later tiles would
  // read the first tile's slabs).
  MLIRContext &ctx = context();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&ctx));
  GpuMatmulConfig persistent = wgmmaBlock(GpuOperand::bf16, 2, 64, 64, 2);
  persistent.persistentBlocks = 1;
  WgmmaMatmulFaults probe;
  probe.probeShared = true;
  std::string error;
  GpuMatmulProblem p = problem(256, 64, 256, GpuOperand::bf16);
  p.allowWgmma = true;
  CHECK(failed(buildWgmmaMatmulKernel(addKernelsModule(*module), "probe", p, persistent, error, probe)));
  CHECK(error.find("the probe takes a block a tile") != std::string::npos);
}

TEST_CASE("GPU emulator: a deliberately broken wgmma kernel fails it") {
  const GpuMatmulProblem p = problem(128, 128, 192, GpuOperand::bf16);
  const GpuMatmulConfig c = wgmmaBlock(GpuOperand::bf16, 2, 64, 64, 2);
  auto broken = [&](auto set) {
    WgmmaMatmulFaults f;
    set(f);
    return runMatmul(p, c, {}, {}, f);
  };
  MatmulRun noWait = broken([](WgmmaMatmulFaults &f) { f.noMbarrierWait = true; });
  CHECK(!noWait.report.ok);
  CHECK(noWait.report.error.find("not been waited for") != std::string::npos);
  // The producer runs ahead of its consumers: it arms a stage's full
  // barrier again before the stage's first load completed its phase.
  MatmulRun noRelease = broken([](WgmmaMatmulFaults &f) { f.noStageRelease = true; });
  CHECK(!noRelease.report.ok);
  CHECK(noRelease.report.error.find("more arrivals on an mbarrier phase than its count") != std::string::npos);
  // A stage released before the wgmmas reading it finished: its refill
  // lands on bytes they still read.
  MatmulRun early = broken([](WgmmaMatmulFaults &f) { f.releaseBeforeWgmmaWait = true; });
  CHECK(!early.report.ok);
  CHECK(early.report.error.find("overwrites shared byte") != std::string::npos);
  CHECK(early.report.error.find("that an unfinished wgmma reads") != std::string::npos);
  MatmulRun noFinal = broken([](WgmmaMatmulFaults &f) { f.noFinalWgmmaWait = true; });
  CHECK(!noFinal.report.ok);
  CHECK(noFinal.report.error.find("wait_group") != std::string::npos);
  MatmulRun noFence = broken([](WgmmaMatmulFaults &f) { f.noWgmmaFence = true; });
  CHECK(!noFence.report.ok);
  CHECK(noFence.report.error.find("wgmma.fence") != std::string::npos);
  // A descriptor swizzle other than the one TMA wrote with reads the wrong
  // elements (one slab: nothing else is in flight to trip over).
  WgmmaMatmulFaults wrong;
  wrong.wrongDescriptorSwizzle = true;
  MatmulRun swizzle = runMatmul(problem(128, 128, 64, GpuOperand::bf16), c, {}, {}, wrong);
  MESSAGE("errors caught: ", noWait.report.error, " / ", noRelease.report.error, " / ", early.report.error, " / ",
          noFinal.report.error, " / ",
          noFence.report.error, "; wrong swizzle: ", swizzle.report.ok ? "worst " + std::to_string(swizzle.worst)
                                                                      : swizzle.report.error);
  REQUIRE_MESSAGE(swizzle.report.ok, swizzle.report.error);
  CHECK(swizzle.worst > 100 * swizzle.bound);
  // A map the driver would not encode (a row stride off the 16-byte grid)
  // is refused as the runtime refuses it in a description.
  MatmulRun badStride = runMatmul(problem(128, 128, 64, GpuOperand::bf16), c, {}, {}, {},
                                  [](std::vector<::nova::TensorMapDesc> &maps) { maps[0].strides[0] += 4; });
  CHECK(!badStride.report.ok);
  CHECK(badStride.report.error.find("a tensor map cuTensorMapEncodeTiled refuses: stride 1 of") != std::string::npos);
  // Converted operands: the conversion's stores need fence.proxy.async
  // before the wgmmas read them; a converted set (3xtf32) or a raw stage
  // still read as stored (tf32 NN: B transposed, A read from the stage,
  // released with the set) given back before its wgmmas finished is
  // overwritten under them.
  GpuMatmulConfig cnn = wgmmaBlock(GpuOperand::tf32, 2, 64, 32, 2);
  cnn.convertB = true;
  WgmmaMatmulFaults unfencedConversion, earlyFree;
  unfencedConversion.noConversionFence = true;
  earlyFree.releaseBeforeWgmmaWait = true;
  for (auto [name, pc, cc] : {std::tuple{"3xtf32", layout(problem(128, 64, 160, GpuOperand::tf32x3), true, false),
                                         wgmmaBlock(GpuOperand::tf32x3, 2, 64, 32, 3)},
                              std::tuple{"tf32 NN", problem(128, 64, 160, GpuOperand::tf32), cnn}}) {
    MatmulRun fine = runMatmul(pc, cc);
    REQUIRE_MESSAGE(fine.report.ok, fine.report.error);
    MatmulRun unfenced = runMatmul(pc, cc, {}, {}, unfencedConversion);
    CHECK(!unfenced.report.ok);
    CHECK(unfenced.report.error.find("no fence.proxy.async") != std::string::npos);
    MatmulRun early = runMatmul(pc, cc, {}, {}, earlyFree);
    CHECK(!early.report.ok);
    CHECK(early.report.error.find("that an unfinished wgmma reads") != std::string::npos);
    MESSAGE(name, " errors caught: ", unfenced.report.error, " / ", early.report.error);
  }
}

namespace {

/// `math.<op>` on f64 inputs, one a thread, after nova-gpu-inline-math wrote
/// it out in arith ops: what the GPU runs, run by the emulator.
std::vector<double> runInlineF64Math(const std::string &op, const std::vector<double> &inputs) {
  const size_t n = inputs.size();
  std::string text = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @f(%in: memref<Nxf64>, %out: memref<Nxf64>) kernel {
      %t = gpu.thread_id x
      %x = memref.load %in[%t] : memref<Nxf64>
      %y = math.OP %x : f64
      memref.store %y, %out[%t] : memref<Nxf64>
      gpu.return
    }
  }
}
)mlir";
  for (size_t at; (at = text.find("Nx")) != std::string::npos;)
    text.replace(at, 2, std::to_string(n) + "x");
  text.replace(text.find("OP"), 2, op);
  MLIRContext &ctx = context();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &ctx);
  REQUIRE(module);
  PassManager pm(&ctx);
  pm.addPass(createGpuInlineMath());
  REQUIRE(succeeded(pm.run(*module)));
  gpu::GPUFuncOp f;
  module->walk([&](gpu::GPUFuncOp g) { f = g; });
  bool calls = false;
  f.walk([&](Operation *o) { calls |= isa<math::ExpOp, math::LogOp, math::TanhOp, math::ErfOp>(o); });
  CHECK_MESSAGE(!calls, "math." << op << " is still a math op (a libdevice call on the GPU)");
  std::vector<uint8_t> in(n * 8), out(n * 8);
  std::memcpy(in.data(), inputs.data(), in.size());
  EmulatorLaunch launch;
  launch.block = {int64_t(n), 1, 1};
  launch.args = {&in, &out};
  EmulatorReport report = emulateKernel(f, launch);
  REQUIRE_MESSAGE(report.ok, report.error);
  std::vector<double> result(n);
  std::memcpy(result.data(), out.data(), out.size());
  return result;
}

} // namespace

TEST_CASE("GPU f64 math without libdevice: exp, log, tanh and erf within a few ulp of the C library") {
  const uint64_t seed = nova_test::test_seed();
  INFO("seed = ", seed);
  std::mt19937_64 rng(seed);
  auto uniform = [&](double lo, double hi, size_t count) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<double> v(count);
    for (double &x : v)
      x = d(rng);
    return v;
  };
  const double inf = INFINITY, nan = NAN, tiny = 4.9406564584124654e-324;
  struct Case {
    std::string op;
    double (*want)(double);
    std::vector<double> inputs;
    double ulps; ///< the bound, in units of the result's last place
  };
  std::vector<Case> cases = {
      {"exp", [](double x) { return std::exp(x); }, uniform(-745, 709.7, 400), 4},
      {"exp", [](double x) { return std::exp(x); }, uniform(-1, 1, 200), 4},
      {"log", [](double x) { return std::log(x); }, uniform(1e-300, 1e300, 200), 4},
      {"log", [](double x) { return std::log(x); }, uniform(0.5, 2.0, 200), 4},
      {"tanh", [](double x) { return std::tanh(x); }, uniform(-25, 25, 300), 4},
      {"tanh", [](double x) { return std::tanh(x); }, uniform(-0.4, 0.4, 300), 4},
      {"erf", [](double x) { return std::erf(x); }, uniform(-7, 7, 400), 8},
      {"erf", [](double x) { return std::erf(x); }, uniform(-0.5, 0.5, 200), 8},
  };
  // Edges: special values, the ends of the ranges, subnormals, the branch points.
  for (double x : {0.0, -0.0, 1e-300, -1e-300, 709.78, 709.7827128933839, -745.13, -740.0, -708.5, 0.5, -0.5,
                   0.34657, 0.3466, inf, -inf, nan})
    cases[0].inputs.push_back(x);
  for (double x : {1.0, 0.0, -0.0, -1.0, tiny, 2.2250738585072014e-308, 1e-310, 1.4142135623730951,
                   1.4142135623730954, 0.7071067811865475, 1.0000000000000002, 0.9999999999999999, 1.7976931348623157e308,
                   inf, -inf, nan})
    cases[2].inputs.push_back(x);
  for (double x : {0.0, -0.0, 1e-300, -1e-300, 0.17328, 0.17329, 21.9, 22.0, 22.1, 700.0, inf, -inf, nan})
    cases[4].inputs.push_back(x);
  for (double x : {0.0, -0.0, 1e-300, 1.9999999, 2.0, 2.0000001, 5.9, 6.0, -6.5, 27.0, inf, -inf, nan})
    cases[6].inputs.push_back(x);
  for (const Case &c : cases) {
    std::vector<double> got = runInlineF64Math(c.op, c.inputs);
    double worst = 0;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      const double x = c.inputs[i], want = c.want(x);
      CAPTURE(c.op);
      CAPTURE(x);
      CAPTURE(got[i]);
      CAPTURE(want);
      if (std::isnan(want) || std::isinf(want) || want == 0) {
        CHECK((std::isnan(want) ? std::isnan(got[i]) : got[i] == want));
        continue;
      }
      // A subnormal result's last place is the smallest subnormal.
      const double ulp = std::max(std::abs(std::nextafter(want, inf) - want), tiny);
      const double err = std::abs(got[i] - want) / ulp;
      worst = std::max(worst, err);
      CHECK(err <= c.ulps);
    }
    MESSAGE("math.", c.op, " f64 over ", c.inputs.size(), " inputs: worst ", worst, " ulp");
  }
}

TEST_CASE("GPU emulator: a wgmma reading what ordinary stores wrote needs fence.proxy.async") {
  // 128 threads store A (64 x 16 f16) and B (8 x 16) into shared memory in
  // wgmma's unswizzled K-major layout (8 x 8 core matrices: LBO 128 bytes
  // between the two k halves, SBO 256 between 8-row groups; element (x, k)
  // at (x/8) 128 + (k/8) 64 + (x%8) 8 + k%8), a barrier, then one
  // m64n8k16 wgmma. Without fence.proxy.async between the stores and the
  // wgmma the async proxy may not see them: the emulator stops it. With
  // it, D = A B exactly (small integers).
  auto run = [](bool fence, std::vector<float> &d) {
    std::string text = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @f(%out: memref<128x4xf32>) kernel attributes {known_block_size = array<i32: 128, 1, 1>} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c3 = arith.constant 3 : index
      %c5 = arith.constant 5 : index
      %c7 = arith.constant 7 : index
      %c8 = arith.constant 8 : index
      %c16 = arith.constant 16 : index
      %c64 = arith.constant 64 : index
      %c128 = arith.constant 128 : index
      %c1023 = arith.constant 1023 : index
      %c1024 = arith.constant 1024 : index
      %cm1024 = arith.constant -1024 : index
      %t = gpu.thread_id x
      %dyn = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %base = memref.extract_aligned_pointer_as_index %dyn : memref<?xi8, #gpu.address_space<workgroup>> -> index
      %up = arith.addi %base, %c1023 : index
      %al = arith.andi %up, %cm1024 : index
      %pad = arith.subi %al, %base : index
      %tiles = memref.view %dyn[%pad][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<1152xf16, #gpu.address_space<workgroup>>
      scf.for %i = %c0 to %c8 step %c1 {
        %i128 = arith.muli %i, %c128 : index
        %el = arith.addi %t, %i128 : index
        %x = arith.divui %el, %c16 : index
        %k = arith.remui %el, %c16 : index
        %s = arith.addi %x, %k : index
        %m = arith.remui %s, %c5 : index
        %mi = arith.index_cast %m : index to i32
        %two = arith.constant 2 : i32
        %vi = arith.subi %mi, %two : i32
        %v = arith.sitofp %vi : i32 to f16
        %x8 = arith.divui %x, %c8 : index
        %xr = arith.remui %x, %c8 : index
        %k8 = arith.divui %k, %c8 : index
        %kr = arith.remui %k, %c8 : index
        %p0 = arith.muli %x8, %c128 : index
        %p1 = arith.muli %k8, %c64 : index
        %p2 = arith.muli %xr, %c8 : index
        %q0 = arith.addi %p0, %p1 : index
        %q1 = arith.addi %q0, %p2 : index
        %at = arith.addi %q1, %kr : index
        memref.store %v, %tiles[%at] : memref<1152xf16, #gpu.address_space<workgroup>>
      }
      %n = arith.divui %t, %c16 : index
      %kb = arith.remui %t, %c16 : index
      %n3 = arith.muli %n, %c3 : index
      %sb = arith.addi %n3, %kb : index
      %mb = arith.remui %sb, %c7 : index
      %mbi = arith.index_cast %mb : index to i32
      %three = arith.constant 3 : i32
      %vbi = arith.subi %mbi, %three : i32
      %vb = arith.sitofp %vbi : i32 to f16
      %kb8 = arith.divui %kb, %c8 : index
      %kbr = arith.remui %kb, %c8 : index
      %r0 = arith.muli %kb8, %c64 : index
      %r1 = arith.muli %n, %c8 : index
      %r2 = arith.addi %r0, %r1 : index
      %r3 = arith.addi %r2, %kbr : index
      %atb = arith.addi %r3, %c1024 : index
      memref.store %vb, %tiles[%atb] : memref<1152xf16, #gpu.address_space<workgroup>>
      gpu.barrier
      FENCE
      %a64 = arith.index_cast %al : index to i64
      %mask = arith.constant 262143 : i64
      %four = arith.constant 4 : i64
      %masked = arith.andi %a64, %mask : i64
      %field = arith.shrui %masked, %four : i64
      %high = arith.constant 68720001024 : i64
      %descA = arith.ori %field, %high : i64
      %bstep = arith.constant 128 : i64
      %descB = arith.addi %descA, %bstep : i64
      %zero = llvm.mlir.zero : !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.fence.aligned
      %d = nvvm.wgmma.mma_async %descA, %descB, %zero, #nvvm.shape<m = 64, n = 8, k = 16>, D [<f32>, #nvvm.wgmma_scale_out<one>], A [<f16>, #nvvm.wgmma_scale_in<one>, #nvvm.mma_layout<row>], B [<f16>, #nvvm.wgmma_scale_in<one>, #nvvm.mma_layout<col>] : !llvm.struct<(f32, f32, f32, f32)> -> !llvm.struct<(f32, f32, f32, f32)>
      nvvm.wgmma.commit.group.sync.aligned
      nvvm.wgmma.wait.group.sync.aligned 0
      %d0 = llvm.extractvalue %d[0] : !llvm.struct<(f32, f32, f32, f32)>
      %d1 = llvm.extractvalue %d[1] : !llvm.struct<(f32, f32, f32, f32)>
      %d2 = llvm.extractvalue %d[2] : !llvm.struct<(f32, f32, f32, f32)>
      %d3 = llvm.extractvalue %d[3] : !llvm.struct<(f32, f32, f32, f32)>
      memref.store %d0, %out[%t, %c0] : memref<128x4xf32>
      memref.store %d1, %out[%t, %c1] : memref<128x4xf32>
      memref.store %d2, %out[%t, %c2] : memref<128x4xf32>
      memref.store %d3, %out[%t, %c3] : memref<128x4xf32>
      gpu.return
    }
  }
}
)mlir";
    const std::string fenceOp = "nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}";
    text.replace(text.find("FENCE"), 5, fence ? fenceOp : std::string());
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context());
    REQUIRE(module);
    REQUIRE(succeeded(verify(*module)));
    gpu::GPUFuncOp f;
    module->walk([&](gpu::GPUFuncOp g) { f = g; });
    std::vector<uint8_t> out(128 * 4 * 4);
    EmulatorLaunch launch;
    launch.block = {128, 1, 1};
    launch.dynamicSharedBytes = 1024 + 2304;
    launch.args = {&out};
    EmulatorReport report = emulateKernel(f, launch);
    d.resize(128 * 4);
    std::memcpy(d.data(), out.data(), out.size());
    return report;
  };
  std::vector<float> d;
  EmulatorReport unfenced = run(false, d);
  CHECK(!unfenced.ok);
  CHECK(unfenced.error.find("no fence.proxy.async") != std::string::npos);
  EmulatorReport fenced = run(true, d);
  REQUIRE_MESSAGE(fenced.ok, fenced.error);
  int wrong = 0;
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < 4; ++i) {
      const int q = t / 32, g = (t % 32) / 4, t4 = t % 4;
      const int row = 16 * q + g + 8 * ((i >> 1) & 1), col = 2 * t4 + (i & 1);
      double want = 0;
      for (int k = 0; k < 16; ++k)
        want += double((row + k) % 5 - 2) * double((3 * col + k) % 7 - 3);
      wrong += d[size_t(t * 4 + i)] != float(want);
    }
  CHECK(wrong == 0);
}

TEST_CASE("GPU emulator: a producer warp and its consumers meet only at mbarriers (each side a context)") {
  // Warp 1's first thread produces values 1..N into a ring of two shared
  // slots: it waits for a slot's release (`empty`, from its third value
  // on), stores, arrives on the slot's `full`. Warp 0 consumes: waits for
  // `full`, adds the slot to its sum, releases it (32 arrivals). Sum
  // 1 + ... + N = N (N + 1) / 2. The variants break the handshake.
  constexpr int64_t kValues = 7;
  auto run = [&](const std::string &variant, float &sum) {
    std::string text = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @ring(%out: memref<32xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c2 = arith.constant 2 : index
      %c32 = arith.constant 32 : index
      %cN = arith.constant N_VALUES : index
      %ticks = arith.constant 1000 : index
      %t = gpu.thread_id x
      %first = arith.cmpi eq, %t, %c0 : index
      %full = nvgpu.mbarrier.create -> !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
      %empty = nvgpu.mbarrier.create -> !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
      nvgpu.mbarrier.init %full[%c0], %c1, predicate = %first : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
      nvgpu.mbarrier.init %full[%c1], %c1, predicate = %first : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
      nvgpu.mbarrier.init %empty[%c0], %c32, predicate = %first : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
      nvgpu.mbarrier.init %empty[%c1], %c32, predicate = %first : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
      gpu.barrier
      %dyn = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %slots = memref.view %dyn[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2xf32, #gpu.address_space<workgroup>>
      %producer = arith.cmpi uge, %t, %c32 : index
      scf.if %producer {
        %issuer = arith.cmpi eq, %t, %c32 : index
        scf.if %issuer {
          scf.for %i = %c0 to %cN step %c1 {
            %s = arith.remui %i, %c2 : index
            %reuse = arith.cmpi uge, %i, %c2 : index
            scf.if %reuse {
              %u = arith.divui %i, %c2 : index
              %u1 = arith.addi %u, %c1 : index
              %pb = arith.andi %u1, %c1 : index
              %p = arith.cmpi ne, %pb, %c0 : index
              PRODUCER_WAIT
            }
            %i1 = arith.addi %i, %c1 : index
            %ii = arith.index_cast %i1 : index to i32
            %v = arith.sitofp %ii : i32 to f32
            memref.store %v, %slots[%s] : memref<2xf32, #gpu.address_space<workgroup>>
            %tok = nvgpu.mbarrier.arrive %full[%s] : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2> -> !nvgpu.mbarrier.token
          }
        }
      } else {
        %zero = arith.constant 0.0 : f32
        %sum = scf.for %i = %c0 to %cN step %c1 iter_args(%acc = %zero) -> (f32) {
          %s = arith.remui %i, %c2 : index
          %u = arith.divui %i, %c2 : index
          %pb = arith.andi %u, %c1 : index
          CONSUMER_PARITY
          nvgpu.mbarrier.try_wait.parity %full[%s], %p, %ticks : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
          EARLY_RELEASE
          %v = memref.load %slots[%s] : memref<2xf32, #gpu.address_space<workgroup>>
          LATE_RELEASE
          %next = arith.addf %acc, %v : f32
          scf.yield %next : f32
        }
        memref.store %sum, %out[%t] : memref<32xf32>
      }
      gpu.return
    }
  }
}
)mlir";
    const std::string release = "%tok = nvgpu.mbarrier.arrive %empty[%s] : !nvgpu.mbarrier.group<memorySpace = "
                                "#gpu.address_space<workgroup>, num_barriers = 2> -> !nvgpu.mbarrier.token";
    const std::string wait = "nvgpu.mbarrier.try_wait.parity %empty[%s], %p, %ticks : !nvgpu.mbarrier.group<"
                             "memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>";
    auto put = [&](const std::string &key, const std::string &with) { text.replace(text.find(key), key.size(), with); };
    put("N_VALUES", std::to_string(kValues));
    put("PRODUCER_WAIT", variant == "no producer wait" ? "" : wait);
    put("CONSUMER_PARITY", variant == "wrong parity" ? "%p = arith.cmpi eq, %pb, %c0 : index"
                                                     : "%p = arith.cmpi ne, %pb, %c0 : index");
    put("EARLY_RELEASE", variant == "early release" ? release : "");
    put("LATE_RELEASE", variant == "early release" ? "" : release);
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context());
    REQUIRE(module);
    REQUIRE(succeeded(verify(*module)));
    gpu::GPUFuncOp f;
    module->walk([&](gpu::GPUFuncOp g) { f = g; });
    std::vector<uint8_t> out(32 * 4);
    EmulatorLaunch launch;
    launch.block = {64, 1, 1};
    launch.dynamicSharedBytes = 8;
    launch.args = {&out};
    EmulatorReport report = emulateKernel(f, launch);
    std::memcpy(&sum, out.data() + 4 * 5, 4); // consumer thread 5's
    MESSAGE(variant, ": ", report.ok ? "ok, sum " + std::to_string(sum) : report.error);
    return report;
  };
  float sum = 0;
  EmulatorReport ok = run("as written", sum);
  REQUIRE_MESSAGE(ok.ok, ok.error);
  CHECK(sum == float(kValues * (kValues + 1) / 2));
  // The producer runs through without waiting for releases: a slot's full
  // barrier passes phases the consumers never saw, and they wait for one
  // that will not come back, after the producer finished.
  EmulatorReport noWait = run("no producer wait", sum);
  CHECK(!noWait.ok);
  CHECK(noWait.error.find("waits forever on an mbarrier") != std::string::npos);
  CHECK(noWait.error.find("the block's other warps have finished") != std::string::npos);
  // The consumers release a slot before reading it: the producer's next
  // store to it is not ordered after their read.
  EmulatorReport early = run("early release", sum);
  CHECK(!early.ok);
  CHECK(early.error.find("read with no barrier between") != std::string::npos);
  CHECK(early.error.find("no mbarrier phase completed after the read") != std::string::npos);
  // The consumers wait for the wrong phase: each side waits for the other.
  EmulatorReport deadlock = run("wrong parity", sum);
  CHECK(!deadlock.ok);
  CHECK(deadlock.error.find("waits forever on an mbarrier") != std::string::npos);
  CHECK(deadlock.error.find("a deadlock") != std::string::npos);
}

TEST_CASE("GPU emulator: consumer warps on paths of their own inside a context each run as a context (nested)") {
  // Warp 2 waits on B and reads slot 1; warps 0 and 1, the other side of
  // the block's divergent branch, split again: warp 0 waits on A, writes
  // slot 1 = slot 0 + 1 and arrives on B; warp 1 writes slot 0 = 41 and
  // arrives on A. Warp 0 can go on only after warp 1, which the branch
  // puts after it: run in lockstep, warps 0 and 1 would wait for each
  // other (a deadlock on a GPU that none has); as contexts of their own,
  // warp 2 reads 42.
  std::string text = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @nested(%out: memref<32xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c32 = arith.constant 32 : index
      %c64 = arith.constant 64 : index
      %false = arith.constant false
      %ticks = arith.constant 1000 : index
      %t = gpu.thread_id x
      %first = arith.cmpi eq, %t, %c0 : index
      %bars = nvgpu.mbarrier.create -> !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
      nvgpu.mbarrier.init %bars[%c0], %c32, predicate = %first : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
      nvgpu.mbarrier.init %bars[%c1], %c32, predicate = %first : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
      gpu.barrier
      %dyn = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %slots = memref.view %dyn[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2xf32, #gpu.address_space<workgroup>>
      %reader = arith.cmpi uge, %t, %c64 : index
      scf.if %reader {
        nvgpu.mbarrier.try_wait.parity %bars[%c1], %false, %ticks : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
        %v = memref.load %slots[%c1] : memref<2xf32, #gpu.address_space<workgroup>>
        %i = arith.subi %t, %c64 : index
        memref.store %v, %out[%i] : memref<32xf32>
      } else {
        %warp0 = arith.cmpi ult, %t, %c32 : index
        scf.if %warp0 {
          nvgpu.mbarrier.try_wait.parity %bars[%c0], %false, %ticks : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2>
          %x = memref.load %slots[%c0] : memref<2xf32, #gpu.address_space<workgroup>>
          %one = arith.constant 1.0 : f32
          %y = arith.addf %x, %one : f32
          scf.if %first {
            memref.store %y, %slots[%c1] : memref<2xf32, #gpu.address_space<workgroup>>
          }
          %tb = nvgpu.mbarrier.arrive %bars[%c1] : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2> -> !nvgpu.mbarrier.token
        } else {
          %writer = arith.cmpi eq, %t, %c32 : index
          scf.if %writer {
            %v = arith.constant 41.0 : f32
            memref.store %v, %slots[%c0] : memref<2xf32, #gpu.address_space<workgroup>>
          }
          %ta = nvgpu.mbarrier.arrive %bars[%c0] : !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>, num_barriers = 2> -> !nvgpu.mbarrier.token
        }
      }
      gpu.return
    }
  }
}
)mlir";
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context());
  REQUIRE(module);
  REQUIRE(succeeded(verify(*module)));
  gpu::GPUFuncOp f;
  module->walk([&](gpu::GPUFuncOp g) { f = g; });
  std::vector<uint8_t> out(32 * 4, 0);
  EmulatorLaunch launch;
  launch.block = {96, 1, 1};
  launch.dynamicSharedBytes = 8;
  launch.args = {&out};
  EmulatorReport report = emulateKernel(f, launch);
  REQUIRE_MESSAGE(report.ok, report.error);
  for (int i = 0; i < 32; ++i) {
    float v = 0;
    std::memcpy(&v, out.data() + 4 * i, 4);
    CHECK(v == 42.0f);
  }
}

TEST_CASE("GPU emulator: a programmatic dependent's wait (griddepcontrol.wait) comes first, or the kernel fails") {
  // out[t] = in[t] + 1, after the wait and the trigger; then the wait
  // moved after the load of `in` (what the grid before may still write).
  auto kernel = [](bool waitFirst) {
    const std::string wait = "llvm.inline_asm has_side_effects \"" + std::string(kGridDependencyWaitAsm) + "\", \"\"  : () -> ()\n";
    const std::string trigger =
        "llvm.inline_asm has_side_effects \"" + std::string(kLaunchDependentsAsm) + "\", \"\"  : () -> ()\n";
    return std::string(R"mlir(
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @dependent(%in: memref<32xf32>, %out: memref<32xf32>) kernel {
)mlir") + (waitFirst ? wait + trigger : "") + R"mlir(
      %t = gpu.thread_id x
      %x = memref.load %in[%t] : memref<32xf32>
)mlir" + (waitFirst ? "" : wait) + R"mlir(
      %one = arith.constant 1.0 : f32
      %y = arith.addf %x, %one : f32
      memref.store %y, %out[%t] : memref<32xf32>
      gpu.return
    }
  }
}
)mlir";
  };
  for (bool waitFirst : {true, false}) {
    CAPTURE(waitFirst);
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kernel(waitFirst), &context());
    REQUIRE(module);
    REQUIRE(succeeded(verify(*module)));
    gpu::GPUFuncOp f;
    module->walk([&](gpu::GPUFuncOp g) { f = g; });
    std::vector<uint8_t> in(32 * 4, 0), out(32 * 4, 0);
    for (int i = 0; i < 32; ++i) {
      const float v = float(i);
      std::memcpy(in.data() + 4 * i, &v, 4);
    }
    EmulatorLaunch launch;
    launch.block = {32, 1, 1};
    launch.args = {&in, &out};
    EmulatorReport report = emulateKernel(f, launch);
    if (waitFirst) {
      REQUIRE_MESSAGE(report.ok, report.error);
      float v = 0;
      std::memcpy(&v, out.data() + 4 * 7, 4);
      CHECK(v == 8.0f);
    } else {
      CHECK_FALSE(report.ok);
      CHECK(report.error.find("griddepcontrol.wait (kGridDependencyWaitAsm) that is not the kernel's first op") !=
            std::string::npos);
    }
  }
}

TEST_CASE("GPU emulator: a cluster's CTAs reach each other's mbarriers, and what they must do for it is checked") {
  // Clusters of 2: each CTA's first thread initializes an mbarrier (count
  // 1) at the start of its dynamic shared memory, the cluster barrier
  // publishes the inits, each first thread arrives on its peer's (mapa +
  // remote arrive), every thread waits for its own, then the first thread
  // writes 1 at its rank; a cluster barrier before the exit. The variants
  // break it.
  std::string arrive;
  for (char c : std::string(kRemoteArriveAsm))
    arrive += c == '\n' ? "\\0A" : c == '\t' ? "\\09" : std::string(1, c);
  auto run = [&](const std::string &variant, std::array<int64_t, 3> cluster, std::vector<float> &out,
                 bool peersLag = true) {
    std::string text = R"mlir(
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @exchange(%out: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %one = arith.constant 1 : i32
      %zero = arith.constant 0 : i32
      %ticks = arith.constant 1000 : i32
      %t = gpu.thread_id x
      %first = arith.cmpi eq, %t, %c0 : index
      %rank32 = nvvm.read.ptx.sreg.cluster.ctarank : i32
      %rank = arith.index_cast %rank32 : i32 to index
      %dyn = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
      %base = memref.extract_aligned_pointer_as_index %dyn : memref<?xi8, #gpu.address_space<workgroup>> -> index
      %address = arith.index_cast %base : index to i32
      %bar = llvm.inttoptr %address : i32 to !llvm.ptr<3>
      nvvm.mbarrier.init.shared %bar, %one, predicate = %first : !llvm.ptr<3>, i32, i1
      nvvm.fence.mbarrier.init
      gpu.barrier
      SYNC_AFTER_INIT
      %peer = PEER
      scf.if %first {
        llvm.inline_asm has_side_effects "ARRIVE", "r,r" %address, %peer : (i32, i32) -> ()
      }
      OVERWRITE
      nvvm.mbarrier.try_wait.parity.shared %bar, %zero, %ticks : !llvm.ptr<3>, i32, i32
      %v = arith.constant 1.0 : f32
      scf.if %first {
        memref.store %v, %out[%rank] : memref<4xf32>
      }
      nvvm.cluster.arrive {aligned}
      nvvm.cluster.wait {aligned}
      gpu.return
    }
  }
}
)mlir";
    auto set = [&](const std::string &key, const std::string &value) { text.replace(text.find(key), key.size(), value); };
    set("ARRIVE", arrive);
    set("SYNC_AFTER_INIT", variant == "no sync after init" ? ""
                           : variant == "arrive twice"     ? "nvvm.cluster.arrive {aligned}\n      nvvm.cluster.arrive {aligned}\n      nvvm.cluster.wait {aligned}"
                                                           : "nvvm.cluster.arrive {aligned}\n      nvvm.cluster.wait {aligned}");
    set("PEER", variant == "no such peer" ? "arith.addi %one, %one : i32" : "arith.subi %one, %rank32 : i32");
    set("OVERWRITE", variant == "store over the mbarrier"
                         ? "%f = memref.view %dyn[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<2xf32, #gpu.address_space<workgroup>>\n"
                           "      scf.if %first {\n        memref.store %v0, %f[%c0] : memref<2xf32, #gpu.address_space<workgroup>>\n      }"
                         : "");
    if (variant == "store over the mbarrier")
      set("%zero = arith.constant 0 : i32", "%zero = arith.constant 0 : i32\n      %v0 = arith.constant 0.0 : f32");
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context());
    REQUIRE(module);
    REQUIRE(succeeded(verify(*module)));
    gpu::GPUFuncOp f;
    module->walk([&](gpu::GPUFuncOp g) { f = g; });
    std::vector<uint8_t> bytes(4 * 4, 0);
    EmulatorLaunch launch;
    launch.grid = {4, 1, 1};
    launch.block = {64, 1, 1};
    launch.cluster = cluster;
    launch.peersLag = peersLag;
    launch.dynamicSharedBytes = 64;
    launch.args = {&bytes};
    EmulatorReport report = emulateKernel(f, launch);
    out.assign(4, 0);
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return report;
  };
  std::vector<float> out;
  for (bool lag : {false, true}) {
    EmulatorReport ok = run("as written", {2, 1, 1}, out, lag);
    REQUIRE_MESSAGE(ok.ok, ok.error);
    CHECK(ok.clusters == 2);
    CHECK(ok.blocks == 4);
    CHECK(ok.remoteArrivals == 4);
    CHECK(ok.clusterBarriers == 8); // two a CTA
    CHECK(out == std::vector<float>{1, 1, 0, 0}); // each cluster writes at its ranks, 0 and 1
  }
  struct Broken {
    const char *variant;
    std::array<int64_t, 3> cluster;
    const char *expect;
  };
  for (const Broken &b : {Broken{"no sync after init", {2, 1, 1}, "of CTA 1 that was not initialized"},
                          Broken{"arrive twice", {2, 1, 1}, "arrives at a cluster barrier again"},
                          Broken{"no such peer", {2, 1, 1}, "CTA rank 2 of a cluster of 2"},
                          Broken{"store over the mbarrier", {2, 1, 1}, "which an mbarrier occupies"},
                          Broken{"as written", {1, 1, 1}, "a cluster register in a kernel launched without a cluster"},
                          Broken{"as written", {3, 1, 1}, "does not divide the grid"}}) {
    EmulatorReport r = run(b.variant, b.cluster, out);
    MESSAGE(std::string(b.variant), ", clusters of ", b.cluster[0], ": ", r.ok ? std::string("not caught") : r.error);
    CHECK(!r.ok);
    CHECK(r.error.find(b.expect) != std::string::npos);
  }
}
