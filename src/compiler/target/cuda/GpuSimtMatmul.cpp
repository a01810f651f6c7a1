//===- GpuSimtMatmul.cpp - a matmul on the CUDA cores, tiled in shared memory ===//

#include "compiler/target/cuda/GpuSimtMatmul.h"
#include "compiler/dialect/NovaDialect.h"
#include "compiler/target/cuda/GpuBlockReduction.h"
#include "compiler/target/cuda/MatmulKernelParts.h"
#include "compiler/transforms/Kernels.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/IR/IRMapping.h"

#include <numeric>

using namespace mlir;
using namespace mlir::nova;

namespace {

std::optional<unsigned> dimOf(AffineExpr e) {
  if (auto d = dyn_cast<AffineDimExpr>(e))
    return d.getPosition();
  return std::nullopt;
}

bool usesDim(AffineMap map, unsigned dim) {
  return llvm::any_of(map.getResults(), [&](AffineExpr e) { return dimOf(e) == dim; });
}

/// The index of `type` whose stride is 1 (the innermost such): the last
/// where the layout is the identity or its strides are not static, the one
/// before it for a transposed view (a weight read as its transpose).
int64_t contiguousIndex(MemRefType type) {
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!type.getLayout().isIdentity() && succeeded(getStridesAndOffset(type, strides, offset)))
    for (int64_t i = type.getRank() - 1; i >= 0; --i)
      if (strides[size_t(i)] == 1 && type.getDimSize(i) != 1)
        return i;
  return type.getRank() - 1;
}

/// Whether the operand `operand`, read through `map`, is contiguous in
/// memory along loop `dim` (its contiguousIndex is that loop's). The copies
/// run consecutive threads along it; a transposed view read along its
/// innermost index instead would give each lane a sector of its own.
bool contiguousAlong(Value operand, AffineMap map, unsigned dim) {
  auto type = cast<MemRefType>(operand.getType());
  if (map.getNumResults() == 0 || int64_t(map.getNumResults()) != type.getRank())
    return false;
  return dimOf(map.getResult(unsigned(contiguousIndex(type)))) == dim;
}

int64_t elementBytes(Value v) {
  return std::max<int64_t>(1, cast<MemRefType>(v.getType()).getElementTypeBitWidth() / 8);
}

int64_t alignUp(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

/// The elements a thread reads from an operand's shared tile at once (one
/// ld.shared.v4.f32, .v2.f64): up to 16 bytes, dividing its register tile
/// (`threadTile` rows or columns) and the block tile's `extent`; 1 where
/// none does.
int64_t vectorWidth(Value operand, int64_t threadTile, int64_t extent) {
  int64_t w = 16 / elementBytes(operand);
  while (w > 1 && (threadTile % w != 0 || extent % w != 0))
    w /= 2;
  return std::max<int64_t>(1, w);
}

/// Two buffers of shared tiles, [2][blockK][blockM + pad] of the lhs and
/// [2][blockK][blockN + pad] of the rhs, each in its element type, the
/// second 16-byte aligned. The pad is the operand's vector width (its rows
/// stay aligned for the vector reads), 1 where it reads scalars (so that
/// by the bank arithmetic the column-wise copies of a transposed operand
/// do not conflict).
struct SharedLayout {
  int64_t lhsWidth = 1, rhsWidth = 1, lhsRow = 0, rhsRow = 0;
  int64_t lhsBytes = 0, rhsOffset = 0, total = 0;
};

SharedLayout sharedLayout(linalg::GenericOp op, const GpuMatmulConfig &c) {
  SharedLayout s;
  Value lhs = op.getDpsInputs()[0], rhs = op.getDpsInputs()[1];
  s.lhsWidth = vectorWidth(lhs, c.warpM, c.blockM);
  s.rhsWidth = vectorWidth(rhs, c.warpN, c.blockN);
  s.lhsRow = c.blockM + s.lhsWidth;
  s.rhsRow = c.blockN + s.rhsWidth;
  s.lhsBytes = kSimtBuffers * c.blockK * s.lhsRow * elementBytes(lhs);
  s.rhsOffset = alignUp(s.lhsBytes, 16);
  s.total = s.rhsOffset + kSimtBuffers * c.blockK * s.rhsRow * elementBytes(rhs);
  return s;
}

} // namespace

