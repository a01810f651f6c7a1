// test_cpu_configurator.cpp - the CPU configurator's decisions, as a pure
// function: for named CPUs (the TargetDesc table) and many matmul shapes,
// every configuration fits the target (registers, L1, L2), covers the result
// with its workgroups, and keeps the FMA pipes' latency covered; and a few
// decisions are pinned (changing them is a deliberate, reviewed change).
#include <doctest/doctest.h>

#include <numeric>

#include "compiler/Context.h"
#include "compiler/target/cpu/CpuConfigurator.h"
#include "nova/target.hpp"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

using namespace mlir;

namespace {

MLIRContext &context() {
  static MLIRContext *ctx = [] {
    DialectRegistry registry;
    mlir::nova::registerNovaCompilerDialects(registry);
    auto *c = new MLIRContext(registry);
    c->loadAllAvailableDialects();
    return c;
  }();
  return *ctx;
}

mlir::nova::CpuFacts factsOf(const ::nova::TargetDesc &t) {
  return {t.vector_bits, t.vector_registers, t.cores, t.l1d_bytes, t.l2_bytes, t.fma_units, t.fma_latency};
}

/// A tagged, bufferized matmul generic [batch] x M x K times K x N, f32 or f64.
struct Matmul {
  OwningOpRef<ModuleOp> module;
  linalg::GenericOp op;
};

Matmul makeMatmul(int64_t batch, int64_t M, int64_t N, int64_t K, Type elem, bool transposeA = false) {
  MLIRContext *ctx = &context();
  OpBuilder b(ctx);
  Matmul out;
  out.module = ModuleOp::create(b.getUnknownLoc());
  b.setInsertionPointToEnd(out.module->getBody());
  SmallVector<int64_t> lhs{M, K}, rhs{K, N}, res{M, N};
  if (transposeA)
    lhs = {K, M};
  if (batch > 1) {
    lhs.insert(lhs.begin(), batch);
    rhs.insert(rhs.begin(), batch);
    res.insert(res.begin(), batch);
  }
  auto type = [&](ArrayRef<int64_t> s) { return MemRefType::get(s, elem); };
  auto func = b.create<func::FuncOp>(b.getUnknownLoc(), "k",
                                     b.getFunctionType({type(lhs), type(rhs), type(res)}, {}));
  Block *body = func.addEntryBlock();
  b.setInsertionPointToStart(body);
  unsigned n = batch > 1 ? 4 : 3;
  auto d = [&](unsigned i) { return b.getAffineDimExpr(i); };
  // loops (batch?, m, k, n)
  unsigned o = batch > 1 ? 1 : 0;
  SmallVector<AffineExpr> ml, mr, mo;
  if (batch > 1)
    ml.push_back(d(0)), mr.push_back(d(0)), mo.push_back(d(0));
  if (transposeA)
    ml.append({d(o + 1), d(o)});
  else
    ml.append({d(o), d(o + 1)});
  mr.append({d(o + 1), d(o + 2)});
  mo.append({d(o), d(o + 2)});
  SmallVector<AffineMap> maps{AffineMap::get(n, 0, ml, ctx), AffineMap::get(n, 0, mr, ctx),
                              AffineMap::get(n, 0, mo, ctx)};
  SmallVector<utils::IteratorType> iters;
  if (batch > 1)
    iters.push_back(utils::IteratorType::parallel);
  iters.append({utils::IteratorType::parallel, utils::IteratorType::reduction, utils::IteratorType::parallel});
  out.op = b.create<linalg::GenericOp>(
      b.getUnknownLoc(), ValueRange{body->getArgument(0), body->getArgument(1)},
      ValueRange{body->getArgument(2)}, maps, iters,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value p = nb.create<arith::MulFOp>(l, args[0], args[1]);
        nb.create<linalg::YieldOp>(l, ValueRange{nb.create<arith::AddFOp>(l, args[2], p)});
      });
  out.op->setAttr("nova.kernel", b.getStringAttr("matmul"));
  b.create<func::ReturnOp>(b.getUnknownLoc());
  return out;
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace

TEST_CASE("every matmul configuration fits its target and covers the result") {
  int checked = 0;
  for (std::string name : {"x86-64-v2", "x86-64-v3", "x86-64-v4"}) {
    for (int cores : {1, 2, 16}) {
      ::nova::TargetDesc t = ::nova::named_target(name);
      t.cores = cores;
      mlir::nova::CpuFacts f = factsOf(t);
      for (int64_t batch : {1, 64})
        for (int64_t M : {1, 7, 64, 250, 2048})
          for (int64_t N : {1, 10, 64, 200, 768, 1024})
            for (int64_t K : {1, 33, 256, 2048})
              for (int variant = 0; variant < 4; ++variant) {
                bool f64 = variant & 1, transposed = variant & 2;
                Type elem = f64 ? Type(Float64Type::get(&context())) : Type(Float32Type::get(&context()));
                Matmul mm = makeMatmul(batch, M, N, K, elem, transposed);
                auto c = mlir::nova::configureCpuKernel(mm.op, f);
                INFO(name, " cores ", cores, " ", batch, "x", M, "x", N, "x", K, f64 ? " f64" : " f32",
                     transposed ? " lhs^T" : "");
                REQUIRE(c);
                if (!c.isMatmul())
                  continue; // too narrow for vectors: plain loops
                ++checked;
                int64_t width = f.vectorBits / (f64 ? 64 : 32);
                ArrayRef<int64_t> reg = c.getRegisterTile(), tile = c.getTile();
                int64_t mr = reg[0], nr = reg[1], nv = nr / width;
                CHECK(nr % width == 0);
                CHECK(mr * nv + nv + 1 <= f.vectorRegisters);          // registers
                // Latency covered, where the result is big enough to choose.
                if (M >= 16 && N >= 4 * width)
                  CHECK(mr * nv >= f.fmaUnits * f.fmaLatency);
                REQUIRE(c.getCacheTile().size() == (transposed ? 2u : 1u));
                int64_t kc = c.getCacheTile()[0];
                CHECK(kc >= 1);
                CHECK(kc <= std::max<int64_t>(K, 1));
                int64_t e = f64 ? 8 : 4;
                // The lhs micro-panel (MR x kc, broadcast) in a quarter of L1,
                // or all of K in one slab where that fits half of it.
                if (kc == std::max<int64_t>(K, 1) && kc > 8)
                  CHECK((mr * kc * e <= f.l1dBytes / 2 || kc <= 16));
                else
                  CHECK((mr * kc * e <= f.l1dBytes / 4 || kc == 8));
                // Workgroups cover the result exactly: product of tile counts.
                int64_t rank = batch > 1 ? 3 : 2;
                REQUIRE(static_cast<int64_t>(tile.size()) == rank);
                int64_t rows = tile[rank - 2], colsPerBlock = tile[rank - 1];
                int64_t groups = batch > 1 ? ceilDiv(batch, tile[0]) : 1;
                groups *= ceilDiv(M, rows) * ceilDiv(N, colsPerBlock);
                CHECK(groups == c.getWorkgroups());
                // No partial last round on 2 cores when the columns come in
                // an even number of register tiles (an even split exists):
                // at most one workgroup per core, or an even count.
                if (batch == 1 && cores == 2 && N % (2 * nr) == 0)
                  CHECK((c.getWorkgroups() <= 2 || c.getWorkgroups() % 2 == 0));
                // Row and column blocks are whole register tiles (edges only at the end).
                CHECK((rows % mr == 0 || rows == M));
                CHECK((colsPerBlock % nr == 0 || colsPerBlock == N));
                // The packed rhs slab (kc x the block's columns, rounded up to
                // whole panels) fits a quarter of L2 (half with a transposed lhs) and the stack budget, unless
                // one panel alone is larger.
                int64_t slab = kc * ceilDiv(colsPerBlock, nr) * nr * e;
                CHECK((slab <= std::min<int64_t>(f.l2Bytes / (transposed ? 2 : 4), 1 << 20) ||
                       colsPerBlock <= nr));
                // A transposed lhs is packed a run of row tiles at a time
                // (whole groups of lcm(MR, lanes) rows): the block's rows
                // where their slab fits L2 (and the stack budget), else a
                // quarter of that's worth; so it caps kc no more than a
                // row-major one does: the same kc.
                if (transposed) {
                  int64_t packRows = c.getCacheTile()[1], group = std::lcm(mr, width);
                  CHECK(packRows % group == 0);
                  CHECK(packRows >= group);
                  CHECK(packRows < rows + group);
                  CHECK((packRows * kc * e <= std::min<int64_t>(f.l2Bytes / 4, 1 << 20) || packRows == group ||
                         (packRows >= rows && packRows * kc * e <= std::min<int64_t>(f.l2Bytes, 1 << 20))));
                  Matmul plain = makeMatmul(batch, M, N, K, elem, false);
                  auto p = mlir::nova::configureCpuKernel(plain.op, f);
                  if (p && p.isMatmul())
                    CHECK(kc == p.getCacheTile()[0]);
                }
                // Slabs are equal but for rounding to 8: the last is not a
                // short remainder.
                if (K > kc)
                  CHECK(K - (ceilDiv(K, kc) - 1) * kc > kc - 8 * ceilDiv(K, kc));
              }
    }
  }
  CHECK(checked > 1000);
}

TEST_CASE("pinned decisions for named CPUs") {
  Type f32 = Float32Type::get(&context());
  auto config = [&](const char *name, int cores, int64_t M, int64_t N, int64_t K,
                    bool transposeA = false) {
    ::nova::TargetDesc t = ::nova::named_target(name);
    t.cores = cores;
    Matmul mm = makeMatmul(1, M, N, K, f32, transposeA);
    std::string s;
    llvm::raw_string_ostream os(s);
    os << mlir::nova::configureCpuKernel(mm.op, factsOf(t));
    return s;
  };
  // AVX-512, 32 registers: 6 x 4 vectors; kc = K = 256 (the 48 KiB L1 of
  // the v4 entry would allow 512); one workgroup per core, split by columns
  // (two row blocks would pack the rhs twice).
  CHECK(config("x86-64-v4", 2, 2048, 768, 256) ==
        "#nova.lowering_config<matmul, workgroups = 2, tile = [2048, 384], cache_tile = [256], "
        "register_tile = [6, 64]>");
  // A row-major weight gradient shape (K = 2048 tokens): kc = 512, 4 slabs;
  // a 512 KiB slab (a quarter of L2) holds 256 columns: 4 column blocks.
  CHECK(config("x86-64-v4", 2, 256, 1024, 2048) ==
        "#nova.lowering_config<matmul, workgroups = 4, tile = [256, 256], cache_tile = [512], "
        "register_tile = [6, 64]>");
  // Transposed lhs: every column block repacks the lhs, so all 256 columns
  // stay in one block and the 2 workgroups split the rows; the lhs, packed
  // just before its row tiles run, does not cap kc: 512, as row-major. Its
  // 516 rows (528 in groups of 48) at kc 512 are over the 1 MiB stack
  // budget: packed 240 rows (a quarter of the 2 MiB L2) at a time.
  CHECK(config("x86-64-v4", 2, 1024, 256, 2048, true) ==
        "#nova.lowering_config<matmul, workgroups = 2, tile = [516, 256], cache_tile = [512, 240], "
        "register_tile = [6, 64]>");
  // A weight gradient whose 1536 columns need 3 slab-sized blocks: 4 column
  // blocks instead, so the 2 cores each run 2 (3 would leave one idle for
  // the last).
  CHECK(config("x86-64-v4", 2, 512, 1536, 2048, true) ==
        "#nova.lowering_config<matmul, workgroups = 4, tile = [512, 384], cache_tile = [512, 240], "
        "register_tile = [6, 64]>");
  // AVX2, 16 registers: 4 x 3 vectors where N allows it; the v3 entry's
  // 32 KiB L1 gives kc = 256 (= K), a quarter of its 1 MiB L2 caps a block
  // at 192 columns.
  CHECK(config("x86-64-v3", 1, 2048, 768, 256) ==
        "#nova.lowering_config<matmul, workgroups = 4, tile = [2048, 192], cache_tile = [256], "
        "register_tile = [4, 24]>");
  // SSE (x86-64-v2): 4-lane vectors.
  CHECK(config("x86-64-v2", 1, 64, 64, 64).find("matmul") != std::string::npos);
}