std::optional<SimtMatmul> mlir::nova::matchSimtMatmul(linalg::GenericOp op, std::string &why) {
  auto no = [&](const char *reason) -> std::optional<SimtMatmul> {
    why = reason;
    return std::nullopt;
  };
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
    return no("not two operands and a result in buffers (a fused prologue?)");
  if (op.getNumReductionLoops() != 1 || op.getNumParallelLoops() < 2)
    return no("not one reduction loop under at least two parallel ones");
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return no("dynamic extents");
  for (AffineMap map : op.getIndexingMapsArray())
    if (!llvm::all_of(map.getResults(), [](AffineExpr e) { return isa<AffineDimExpr, AffineConstantExpr>(e); }))
      return no("an operand read through an affine expression, not a loop or a constant");
  bool hasIndex = false;
  op.getRegion().walk([&](linalg::IndexOp) { hasIndex = true; });
  if (hasIndex)
    return no("its body reads loop indices");
  for (Value v : op->getOperands())
    if (!isa<FloatType>(cast<MemRefType>(v.getType()).getElementType()))
      return no("an operand that is not floating point");
  SimtMatmul s;
  AffineMap out = op.getIndexingMapsArray()[2];
  if (out.getNumResults() != op.getNumParallelLoops() || !out.isProjectedPermutation())
    return no("its result is not written once for every point of the parallel loops");
  for (auto [i, e] : llvm::enumerate(out.getResults())) {
    unsigned d = *dimOf(e);
    if (i + 2 < out.getNumResults())
      s.batchDims.push_back(d);
  }
  s.m = *dimOf(out.getResults()[out.getNumResults() - 2]);
  s.n = *dimOf(out.getResults().back());
  for (auto [i, iterator] : llvm::enumerate(op.getIteratorTypesArray()))
    if (iterator == utils::IteratorType::reduction)
      s.k = unsigned(i);
  AffineMap lhs = op.getIndexingMapsArray()[0], rhs = op.getIndexingMapsArray()[1];
  if (!usesDim(lhs, s.m) || !usesDim(lhs, s.k) || usesDim(lhs, s.n) || !usesDim(rhs, s.k) || !usesDim(rhs, s.n) ||
      usesDim(rhs, s.m))
    return no("its operands are not (.., m, k) and (.., k, n)");
  GpuMatmulProblem &p = s.problem;
  for (unsigned d : s.batchDims)
    p.batch *= ranges[d];
  p.m = ranges[s.m];
  p.n = ranges[s.n];
  p.k = ranges[s.k];
  p.operand = cast<MemRefType>(op.getDpsInits()[0].getType()).getElementType().isF64() ? GpuOperand::f64
                                                                                      : GpuOperand::f32;
  p.lhsTransposed = contiguousAlong(op.getDpsInputs()[0], lhs, s.m);
  p.rhsTransposed = contiguousAlong(op.getDpsInputs()[1], rhs, s.k);
  p.allowWgmma = false;
  p.allowSplitK = false; // the caller's to allow (its result a whole buffer)
  s.batched = !s.batchDims.empty();
  return s;
}

int64_t mlir::nova::simtMatmulSharedBytes(linalg::GenericOp op, const GpuMatmulConfig &config) {
  return sharedLayout(op, config).total;
}

GpuMatmulConfig mlir::nova::simtConfigFromLowering(LoweringConfigAttr config, int64_t threads) {
  GpuMatmulConfig c;
  c.kind = GpuMmaKind::simt;
  ArrayRef<int64_t> tile = config.getTile();
  c.blockM = tile[tile.size() - 2];
  c.blockN = tile[tile.size() - 1];
  c.blockK = config.getCacheTile()[0];
  c.warpM = config.getRegisterTile()[0];
  c.warpN = config.getRegisterTile()[1];
  c.splitK = config.getCacheTile().size() > 2 ? config.getCacheTile()[2] : 1;
  c.threads = threads;
  return c;
}

LogicalResult mlir::nova::buildSimtMatmul(linalg::GenericOp op, const SimtMatmul &match, const GpuMatmulConfig &c,
                                          FloatAttr init, const SimtMatmulFaults &faults,
                                          std::optional<SimtEpilogue> epilogue, Value parts) {
  const int64_t rowThreads = c.blockM / c.warpM, columnThreads = c.blockN / c.warpN;
  if (c.blockM % c.warpM != 0 || c.blockN % c.warpN != 0 || rowThreads * columnThreads != c.threads || c.blockK < 1)
    return op.emitError("nova-gpu-map-threads: the simt matmul config ")
           << c.blockM << "x" << c.blockN << "x" << c.blockK << " with " << c.warpM << "x" << c.warpN
           << " a thread does not give " << c.threads << " threads";
  const GpuMatmulProblem &p = match.problem;
  const int64_t splitK = std::max<int64_t>(1, c.splitK);
  if ((splitK > 1) != bool(parts) || (parts && (match.batched || epilogue ||
                                                cast<MemRefType>(parts.getType()).getShape() !=
                                                    ArrayRef<int64_t>{splitK, p.m, p.n})))
    return op.emitError("nova-gpu-map-threads: a simt matmul split across K into ")
           << splitK << " parts needs their " << splitK << "x" << p.m << "x" << p.n
           << " workspace, and no batch or epilogue";
  OpBuilder b(op);
  Location l = op.getLoc();
  auto cst = [&](int64_t v) -> Value { return b.create<arith::ConstantIndexOp>(l, v); };
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  Value lhs = op.getDpsInputs()[0], rhs = op.getDpsInputs()[1], out = op.getDpsInits()[0];
  Type lhsType = cast<MemRefType>(lhs.getType()).getElementType();
  Type rhsType = cast<MemRefType>(rhs.getType()).getElementType();
  Type accType = cast<MemRefType>(out.getType()).getElementType();
  Block &body = op.getRegion().front();

  // Which tile and which thread.
  Value thread = b.create<gpu::ThreadIdOp>(l, gpu::Dimension::x);
  Value block = b.create<gpu::BlockIdOp>(l, gpu::Dimension::x);
  const int64_t tilesM = (p.m + c.blockM - 1) / c.blockM, tilesN = (p.n + c.blockN - 1) / c.blockN;
  // Split across K: the part is the slowest index of the grid; part q
  // folds K from q * kPer (a whole number of slabs) into its own partial
  // products, from zero.
  SmallVector<int64_t> grid;
  if (parts)
    grid.push_back(splitK);
  for (unsigned d : match.batchDims)
    grid.push_back(ranges[d]);
  grid.push_back(tilesM);
  grid.push_back(tilesN);
  SmallVector<Value> tileAt = delinearizeIndex(b, l, block, grid);
  Value part;
  if (parts) {
    part = tileAt.front();
    tileAt.erase(tileAt.begin());
    grid.erase(grid.begin());
  }
  const int64_t slabCount = ((p.k + splitK - 1) / splitK + c.blockK - 1) / c.blockK;
  Value kStart = parts ? b.create<arith::MulIOp>(l, part, cst(slabCount * c.blockK)) : cst(0);
  Value m0 = b.create<arith::MulIOp>(l, tileAt[grid.size() - 2], cst(c.blockM));
  Value n0 = b.create<arith::MulIOp>(l, tileAt[grid.size() - 1], cst(c.blockN));
  Value tx = b.create<arith::RemUIOp>(l, thread, cst(columnThreads));
  Value ty = b.create<arith::DivUIOp>(l, thread, cst(columnThreads));
  // Loop values for an operand's indices (the loops it does not read: 0).
  auto loopValues = [&](Value m, Value n, Value k) {
    SmallVector<Value> dims(ranges.size(), cst(0));
    for (auto [i, d] : llvm::enumerate(match.batchDims))
      dims[d] = tileAt[i];
    dims[match.m] = m;
    dims[match.n] = n;
    dims[match.k] = k;
    return dims;
  };
  auto indices = [&](AffineMap map, ArrayRef<Value> dims) { return indicesAt(b, l, map, dims); };
  auto below = [&](Value v, int64_t bound) {
    return b.create<arith::CmpIOp>(l, arith::CmpIPredicate::ult, v, cst(bound));
  };
  auto both = [&](Value x, Value y) -> Value { return b.create<arith::AndIOp>(l, x, y); };
  auto zero = [&](Type type) -> Value { return b.create<arith::ConstantOp>(l, b.getZeroAttr(type)); };
  // A value of `type` (a scalar or a vector) loaded where `inside`, else zero.
  auto loadOrZero = [&](Value inside, Type type, function_ref<Value()> load) -> Value {
    auto select = b.create<scf::IfOp>(l, TypeRange{type}, inside, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(&select.getThenRegion().front());
    b.create<scf::YieldOp>(l, load());
    b.setInsertionPointToStart(&select.getElseRegion().front());
    b.create<scf::YieldOp>(l, zero(type));
    return select.getResult(0);
  };

  // Shared tiles: two buffers of each.
  SharedLayout layout = sharedLayout(op, c);
  auto wg = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Value dyn = b.create<gpu::DynamicSharedMemoryOp>(
      l, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(), wg));
  Value lhsTile = b.create<memref::ViewOp>(
      l, MemRefType::get({kSimtBuffers, c.blockK, layout.lhsRow}, lhsType, MemRefLayoutAttrInterface(), wg), dyn,
      cst(0), ValueRange{});
  Value rhsTile = b.create<memref::ViewOp>(
      l, MemRefType::get({kSimtBuffers, c.blockK, layout.rhsRow}, rhsType, MemRefLayoutAttrInterface(), wg), dyn,
      cst(layout.rhsOffset), ValueRange{});

  // The accumulators: thread (ty, tx) owns rows ty * wA + r + g * rowThreads
  // * wA (r < wA: a run of wA rows the tile holds side by side, read as one
  // vector) and columns tx * wB + q + h * columnThreads * wB; wA = wB = 1:
  // rows ty + i * rowThreads, columns tx + j * columnThreads. A warp's
  // reads are broadcasts or consecutive, its global stores in runs.
  const int64_t wA = layout.lhsWidth, wB = layout.rhsWidth;
  // The offset in the tile of this thread's i-th row (j-th column).
  auto rowOffset = [&](int64_t i) {
    return b.create<arith::AddIOp>(l, b.create<arith::MulIOp>(l, ty, cst(wA)),
                                   cst(i % wA + i / wA * rowThreads * wA));
  };
  auto columnOffset = [&](int64_t j) {
    return b.create<arith::AddIOp>(l, b.create<arith::MulIOp>(l, tx, cst(wB)),
                                   cst(j % wB + j / wB * columnThreads * wB));
  };
  SmallVector<Value> rows, columns;
  for (int64_t i = 0; i < c.warpM; ++i)
    rows.push_back(b.create<arith::AddIOp>(l, m0, rowOffset(i)));
  for (int64_t j = 0; j < c.warpN; ++j)
    columns.push_back(b.create<arith::AddIOp>(l, n0, columnOffset(j)));
  SmallVector<Value> initial;
  for (int64_t i = 0; i < c.warpM; ++i)
    for (int64_t j = 0; j < c.warpN; ++j) {
      if (parts) {
        initial.push_back(zero(accType));
        continue;
      }
      if (init) {
        initial.push_back(b.create<arith::ConstantOp>(l, b.getFloatAttr(accType, init.getValueAsDouble())));
        continue;
      }
      Value inside = both(below(rows[size_t(i)], p.m), below(columns[size_t(j)], p.n));
      initial.push_back(loadOrZero(inside, accType, [&] {
        return b.create<memref::LoadOp>(l, out, indices(maps[2], loopValues(rows[size_t(i)], columns[size_t(j)],
                                                                            cst(0))));
      }));
    }

  // One operand's slab: `tileExtent` rows of the tile's non-K dim from
  // `origin` (`extent` in the matrix), K from k0, in units of `vec`
  // elements along the operand's innermost index (contiguous in memory):
  // unit u is copied by thread u % threads in round u / threads,
  // consecutive threads on consecutive units (to coalesce). A unit is one
  // 16-byte global load (ld.global.v4.f32, .v2.f64) where the innermost
  // extent is whole units (so each row, and each unit, starts on a
  // multiple of 16 bytes: the buffers are whole and 16-byte aligned) and
  // the slab is too; one element otherwise.
  struct Slab {
    Value tile, operand;
    AffineMap map;
    Type type;
    int64_t tileExtent, extent;
    Value origin;
    bool isLhs, kFastest;
    int64_t vec = 1, tileRow = 0;
    /// What the loads read: the operand, or (`swapped`) the view of a
    /// transposed view that swaps its last two indices back.
    Value source;
    bool swapped = false;
  };
  Slab slabs[2] = {
      {lhsTile, lhs, maps[0], lhsType, c.blockM, p.m, m0, /*isLhs=*/true, /*kFastest=*/!p.lhsTransposed},
      {rhsTile, rhs, maps[1], rhsType, c.blockN, p.n, n0, /*isLhs=*/false, /*kFastest=*/p.rhsTransposed}};
  slabs[0].tileRow = layout.lhsRow;
  slabs[1].tileRow = layout.rhsRow;
  // A transposed view (its last two indices stored the other way round: a
  // weight read as its transpose) is read through the view that swaps them
  // back, whose last index is contiguous; then, as for any operand whose
  // rows are whole 16-byte units (aligned: every other stride and the
  // offset a multiple of them), 16 bytes a load.
  for (Slab &s : slabs) {
    s.source = s.operand;
    auto type = cast<MemRefType>(s.operand.getType());
    const int64_t rank = type.getRank();
    if (rank >= 2 && contiguousIndex(type) == rank - 2) {
      SmallVector<unsigned> order(static_cast<size_t>(rank), 0u);
      std::iota(order.begin(), order.end(), 0u);
      std::swap(order[size_t(rank - 1)], order[size_t(rank - 2)]);
      s.source = b.create<memref::TransposeOp>(
          l, s.operand, AffineMapAttr::get(AffineMap::getPermutationMap(order, b.getContext())));
      s.swapped = true;
    }
    auto sourceType = cast<MemRefType>(s.source.getType());
    const int64_t w = 16 / elementBytes(s.operand), innermost = sourceType.getShape().back();
    const int64_t along = s.kFastest ? c.blockK : s.tileExtent;
    bool aligned = sourceType.getLayout().isIdentity();
    SmallVector<int64_t> sourceStrides;
    int64_t offset = 0;
    if (!aligned && succeeded(getStridesAndOffset(sourceType, sourceStrides, offset)) &&
        sourceStrides.back() == 1 && !ShapedType::isDynamic(offset) && offset % w == 0) {
      aligned = true;
      for (int64_t i = 0; i + 1 < rank; ++i)
        aligned = aligned && !ShapedType::isDynamic(sourceStrides[size_t(i)]) &&
                  (sourceStrides[size_t(i)] % w == 0 || sourceType.getShape()[size_t(i)] == 1);
    }
    if (!faults.scalarGlobalLoads && aligned && innermost % w == 0 && along % w == 0)
      s.vec = w;
  }
  auto chunks = [&](const Slab &s) { return s.tileExtent * c.blockK / s.vec; };
  // The value one unit of a slab waits in: its element, or a vector of them.
  auto unitType = [&](const Slab &s) -> Type { return s.vec == 1 ? s.type : VectorType::get({s.vec}, s.type); };
  auto rounds = [&](const Slab &s) { return (chunks(s) + c.threads - 1) / c.threads; };
  // This thread's units of both slabs, the same for every slab: unit
  // `round * threads + thread` at (kk, rr) in the tile (its first
  // element), and whether it is one (null where every thread's is: the
  // last round may run past the slab). Computed once, before the K loop,
  // for its loads and stores.
  struct Unit {
    Value kk, rr, valid;
  };
  SmallVector<Unit> units;
  for (const Slab &s : slabs)
    for (int64_t round = 0; round < rounds(s); ++round) {
      Value unit = b.create<arith::AddIOp>(l, thread, cst(round * c.threads));
      Unit u;
      if (s.kFastest && s.vec == 1 && c.blockK % 8 == 0) {
        // Scalars along K (rows that are not whole 16-byte units): a warp
        // takes 8 K of 4 tile rows (32 bytes of f32 a row: whole sectors),
        // whose stores, an element a tile row, hit 32 distinct banks where
        // the tile rows are in K's order (16 K of 2 rows would hit 16 banks
        // twice); in the order below, 2 ways (rows of the other operand's
        // kind decide it).
        Value k8 = b.create<arith::RemUIOp>(l, unit, cst(8)), group = b.create<arith::DivUIOp>(l, unit, cst(8));
        u.rr = b.create<arith::RemUIOp>(l, group, cst(s.tileExtent));
        u.kk = b.create<arith::AddIOp>(
            l, k8, b.create<arith::MulIOp>(l, b.create<arith::DivUIOp>(l, group, cst(s.tileExtent)), cst(8)));
      } else if (s.kFastest) {
        u.kk = b.create<arith::MulIOp>(l, b.create<arith::RemUIOp>(l, unit, cst(c.blockK / s.vec)), cst(s.vec));
        u.rr = b.create<arith::DivUIOp>(l, unit, cst(c.blockK / s.vec));
      } else {
        u.rr = b.create<arith::MulIOp>(l, b.create<arith::RemUIOp>(l, unit, cst(s.tileExtent / s.vec)),
                                       cst(s.vec));
        u.kk = b.create<arith::DivUIOp>(l, unit, cst(s.tileExtent / s.vec));
      }
      if ((round + 1) * c.threads > chunks(s))
        u.valid = below(unit, chunks(s));
      units.push_back(u);
    }
  // This thread's units of both slabs at K = k0, from global memory (zero
  // past the matrix's edges; a unit's elements are all inside or all
  // outside, its first one says which): the registers a slab waits in.
  auto loadSlabs = [&](Value k0) {
    SmallVector<Value> values;
    const Unit *u = units.data();
    for (const Slab &s : slabs)
      for (int64_t round = 0; round < rounds(s); ++round, ++u) {
        Value k = b.create<arith::AddIOp>(l, k0, u->kk), r = b.create<arith::AddIOp>(l, s.origin, u->rr);
        Value inside = both(below(k, p.k), below(r, s.extent));
        if (u->valid)
          inside = both(inside, u->valid);
        SmallVector<Value> dims = s.isLhs ? loopValues(r, cst(0), k) : loopValues(cst(0), r, k);
        values.push_back(loadOrZero(inside, unitType(s), [&]() -> Value {
          SmallVector<Value> at = indices(s.map, dims);
          if (s.swapped)
            std::swap(at[at.size() - 1], at[at.size() - 2]);
          if (s.vec == 1)
            return b.create<memref::LoadOp>(l, s.source, at);
          return b.create<vector::LoadOp>(l, cast<VectorType>(unitType(s)), s.source, at);
        }));
      }
    return values;
  };
  // The tile row that holds K row k of a slab. A K-contiguous operand's
  // unit (4 floats along K, 4 units a tile row) is stored an element a
  // row: a warp's 8 rows of units write rows k, k + 4, k + 8, k + 12 at
  // once, whose banks coincide in pairs where a row is 4 modulo 8 words
  // (2-way conflicts, GpuRequestCost.h). Rows in the order 0, 1, 8, 9, 2,
  // 3, 10, 11, ... (k = 4j + e to row 2j + (e & 1) + 8 (e >> 1)) put
  // those four 8 banks apart. Both operands' slabs take the same order,
  // and the products read the rows in their own order: a K row's elements
  // still meet (only the order of the sums changes).
  const bool permuteRows = c.blockK == 16 && llvm::any_of(slabs, [&](const Slab &s) {
    return s.kFastest && s.vec == 4 && elementBytes(s.operand) == 4 && s.tileRow % 8 == 4;
  });
  auto physicalRow = [&](Value k) -> Value {
    if (!permuteRows)
      return k;
    auto shr = [&](Value v, int64_t n) { return b.create<arith::ShRUIOp>(l, v, cst(n)); };
    auto bit = [&](Value v, int64_t n) { return b.create<arith::AndIOp>(l, shr(v, n), cst(1)); };
    Value j2 = b.create<arith::MulIOp>(l, shr(k, 2), cst(2));
    Value e8 = b.create<arith::MulIOp>(l, bit(k, 1), cst(8));
    return b.create<arith::AddIOp>(l, b.create<arith::AddIOp>(l, j2, bit(k, 0)), e8);
  };
  // `values` (loadSlabs') into shared buffer `buffer`: a unit along the
  // tile's rows (M or N contiguous) as one vector store where the rows are
  // whole vectors; along K (K contiguous) an element a tile row.
  auto storeSlabs = [&](Value buffer, ValueRange values) {
    size_t next = 0;
    for (const Slab &s : slabs)
      for (int64_t round = 0; round < rounds(s); ++round, ++next) {
        const Unit &u = units[next];
        OpBuilder::InsertionGuard g(b);
        if (u.valid)
          b.setInsertionPointToStart(
              &b.create<scf::IfOp>(l, u.valid, /*withElseRegion=*/false).getThenRegion().front());
        if (s.vec == 1) {
          b.create<memref::StoreOp>(l, values[next], s.tile, ValueRange{buffer, physicalRow(u.kk), u.rr});
          continue;
        }
        if (!s.kFastest && s.tileRow % s.vec == 0) {
          b.create<vector::StoreOp>(l, values[next], s.tile, ValueRange{buffer, physicalRow(u.kk), u.rr});
          continue;
        }
        for (int64_t e = 0; e < s.vec; ++e) {
          Value element = b.create<vector::ExtractOp>(l, values[next], e);
          SmallVector<Value> at{buffer, u.kk, u.rr};
          at[s.kFastest ? 1 : 2] = b.create<arith::AddIOp>(l, at[s.kFastest ? 1 : 2], cst(e));
          at[1] = physicalRow(at[1]);
          b.create<memref::StoreOp>(l, element, s.tile, at);
        }
      }
  };

  // The vector reads and loads are aligned to their size (the tiles' rows
  // and the runs start on multiples of it, and so do the operands' rows
  // and units): PtxEmitter may say so to LLVM.
  if (wA > 1 || wB > 1 || slabs[0].vec > 1 || slabs[1].vec > 1)
    op->getParentOfType<FunctionOpInterface>()->setAttr(kAlignedVectorsAttr, b.getUnitAttr());

  // Double-buffered: slab 0 to buffer 0; then slab s computes from buffer
  // s % 2 while slab s + 1 waits in registers (its global loads issued
  // before the computation, so their latency hides behind it) and goes to
  // the other buffer after it; one barrier a slab. (The barrier after slab
  // s - 1 is what lets slab s + 1 overwrite the buffer s - 1 read.)
  storeSlabs(cst(0), loadSlabs(kStart));
  if (!faults.noBarrierAfterCopy)
    b.create<gpu::BarrierOp>(l);
  scf::ForOp kLoop = buildFor(b, l, cst(0), cst(slabCount), cst(1), initial, [&](Value slab, ValueRange accs) {
    Value following = b.create<arith::AddIOp>(l, slab, cst(1));
    Value more = below(following, slabCount);
    SmallVector<Type> types;
    for (const Slab &s : slabs)
      types.append(size_t(rounds(s)), unitType(s));
    auto prefetch = b.create<scf::IfOp>(l, types, more, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&prefetch.getThenRegion().front());
      b.create<scf::YieldOp>(
          l, loadSlabs(b.create<arith::AddIOp>(l, kStart, b.create<arith::MulIOp>(l, following, cst(c.blockK)))));
      b.setInsertionPointToStart(&prefetch.getElseRegion().front());
      SmallVector<Value> zeros;
      for (Type t : types)
        zeros.push_back(zero(t));
      b.create<scf::YieldOp>(l, zeros);
    }
    Value current = b.create<arith::RemUIOp>(l, slab, cst(kSimtBuffers));
    scf::ForOp inner = buildFor(b, l, cst(0), cst(c.blockK), cst(1), accs, [&](Value kk, ValueRange in) {
      // This thread's rows (columns) of the slab's row kk, each run of
      // wA (wB) of them one vector read.
      auto read = [&](Value tile, Type element, int64_t count, int64_t width, function_ref<Value(int64_t)> offset) {
        SmallVector<Value> values;
        for (int64_t first = 0; first < count; first += width) {
          SmallVector<Value> at{current, kk, offset(first)};
          if (width == 1) {
            values.push_back(b.create<memref::LoadOp>(l, tile, at));
            continue;
          }
          if (faults.misalignedVectorReads)
            at[2] = b.create<arith::AddIOp>(l, at[2], cst(1));
          Value v = b.create<vector::LoadOp>(l, VectorType::get({width}, element), tile, at);
          for (int64_t e = 0; e < width; ++e)
            values.push_back(b.create<vector::ExtractOp>(l, v, e));
        }
        return values;
      };
      SmallVector<Value> a = read(lhsTile, lhsType, c.warpM, wA, rowOffset);
      SmallVector<Value> bv = read(rhsTile, rhsType, c.warpN, wB, columnOffset);
      SmallVector<Value> next;
      for (int64_t i = 0; i < c.warpM; ++i)
        for (int64_t j = 0; j < c.warpN; ++j) {
          IRMapping map;
          map.map(body.getArgument(0), a[size_t(i)]);
          map.map(body.getArgument(1), bv[size_t(j)]);
          map.map(body.getArgument(2), in[size_t(i * c.warpN + j)]);
          next.push_back(cloneBodyAt(b, body, map, /*loops=*/{})[0]); // no linalg.index (matchSimtMatmul)
        }
      return next;
    });
    {
      auto refill = b.create<scf::IfOp>(l, more, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&refill.getThenRegion().front());
      storeSlabs(b.create<arith::RemUIOp>(l, following, cst(kSimtBuffers)), prefetch.getResults());
    }
    if (!faults.noBarrierAfterSlab)
      b.create<gpu::BarrierOp>(l);
    return SmallVector<Value>(inner.getResults());
  });

  // The results in range: a thread's run of wB adjacent columns one
  // vector store (st.global.v4.f32) where the result's rows are whole runs
  // (a run is then all inside or all outside, and aligned to its size);
  // an element at a time otherwise.
  Value target = epilogue ? epilogue->out : parts ? parts : out;
  const bool storeRuns = wB > 1 && !faults.scalarGlobalStores && p.n % wB == 0 &&
                         cast<MemRefType>(target.getType()).getLayout().isIdentity();
  auto resultAt = [&](int64_t i, int64_t j) -> SmallVector<Value> {
    if (epilogue)
      return {rows[size_t(i)], columns[size_t(j)]};
    if (parts)
      return {part, rows[size_t(i)], columns[size_t(j)]};
    return indices(maps[2], loopValues(rows[size_t(i)], columns[size_t(j)], cst(0)));
  };
  auto finalValue = [&](int64_t i, int64_t j) -> Value {
    Value result = kLoop.getResult(unsigned(i * c.warpN + j));
    if (!epilogue)
      return result;
    // The fused epilogue's body on the result, to its own result.
    ImplicitLocOpBuilder ib(l, b);
    return applyGpuEpilogue(ib, *epilogue->body, epilogue->inputs, epilogue->args, result, rows[size_t(i)],
                            columns[size_t(j)]);
  };
  if (storeRuns) {
    for (int64_t i = 0; i < c.warpM; ++i)
      for (int64_t j = 0; j < c.warpN; j += wB) {
        Value inside = both(below(rows[size_t(i)], p.m), below(columns[size_t(j)], p.n));
        auto guard = b.create<scf::IfOp>(l, inside, /*withElseRegion=*/false);
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(&guard.getThenRegion().front());
        SmallVector<Value> run;
        for (int64_t e = 0; e < wB; ++e)
          run.push_back(kLoop.getResult(unsigned(i * c.warpN + j + e)));
        Value values = vectorOf(b, l, run);
        if (epilogue) {
          // The epilogue on the run at once: its inputs' runs loaded as
          // vectors too (a lane's 4 scalar loads of a row took 4 times the
          // sectors, GpuRequestCost.h).
          ImplicitLocOpBuilder ib(l, b);
          values = applyGpuEpilogue(ib, *epilogue->body, epilogue->inputs, epilogue->args, values, rows[size_t(i)],
                                    columns[size_t(j)]);
        }
        b.create<vector::StoreOp>(l, values, target, resultAt(i, j));
      }
    op.erase();
    return success();
  }
  for (int64_t i = 0; i < c.warpM; ++i)
    for (int64_t j = 0; j < c.warpN; ++j) {
      Value inside = both(below(rows[size_t(i)], p.m), below(columns[size_t(j)], p.n));
      auto guard = b.create<scf::IfOp>(l, inside, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(&guard.getThenRegion().front());
      b.create<memref::StoreOp>(l, finalValue(i, j), target, resultAt(i, j));
    }
  op.erase();
  return success();
}
